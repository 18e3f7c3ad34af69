//! Numbering the change log without a lock over the whole cluster
//! (schema version 6).
//!
//! Writers do not number their changes. A batch (`sql`) or a reset
//! (`reset`) takes a ticket, `nextval('plant_changes_ticket')`, once it
//! holds every row lock it takes and has a transaction id, and writes its
//! changes under that ticket as one row of `plant_changes_pending`. The
//! numberer, run by each instance's follower (`follow`) on the follower's
//! connection between its reads, moves the committed pending rows to
//! `plant_changes` in ticket order, numbered after `plantstore_feed.last`,
//! and records the last ticket it has numbered up to in
//! `plantstore_feed.ticket`. Followers read `plant_changes` by number as
//! they always did: a version 5 log keeps its rows and ids.
//!
//! A round of the numberer:
//! 1. Horizon: `t`, the sequence's last value (`CACHE 1`, so no value
//!    handed out is above it); if `t` is above `plantstore_feed.ticket`,
//!    then, in a later statement, `x := pg_current_xact_id()`, a
//!    transaction id newer than every one assigned before it.
//! 2. Wait until `pg_snapshot_xmin(pg_current_snapshot())` is above `x`:
//!    every transaction with an id up to `x` has ended.
//! 3. Number, in one transaction that holds the advisory lock
//!    [`NUMBERER_LOCK`] and `plantstore_feed`'s row (each only tried: an
//!    instance that does not get both skips the round): delete the
//!    pending rows with tickets up to `t` (the oldest [`NUMBER_ROWS`]; the
//!    rest under the same horizon next), insert them into `plant_changes`
//!    numbered in ticket order from `last + 1`, and set `last` and
//!    `ticket`.
//!
//! Steps 2 and 3 are one statement ([`NUMBER`]), run at each look until
//! the wait is over: the check of step 2 is made on the snapshot that
//! step 3 reads with, and the numbering is done only if it passed. The
//! same statement reads the sequence again, so that the next horizon
//! needs only step 1's second statement. One look under a steady load is
//! then four statements: a read of the log, [`NUMBER`], [`XID`], and a
//! read of what was numbered. (They were eleven, each planned for its
//! run; the follower's share of the feed's cost fell by about a tenth.)
//!
//! Why no change is missed, none is numbered twice, and every feed has
//! the same order:
//! - At step 3 every ticket up to `t` is final. A writer has its
//!   transaction id before it takes its ticket (a batch from its first
//!   modification; a reset from its update of the generation). A ticket
//!   up to `t` was handed out before `t` was read, so before `x` was
//!   assigned, and its writer's id is below `x`; when the snapshot of
//!   steps 2 and 3 was taken, that writer had ended (its `xmin` is above
//!   `x`): committed, and its row is visible to that snapshot, or rolled
//!   back, and its row will never be.
//! - Numbers are given once. Numberings run one at a time (the lock), and
//!   each numbers only if the counter row it locked is the one its
//!   snapshot shows, same `last` and same `ticket`: a numbering that
//!   committed after that snapshot was taken, and moved anything, raised
//!   `ticket` (the tickets it moved are above the one before, and the
//!   trigger below refuses a `last` moved without it; both only grow, so
//!   an old value is never met again), and this one then does nothing
//!   (the lock of a row in PostgreSQL's read committed finds its newest
//!   version, while the rest of the statement reads the snapshot). One
//!   that moved nothing deleted nothing that snapshot shows. So each
//!   numbers the pending rows, after `last`, as the previous one left
//!   them. Each moves every
//!   pending row with a ticket up to its `t` (by the above, all there will
//!   ever be, less those numbered before), or the oldest of them, and
//!   deletes what it numbers in the transaction that numbers it. So the
//!   tickets numbered are always every ticket up to `plantstore_feed.ticket`,
//!   and numbers follow ticket order.
//! - Followers read `plant_changes` by number; the numbers are fixed by
//!   one commit and numberings commit one after another, each above the
//!   last: a follower that has read number n never later finds a smaller
//!   one, and every follower reads the same changes in the same order.
//!
//! Why the changes of one id are in the order the store applied them: two
//! batches that change one id both lock its row (a create, its key in the
//! primary key's index); the second gets it only once the first has
//! committed, and takes its ticket after its locks, so after the first
//! took its ticket. The sequence hands out increasing values (`CACHE 1`),
//! so the second's ticket and number are larger. A reset takes its
//! ticket after its lock of the whole table: before it every batch that
//! committed first, after it every batch that waited for it.
//!
//! The price: step 2 waits for every transaction of the cluster that
//! holds a transaction id (has written) and began before `x`, in any
//! database. One left open (a session idle in a transaction, a prepared
//! transaction) holds the numbering back: writes go on, the feeds wait.
//! A horizon waiting [`WAIT_WARNING`] is logged, naming the oldest such
//! transaction where PostgreSQL shows it, and again every `WAIT_WARNING`;
//! `idle_in_transaction_session_timeout` bounds the wait (docs/postgres.md).
//!
//! What the wait buys: numbers follow ticket order across all writers,
//! and `plantstore_feed.ticket` says that nothing below it is left. (The
//! properties above, per id included, would hold for the rows visible to
//! each numbering without it; a row committed late would then be numbered
//! after tickets above its own, once and alike on every feed, but only
//! when a later ticket made the numberer look again.)
//!
//! Latency: a follower with no horizon takes one and tries it at once;
//! one that has just numbered up to its horizon, and finds tickets handed
//! out since, takes the next one and tries it at the next look
//! (`follow::LOOK`): under a steady load some transaction is always under
//! way when a horizon is taken, and trying it at once would only wait,
//! for a statement's cost. A change reaches the log within about two
//! looks of its commit, the feed of the instance that numbered it at
//! once, the others' at their next look. The horizon lives in the
//! follower's memory: a lost connection, or a failed statement, starts
//! over with a new one; so does a horizon taken before the server last
//! started (`pg_postmaster_start_time`, checked by [`NUMBER`]): behind a
//! pooler the follower's connection outlives a restart of PostgreSQL, and
//! ids and tickets not yet flushed before it may be handed out again.
//!
//! `PLANTSTORE_BENCH_NO_CHANGE_LOG=1` is a benchmark's switch, not a flag
//! (`sql::change_log_on`): the change log off, to measure what it costs.

