//! `--database URL`: plants in PostgreSQL, shared by every instance that
//! names the same database (the `postgres` feature; the default build has
//! none of this).
//!
//! The event loops never talk to the database. A handler checks and parses
//! the request as usual, defers its answer, and hands a job to
//! [`Database::submit`]; one of `--database-pool` worker threads, each
//! with its own connection ([`Connection`]), runs it and completes the
//! answer. A job always completes: run on a connection, or refused with an
//! [`Unavailable`] reason that the API answers 503 with `Retry-After`.
//!
//! Bounds. At most [`QUEUE`] jobs wait; past that a request is refused at
//! once. A job that waited [`MAX_WAIT`] is refused (by the worker that
//! reaches it, or by the watchdog), every statement has
//! [`STATEMENT_TIMEOUT`], and the TCP connection gives up on an
//! unresponsive network after [`TCP_TIMEOUT`]. A server that stops
//! answering but keeps its connections open meets none of those: the
//! watchdog answers a job that ran [`STUCK`] with 503 and replaces its
//! worker, so no request hangs on a database that stopped answering.
//!
//! Failure and recovery. A worker whose connection is lost (PostgreSQL
//! stopped, restarted, or the network cut) connects again, waiting
//! [`BACKOFF_MIN`] doubling to [`BACKOFF_MAX`] between attempts. An idle
//! worker checks its connection every [`PING`], so the instance notices a
//! lost database within about that even with no traffic. While no worker
//! is connected, requests are refused at once with the last error as the
//! reason (also what `/healthz` says), and so are the jobs that were
//! waiting.

mod sql;

pub use sql::{Connection, DbError, SCHEMA_VERSION, SchemaError, ensure_schema};

use std::collections::VecDeque;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use log::{debug, error, info, warn};

use crate::lock::{lock, wait_timeout};
use crate::metrics::{Exposition, Histogram, Kind};

/// Jobs that may wait for a worker, over all workers. Each holds one
/// parsed request (a plant at most as large as the name and tag limits
/// allow), so this bounds the memory they take.
pub const QUEUE: usize = 1024;
/// A job that waited this long is refused (503) rather than run late.
pub const MAX_WAIT: Duration = Duration::from_secs(5);
/// The longest any statement may run (PostgreSQL's `statement_timeout`).
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Connecting gives up after this.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Data unacknowledged by the server for this long ends the connection
/// (`TCP_USER_TIMEOUT`).
pub const TCP_TIMEOUT: Duration = Duration::from_secs(5);
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

/// Default `--database-pool`.
pub const DEFAULT_POOL: usize = 8;

/// `--database` and `--database-pool`, checked.
#[derive(Clone)]
pub struct DatabaseConfig {
    client: postgres::Config,
    /// Workers, one connection each.
    pub pool: usize,
}

impl DatabaseConfig {
    /// Parses a `postgres://user:pass@host:port/db` URL (or a libpq
    /// `key=value` string); the client's timeouts are set here.
    pub fn parse(url: &str, pool: usize) -> Result<DatabaseConfig, String> {
        let mut client = postgres::Config::from_str(url).map_err(|e| e.to_string())?;
        if client.get_hosts().is_empty() {
            return Err("no host in it".into());
        }
        // An `@` left in a password ends the credentials early and puts the
        // rest of the password in the host: never log that.
        let at_in_host = client.get_hosts().iter().any(|host| match host {
            postgres::config::Host::Tcp(name) => name.contains('@'),
            postgres::config::Host::Unix(_) => false,
        });
        if at_in_host {
            return Err("an @ in the password must be written %40".into());
        }
        let timeout = format!("-c statement_timeout={}", STATEMENT_TIMEOUT.as_millis());
        let options = match client.get_options() {
            Some(theirs) => format!("{theirs} {timeout}"),
            None => timeout,
        };
        client
            .options(&options)
            .application_name("plantstore")
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_user_timeout(TCP_TIMEOUT)
            .keepalives_idle(Duration::from_secs(10));
        Ok(DatabaseConfig { client, pool })
    }

    /// Where it points, without the password: `user@host:port/db`.
    pub fn describe(&self) -> String {
        let host = match self.client.get_hosts().first() {
            Some(postgres::config::Host::Tcp(name)) => name.clone(),
            Some(postgres::config::Host::Unix(path)) => path.display().to_string(),
            None => String::new(),
        };
        let port = self.client.get_ports().first().copied().unwrap_or(5432);
        format!(
            "{}@{host}:{port}/{}",
            self.client.get_user().unwrap_or(""),
            self.client
                .get_dbname()
                .or(self.client.get_user())
                .unwrap_or("")
        )
    }

    /// A worker's connection, its statements prepared.
    fn connect(&self) -> Result<Connection, DbError> {
        Connection::open(&self.client)
    }

