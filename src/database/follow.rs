//! Following the change log: every change any instance commits, in the
//! order of the log's numbers, for this instance's change feed.
//!
//! One thread per instance, on a connection of its own, every [`LOOK`]:
//! reads the log (`plant_changes`) from the last number it handed on (one
//! indexed probe when nothing changed), then numbers what the writers of
//! every instance committed (`number`: at most one instance numbers at a
//! time, the others find it done), and reads again if it numbered
//! anything. (A `NOTIFY` from
//! each batch would wake it sooner, but takes a lock over the whole
//! database at every commit that notifies.) A lost connection (PostgreSQL
//! stopped or restarted) is made again with the workers' backoff, and
//! reading goes on from the same number, so a restart loses nothing the
//! log still holds. The log keeps the last [`KEEP`] changes: each follower
//! drops the older ones every [`PRUNE`]. A follower further behind than
//! that finds a gap in the numbers, and hands the next change on as it
//! is: the feed then tells its subscribers to start again (`reset`).
//!
//! The thread ends within a [`LOOK`] once `alive` can no longer be
//! upgraded (the store it feeds is gone). With the change log off (the
//! benchmark's switch, `sql::change_log_on`) there is no thread.

use std::sync::Weak;
use std::thread;
use std::time::{Duration, Instant};

use log::{info, warn};

use super::number::Numberer;
use super::sql::change_log_on;
use super::{BACKOFF_MAX, BACKOFF_MIN, Connect, Connection, DatabaseConfig, DbError};
use crate::model::PlantChange;

/// How often the log is read.
pub const LOOK: Duration = Duration::from_millis(50);
/// How often the log is pruned.
pub const PRUNE: Duration = Duration::from_secs(10);
/// Changes the log keeps for followers that fall behind or reconnect.
pub const KEEP: u64 = 100_000;
/// Batches read at a time.
const PAGE: usize = 64;

/// Starts the follower: hands each change after number `after` to
/// `deliver`, in order, while `alive` lives.
pub fn follow<T: Send + Sync + 'static>(
    config: DatabaseConfig,
    after: u64,
    deliver: Box<dyn Fn(&PlantChange) + Send>,
    alive: Weak<T>,
) -> std::io::Result<()> {
    if !change_log_on() {
        warn!(
            "database: PLANTSTORE_BENCH_NO_CHANGE_LOG=1, a benchmark's switch: no change log, \
             and the change feed stays silent"
        );
        return Ok(());
    }
    thread::Builder::new()
        .name("database-feed".into())
        .spawn(move || {
            let mut last = after;
            let mut backoff = BACKOFF_MIN;
            while alive.upgrade().is_some() {
                match config.connect_follower() {
                    Ok(mut connection) => {
                        backoff = BACKOFF_MIN;
                        if let Err(e) = run(&mut connection, &mut last, &*deliver, &alive) {
                            warn!("database: the change feed's connection: {e}; connecting again");
                        }
                    }
                    Err(e) => {
                        info!("database: the change feed cannot connect: {e}");
                        thread::sleep(backoff);
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    }
                }
            }
        })
        .map(drop)
}

/// Reads on one connection until it fails (`Err`) or `alive` is gone
/// (`Ok`).
fn run<T>(
    connection: &mut Connection,
    last: &mut u64,
    deliver: &dyn Fn(&PlantChange),
    alive: &Weak<T>,
) -> Result<(), DbError> {
    let mut pruned = Instant::now();
    let mut numberer = Numberer::default();
    loop {
        // What another instance numbered is read first, not after this
        // one's turn at numbering; what this one numbers, right after.
        read(connection, last, deliver)?;
        if numberer.step(connection)? > 0 {
            read(connection, last, deliver)?;
        }
        if pruned.elapsed() >= PRUNE {
            pruned = Instant::now();
            if let Some(upto) = last.checked_sub(KEEP) {
                connection.prune_changes(upto)?;
            }
        }
        if alive.upgrade().is_none() {
            return Ok(());
        }
        thread::sleep(LOOK);
        if connection.is_closed() {
            return Err(DbError("the connection closed".into()));
        }
    }
}

/// Hands on everything logged since the last change handed on.
fn read(
    connection: &mut Connection,
    last: &mut u64,
    deliver: &dyn Fn(&PlantChange),
) -> Result<(), DbError> {
    loop {
        let (changes, more) = connection.changes_page(*last, PAGE)?;
        for change in &changes {
            deliver(change);
            *last = change.seq;
        }
        if !more {
            return Ok(());
        }
    }
}
