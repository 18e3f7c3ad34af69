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

use super::pool::{PoolState, Slot};
use super::{BACKOFF_MAX, BACKOFF_MIN, Connection, DbError, MAX_WAIT, PING, Unavailable};
use crate::lock::lock;

/// Starts a worker with a place of its own.
pub(super) fn spawn_worker(shared: &Arc<PoolState>) -> std::io::Result<()> {
    let slot = Arc::new(Slot::default());
    lock(&shared.slots).push(Arc::clone(&slot));
    let worker = Arc::clone(shared);
    let thread = thread::Builder::new()
        .name("database".into())
        .spawn(move || work(&worker, &slot))?;
    lock(&shared.threads).push(thread);
    Ok(())
}

/// A worker: connect (again, with backoff, whenever the connection is
/// lost), then run jobs until stopped, or until the watchdog gave up on it.
fn work(shared: &Arc<PoolState>, slot: &Slot) {
    let mut backoff = BACKOFF_MIN;
    let mut connected_before = false;
    while !shared.is_stopping() && !slot.abandoned.load(Ordering::Acquire) {
        let mut connection = match shared.config.connect() {
            Ok(connection) => connection,
            Err(e) => {
                debug!("database {}: cannot connect: {e}", shared.config.describe());
                shared.set_failure(format!("cannot connect: {e}"));
                if shared.up.load(Ordering::Acquire) == 0 {
                    shared.refuse_all(Unavailable::Down(shared.failure()));
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
        let why = serve(shared, slot, &mut connection);
        if slot.abandoned.load(Ordering::Acquire) {
            // The watchdog counted it down and started another.
            shared.abandoned.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        let left = shared.up.fetch_sub(1, Ordering::AcqRel) - 1;
        if shared.is_stopping() {
            return;
        }
        went_down(shared, why, left);
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
        shared.refuse_all(Unavailable::Down(shared.failure()));
    }
}

/// Runs jobs on `connection` until it is lost (then says why), the pool
/// stops, or the watchdog gives up on this worker.
fn serve(shared: &Arc<PoolState>, slot: &Slot, connection: &mut Connection) -> String {
    loop {
        let Some(job) = shared.next() else {
            if shared.is_stopping() {
                return "stopping".into();
            }
            // Idle: is the database still there?
            if let Err(e) = connection.client().is_valid(PING) {
                return format!("connection lost: {}", DbError::from(e));
            }
            continue;
        };
        if let Some(queued) = job.queued {
            let waited = queued.elapsed();
            shared.stats.wait.observe(waited);
            if waited > MAX_WAIT {
                shared.stats.refuse(&Unavailable::Expired);
                (job.refuse)(Unavailable::Expired);
                continue;
            }
        }
        let (started, errors) = (Instant::now(), connection.errors());
        *lock(&slot.current) = Some((started, Arc::clone(&job.refuse)));
        let ran = catch_unwind(AssertUnwindSafe(|| (job.run)(connection)));
        let given_up = lock(&slot.current).take().is_none();
        shared.stats.run.observe(started.elapsed());
        if ran.is_err() {
            // A bug, not the database: answer, and start afresh.
            error!("a database job panicked; its connection is closed");
            (job.refuse)(Unavailable::Failed("a job panicked".into()));
            return "a job panicked".into();
        }
        if given_up {
            return "the database stopped answering".into();
        }
        shared.stats.failed(connection.errors() - errors);
        if connection.is_closed() {
            return "connection lost".into();
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
