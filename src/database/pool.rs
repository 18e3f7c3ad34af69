//! The worker pool: jobs and changes queued (at most `QUEUE` together),
//! answered exactly once (run on a worker's connection, or refused with an
//! `JobFailure` reason), the pool's state that workers and the watchdog
//! share, its metrics, and shutdown. The workers are `worker.rs`, the
//! watchdog `watchdog.rs`, the batches of changes `batch.rs`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::batch::{self, Answer, Change, Queued, Waiting};
use super::health::beat;
use super::watchdog::watch;
use super::worker::spawn_worker;
use super::{Connection, DatabaseConfig, JobFailure, PING, QUEUE, STUCK};
use crate::lock::{lock, wait_timeout};
use crate::metrics::{Exposition, Histogram, Kind};

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

/// The worker pool over one database.
pub struct Pool {
    shared: Arc<PoolState>,
}

/// A handle that submits jobs to the pool (for a stream that asks for
/// more as it goes).
#[derive(Clone)]
pub struct JobSender(Arc<PoolState>);

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
    fn len(&self) -> usize {
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

impl Pool {
    /// Starts `config.pool` workers; each connects on its own.
    pub fn start(config: DatabaseConfig) -> std::io::Result<Pool> {
        let shared = Arc::new(PoolState {
            queue: Mutex::new(Queues::default()),
            ready: Condvar::new(),
            stopping: AtomicBool::new(false),
            up: AtomicUsize::new(0),
            answering: AtomicBool::new(true),
            back: AtomicU64::new(0),
            failure: Mutex::new("not connected yet".into()),
            stats: Stats::default(),
            slots: Mutex::new(Vec::new()),
            abandoned: AtomicUsize::new(0),
            threads: Mutex::new(Vec::new()),
            config,
        });
        for _ in 0..shared.config.pool {
            spawn_worker(&shared)?;
        }
        let watched = Arc::clone(&shared);
        let watchdog = thread::Builder::new()
            .name("database-watchdog".into())
            .spawn(move || watch(&watched))?;
        lock(&shared.threads).push(watchdog);
        let beating = Arc::clone(&shared);
        let heartbeat = thread::Builder::new()
            .name("database-health".into())
            .spawn(move || beat(&beating))?;
        lock(&shared.threads).push(heartbeat);
        Ok(Pool { shared })
    }

    /// Waits up to `limit` for the first worker to connect.
    pub fn wait_up(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.shared.up.load(Ordering::Acquire) == 0 {
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// See [`JobSender::submit`].
    pub fn submit<R: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> R + Send + 'static,
        answer: impl FnOnce(Result<R, JobFailure>) + Send + 'static,
    ) {
        self.queue().submit(work, answer);
    }

    /// A handle for submitting jobs later.
    pub fn queue(&self) -> JobSender {
        JobSender(Arc::clone(&self.shared))
    }
}

impl JobSender {
    /// Runs `work` on a worker's connection and calls `answer` with what it
    /// made, or calls `answer` with the reason it did not run (at once when
    /// it cannot be queued) or did not end in time: exactly once either
    /// way. What `work` makes after its answer was given is dropped.
    pub fn submit<R: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> R + Send + 'static,
        answer: impl FnOnce(Result<R, JobFailure>) + Send + 'static,
    ) {
        let once = Arc::new(Mutex::new(Some(answer)));
        let given = Arc::clone(&once);
        let refuse: Refuse = Arc::new(move |why| {
            if let Some(answer) = lock(&once).take() {
                answer(Err(why));
            }
        });
        let job = Job {
            queued: Some(Instant::now()),
            run: Box::new(move |connection| {
                let made = work(connection);
                if let Some(answer) = lock(&given).take() {
                    answer(Ok(made));
                }
            }),
            refuse,
        };
        let push = |queues: &mut Queues, job| {
            queues.jobs.push_back(job);
            true
        };
        if let Err((job, why)) = self.0.enqueue(job, push) {
            (job.refuse)(why);
        }
    }

    /// Applies `change` to the plant `id` in the next batch and calls
    /// `answer` with whether it was applied (see [`Answer`]) once that
    /// batch committed, or with why it was not: exactly once.
    pub fn change(&self, id: i64, change: Change, answer: Answer) {
        let queued = Queued::new(id, change, answer);
        if let Err((queued, why)) = self.0.enqueue(queued, |queues, c| queues.changes.push(c)) {
            queued.refuse(why);
        }
    }
}

impl Pool {
    /// Where it points, without the password, and the pool's size.
    pub fn describe(&self) -> String {
        let config = &self.shared.config;
        format!("{} (pool {})", config.describe(), config.pool)
    }

    /// `None` while the database answers and a worker is connected, else
    /// why not.
    pub fn failure(&self) -> Option<Arc<str>> {
        self.shared.down()
    }

    /// `Ok` while the database answers and a worker is connected, else the
    /// refusal to answer with, counted as one (for a request that would
    /// not reach `submit`).
    pub fn check(&self) -> Result<(), JobFailure> {
        match self.failure() {
            None => Ok(()),
            Some(why) => {
                let refused = JobFailure::Down(why);
                self.shared.stats.refuse(&refused);
                Err(refused)
            }
        }
    }

    /// Stops the workers once the jobs queued now are done or refused,
    /// waiting at most `STUCK` for them: a worker held by a database that
    /// stopped answering is left behind (its request was answered).
    pub fn shut_down(&self) {
        self.shared.stopping.store(true, Ordering::Release);
        self.shared.ready.notify_all();
        let threads = std::mem::take(&mut *lock(&self.shared.threads));
        let deadline = Instant::now() + STUCK;
        for thread in threads {
            while !thread.is_finished() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(5));
            }
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
        // Whatever a worker did not take (none may have been connected).
        self.shared.refuse_all(JobFailure::Stopping);
    }

    /// The pool's lines of `/metrics`.
    pub fn render(&self, out: &mut Exposition) {
        let shared = &self.shared;
        let stats = &shared.stats;
        let queued = shared.lock_queue().len();
        for (name, kind, help, value) in [
            (
                "plantstore_database_connections",
                Kind::Gauge,
                "Pool connections open (one per worker).",
                shared.up.load(Ordering::Relaxed) as u64,
            ),
            (
                "plantstore_database_pool_size",
                Kind::Gauge,
                "Pool workers (--database-pool).",
                shared.config.pool as u64,
            ),
            (
                "plantstore_database_queue",
                Kind::Gauge,
                "Requests waiting for a database worker.",
                queued as u64,
            ),
            (
                "plantstore_database_reconnects_total",
                Kind::Counter,
                "Connections made again after one was lost or refused.",
                stats.reconnects.load(Ordering::Relaxed),
            ),
            (
                "plantstore_database_batches_total",
                Kind::Counter,
                "Batches of changes committed, each one statement.",
                stats.batches.load(Ordering::Relaxed),
            ),
            (
                "plantstore_database_batched_changes_total",
                Kind::Counter,
                "Changes committed in those batches.",
                stats.batched.load(Ordering::Relaxed),
            ),
        ] {
            out.single(name, kind, help, value);
        }
        const REFUSED: &str = "plantstore_database_refused_total";
        out.family(
            REFUSED,
            Kind::Counter,
            "Requests answered 503 without the database, by reason.",
        );
        for (reason, count) in ["down", "busy", "expired", "failed"]
            .iter()
            .zip(&stats.refused)
        {
            out.sample(
                REFUSED,
                &[("reason", reason)],
                count.load(Ordering::Relaxed),
            );
        }
        for (name, help, histogram) in [
            (
                "plantstore_database_query_duration_seconds",
                "Time a request's statements took on its connection, round trip included.",
                &stats.run,
            ),
            (
                "plantstore_database_wait_duration_seconds",
                "Time a request waited for a database worker.",
                &stats.wait,
            ),
        ] {
            out.family(name, Kind::Histogram, help);
            histogram.render(out, name, ("pool", "main"));
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shut_down();
    }
}

impl PoolState {
    pub(super) fn lock_queue(&self) -> MutexGuard<'_, Queues> {
        lock(&self.queue)
    }

    /// Queues `item` with `push`, which says whether a worker may take
    /// work now (a worker is woken), or gives it back with why it cannot
    /// wait (counted).
    fn enqueue<T>(
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

    /// The next job: a batch of the changes waiting when one may run,
    /// else the first job, waiting up to `PING` for either; `None` on a
    /// timeout or when stopping with nothing queued.
    pub(super) fn next(self: &Arc<Self>) -> Option<Job> {
        let mut queues = self.lock_queue();
        for round in 0..2 {
            if let Some(batch) = queues.changes.take() {
                drop(queues);
                return Some(batch::job(self, batch));
            }
            if let Some(job) = queues.jobs.pop_front() {
                return Some(job);
            }
            if round == 0 && !self.is_stopping() {
                queues = wait_timeout(&self.ready, queues, PING).0;
            }
        }
        None
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::BACKOFF_MAX;
    use std::sync::mpsc;

    #[test]
    fn with_no_database_to_reach_every_job_is_refused_at_once_and_the_pool_stops() {
        // A loopback port no one listens on: connecting is refused at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let url = format!("postgres://ann:pw@127.0.0.1:{port}/plants");
        let database = Pool::start(DatabaseConfig::parse(&url, 2).unwrap()).unwrap();
        assert!(!database.wait_up(Duration::from_millis(300)));
        let why = database.failure().expect("no connection is up");
        assert!(why.contains("cannot connect"), "{why}");
        let (tx, rx) = mpsc::channel();
        let started = Instant::now();
        database.submit(
            |_| panic!("no connection to run on"),
            move |answer: Result<(), JobFailure>| {
                let _ = tx.send(answer.err().map(|why| why.to_string()));
            },
        );
        let answer = rx.recv_timeout(Duration::from_secs(10)).expect("answered");
        assert_eq!(
            answer.as_deref(),
            Some("the database is unavailable; try again shortly")
        );
        // At once, not after waiting for a connection (MAX_WAIT, 5 s): a
        // millisecond when idle, with room here for a loaded machine.
        assert!(started.elapsed() < Duration::from_secs(2));
        let mut metrics = Exposition::new();
        database.render(&mut metrics);
        let metrics = metrics.into_text();
        assert!(metrics.contains("plantstore_database_refused_total{reason=\"down\"} 1\n"));
        assert!(metrics.contains("plantstore_database_connections 0\n"));
        let stopping = Instant::now();
        database.shut_down();
        assert!(stopping.elapsed() < BACKOFF_MAX + Duration::from_secs(3));
    }
}
