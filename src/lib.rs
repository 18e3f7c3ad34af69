//! plantstore: a tiny, fast HTTP server for the Plant Store API.
//!
//! A tour, from the socket inwards:
//!
//! - [`http`]: our own HTTP/1.1 engine on `httparse`: one event loop per
//!   core on non-blocking sockets, around a sans-I/O protocol core with
//!   every limit and timeout as a deadline. It exposes only `Request`,
//!   `Response`, `Deferred` and the `Handler` trait.
//! - [`api`]: the Plant Store API as a `Handler`: one routing `match`,
//!   bearer auth, one small function per operation, `ApiError` to status.
//! - [`store`]: plants and their validation, in memory in sharded maps,
//!   and the `--data` journal with group commit (a committer thread that
//!   completes deferred responses), recovery and compaction.
//! - [`webhook`]: the `newPlant` webhook: per-URL queues and workers,
//!   retries, Standard Webhooks signatures.
//! - [`config`]: flags as typed, and the validated `Config`.
//! - [`logging`]: the logger `main` installs: timestamped lines on
//!   stderr, as text or JSON.
//! - [`seed`]: `--seed FILE`, plants loaded into an empty store at
//!   start-up.
//!
//! `main.rs` only parses flags, sets up logging and turns errors into exit
//! codes; [`start`] is what both it and the integration tests call
//! ([`serve`] when a test brings its own store).

// Denied, not forbidden: two audited calls allow it locally, in
// `store/journal/file.rs` (`statvfs`, which std lacks, and `statx` asking
// for less than std does).
#![deny(unsafe_code)]

pub mod api;
pub mod config;
#[cfg(feature = "postgres")]
pub mod database;
pub mod http;
mod lock;
pub mod logging;
pub mod metrics;
pub mod os;
pub mod plant;
mod reach;
pub mod seed;
pub mod store;
pub mod webhook;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use log::{info, warn};

use api::{App, Backend, Tokens};
use config::{Config, TokenSource};
use http::{Gauge, Server, Stopper};
use seed::{Before, SeedError};
use store::{Capacity, OpenError, Store, SyncMode};
use webhook::Webhooks;

/// How long queued webhook deliveries may still go out after the server
/// stopped.
pub const WEBHOOK_GRACE: Duration = Duration::from_secs(2);

/// A bound server and its application. `run` serves until stopped, then
/// shuts the application down: queued webhook deliveries get
/// [`WEBHOOK_GRACE`] and the journal is synced.
pub struct Service {
    server: Server,
    app: Arc<App>,
}

impl Service {
    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// A handle that stops the server.
    pub fn stopper(&self) -> Stopper {
        self.server.stopper()
    }

    /// A handle that re-reads the files of `config` (what SIGHUP does).
    pub fn reloader(&self, config: &Config) -> Reloader {
        Reloader {
            app: Arc::clone(&self.app),
            token_file: config.token_file.clone(),
            secret_file: config.webhook_secret_file.clone(),
        }
    }

    /// Serves until stopped; waits up to `grace` for open connections and
    /// returns how many were still open.
    pub fn run(self, grace: Duration) -> usize {
        let still_open = self.server.run(grace);
        self.app.shut_down(WEBHOOK_GRACE);
        still_open
    }
}

/// Re-reads `--token-file` and `--webhook-secret-file` while the server
/// runs (on SIGHUP), checked exactly as at start-up. A file that reads and
/// checks cleanly replaces what was in use; one that does not changes
/// nothing, and the log says why. Never stops the server: the plants, the
/// connections and every other setting stay as they are.
pub struct Reloader {
    app: Arc<App>,
    token_file: Option<std::path::PathBuf>,
    secret_file: Option<std::path::PathBuf>,
}

