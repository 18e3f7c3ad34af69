//! `--seed` into the database: the only SQL of seeding, one transaction of
//! batched inserts. The door (`plants/seed.rs`) reads the file through
//! `crate::seed`, decides when a batch is written and hands the plants
//! here; nothing here knows the file.

use postgres::Transaction;
use postgres::types::Type;

use super::DbError;
use super::sql::{Typed, folded};
use crate::model::NewPlant;

/// Inserts rows given as arrays.
const INSERT: &str = "INSERT INTO plants (id, name, tag, name_folded, tag_folded)
SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::bytea[], $4::text[], $5::text[])";

/// A seed being loaded into an empty `plants` table, in one transaction
/// that holds the table locked: of instances starting together on an empty
/// database exactly one loads it, and a load not committed (dropped) leaves
/// the table empty.
pub struct SeedLoad<'a> {
    tx: Transaction<'a>,
    rows: Rows,
}

impl<'a> SeedLoad<'a> {
    /// Locks the table and begins the load; `None` (nothing begun) when the
    /// table already holds plants.
    pub fn begin(client: &'a mut postgres::Client) -> Result<Option<SeedLoad<'a>>, DbError> {
        let mut tx = client.transaction()?;
        // Other instances starting together wait here for the whole load,
        // however long it takes: no statement timeout in this transaction.
        tx.batch_execute(
            "SET LOCAL statement_timeout = 0; LOCK TABLE plants IN SHARE ROW EXCLUSIVE MODE",
        )?;
        let held: bool = tx
            .query_typed_one("SELECT EXISTS (SELECT 1 FROM plants)", &[])?
            .get(0);
        if held {
            return Ok(None);
        }
        Ok(Some(SeedLoad {
            tx,
            rows: Rows::default(),
        }))
    }

    /// Adds a plant to the rows the next `write` inserts.
    pub fn push(&mut self, new: NewPlant) {
        let (name, tag) = folded(&new.plant);
        self.rows.names_folded.push(name);
        self.rows.tags_folded.push(tag);
        self.rows.ids.push(new.id);
        self.rows.names.push(new.plant.name.into_bytes());
        self.rows.tags.push(new.plant.tag.map(String::into_bytes));
    }

    /// Rows pushed and not yet written.
    pub fn rows(&self) -> usize {
        self.rows.ids.len()
    }

    /// Inserts the rows pushed since the last write, in one statement.
    pub fn write(&mut self) -> Result<(), DbError> {
        let rows = std::mem::take(&mut self.rows);
        let values: [Typed; 5] = [
            (&rows.ids, Type::INT8_ARRAY),
            (&rows.names, Type::BYTEA_ARRAY),
            (&rows.tags, Type::BYTEA_ARRAY),
            (&rows.names_folded, Type::TEXT_ARRAY),
            (&rows.tags_folded, Type::TEXT_ARRAY),
        ];
        self.tx.execute_typed(INSERT, &values)?;
        Ok(())
    }

    /// Writes the rows left and commits the load.
    pub fn commit(mut self) -> Result<(), DbError> {
        self.write()?;
        Ok(self.tx.commit()?)
    }
}

/// Columns of plants to insert at once.
#[derive(Default)]
struct Rows {
    ids: Vec<i64>,
    names: Vec<Vec<u8>>,
    tags: Vec<Option<Vec<u8>>>,
    names_folded: Vec<String>,
    tags_folded: Vec<Option<String>>,
}
