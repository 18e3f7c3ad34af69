//! Reading the change log (`plant_changes`, written by `sql`'s batch
//! statements): forward from a number, for the follower (`follow`);
//! backward from a number, for a change feed asked to resume from before
//! what it holds; its last number; and pruning it.
//!
//! A row of the log is one batch: its first number and its changes as
//! arrays, in number order; or one reset (schema version 5: id 0, kind 4,
//! no name), read as a change of kind `Reset`. Every read is bounded: forward by a number of
//! batches; backward by a number of batches and by bytes of names and
//! tags a statement (the server sums them and stops), and by
//! [`READ_BACK_FOR`] over all its statements.

use std::time::{Duration, Instant};

use postgres::Row;
use postgres::types::Type;

use super::reset::RESET_KIND;
use super::sql::{CHANGES_AFTER, Typed};
use super::waiting::BATCH_CHANGES;
use super::{Connection, DbError};
use crate::model::{ChangeKind, Plant, PlantChange};

/// The log's batches that hold changes after a number ($2) and start at
/// or before another ($3), newest first, at most $4 of them, and only
/// while the names and tags of the newer ones take at most $5 bytes (the
/// batch that passes it is the last). $1 bounds the index scan as in
/// [`CHANGES_AFTER`](super::sql::CHANGES_AFTER).
const CHANGES_BACK: &str = "SELECT seq, ids, kinds, names, tags FROM (
    SELECT seq, ids, kinds, names, tags,
        (sum(bytes) OVER (ORDER BY seq DESC))::bigint - bytes AS newer
    FROM (
        SELECT seq, ids, kinds, names, tags,
            (SELECT coalesce(sum(octet_length(n)), 0) FROM unnest(names) AS n)
            + (SELECT coalesce(sum(octet_length(t)), 0) FROM unnest(tags) AS t) AS bytes
        FROM plant_changes
        WHERE seq > $1 AND seq + cardinality(ids) - 1 > $2 AND seq <= $3
        ORDER BY seq DESC LIMIT $4
    ) AS batches
) AS counted WHERE newer <= $5 ORDER BY seq DESC";

/// Batches read by one statement of a backward read.
const BACK_PAGE: usize = 1024;

/// The longest a backward read goes on: it starts no statement after this
/// (each one is bounded by the statement timeout).
pub const READ_BACK_FOR: Duration = Duration::from_secs(1);

/// The type of every parameter here.
const INT8: Type = Type::INT8;