use std::thread;
use std::time::{Duration, Instant};

use log::warn;
use postgres::types::Type;

use super::sql::Typed;
use super::{Connection, DbError};

/// What version 6 adds to version 5: the tickets, the pending rows, and
/// the last ticket numbered (the log itself is unchanged); and a trigger
/// that refuses what an instance of an older build still running would
/// do, number changes itself (`last` moved without `ticket`), which
/// would put them out of order with the numberer's: its batch fails (a
/// 503) instead. A numbering always moves `ticket` with `last`.
pub(super) const SCHEMA_6: &str = "
CREATE SEQUENCE plant_changes_ticket CACHE 1;
CREATE TABLE plant_changes_pending (
    ticket bigint PRIMARY KEY, ids bigint[] NOT NULL, kinds smallint[] NOT NULL,
    names bytea[] NOT NULL, tags bytea[] NOT NULL
);
ALTER TABLE plantstore_feed ADD COLUMN ticket bigint NOT NULL DEFAULT 0;
CREATE FUNCTION plantstore_feed_numbered() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.last <> OLD.last AND NEW.ticket <= OLD.ticket THEN
        RAISE EXCEPTION 'the change log is numbered by plantstore schema version 6: '
            'stop every instance of an older build';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER plantstore_feed_numbered BEFORE UPDATE ON plantstore_feed
    FOR EACH ROW EXECUTE FUNCTION plantstore_feed_numbered();
";

/// The advisory lock of a numbering transaction ("plantnum" in ASCII).
const NUMBERER_LOCK: i64 = 0x706c_616e_746e_756d;

/// Pending rows (batches of at most `waiting::BATCH_CHANGES` changes) one
/// numbering moves, at most...
const NUMBER_ROWS: i64 = 1024;
/// ... and numberings one look runs, at most: a larger backlog goes on at
/// the next look.
const ROUNDS: usize = 16;

