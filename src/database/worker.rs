//! A pool worker: one thread, one connection, made again with backoff
//! whenever it is lost; runs queued jobs under `catch_unwind`, checks an
//! idle connection every `PING`, and says when the last connection went
//! down (refusing what waits) or the first came back.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use log::{debug, error, info, warn};

use super::batch;
use super::state::{Job, PoolState, Slot};
use super::{BACKOFF_MAX, BACKOFF_MIN, Connect, Connection, DbError, JobFailure, MAX_WAIT, PING};
use crate::lock::{lock, wait_timeout};

/// Starts a worker with a place of its own.
pub(super) fn spawn_worker(shared: &Arc<PoolState>) -> std::io::Result<()> {
    let slot = Arc::new(Slot::default());
    lock(&shared.slots).push(Arc::clone(&slot));
    start_worker(shared, slot)
}

/// Starts a worker in `slot`, already among the pool's places (taken out
/// again if the thread cannot start).
pub(super) fn start_worker(shared: &Arc<PoolState>, slot: Arc<Slot>) -> std::io::Result<()> {
    let (worker, place) = (Arc::clone(shared), Arc::clone(&slot));
    let thread = thread::Builder::new()
        .name("database".into())
        .spawn(move || work(&worker, place));
    let thread = match thread {
        Ok(thread) => thread,
        Err(e) => {
            lock(&shared.slots).retain(|s| !Arc::ptr_eq(s, &slot));
            return Err(e);
        }
    };
    let mut threads = lock(&shared.threads);
    // Workers given up on that have since ended: nothing to keep.
    threads.retain(|t| !t.is_finished());
    threads.push(thread);
    Ok(())
}

/// How a worker's run on one connection ended.
enum Ended {
    /// The connection was lost (or the pool stops): why.
    Lost(String),
    /// The watchdog gave up on its job and counted it down.
    GivenUp,
}

/// A worker: connect (again, with backoff, whenever the connection is
/// lost), then run jobs until stopped. One the watchdog gave up on comes
/// back when its job ends: it takes a new place if the pool is short of
/// workers (none was started for it), else it ends.
fn work(shared: &Arc<PoolState>, mut slot: Arc<Slot>) {
    let mut backoff = BACKOFF_MIN;
    let mut connected_before = false;
    while !shared.is_stopping() {
        let mut connection = match shared.config.connect() {
            Ok(connection) => connection,
            Err(e) => {
                debug!("database {}: cannot connect: {e}", shared.config.describe());
                shared.set_failure(format!("cannot connect: {e}"));
                if shared.up.load(Ordering::Acquire) == 0 {
                    shared.refuse_all(JobFailure::Down(shared.failure()));
                }
                pause(shared, backoff);
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        backoff = BACKOFF_MIN;
        if connected_before {
            shared.stats.reconnects.fetch_add(1, Ordering::Relaxed);
        }
        connected_before = true;
        if shared.up.fetch_add(1, Ordering::AcqRel) == 0 {
            info!("database {}: connected", shared.config.describe());
        }
        let why = match serve(shared, &slot, &mut connection) {
            Ended::Lost(why) => why,
            Ended::GivenUp => {
                shared.abandoned.fetch_sub(1, Ordering::AcqRel);
                drop(connection);
                let mut slots = lock(&shared.slots);
                if shared.is_stopping() || slots.len() >= shared.config.pool {
                    drop(slots);
                    // Changes behind its batch may have been left to it.
                    shared.ready.notify_one();
                    return;
                }
                slot = Arc::new(Slot::default());
                slots.push(Arc::clone(&slot));
                continue;
            }
        };
        let left = shared.up.fetch_sub(1, Ordering::AcqRel) - 1;
        if shared.is_stopping() {
            return;
        }
        went_down(shared, why, left);
        // What waits may have been left for this worker to take.
        shared.ready.notify_one();
    }
}

/// After a connection was lost (or given up on) and `left` remain: records
/// why, and with none left refuses what waits (nothing would run it soon).
pub(super) fn went_down(shared: &PoolState, why: String, left: usize) {
    shared.set_failure(why);
    if left == 0 {
        warn!(
            "database {}: {}; answering 503 until it is back",
            shared.config.describe(),
            shared.failure()
        );
        shared.refuse_all(JobFailure::Down(shared.failure()));
    }
}

/// The next job: a batch of the changes waiting when one may run,
/// else the first job, waiting up to `PING` for either; `None` on a
/// timeout or when stopping with nothing queued.
fn next(shared: &Arc<PoolState>) -> Option<Job> {
    let mut queues = shared.lock_queue();
    for round in 0..2 {
        if let Some(batch) = queues.changes.take() {
            drop(queues);
            return Some(batch::job(shared, batch));
        }
        if let Some(job) = queues.jobs.pop_front() {
            return Some(job);
        }
        if round == 0 && !shared.is_stopping() {
            queues = wait_timeout(&shared.ready, queues, PING).0;
        }
    }
    None
}

/// Runs jobs on `connection` until it is lost (then says why), the pool
/// stops, or the watchdog gives up on this worker.
fn serve(shared: &Arc<PoolState>, slot: &Slot, connection: &mut Connection) -> Ended {
    loop {
        let Some(job) = next(shared) else {
            if shared.is_stopping() {
                return Ended::Lost("stopping".into());
            }
            // Idle: is the database still there?
            if let Err(e) = connection.client().is_valid(PING) {
                return Ended::Lost(format!("connection lost: {}", DbError::from(e)));
            }
            continue;
        };
        if let Some(queued) = job.queued {
            let waited = queued.elapsed();
            shared.stats.wait.observe(waited);
            if waited > MAX_WAIT {
                shared.stats.refuse(&JobFailure::Expired);
                (job.refuse)(JobFailure::Expired);
                continue;
            }
        }
        let (started, errors) = (Instant::now(), connection.errors());
        *lock(&slot.current) = Some((started, Arc::clone(&job.refuse)));
        let ran = catch_unwind(AssertUnwindSafe(|| (job.run)(connection)));
        // Taken by the watchdog, it also marked this worker given up on,
        // under the same lock.
        let given_up = lock(&slot.current).take().is_none();
        shared.stats.run.observe(started.elapsed());
        if given_up {
            return Ended::GivenUp;
        }
        if ran.is_err() {
            // A bug, not the database: answer, and start afresh.
            error!("a database job panicked; its connection is closed");
            (job.refuse)(JobFailure::Failed("a job panicked".into()));
            return Ended::Lost("a job panicked".into());
        }
        shared.stats.failed(connection.errors() - errors);
        if connection.is_closed() {
            return Ended::Lost("connection lost".into());
        }
    }
}

/// Sleeps `wait`, or less if the pool stops or the heartbeat sees the
/// database answer again.
fn pause(shared: &PoolState, wait: Duration) {
    let deadline = Instant::now() + wait;
    let back = shared.back.load(Ordering::Acquire);
    while !shared.is_stopping() && shared.back.load(Ordering::Acquire) == back {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        thread::sleep((deadline - now).min(Duration::from_millis(50)));
    }
}
