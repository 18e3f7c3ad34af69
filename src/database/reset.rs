//! `POST /plants/reset` on the database (schema version 5): every plant
//! replaced by the seed's in one transaction, logged as one change of its
//! own kind, and the count of resets (the generation) that lets a listing
//! or an export read in pieces tell that the plants were replaced under it.
//!
//! The transaction first locks `plants` in `EXCLUSIVE` mode: reads go on
//! (seeing the old plants until the commit), every batch already running
//! commits first, and every later one waits for the commit. It then adds
//! one to the generation (the row of `plantstore_feed`, locked until the
//! commit; batches never touch it, and the numberer only tries it), deletes every
//! plant, inserts the seed's in statements of at most [`PIECE_ROWS`] rows
//! and [`PIECE_BYTES`] bytes of names and tags, and logs the reset (id 0,
//! kind 4, no name) under a ticket (schema version 6, `number`), taken
//! after the table's lock and the update that gave it a transaction id. A
//! write racing a reset therefore lands wholly before it (and is gone) or
//! wholly after it (and stays), and its ticket, then its number in the
//! log, says which.
//!
//! The whole job is bounded by [`RESET_FOR`], below the watchdog's
//! `STUCK`: each statement is given what is left of it as its timeout, so
//! a reset either commits or is rolled back before anyone answers for it.

use std::time::{Duration, Instant};

use postgres::Transaction;
use postgres::error::SqlState;
use postgres::types::Type;

use super::sql::{Columns, Typed};
use super::{Connection, DbError};
use crate::model::Plant;

/// The change log's kind of a reset (1 to 3 are create, replace, delete).
pub(super) const RESET_KIND: i16 = 4;

/// What version 5 adds to version 4: the count of resets, beside the
/// change log's counter. (The reset kind itself needs no column.)
pub(super) const SCHEMA_5: &str =
    "ALTER TABLE plantstore_feed ADD COLUMN generation bigint NOT NULL DEFAULT 0;";

/// Rows one insert of the seed's plants takes, at most...
const PIECE_ROWS: usize = 1000;
/// ... and bytes of names and tags (the plant that passes it is the last).
const PIECE_BYTES: usize = 1 << 20;

/// The longest a reset runs before it is rolled back (and answered 503).
pub const RESET_FOR: Duration = Duration::from_secs(6);

/// Inserts rows given as arrays.
const INSERT: &str = "INSERT INTO plants (id, name, tag, name_folded, tag_folded)
SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::bytea[], $4::text[], $5::text[])";

/// Adds one to the count of resets, and returns it.
const NEXT_GENERATION: &str =
    "UPDATE plantstore_feed SET generation = generation + 1 WHERE one RETURNING generation";

/// The log's pending row of a reset (kind $1) under the next ticket, which
/// it returns.
const LOG_RESET: &str = "INSERT INTO plant_changes_pending (ticket, ids, kinds, names, tags)
VALUES (nextval('plant_changes_ticket'), ARRAY[0::bigint], ARRAY[$1::smallint],
    ARRAY[NULL::bytea], ARRAY[NULL::bytea])
RETURNING ticket";

/// What a committed reset did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResetDone {
    /// Its ticket in the change log (`number`), the order of its number
    /// among the others; 0 with the log off (`sql::change_log_on`).
    pub ticket: u64,
    /// The generation it began.
    pub generation: u64,
    /// Plants it left.
    pub plants: usize,
}

/// Why a reset was not done; nothing of it was.
#[derive(Debug)]
pub enum ResetFailed {
    /// It did not finish within [`RESET_FOR`] (its lock was held by
    /// another writer, or its seed took too long to write).
    OutOfTime(DbError),
    /// The database failed otherwise.
    Db(DbError),
}

/// A read made in pieces, checked against the generation of its first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InGeneration<T> {
    /// Read within this generation.
    Read(T, u64),
    /// The plants were reset since the first piece (now this generation):
    /// nothing read.
    Reset(u64),
}

/// A bigint of the database as a number, or why it is not one.
fn number(n: i64, what: &str) -> Result<u64, DbError> {
    u64::try_from(n).map_err(|_| DbError(format!("plantstore_feed holds {what} {n}")))
}

impl Connection {
    /// Replaces every plant by `plants` (ids unique, as a seed's are) in
    /// one transaction and logs it; rolled back on any failure.
    pub fn reset(&mut self, plants: &[(i64, Plant)]) -> Result<ResetDone, ResetFailed> {
        let deadline = Instant::now() + RESET_FOR;
        let done = reset_in(self.client().transaction(), plants, deadline);
        let out_of_time = matches!(&done, Err(e) if e.code() == Some(&SqlState::QUERY_CANCELED));
        match self.counted(done) {
            Err(e) if out_of_time => Err(ResetFailed::OutOfTime(e)),
            done => done.map_err(ResetFailed::Db),
        }
    }

