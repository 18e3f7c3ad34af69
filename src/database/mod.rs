//! `--database URL`: plants in PostgreSQL, shared by every instance that
//! names the same database (the `postgres` feature; the default build has
//! none of this).
//!
//! The event loops never talk to the database. The door (`crate::plants`)
//! hands each read to [`Pool::submit`] as a job and each change (create,
//! replace, delete) to [`JobSender::change`]; one of `--database-pool`
//! worker threads, each with its own connection ([`Connection`]), runs a
//! job, or every change waiting as one batch (group commit, `batch`), and
//! gives the answers. A job or change is always answered: run on a
//! connection, or refused with a [`JobFailure`] reason (the API answers
//! 503 with `Retry-After`). Nothing here knows HTTP or the API; nothing
//! outside this module speaks SQL.
//!
//! Files: `connect` (connecting with the `--database` URL that
//! `crate::dbconfig` checked), `tls_connector` (the TLS connector), `pool` (the
//! handle: queueing, metrics, shutdown), `state` (what the pool's threads
//! share), `waiting` (the changes waiting, in order per id), `batch` (one
//! batch run: group commit), `worker`, `health` (the heartbeat),
//! `watchdog`, `sql` (the statements that change plants and read them
//! by id, the change log), `listing` (a page of a listing: orders,
//! search, count) and `shapes` (its statements' SQL), `schema` (made,
//! upgraded, checked at start),
//! `changelog` (reading the change log back), `number` (numbering it
//! without a lock over the cluster), `follow` (the change log
//! read for the change feed), `key` (the key of the feed's tickets,
//! shared by every instance), `seed` (the SQL of `--seed`: the door reads
//! the file and hands the plants to [`SeedLoad`]), `reset` (every plant
//! replaced by the seed's in one transaction, and the count of resets that
//! a read in pieces checks). The files beside this
//! one import one way: `waiting` and `state` below the ones that run
//! (`batch`, `worker`, `health`, `watchdog`, `pool`).
//!
//! Bounds. At most [`QUEUE`] jobs and changes wait; past that a request is refused at
//! once. A job that waited [`MAX_WAIT`] is refused (by the worker that
//! reaches it, or by the watchdog), every statement has
//! [`STATEMENT_TIMEOUT`](crate::dbconfig::STATEMENT_TIMEOUT), and the TCP connection gives up on an
//! unresponsive network after [`TCP_TIMEOUT`](crate::dbconfig::TCP_TIMEOUT). A server that stops
//! answering but keeps its connections open meets none of those: the
//! watchdog answers a job that ran [`STUCK`] with 503 and replaces its
//! worker, so no request hangs on a database that stopped answering.
//!
//! Failure and recovery. A worker whose connection is lost (PostgreSQL
//! stopped, restarted, or the network cut) connects again, waiting
//! [`BACKOFF_MIN`] doubling to [`BACKOFF_MAX`] between attempts (cut short
//! when the heartbeat sees the database answer again). An idle worker
//! checks its connection every [`PING`]. The heartbeat (`health`) asks on
//! a connection of its own every `health::BEAT` and calls the database
//! unreachable when no answer comes within `health::ANSWER`, whatever the
//! load. While it is unreachable, or no worker is connected, requests are
//! refused at once with the last error as the reason (also what
//! `/healthz` says), the jobs and changes that were waiting are refused,
//! and the watchdog gives up on those running: a request held by a
//! database that stopped answering is answered 503 within about
//! `BEAT + ANSWER` and a watchdog round, under a second.

mod batch;
mod changelog;
mod connect;
mod follow;
mod health;
mod key;
mod listing;
mod number;
mod pool;
mod reset;
mod schema;
mod seed;
mod shapes;
mod sql;
mod state;
mod tls_connector;
mod waiting;
mod watchdog;
mod worker;

pub use connect::Connect;
pub use follow::follow;
pub use key::{KEY_BYTES, ticket_key};
pub use number::number_committed;
pub use pool::{JobSender, Pool};
pub use reset::{InGeneration, RESET_FOR, ResetDone, ResetFailed};
pub use schema::{SCHEMA_VERSION, Schema, SchemaError, ensure_schema, feed_start};
pub use seed::SeedLoad;
pub use sql::{Connection, DbError};

use crate::dbconfig::DatabaseConfig;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Jobs and changes that may wait for a worker, over all workers. Each
/// holds one parsed request (a plant at most as large as the name and tag limits
/// allow), so this bounds the memory they take.
pub const QUEUE: usize = 1024;
/// A job that waited this long is refused (503) rather than run late.
pub const MAX_WAIT: Duration = Duration::from_secs(5);
/// First wait before connecting again, doubled after each failure...
pub const BACKOFF_MIN: Duration = Duration::from_millis(50);
/// ... up to this.
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// An idle worker checks its connection this often.
pub const PING: Duration = Duration::from_millis(500);
/// A job running this long is given up on (503) by the watchdog: the
/// server's `statement_timeout` has passed and it still has not answered.
pub const STUCK: Duration = Duration::from_secs(7);
/// How often the watchdog looks.
const WATCH: Duration = Duration::from_millis(100);

/// Why a job got no result: it did not run, or its statement failed. The
/// door turns it into the model's `Unavailable`, the words a client is
/// told.
#[derive(Debug, Clone)]
pub enum JobFailure {
    /// No worker is connected (the last error).
    Down(Arc<str>),
    /// `QUEUE` jobs already wait.
    Busy,
    /// It waited `MAX_WAIT`.
    Expired,
    /// The server is stopping.
    Stopping,
    /// Its statement failed (the database's words; logged, not sent).
    Failed(Arc<str>),
}

impl fmt::Display for JobFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobFailure::Down(_) | JobFailure::Failed(_) => {
                f.write_str("the database is unavailable; try again shortly")
            }
            JobFailure::Busy | JobFailure::Expired => {
                f.write_str("the database is busy; try again shortly")
            }
            JobFailure::Stopping => f.write_str("the server is stopping"),
        }
    }
}

impl From<DbError> for JobFailure {
    fn from(e: DbError) -> JobFailure {
        JobFailure::Failed(e.0.into())
    }
}