impl Reloader {
    /// Reloads both files; logs what happened.
    pub fn reload(&self) {
        if let Some(path) = &self.token_file {
            match config::read_tokens(path) {
                Ok((tokens, warnings)) => {
                    for warning in warnings {
                        warn!("{warning}");
                    }
                    self.app.set_tokens(tokens);
                    info!(
                        "reloaded {}: {} tokens active",
                        path.display(),
                        self.app.token_count()
                    );
                }
                Err(e) => log::error!(
                    "reload refused: {e}; the {} tokens in use stay active",
                    self.app.token_count()
                ),
            }
        }
        if let Some(path) = &self.secret_file {
            match config::read_webhook_secret(path) {
                Ok(key) => {
                    self.app.set_webhook_secret(key);
                    info!(
                        "reloaded {}: webhook deliveries signed with it",
                        path.display()
                    );
                }
                Err(e) => log::error!("reload refused: {e}; the webhook secret in use stays"),
            }
        }
        if self.token_file.is_none() && self.secret_file.is_none() {
            info!(
                "reload: nothing to re-read (no --token-file or --webhook-secret-file); {} tokens active",
                self.app.token_count()
            );
        }
    }
}

/// Why the server could not start.
#[derive(Debug)]
pub enum StartError {
    /// The journal cannot be opened or recovered.
    Store(OpenError),
    /// The address cannot be bound.
    Listen(SocketAddr, io::Error),
    /// The `--seed` file cannot be loaded.
    Seed(SeedError),
    /// The database cannot be reached or its schema used.
    #[cfg(feature = "postgres")]
    Database(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Store(e) => write!(f, "cannot open the data file: {e}"),
            StartError::Listen(addr, e) => write!(f, "cannot listen on {addr}: {e}"),
            StartError::Seed(e) => write!(f, "{e}"),
            #[cfg(feature = "postgres")]
            StartError::Database(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for StartError {}

/// Opens the store `config` asks for (replaying its journal), loads its
/// seed, binds its address and logs the start-up line. The caller runs the
/// returned server.
pub fn start(config: &Config) -> Result<Service, StartError> {
    #[cfg(feature = "postgres")]
    if let Some(database) = &config.database {
        let backend = open_database(config, database)?;
        return serve_backend(config, backend).map_err(|e| StartError::Listen(config.addr, e));
    }
    let capacity = Capacity {
        plants: config.max_plants,
        data: config.max_data,
    };
    let (store, before) = match &config.data {
        None => (Store::new(capacity), Before::InMemory),
        Some(data) => {
            let (store, recovery) = Store::open(capacity, data).map_err(StartError::Store)?;
            if recovery.torn_bytes > 0 {
                warn!(
                    "{}: cut off a torn final record ({} bytes) left by an interrupted write",
                    data.path.display(),
                    recovery.torn_bytes
                );
            }
            info!(
                "recovered {} plants from {} journal records in {} ms",
                store.len(),
                recovery.records,
                recovery.elapsed.as_millis()
            );
            (store, Before::Journal(recovery.records))
        }
    };
    if let Some(path) = &config.seed {
        seed::load(path, &store, before, config.text_limits, capacity).map_err(StartError::Seed)?;
    }
    serve(config, store).map_err(|e| StartError::Listen(config.addr, e))
}

/// Connects to the database, creates or checks its schema, loads the seed
/// into an empty table, and starts the pool (waiting briefly for its first
/// connection, so the first requests find one).
#[cfg(feature = "postgres")]
fn open_database(
    config: &Config,
    database: &database::DatabaseConfig,
) -> Result<Backend, StartError> {
    let at = database.describe();
    let failed = |e: &dyn fmt::Display| StartError::Database(format!("database {at}: {e}"));
    let mut client = database.connect_client().map_err(|e| failed(&e))?;
    database::ensure_schema(&mut client).map_err(|e| failed(&e))?;
    if let Some(path) = &config.seed {
        seed::load_into_database(path, &mut client, config.text_limits)
            .map_err(StartError::Seed)?;
    }
    drop(client);
    let pool = database::Database::start(database.clone()).map_err(|e| failed(&e))?;
    if !pool.wait_up(database::CONNECT_TIMEOUT) {
        warn!("database {at}: no pool connection yet; answering 503 until one is up");
    }
    Ok(Backend::Database(pool))
}

/// Serves `store` as `config` says (its `data` only names the storage in
/// the start-up line): binds, logs, and returns the server to run.
pub fn serve(config: &Config, store: Store) -> io::Result<Service> {
    serve_backend(config, Backend::Memory(store))
}

/// Serves `backend`: binds, logs, and returns the server to run.
fn serve_backend(config: &Config, backend: Backend) -> io::Result<Service> {
    let webhooks = Webhooks::start(config.webhook.clone())?;
    let gauge = Gauge::new();
    let storage = storage(config, &backend);
    let app = Arc::new(App::new(
        backend,
        Tokens::new(config.tokens.clone()),
        webhooks,
        gauge.clone(),
        config.text_limits,
        config.cors.clone(),
        config.ui,
    ));
    let mut limits = config.limits.clone();
    limits.max_connections = connection_cap(limits.max_connections);
    let server = Server::bind(config.addr, limits, Arc::clone(&app) as _, &gauge)?;
    match config.token_source {
        TokenSource::Flag => warn!("--token is visible in the process list; prefer --token-file"),
        TokenSource::Generated => {
            warn!("no token configured; generated one for this run (printed above)")
        }
        TokenSource::File | TokenSource::Env => {}
    }
    for warning in &config.warnings {
        warn!("{warning}");
    }
    let addr = server.local_addr();
    if addr.ip().is_unspecified() {
        // No one can open http://0.0.0.0:8080: say where it can be reached.
        info!(
            "plantstore {} listening on every address, port {} ({addr}), storage: {storage}; \
             reachable at {}",
            env!("CARGO_PKG_VERSION"),
            addr.port(),
            reach::urls(addr).join(", "),
        );
    } else {
        info!(
            "plantstore {} listening on http://{addr}, storage: {storage}",
            env!("CARGO_PKG_VERSION"),
        );
    }
    for target in &config.webhook.targets {
        info!("announcing new plants to {}", target.url);
    }
    Ok(Service { server, app })
}

/// Where the plants are, for the start-up line: `in memory ..., N plants`.
fn storage(config: &Config, backend: &Backend) -> String {
    match backend {
        Backend::Memory(store) => {
            let plants = store.len();
            match &config.data {
                None => format!("in memory only (a restart starts empty), {plants} plants"),
                Some(data) => format!(
                    "journal {} (sync {}), {plants} plants",
                    data.path.display(),
                    match data.sync {
                        SyncMode::Always => "always",
                        SyncMode::Never => "never",
                    }
                ),
            }
        }
        #[cfg(feature = "postgres")]
        Backend::Database(pool) => format!("database {}", pool.describe()),
    }
}

/// Descriptors kept free of connections: the listener, the journal, the
/// event loops' own, webhook sockets.
const SPARE_DESCRIPTORS: usize = 64;

/// Each connection needs a file descriptor; past the open-file limit,
/// accept would fail before the 503 logic could answer. So the soft limit
/// is raised to the hard one, and the connection cap is lowered (with a
/// warning) to what it allows.
fn connection_cap(max_connections: usize) -> usize {
    let Some(limit) = http::raise_open_file_limit() else {
        return max_connections;
    };
    let fit = usize::try_from(limit)
        .unwrap_or(usize::MAX)
        .saturating_sub(SPARE_DESCRIPTORS)
        .max(1);
    if fit < max_connections {
        warn!(
            "open-file limit {limit} allows {fit} connections, not --max-connections \
             {max_connections}; serving {fit} (raise LimitNOFILE= in systemd, or ulimit -n)"
        );
        return fit;
    }
    max_connections
}
