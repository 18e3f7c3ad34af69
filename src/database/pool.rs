//! The worker pool: jobs queued (at most `QUEUE`), answered exactly once
//! (run on a worker's connection, or refused with an `Unavailable`
//! reason), the pool's state that workers and the watchdog share, its
//! metrics, and shutdown. The workers are `worker.rs`, the watchdog
//! `watchdog.rs`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::watchdog::watch;
use super::worker::spawn_worker;
use super::{Connection, DatabaseConfig, PING, QUEUE, STUCK, Unavailable};
use crate::lock::{lock, wait_timeout};
use crate::metrics::{Exposition, Histogram, Kind};

/// A request's work for a worker: its statements, and its answer, given
/// exactly once: by the worker after the statements, or through `refuse`
/// with the reason they did not run (or, from the watchdog, did not end).
pub(super) struct Job {
    pub(super) queued: Instant,
    pub(super) run: Box<dyn FnOnce(&mut Connection) + Send>,
    pub(super) refuse: Refuse,
}

/// Answers a job with why it did not run; later calls do nothing.
pub(super) type Refuse = Arc<dyn Fn(Unavailable) + Send + Sync>;

/// A worker's place, which the watchdog reads: the job it runs, since
/// when, and whether the watchdog gave up on it.
#[derive(Default)]
pub(super) struct Slot {
    pub(super) current: Mutex<Option<(Instant, Refuse)>>,
    pub(super) abandoned: AtomicBool,
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
    pub(super) queue: Mutex<VecDeque<Job>>,
    pub(super) ready: Condvar,
    pub(super) stopping: AtomicBool,
    /// Workers connected now.
    pub(super) up: AtomicUsize,
    /// Why the last connection failed or was lost.
    pub(super) failure: Mutex<Arc<str>>,
    pub(super) stats: Stats,
    /// The workers' places (not those the watchdog gave up on).
    pub(super) slots: Mutex<Vec<Arc<Slot>>>,
    /// Workers the watchdog gave up on; at most `pool` are replaced.
    pub(super) abandoned: AtomicUsize,
    /// Every thread started, the watchdog's included.
    pub(super) threads: Mutex<Vec<JoinHandle<()>>>,
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
}

impl Pool {
    /// Starts `config.pool` workers; each connects on its own.
    pub fn start(config: DatabaseConfig) -> std::io::Result<Pool> {
        let shared = Arc::new(PoolState {
            queue: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            stopping: AtomicBool::new(false),
            up: AtomicUsize::new(0),
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
        answer: impl FnOnce(Result<R, Unavailable>) + Send + 'static,
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
        answer: impl FnOnce(Result<R, Unavailable>) + Send + 'static,
    ) {
        let once = Arc::new(Mutex::new(Some(answer)));
        let given = Arc::clone(&once);
        let refuse: Refuse = Arc::new(move |why| {
            if let Some(answer) = lock(&once).take() {
                answer(Err(why));
            }
        });
        let job = Job {
            queued: Instant::now(),
            run: Box::new(move |connection| {
                let made = work(connection);
                if let Some(answer) = lock(&given).take() {
                    answer(Ok(made));
                }
            }),
            refuse,
        };
        let shared = &self.0;
        let refused = if shared.stopping.load(Ordering::Acquire) {
            Unavailable::Stopping
        } else if shared.up.load(Ordering::Acquire) == 0 {
            Unavailable::Down(shared.failure())
        } else {
            let mut queue = shared.lock_queue();
            if queue.len() < QUEUE {
                queue.push_back(job);
                drop(queue);
                shared.ready.notify_one();
                return;
            }
            Unavailable::Busy
        };
        shared.stats.refuse(&refused);
        (job.refuse)(refused);
    }
}

impl Pool {
    /// Where it points, without the password, and the pool's size.
    pub fn describe(&self) -> String {
        let config = &self.shared.config;
        format!("{} (pool {})", config.describe(), config.pool)
    }

    /// `None` while a worker is connected, else why none is.
    pub fn failure(&self) -> Option<Arc<str>> {
        (self.shared.up.load(Ordering::Acquire) == 0).then(|| self.shared.failure())
    }

    /// `Ok` while a worker is connected, else the refusal to answer with,
    /// counted as one (for a request that would not reach `submit`).
    pub fn check(&self) -> Result<(), Unavailable> {
        match self.failure() {
            None => Ok(()),
            Some(why) => {
                let refused = Unavailable::Down(why);
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
        self.shared.refuse_all(Unavailable::Stopping);
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
    pub(super) fn lock_queue(&self) -> MutexGuard<'_, VecDeque<Job>> {
        lock(&self.queue)
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

    /// Refuses every queued job.
    pub(super) fn refuse_all(&self, why: Unavailable) {
        let jobs = std::mem::take(&mut *self.lock_queue());
        for job in jobs {
            self.stats.refuse(&why);
            (job.refuse)(why.clone());
        }
    }

    /// The next job, waiting up to `PING` for one; `None` on a timeout
    /// or when stopping with nothing queued.
    pub(super) fn next(&self) -> Option<Job> {
        let mut queue = self.lock_queue();
        if queue.is_empty() && !self.is_stopping() {
            queue = wait_timeout(&self.ready, queue, PING).0;
        }
        queue.pop_front()
    }
}

/// `Stats::refused`'s index of a failed statement.
const FAILED: usize = 3;

impl Stats {
    pub(super) fn refuse(&self, why: &Unavailable) {
        let index = match why {
            Unavailable::Down(_) => 0,
            Unavailable::Busy => 1,
            Unavailable::Expired => 2,
            Unavailable::Failed(_) => FAILED,
            Unavailable::Stopping => return,
        };
        self.refused[index].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request whose statement failed (it answered 503 itself).
    pub(super) fn failed(&self) {
        self.refused[FAILED].fetch_add(1, Ordering::Relaxed);
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
            move |answer: Result<(), Unavailable>| {
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