/// A horizon waited for this long is logged, and again this often.
pub const WAIT_WARNING: Duration = Duration::from_secs(10);

/// The last ticket handed out (0 before the first) and the last numbered.
const TICKETS: &str = "SELECT
    (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM plant_changes_ticket),
    (SELECT ticket FROM plantstore_feed WHERE one)";

/// A transaction id newer than every one assigned before (this statement
/// commits at once).
/// With it, when the server started: a horizon is of one run of the
/// server (see [`Horizon::started`]).
const XID: &str = "SELECT pg_current_xact_id()::text::bigint, pg_postmaster_start_time()::text";

/// Steps 2 and 3 in one statement, so one transaction, for the horizon
/// of tickets up to $1 and transaction ids up to $4, taken on the server
/// started at $5; at most $2 pending rows, under the advisory lock $3.
///
/// - `ready`: whether every transaction with an id up to $4 had ended
///   when the statement's snapshot was taken (its `xmin`, which is the
///   snapshot every part of the statement reads with), and whether the
///   server is the one the horizon was taken on. If not, nothing else
///   happens.
/// - `held`: the counter row, only if this transaction gets the
///   numberer's lock and the row (a reset holds it until it commits;
///   each only tried), and only if the row locked is the one the snapshot
///   shows: a numbering that committed after the snapshot was taken moved
///   rows this snapshot still shows pending, and this one then does
///   nothing (the next look sees what it did).
/// - Then, as before: the pending rows with tickets up to $1 (the oldest
///   $2) are deleted, by a range of the tickets' index up to the last of
///   them, and inserted into the log numbered in ticket order after
///   `last`; `last` and the last ticket numbered up to ($1 if fewer than
///   $2 rows were left) are set.
///
/// It returns `ready`'s two answers, the rows moved (null if `held` was
/// empty), the last ticket numbered up to after it, and the sequence's last
/// value as the statement ran (the next horizon's ticket).
///
/// (The delete is a range of the tickets' index: the table is emptied as
/// fast as it fills, so until vacuum comes by it holds mostly the dead rows
/// of what was moved, and a delete by `ticket IN (...)` was planned as a
/// scan of the whole table, which read every one of them at every
/// numbering.)
const NUMBER: &str = "WITH ready AS (
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint > $4 AS passed,
        pg_postmaster_start_time()::text = $5 AS same
), seen AS (
    SELECT last, ticket FROM plantstore_feed WHERE one
), locked AS (
    SELECT f.last, f.ticket FROM plantstore_feed AS f, ready
    WHERE f.one AND ready.passed AND ready.same AND pg_try_advisory_xact_lock($3)
    FOR UPDATE OF f SKIP LOCKED
), held AS (
    SELECT locked.last FROM locked, seen
    WHERE locked.last = seen.last AND locked.ticket = seen.ticket
), upto AS (
    SELECT max(ticket) AS ticket FROM (
        SELECT ticket FROM plant_changes_pending
        WHERE ticket <= $1 AND EXISTS (SELECT FROM held) ORDER BY ticket LIMIT $2
    ) AS oldest
), moved AS (
    DELETE FROM plant_changes_pending WHERE ticket <= (SELECT ticket FROM upto)
    RETURNING ticket, ids, kinds, names, tags
), numbered AS (
    INSERT INTO plant_changes (seq, ids, kinds, names, tags)
    SELECT (SELECT last FROM held) + 1 + sum(cardinality(ids)) OVER (ORDER BY ticket)
            - cardinality(ids),
        ids, kinds, names, tags
    FROM moved
    RETURNING seq + cardinality(ids) - 1 AS last
), counted AS (
    SELECT count(*) AS n, max(ticket) AS upto FROM moved
), updated AS (
    UPDATE plantstore_feed SET
        last = coalesce((SELECT max(last) FROM numbered), plantstore_feed.last),
        ticket = greatest(plantstore_feed.ticket,
            CASE WHEN counted.n < $2 THEN $1 ELSE counted.upto END)
    FROM counted, held WHERE one
    RETURNING counted.n, plantstore_feed.ticket
)
SELECT ready.passed, ready.same, (SELECT n FROM updated),
    coalesce((SELECT ticket FROM updated), (SELECT ticket FROM seen)),
    (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM plant_changes_ticket)