/// `n` as a statement's bigint.
fn bigint(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Connection {
    /// The logged changes after number `after`, in order, from up to
    /// `batches` batches.
    pub fn changes_after(
        &mut self,
        after: u64,
        batches: usize,
    ) -> Result<Vec<PlantChange>, DbError> {
        self.changes_page(after, batches)
            .map(|(changes, _)| changes)
    }

    /// [`changes_after`](Self::changes_after), and whether the log may
    /// hold more: it gave `batches` batches.
    pub(super) fn changes_page(
        &mut self,
        after: u64,
        batches: usize,
    ) -> Result<(Vec<PlantChange>, bool), DbError> {
        let from = bigint(after.saturating_sub(BATCH_CHANGES as u64));
        let limit = bigint(batches as u64);
        let after_n = bigint(after);
        let values: [Typed; 3] = [(&from, INT8), (&after_n, INT8), (&limit, INT8)];
        let rows = self.client().query_typed(CHANGES_AFTER, &values);
        let rows = self.counted(rows)?;
        let mut changes = Vec::new();
        for row in &rows {
            changes.extend(batch(row)?.into_iter().filter(|c| c.seq > after));
        }
        Ok((changes, rows.len() >= batches))
    }

    /// The logged changes numbered `after + 1 ..= upto`, read from the
    /// newest down while their names and tags take at most `bytes` (the
    /// change that passes it included) and for at most [`READ_BACK_FOR`]:
    /// in ascending order, without gaps, ending at `upto` (empty if the log
    /// no longer holds `upto`). Fewer than asked for when the log no longer
    /// holds the older ones, or they did not fit.
    pub fn changes_back(
        &mut self,
        after: u64,
        upto: u64,
        bytes: usize,
    ) -> Result<Vec<PlantChange>, DbError> {
        let deadline = Instant::now() + READ_BACK_FOR;
        let from = bigint(after.saturating_sub(BATCH_CHANGES as u64));
        // Newest first while reading.
        let mut read: Vec<PlantChange> = Vec::new();
        let mut left = bytes;
        let mut next = upto;
        while next > after && left > 0 && Instant::now() < deadline {
            let (after_n, next_n) = (bigint(after), bigint(next));
            let (page, left_n) = (bigint(BACK_PAGE as u64), bigint(left as u64));
            let values: [Typed; 5] = [
                (&from, INT8),
                (&after_n, INT8),
                (&next_n, INT8),
                (&page, INT8),
                (&left_n, INT8),
            ];
            let rows = self.client().query_typed(CHANGES_BACK, &values);
            let rows = self.counted(rows)?;
            for row in &rows {
                for change in batch(row)?.into_iter().rev() {
                    if change.seq > next || change.seq <= after {
                        continue;
                    }
                    if change.seq != next {
                        // A gap: the log no longer holds the older ones.
                        return Ok(ascending(read));
                    }
                    left = left.saturating_sub(change.bytes());
                    next -= 1;
                    read.push(change);
                }
            }
            if rows.len() < BACK_PAGE {
                // The range, or the bytes, came to an end.
                break;
            }
        }
        Ok(ascending(read))
    }

    /// The number of the log's last change.
    pub fn log_last(&mut self) -> Result<u64, DbError> {
        let row = self
            .client()
            .query_typed_one("SELECT last FROM plantstore_feed", &[]);
        let last: i64 = self.counted(row)?.try_get(0)?;
        u64::try_from(last).map_err(|_| DbError(format!("plantstore_feed holds {last}")))
    }

    /// Drops the logged changes up to number `upto`.
    pub fn prune_changes(&mut self, upto: u64) -> Result<u64, DbError> {
        let deleted = self.client().execute_typed(
            "DELETE FROM plant_changes WHERE seq <= $1",
            &[(&bigint(upto), INT8)],
        );
        self.counted(deleted)
    }
}

/// `newest_first` turned around.
fn ascending(mut newest_first: Vec<PlantChange>) -> Vec<PlantChange> {
    newest_first.reverse();
    newest_first
}

/// Every change of the batch in `row`, in order. What this server wrote
/// is UTF-8; anything else is shown with U+FFFD rather than refused. A
/// row that does not hold together (written by hand) is an error.
fn batch(row: &Row) -> Result<Vec<PlantChange>, DbError> {
    let first: i64 = row.try_get(0)?;
    let ids: Vec<i64> = row.try_get(1)?;
    let kinds: Vec<i16> = row.try_get(2)?;
    // Borrowed from the row: each name and tag is copied once, into its
    // `String`.
    let names: Vec<Option<&[u8]>> = row.try_get(3)?;
    let tags: Vec<Option<&[u8]>> = row.try_get(4)?;
    let first = u64::try_from(first).map_err(|_| DbError(format!("plant_changes: seq {first}")))?;
    if ids.len() != kinds.len() || ids.len() != names.len() || ids.len() != tags.len() {
        return Err(DbError(format!(
            "plant_changes: batch {first} has arrays of unequal length"
        )));
    }
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let mut changes = Vec::with_capacity(ids.len());
    for (at, (((id, kind), name), tag)) in
        ids.into_iter().zip(kinds).zip(names).zip(tags).enumerate()
    {
        let seq = first + at as u64;
        let kind = match kind {
            1 => ChangeKind::Created,
            2 => ChangeKind::Replaced,
            3 => ChangeKind::Deleted,
            RESET_KIND => ChangeKind::Reset,
            other => return Err(DbError(format!("plant_changes: kind {other}"))),
        };
        let plant = match (kind, name) {
            (ChangeKind::Deleted | ChangeKind::Reset, _) => None,
            (_, Some(name)) => Some(Plant {
                name: text(name),
                tag: tag.map(text),
            }),
            (_, None) => {
                return Err(DbError(format!("plant_changes: change {seq} has no name")));
            }
        };
        changes.push(PlantChange {
            seq,
            id,
            kind,
            plant,
        });
    }
    Ok(changes)
}