    /// The count of resets so far.
    pub fn generation(&mut self) -> Result<u64, DbError> {
        let row = self
            .client()
            .query_typed_one("SELECT generation FROM plantstore_feed", &[]);
        number(self.counted(row)?.try_get(0)?, "generation")
    }

    /// Reads `read` as a piece of a listing or export whose first piece
    /// was read in generation `first` (`None`: this is the first).
    /// Statements that follow one another see ever later commits, so the
    /// generation is read before the first piece (whose plants are then of
    /// it or later) and after each later one (whose plants, and every
    /// piece's since the first, are then of it, or the generation moved):
    /// one small statement a piece.
    pub fn in_generation<T>(
        &mut self,
        first: Option<u64>,
        read: impl FnOnce(&mut Connection) -> Result<T, DbError>,
    ) -> Result<InGeneration<T>, DbError> {
        match first {
            None => {
                let generation = self.generation()?;
                Ok(InGeneration::Read(read(self)?, generation))
            }
            Some(first) => {
                let made = read(self)?;
                match self.generation()? {
                    now if now == first => Ok(InGeneration::Read(made, now)),
                    now => Ok(InGeneration::Reset(now)),
                }
            }
        }
    }
}

/// The reset's statements in `tx`, each given what is left until
/// `deadline`; committed if all succeed.
fn reset_in(
    tx: Result<Transaction, postgres::Error>,
    plants: &[(i64, Plant)],
    deadline: Instant,
) -> Result<ResetDone, postgres::Error> {
    let mut tx = tx?;
    limit(&mut tx, deadline)?;
    tx.batch_execute("LOCK TABLE plants IN EXCLUSIVE MODE")?;
    limit(&mut tx, deadline)?;
    let generation: i64 = tx.query_typed_one(NEXT_GENERATION, &[])?.try_get(0)?;
    limit(&mut tx, deadline)?;
    tx.batch_execute("DELETE FROM plants")?;
    for piece in pieces(plants) {
        limit(&mut tx, deadline)?;
        let mut rows = Columns::default();
        for (id, plant) in piece {
            rows.push(*id, plant);
        }
        tx.execute_typed(INSERT, &rows.typed())?;
    }
    let ticket: i64 = if super::sql::change_log_on() {
        let kind: [Typed; 1] = [(&RESET_KIND, Type::INT2)];
        tx.query_typed_one(LOG_RESET, &kind)?.try_get(0)?
    } else {
        0
    };
    tx.commit()?;
    Ok(ResetDone {
        // The counters only grow from 0: never negative.
        ticket: u64::try_from(ticket).unwrap_or(0),
        generation: u64::try_from(generation).unwrap_or(0),
        plants: plants.len(),
    })
}

/// Gives the next statements of `tx` what is left until `deadline`.
fn limit(tx: &mut Transaction, deadline: Instant) -> Result<(), postgres::Error> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .as_millis();
    // 0 would mean no timeout at all.
    tx.batch_execute(&format!("SET LOCAL statement_timeout = {}", left.max(1)))
}

/// `plants` in pieces of at most `PIECE_ROWS` rows, each ending at the
/// plant whose name and tag take its bytes past `PIECE_BYTES`.
fn pieces(plants: &[(i64, Plant)]) -> Vec<&[(i64, Plant)]> {
    let mut pieces = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (at, (_, plant)) in plants.iter().enumerate() {
        bytes += plant.name.len() + plant.tag.as_ref().map_or(0, String::len);
        if at + 1 - start == PIECE_ROWS || bytes >= PIECE_BYTES {
            pieces.push(&plants[start..=at]);
            (start, bytes) = (at + 1, 0);
        }
    }
    if start < plants.len() {
        pieces.push(&plants[start..]);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plant(id: i64, bytes: usize) -> (i64, Plant) {
        let name = "n".repeat(bytes);
        (id, Plant { name, tag: None })
    }

    #[test]
    fn pieces_end_at_the_rows_or_the_bytes_and_keep_every_plant_in_order() {
        let many: Vec<_> = (0..2500).map(|id| plant(id, 1)).collect();
        let sizes: Vec<usize> = pieces(&many).iter().map(|p| p.len()).collect();
        assert_eq!(sizes, [1000, 1000, 500]);
        let big: Vec<_> = (0..5).map(|id| plant(id, PIECE_BYTES / 2)).collect();
        let sizes: Vec<usize> = pieces(&big).iter().map(|p| p.len()).collect();
        assert_eq!(sizes, [2, 2, 1]);
        let ids: Vec<i64> = pieces(&big).concat().iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [0, 1, 2, 3, 4]);
        assert!(pieces(&[]).is_empty());
    }
}