FROM ready";

/// The oldest transaction of the cluster that holds an id, where this
/// role may see it: its process, database, state and age in seconds.
const OLDEST: &str = "SELECT pid, datname::text, coalesce(state, '?'),
    coalesce(extract(epoch FROM now() - xact_start)::bigint, 0)
FROM pg_stat_activity
WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()
ORDER BY age(backend_xid) DESC LIMIT 1";

/// A horizon (step 1): tickets up to `ticket` are final once every
/// transaction up to `xid` has ended.
struct Horizon {
    ticket: i64,
    xid: i64,
    /// When the server whose ids these are started. Behind a pooler
    /// (pgbouncer) the follower's connection outlives a restart of
    /// PostgreSQL, after which the ids and the sequence may start again
    /// below what the horizon holds (what was not yet flushed is gone): a
    /// horizon of another run of the server is dropped, not trusted.
    started: String,
    since: Instant,
    warned: Option<Instant>,
}

/// The numberer of one follower connection: the horizon it holds.
#[derive(Default)]
pub(super) struct Numberer {
    horizon: Option<Horizon>,
}

/// What one numbering ([`NUMBER`]) did.
enum Numbered {
    /// Every ticket up to the horizon is numbered.
    All {
        /// Rows moved to the log by this numbering.
        moved: i64,
        /// The last ticket the sequence had handed out as it ran.
        handed: i64,
        /// Every ticket up to this one is numbered.
        numbered: i64,
    },
    /// [`NUMBER_ROWS`] were; more are left under the horizon.
    Some,
    /// Not yet: a transaction that may hold a ticket under the horizon
    /// has not ended.
    Waiting,
    /// Another instance numbers (or has just numbered), or a reset holds
    /// the counter row.
    Skipped,
    /// Nothing: the server is not the one the horizon was taken on.
    Restarted,
}

impl Numberer {
    /// One look's numbering: goes on under the horizon held (at most
    /// [`ROUNDS`] numberings); when none is held, takes one and tries it
    /// at once. When a numbering finds that tickets were handed out since
    /// the horizon, the next horizon is taken and tried at the next look:
    /// under a steady load transactions are always under way, and trying
    /// it at once would wait, for a statement's cost. How many rows it
    /// moved to the log.
    pub(super) fn step(&mut self, connection: &mut Connection) -> Result<i64, DbError> {
        let stepped = self.step_on(connection);
        if stepped.is_err() {
            // What failed may have been the server: start over.
            self.horizon = None;
        }
        stepped
    }

    fn step_on(&mut self, connection: &mut Connection) -> Result<i64, DbError> {
        // Whether the horizon was taken in this look: one held from an
        // earlier look that turns out to be of an earlier run of the
        // server is taken again at once, a new one is not.
        let mut fresh = self.horizon.is_none();
        if fresh {
            self.horizon = horizon(connection)?;
        }
        let mut moved = 0;
        for _ in 0..ROUNDS {
            let Some(held) = &mut self.horizon else {
                break;
            };
            match number(connection, held)? {
                Numbered::All {
                    moved: n,
                    handed,
                    numbered,
                } => {
                    moved += n;
                    self.horizon = if handed > numbered {
                        Some(next_horizon(connection, handed)?)
                    } else {
                        None
                    };
                    break;
                }
                Numbered::Some => moved += NUMBER_ROWS,
                Numbered::Waiting => {
                    held.waiting(connection);
                    break;
                }
                Numbered::Skipped => break,
                Numbered::Restarted if fresh => {
                    self.horizon = None;
                    break;
                }
                Numbered::Restarted => {
                    fresh = true;
                    self.horizon = horizon(connection)?;
                }
            }
        }
        Ok(moved)
    }
}

