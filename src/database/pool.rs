//! The worker pool: the handle the door holds. It starts the workers,
//! the watchdog and the heartbeat, queues jobs and changes (at most
//! `QUEUE` together), each answered exactly once (run on a worker's
//! connection, or refused with an `JobFailure` reason), renders the
//! metrics, and shuts down. What the threads share is `state.rs`; the
//! workers are `worker.rs`, the watchdog `watchdog.rs`, the heartbeat
//! `health.rs`, the changes waiting `waiting.rs`, a batch run `batch.rs`.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::health::beat;
use super::state::{Job, PoolState, Queues, Refuse, Stats};
use super::waiting::Queued;
use super::watchdog::watch;
use super::worker::spawn_worker;
use super::{Connection, DatabaseConfig, JobFailure, STUCK};
use crate::lock::lock;
use crate::metrics::{Exposition, Kind};
use crate::model::{Edit, Reply};

/// The worker pool over one database.
pub struct Pool {
    shared: Arc<PoolState>,
}

/// A handle that submits jobs to the pool (for a stream that asks for
/// more as it goes).
#[derive(Clone)]
pub struct JobSender(Arc<PoolState>);

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

    /// Applies `edit` to the plant `id` in the next batch and answers
    /// `reply` with whether it was applied (`false`: a create found the id
    /// taken, a replace or delete found no such plant) once that batch
    /// committed, or with why it was not: exactly once.
    pub fn change(&self, id: i64, edit: Edit, reply: Box<dyn Reply<bool, JobFailure>>) {
        let queued = Queued::new(id, edit, reply);
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
