//! `--seed` into the database: the file read and checked by `crate::seed`
//! as for the memory store, written here in one transaction of batched
//! inserts (the only SQL of seeding).

use std::path::Path;
use std::time::Instant;

use log::info;

use super::DbError;
use crate::model::TextLimits;
use crate::seed::{BATCH, Fault, SeedError, check, loaded, located, read};
use crate::store::Capacity;

/// Loads the seed at `path` into the database's `plants` table if it has
/// none, in one transaction: a seed that fails leaves the table empty, and
/// of instances starting together on an empty database exactly one loads
/// it (the table is locked while it checks and loads). Checked as
/// `POST /plants` checks a body, and for ids repeated in the file;
/// `--max-plants` and `--max-data` bound the in-memory store, not this.
pub fn load_seed(
    path: &Path,
    client: &mut postgres::Client,
    limits: TextLimits,
) -> Result<Option<u64>, SeedError> {
    let started = Instant::now();
    let unbounded = Capacity {
        plants: usize::MAX,
        data: u64::MAX,
    };
    check(path, limits, unbounded)?;
    let failed = |e: postgres::Error| SeedError {
        path: path.to_path_buf(),
        at: None,
        fault: Fault::Database(DbError::from(e).0),
        partial: false,
    };
    let mut tx = client.transaction().map_err(failed)?;
    // Other instances starting together wait here for the whole load,
    // however long it takes: no statement timeout in this transaction.
    tx.batch_execute(
        "SET LOCAL statement_timeout = 0; LOCK TABLE plants IN SHARE ROW EXCLUSIVE MODE",
    )
    .map_err(failed)?;
    let held: bool = tx
        .query_one("SELECT EXISTS (SELECT 1 FROM plants)", &[])
        .map_err(failed)?
        .get(0);
    if held {
        info!(
            target: "plantstore::seed",
            "--seed {}: not loaded: the database already holds plants, and a seed only \
             fills an empty one",
            path.display()
        );
        return Ok(None);
    }
    let insert = tx
        .prepare(
            "INSERT INTO plants (id, name, tag) \
             SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::bytea[])",
        )
        .map_err(failed)?;
    let mut batch = Rows::default();
    let write = |tx: &mut postgres::Transaction<'_>, batch: &mut Rows| {
        let result = tx.execute(&insert, &[&batch.ids, &batch.names, &batch.tags]);
        *batch = Rows::default();
        result
            .map(drop)
            .map_err(|e| Fault::Database(DbError::from(e).0))
    };
    let plants = read(path, limits, |_, new| {
        batch.ids.push(new.id);
        batch.names.push(new.plant.name.into_bytes());
        batch.tags.push(new.plant.tag.map(String::into_bytes));
        match batch.ids.len() as u64 >= BATCH {
            true => write(&mut tx, &mut batch),
            false => Ok(()),
        }
    })
    .map_err(|e| located(path, e, limits))?;
    write(&mut tx, &mut batch).map_err(|fault| SeedError {
        path: path.to_path_buf(),
        at: None,
        fault,
        partial: false,
    })?;
    tx.commit().map_err(failed)?;
    Ok(Some(loaded(path, plants, started)))
}

/// Columns of plants to insert at once.
#[derive(Default)]
struct Rows {
    ids: Vec<i64>,
    names: Vec<Vec<u8>>,
    tags: Vec<Option<Vec<u8>>>,
}