/// Step 1: a horizon, if any ticket handed out is not numbered yet.
fn horizon(connection: &mut Connection) -> Result<Option<Horizon>, DbError> {
    let row = connection.client().query_typed_one(TICKETS, &[])?;
    let (handed, numbered): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
    if handed <= numbered {
        return Ok(None);
    }
    next_horizon(connection, handed).map(Some)
}

/// Step 1 for tickets up to `handed`, read by an earlier statement.
fn next_horizon(connection: &mut Connection, handed: i64) -> Result<Horizon, DbError> {
    // A statement of its own, after the one that read the ticket.
    let row = connection.client().query_typed_one(XID, &[])?;
    Ok(Horizon {
        ticket: handed,
        xid: row.try_get(0)?,
        started: row.try_get(1)?,
        since: Instant::now(),
        warned: None,
    })
}

/// Steps 2 and 3, once.
fn number(connection: &mut Connection, horizon: &Horizon) -> Result<Numbered, DbError> {
    let params: [Typed; 5] = [
        (&horizon.ticket, Type::INT8),
        (&NUMBER_ROWS, Type::INT8),
        (&NUMBERER_LOCK, Type::INT8),
        (&horizon.xid, Type::INT8),
        (&horizon.started, Type::TEXT),
    ];
    let row = connection.client().query_typed_one(NUMBER, &params)?;
    let (passed, same): (bool, bool) = (row.try_get(0)?, row.try_get(1)?);
    let moved: Option<i64> = row.try_get(2)?;
    let (numbered, handed): (i64, i64) = (row.try_get(3)?, row.try_get(4)?);
    Ok(match (same, passed, moved) {
        (false, _, _) => Numbered::Restarted,
        (true, false, _) => Numbered::Waiting,
        (true, true, None) => Numbered::Skipped,
        (true, true, Some(n)) if n >= NUMBER_ROWS => Numbered::Some,
        (true, true, Some(moved)) => Numbered::All {
            moved,
            handed,
            numbered,
        },
    })
}

impl Horizon {
    /// Logs a wait of [`WAIT_WARNING`] and more, every `WAIT_WARNING`.
    fn waiting(&mut self, connection: &mut Connection) {
        let waited = self.since.elapsed();
        if waited < WAIT_WARNING || self.warned.is_some_and(|w| w.elapsed() < WAIT_WARNING) {
            return;
        }
        self.warned = Some(Instant::now());
        let oldest = match connection.client().query_typed_opt(OLDEST, &[]) {
            Ok(Some(row)) => oldest(&row).unwrap_or_default(),
            _ => String::new(),
        };
        warn!(
            "database: the change feed has waited {} s for transactions that began before it \
             looked to end; changes are stored but not yet on the feed. A transaction left open \
             anywhere in the cluster holds the feed back{oldest}: end it, or set \
             idle_in_transaction_session_timeout",
            waited.as_secs()
        );
    }
}

/// The oldest open transaction as the warning names it.
fn oldest(row: &postgres::Row) -> Result<String, postgres::Error> {
    let (pid, database): (i32, Option<String>) = (row.try_get(0)?, row.try_get(1)?);
    let (state, age): (String, i64) = (row.try_get(2)?, row.try_get(3)?);
    let database = database.unwrap_or_default();
    Ok(format!(
        " (the oldest: process {pid}, database {database}, {state}, open {age} s)"
    ))
}

/// Numbers every change committed before the call, as a follower does,
/// waiting at most `within` for the transactions under way to end; the
/// log's last number. For tools and tests that read the log on a
/// connection of their own.
pub fn number_committed(connection: &mut Connection, within: Duration) -> Result<u64, DbError> {
    let deadline = Instant::now() + within;
    if let Some(horizon) = horizon(connection)? {
        loop {
            match number(connection, &horizon)? {
                Numbered::All { .. } => break,
                Numbered::Some => continue,
                Numbered::Restarted => {
                    return Err(DbError(
                        "the database server restarted while the change log was numbered".into(),
                    ));
                }
                Numbered::Waiting | Numbered::Skipped => {}
            }
            if Instant::now() >= deadline {
                return Err(DbError(format!(
                    "the change log's tickets were not all numbered within {within:?}"
                )));
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
    connection.log_last()
}