    /// A plain client, for start-up work (the schema, the seed).
    pub fn connect_client(&self) -> Result<postgres::Client, DbError> {
        Ok(self.client.connect(postgres::NoTls)?)
    }
}

impl fmt::Debug for DatabaseConfig {
    // Never the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseConfig")
            .field("at", &self.describe())
            .field("pool", &self.pool)
            .finish()
    }
}

/// Why a job did not run.
#[derive(Debug, Clone)]
pub enum Unavailable {
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

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::Down(_) | Unavailable::Failed(_) => {
                f.write_str("the database is unavailable; try again shortly")
            }
            Unavailable::Busy | Unavailable::Expired => {
                f.write_str("the database is busy; try again shortly")
            }
            Unavailable::Stopping => f.write_str("the server is stopping"),
        }
    }
}

impl From<DbError> for Unavailable {
    fn from(e: DbError) -> Unavailable {
        Unavailable::Failed(e.0.into())
    }
}

/// A request's work for a worker: its statements, and its answer, given
/// exactly once: by the worker after the statements, or through `refuse`
/// with the reason they did not run (or, from the watchdog, did not end).
struct Job {
    queued: Instant,
    run: Box<dyn FnOnce(&mut Connection) + Send>,
    refuse: Refuse,
}

/// Answers a job with why it did not run; later calls do nothing.
type Refuse = Arc<dyn Fn(Unavailable) + Send + Sync>;

/// A worker's place, which the watchdog reads: the job it runs, since
/// when, and whether the watchdog gave up on it.
#[derive(Default)]
struct Slot {
    current: Mutex<Option<(Instant, Refuse)>>,
    abandoned: AtomicBool,
}

/// The worker pool over one database.
pub struct Database {
    shared: Arc<Shared>,
}

/// A handle that submits jobs to the pool (for a stream that asks for
/// more as it goes).
#[derive(Clone)]
pub struct Queue(Arc<Shared>);

