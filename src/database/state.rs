//! The worker pool's shared state: what `pool.rs` (the handle the door
//! holds), the workers, the watchdog, the heartbeat and a running batch
//! all read and change. It imports none of them, so they import it one
//! way: the pool starts the threads, the threads and `batch.rs` use this.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use super::waiting::Waiting;
use super::{Connection, DatabaseConfig, JobFailure, QUEUE};
use crate::lock::lock;
use crate::metrics::Histogram;

/// A request's work for a worker: its statements, and its answer, given
/// exactly once: by the worker after the statements, or through `refuse`
/// with the reason they did not run (or, from the watchdog, did not end).
pub(super) struct Job {
    /// When it was queued; `None` for a batch, whose changes' waits were
    /// counted when it was taken.
    pub(super) queued: Option<Instant>,
    pub(super) run: Box<dyn FnOnce(&mut Connection) + Send>,
    pub(super) refuse: Refuse,
}

/// Answers a job with why it did not run; later calls do nothing.
pub(super) type Refuse = Arc<dyn Fn(JobFailure) + Send + Sync>;

/// A worker's place, which the watchdog reads: the job it runs, and since
/// when. The watchdog gives up on a job by taking it from here (and the
/// place out of the pool's); the worker takes it back when the job ends,
/// and finding it gone knows it was given up on.
#[derive(Default)]
pub(super) struct Slot {
    pub(super) current: Mutex<Option<(Instant, Refuse)>>,
}

/// What the pool's threads share: the queues, the workers' places, the
/// database's health as the heartbeat and the workers see it, the
/// metrics, and the threads to join on shutdown.
pub(super) struct PoolState {
    pub(super) config: DatabaseConfig,
    pub(super) queue: Mutex<Queues>,
    pub(super) ready: Condvar,
    pub(super) stopping: AtomicBool,
    /// Workers connected now.
    pub(super) up: AtomicUsize,
    /// Whether the heartbeat's last question was answered in time.
    pub(super) answering: AtomicBool,
    /// Counts the heartbeat's returns to answering (workers waiting to
    /// connect again try at once).
    pub(super) back: AtomicU64,
    /// Why the last connection failed or was lost.
    pub(super) failure: Mutex<Arc<str>>,
    pub(super) stats: Stats,
    /// The workers' places (not those the watchdog gave up on).
    pub(super) slots: Mutex<Vec<Arc<Slot>>>,
    /// Workers the watchdog gave up on that are still running (held by
    /// the database); a worker given up on is replaced while fewer than
    /// `pool` are.
    pub(super) abandoned: AtomicUsize,
    /// Every thread started, the watchdog's included.
    pub(super) threads: Mutex<Vec<JoinHandle<()>>>,
}

/// What waits for a worker: jobs (reads) in arrival order, and changes,
/// taken a batch at a time.
#[derive(Default)]
pub(super) struct Queues {
    pub(super) jobs: VecDeque<Job>,
    pub(super) changes: Waiting,
}

impl Queues {
    pub(super) fn len(&self) -> usize {
        self.jobs.len() + self.changes.len()
    }
}

/// What `/metrics` reports of the pool.
#[derive(Default)]
pub(super) struct Stats {
    /// Time a job ran on its connection (statement and round trip).
    pub(super) run: Histogram,
    /// Time a job waited for a worker.
    pub(super) wait: Histogram,
    /// Jobs refused, by reason: down, busy, expired, failed.
    pub(super) refused: [AtomicU64; 4],
    /// Connections made after the first of each worker.
    pub(super) reconnects: AtomicU64,
    /// Batches of changes committed, and the changes in them.
    pub(super) batches: AtomicU64,
    pub(super) batched: AtomicU64,
}

impl PoolState {
    pub(super) fn lock_queue(&self) -> MutexGuard<'_, Queues> {
        lock(&self.queue)
    }

    /// Queues `item` with `push`, which says whether a worker may take
    /// work now (a worker is woken), or gives it back with why it cannot
    /// wait (counted).
    pub(super) fn enqueue<T>(
        &self,
        item: T,
        push: impl FnOnce(&mut Queues, T) -> bool,
    ) -> Result<(), (T, JobFailure)> {
        let refused = if self.is_stopping() {
            JobFailure::Stopping
        } else if let Some(why) = self.down() {
            JobFailure::Down(why)
        } else {
            let mut queues = self.lock_queue();
            if queues.len() < QUEUE {
                let wake = push(&mut queues, item);
                drop(queues);
                if wake {
                    self.ready.notify_one();
                }
                return Ok(());
            }
            JobFailure::Busy
        };
        self.stats.refuse(&refused);
        Err((item, refused))
    }

    /// Why requests cannot be served now: the database does not answer
    /// the heartbeat, or no worker is connected.
    pub(super) fn down(&self) -> Option<Arc<str>> {
        let answering = self.answering.load(Ordering::Acquire);
        (!answering || self.up.load(Ordering::Acquire) == 0).then(|| self.failure())
    }

    pub(super) fn failure(&self) -> Arc<str> {
        Arc::clone(&lock(&self.failure))
    }

    pub(super) fn set_failure(&self, why: String) {
        *lock(&self.failure) = why.into();
    }

    pub(super) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Refuses every queued job and change.
    pub(super) fn refuse_all(&self, why: JobFailure) {
        let (jobs, changes) = {
            let mut queues = self.lock_queue();
            (std::mem::take(&mut queues.jobs), queues.changes.drain())
        };
        for job in jobs {
            self.stats.refuse(&why);
            (job.refuse)(why.clone());
        }
        for change in changes {
            self.stats.refuse(&why);
            change.refuse(why.clone());
        }
    }
}

/// `Stats::refused`'s index of a failed statement.
const FAILED: usize = 3;

impl Stats {
    pub(super) fn refuse(&self, why: &JobFailure) {
        let index = match why {
            JobFailure::Down(_) => 0,
            JobFailure::Busy => 1,
            JobFailure::Expired => 2,
            JobFailure::Failed(_) => FAILED,
            JobFailure::Stopping => return,
        };
        self.refused[index].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts requests whose statements failed (they answered 503
    /// themselves).
    pub(super) fn failed(&self, requests: u64) {
        self.refused[FAILED].fetch_add(requests, Ordering::Relaxed);
    }
}