struct Shared {
    config: DatabaseConfig,
    queue: Mutex<VecDeque<Job>>,
    ready: Condvar,
    stopping: AtomicBool,
    /// Workers connected now.
    up: AtomicUsize,
    /// Why the last connection failed or was lost.
    failure: Mutex<Arc<str>>,
    stats: Stats,
    /// The workers' places (not those the watchdog gave up on).
    slots: Mutex<Vec<Arc<Slot>>>,
    /// Workers the watchdog gave up on; at most `pool` are replaced.
    abandoned: AtomicUsize,
    /// Every thread started, the watchdog's included.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// What `/metrics` reports of the pool.
#[derive(Default)]
struct Stats {
    /// Time a job ran on its connection (statement and round trip).
    run: Histogram,
    /// Time a job waited for a worker.
    wait: Histogram,
    /// Jobs refused, by reason: down, busy, expired, failed.
    refused: [AtomicU64; 4],
    /// Connections made after the first of each worker.
    reconnects: AtomicU64,
}

impl Database {
    /// Starts `config.pool` workers; each connects on its own.
    pub fn start(config: DatabaseConfig) -> std::io::Result<Database> {
        let shared = Arc::new(Shared {
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
        Ok(Database { shared })
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

    /// See [`Queue::submit`].
    pub fn submit<R: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> R + Send + 'static,
        answer: impl FnOnce(Result<R, Unavailable>) + Send + 'static,
    ) {
        self.queue().submit(work, answer);
    }

    /// A handle for submitting jobs later.
    pub fn queue(&self) -> Queue {
        Queue(Arc::clone(&self.shared))
    }
}

impl Queue {
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

impl Database {
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
                "Database connections open (one per worker).",
                shared.up.load(Ordering::Relaxed) as u64,
            ),
            (
                "plantstore_database_pool_size",
                Kind::Gauge,
                "Database workers (--database-pool).",
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

impl Drop for Database {
    fn drop(&mut self) {
        self.shut_down();
    }
}

impl Shared {
    fn lock_queue(&self) -> MutexGuard<'_, VecDeque<Job>> {
        lock(&self.queue)
    }

    fn failure(&self) -> Arc<str> {
        Arc::clone(&lock(&self.failure))
    }

    fn set_failure(&self, why: String) {
        *lock(&self.failure) = why.into();
    }

    fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Refuses every queued job.
    fn refuse_all(&self, why: Unavailable) {
        let jobs = std::mem::take(&mut *self.lock_queue());
        for job in jobs {
            self.stats.refuse(&why);
            (job.refuse)(why.clone());
        }
    }

    /// The next job, waiting up to `PING` for one; `None` on a timeout
    /// or when stopping with nothing queued.
    fn next(&self) -> Option<Job> {
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
    fn refuse(&self, why: &Unavailable) {
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
    fn failed(&self) {
        self.refused[FAILED].fetch_add(1, Ordering::Relaxed);
    }
}

/// Starts a worker with a place of its own.
fn spawn_worker(shared: &Arc<Shared>) -> std::io::Result<()> {
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
fn work(shared: &Shared, slot: &Slot) {
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
fn went_down(shared: &Shared, why: String, left: usize) {
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
fn serve(shared: &Shared, slot: &Slot, connection: &mut Connection) -> String {
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
        let waited = job.queued.elapsed();
        shared.stats.wait.observe(waited);
        if waited > MAX_WAIT {
            shared.stats.refuse(&Unavailable::Expired);
            (job.refuse)(Unavailable::Expired);
            continue;
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
        if connection.errors() > errors {
            shared.stats.failed();
        }
        if connection.is_closed() {
            return "connection lost".into();
        }
    }
}

/// The watchdog: every `WATCH`, refuses jobs that waited `MAX_WAIT` (when
/// every worker is held, none would reach them) and gives up on a worker
/// whose job has run `STUCK`. A server that stops answering without
/// closing the connection (frozen, or its machine gone with no reset) is
/// met by no timeout of the client's own: its request is answered 503,
/// the worker counted down, and another started in its place (up to
/// `pool` of them over the pool's life).
fn watch(shared: &Arc<Shared>) {
    while !shared.is_stopping() {
        thread::sleep(WATCH);
        let expired: Vec<Job> = {
            let mut queue = shared.lock_queue();
            let old = queue
                .iter()
                .take_while(|job| job.queued.elapsed() > MAX_WAIT)
                .count();
            queue.drain(..old).collect()
        };
        for job in expired {
            shared.stats.refuse(&Unavailable::Expired);
            (job.refuse)(Unavailable::Expired);
        }
        let stuck: Vec<(Arc<Slot>, Refuse)> = lock(&shared.slots)
            .iter()
            .filter_map(|slot| {
                let mut current = lock(&slot.current);
                match &*current {
                    Some((since, _)) if since.elapsed() > STUCK => {
                        current.take().map(|(_, refuse)| (Arc::clone(slot), refuse))
                    }
                    _ => None,
                }
            })
            .collect();
        for (slot, refuse) in stuck {
            slot.abandoned.store(true, Ordering::Release);
            lock(&shared.slots).retain(|s| !Arc::ptr_eq(s, &slot));
            let why = Unavailable::Failed("no answer from the database".into());
            shared.stats.refuse(&why);
            refuse(why);
            let left = shared.up.fetch_sub(1, Ordering::AcqRel) - 1;
            went_down(shared, "the database stopped answering".into(), left);
            let replaced = shared.abandoned.fetch_add(1, Ordering::AcqRel) < shared.config.pool;
            if replaced && let Err(e) = spawn_worker(shared) {
                warn!("database: cannot start a worker: {e}");
            }
        }
    }
}

/// Sleeps `wait`, or less if the pool stops.
fn pause(shared: &Shared, wait: Duration) {
    let deadline = Instant::now() + wait;
    while !shared.is_stopping() {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        thread::sleep((deadline - now).min(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn the_url_is_checked_and_its_password_never_shown() {
        let config = DatabaseConfig::parse("postgres://ann:s3cret@db.example:6543/plants", 3)
            .expect("a good URL");
        assert_eq!(config.describe(), "ann@db.example:6543/plants");
        assert_eq!(config.pool, 3);
        assert!(!format!("{config:?}").contains("s3cret"));
        for bad in [
            "postgres://ann:p@ss@db/x",
            "postgres://ann@db:notaport/x",
            "mysql://x",
            "host=/tmp user=",
        ] {
            assert!(DatabaseConfig::parse(bad, 1).is_err(), "{bad}");
        }
    }

    #[test]
    fn with_no_database_to_reach_every_job_is_refused_at_once_and_the_pool_stops() {
        // A loopback port no one listens on: connecting is refused at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let url = format!("postgres://ann:pw@127.0.0.1:{port}/plants");
        let database = Database::start(DatabaseConfig::parse(&url, 2).unwrap()).unwrap();
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
        let answer = rx.recv_timeout(Duration::from_secs(1)).expect("answered");
        assert_eq!(
            answer.as_deref(),
            Some("the database is unavailable; try again shortly")
        );
        assert!(started.elapsed() < Duration::from_millis(100));
        let mut metrics = Exposition::new();
        database.render(&mut metrics);
        let metrics = metrics.into_text();
        assert!(metrics.contains("plantstore_database_refused_total{reason=\"down\"} 1\n"));
        assert!(metrics.contains("plantstore_database_connections 0\n"));
        let stopping = Instant::now();
        database.shut_down();
        assert!(stopping.elapsed() < BACKOFF_MAX + Duration::from_millis(500));
    }
}
