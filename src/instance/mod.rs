//! A plantstore instance: the store the flags chose behind the door, the
//! API on the engine, the webhook sender; started, run, reloaded, stopped.
//!
//! The top of the house beside `config`: it may import every layer (it is
//! the wiring: with `plants`, the only module that may name the stores),
//! and only `signals`, which drives its `Reloader`, imports it. `main`
//! calls [`start`], runs the instance and turns a
//! [`StartError`] into an exit code; the integration tests call [`start`]
//! and [`serve`] (with a store of their own). HTTPS's part (the
//! certificate served, `--tls-auto`'s renewals and their thread):
//! `tls.rs`.

mod acme;
mod tls;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use log::{Level, info, log, warn};

use crate::api::{Access, App, Scope, Tokens};
use crate::certs::Certificate;
use crate::certs::acme::{RenewNow, Running};
use crate::config::{self, Config, TokenSource};
use crate::http::{self, Gauge, Server, Stopper};
use crate::model::{Capacity, plural};
use crate::plants::{Plants, Setup, SetupError};
use crate::reach;
use crate::seed::SeedError;
use crate::store::{OpenError, Store};
use crate::transport::StartTlsError;
use crate::webhook::Webhooks;

/// How long queued webhook deliveries may still go out after the server
/// stopped.
pub const WEBHOOK_GRACE: Duration = Duration::from_secs(2);

/// A bound server and its application. `run` serves until stopped, then
/// shuts the application down: the database's queued requests are
/// finished, queued webhook deliveries get [`WEBHOOK_GRACE`], and the
/// journal is synced.
pub struct Instance {
    server: Server,
    app: Arc<App>,
    /// With HTTPS: the certificate served, which a reload replaces.
    https: Option<Certificate>,
    /// With `--acme-domain`: the `acme` thread and HTTP-01's listener.
    acme: Option<Running>,
}

impl Instance {
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
            https: self.https.clone(),
            acme: self.acme.as_ref().map(Running::waker),
        }
    }

    /// Serves until stopped; waits up to `grace` for open connections and
    /// returns how many were still open.
    pub fn run(self, grace: Duration) -> usize {
        let still_open = self.server.run(grace);
        if let Some(acme) = self.acme {
            acme.stop();
        }
        self.app.shut_down(WEBHOOK_GRACE);
        still_open
    }
}

/// Re-reads `--token-file` and `--webhook-secret-file` while the server
/// runs (on SIGHUP), and on the database the tickets' shared key (a
/// deleted key is made anew: a rotation), checked exactly as at start-up (a regular file of at
/// most 16 MiB: a FIFO or a device is refused, never read, so a reload
/// cannot hang or fill memory). A file that reads and checks cleanly
/// replaces what was in use; one that does not changes nothing, and the
/// log says why. Never stops the server: the plants, the connections and
/// every other setting stay as they are.
pub struct Reloader {
    app: Arc<App>,
    token_file: Option<std::path::PathBuf>,
    secret_file: Option<std::path::PathBuf>,
    /// With HTTPS: the certificate served, with the files it is read from.
    https: Option<Certificate>,
    /// With ACME: wakes its thread.
    acme: Option<RenewNow>,
}

impl Reloader {
    /// Reloads both files; logs what happened.
    pub fn reload(&self) {
        if let Some(path) = &self.token_file {
            match config::read_tokens(path) {
                Ok((tokens, warnings)) => {
                    for warning in warnings {
                        warn!(target: "plantstore", "{warning}");
                    }
                    self.app.set_tokens(tokens);
                    let count = self.app.token_count();
                    info!(
                        target: "plantstore",
                        "reloaded {}: {count} token{} active",
                        path.display(),
                        plural(count as u64)
                    );
                }
                Err(e) => {
                    let count = self.app.token_count();
                    log::error!(
                        target: "plantstore",
                        "reload refused: {e}; the {count} token{} in use {} active",
                        plural(count as u64),
                        if count == 1 { "stays" } else { "stay" }
                    )
                }
            }
        }
        match self.app.reload_ticket_key() {
            None | Some(Ok(false)) => {}
            Some(Ok(true)) => info!(
                target: "plantstore",
                "reload: the database holds a new ticket key; tickets of the old one are refused"
            ),
            Some(Err(e)) => log::error!(
                target: "plantstore",
                "reload: cannot read the ticket key ({e}); the key in use stays"
            ),
        }
        if let Some(path) = &self.secret_file {
            match config::read_webhook_secret(path) {
                Ok(key) => {
                    self.app.set_webhook_secret(key);
                    info!(
                        target: "plantstore",
                        "reloaded {}: webhook deliveries signed with it",
                        path.display()
                    );
                }
                Err(e) => {
                    log::error!(target: "plantstore", "reload refused: {e}; the webhook secret in use stays")
                }
            }
        }
        if let Some(acme) = &self.acme {
            acme.wake();
            info!(target: "plantstore", "reload: ACME looks at its certificate again now");
        }
        let certificate = self.https.is_some();
        if let Some(https) = &self.https {
            tls::reload(https);
        }
        if self.token_file.is_none() && self.secret_file.is_none() && !certificate {
            let count = self.app.token_count();
            info!(
                target: "plantstore",
                "reload: nothing to re-read (no --token-file, --webhook-secret-file or \
                 --tls-cert); {count} token{} active",
                plural(count as u64)
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
    Database(String),
    /// HTTPS cannot be served (`--tls-auto`'s directory: what in it).
    Tls(StartTlsError),
}

impl From<SetupError> for StartError {
    fn from(e: SetupError) -> StartError {
        match e {
            SetupError::Journal(e) => StartError::Store(e),
            SetupError::Seed(e) => StartError::Seed(e),
            SetupError::Database(e) => StartError::Database(e),
        }
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Store(e) => write!(f, "cannot open the data file: {e}"),
            StartError::Listen(addr, e) => write!(f, "cannot listen on {addr}: {e}"),
            StartError::Seed(e) => write!(f, "{e}"),
            StartError::Database(e) => f.write_str(e),
            StartError::Tls(e) => write!(f, "cannot serve HTTPS: {e}"),
        }
    }
}

impl std::error::Error for StartError {}

impl StartError {
    /// The process's exit status for it: 2 for a flag's value that cannot
    /// be used (`--data` naming something that cannot be a journal, a seed
    /// file that cannot be loaded), as for those `Config` refuses; else 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            StartError::Store(OpenError::NotAFile { .. }) => 2,
            StartError::Seed(e) if e.is_in_seed() => 2,
            StartError::Tls(_) => 2,
            _ => 1,
        }
    }
}

/// What `config` asks of the store, for the door.
fn setup(config: &Config) -> Setup {
    Setup {
        capacity: Capacity {
            plants: config.max_plants,
            data: config.max_data,
        },
        limits: config.text_limits,
        journal: config.data.clone(),
        seed: config.seed.clone(),
        allow_reset: config.allow_reset,
        database: config.database.clone(),
    }
}

/// Opens the store `config` asks for (replaying its journal, or starting
/// its database pool), loads its seed, binds its address and logs the
/// start-up line. The caller runs the returned instance.
pub fn start(config: &Config) -> Result<Instance, StartError> {
    let https = tls::https(config).map_err(StartError::Tls)?;
    let plants = Plants::open(&setup(config))?;
    serve_plants(config, plants, https).map_err(|e| StartError::Listen(config.addr, e))
}

/// Serves `store`, opened by the caller, as `config` says (its `data`
/// only names the storage in the start-up line): binds, logs, and returns
/// the instance to run.
pub fn serve(config: &Config, store: Store) -> io::Result<Instance> {
    let https = tls::https(config).map_err(io::Error::other)?;
    serve_plants(config, Plants::memory(store, config.data.as_ref()), https)
}

/// Serves `plants` (over TLS with `https`): binds, logs, and returns the
/// instance to run.
fn serve_plants(
    config: &Config,
    plants: Plants,
    https: Option<Certificate>,
) -> io::Result<Instance> {
    let webhooks = Webhooks::start(config.webhook.clone())?;
    let gauge = Gauge::new();
    let mut storage = plants.describe();
    if config.read_only {
        storage.push_str("; read-only: every change is refused (403)");
    }
    let ticket_key = plants.ticket_key()?;
    let app = App::new(
        plants,
        Access {
            tokens: Tokens::new(config.tokens.clone()),
            read_only: config.read_only,
            guard: config.guard.clone(),
            ticket_key,
            ticket_ttl: config.ticket_ttl,
            delay: config.delay.map(|d| (d.min, d.max)),
        },
        webhooks,
        gauge.clone(),
        config.text_limits,
        config.cors.clone(),
        config.ui,
    );
    // With `--tls-auto`: `/ca.pem`, and `/healthz`'s fingerprint.
    let app = Arc::new(app.serving_ca(https.as_ref().map(Certificate::https)));
    let mut limits = config.limits.clone();
    limits.max_connections = connection_cap(limits.max_connections);
    // With `--acme-domain`: HTTPS with ACME's certificate, the API behind
    // a 503 until the first one is delivered. (A `match` on the flag, not
    // `Option::map`: in a build without ACME, where the flag's type has no
    // value, the arm is dropped before any code is made of it; through a
    // closure the plain build measured larger.)
    #[allow(clippy::manual_map)]
    let front = match &config.acme {
        Some(settings) => Some(acme::front(settings, &app, config.hsts())),
        None => None,
    };
    let (handler, acme_certificate, ready) = match front.transpose()? {
        Some(acme::Front {
            certificate,
            ready,
            handler,
        }) => (handler, Some(certificate), Some(ready)),
        None => (Arc::clone(&app) as Arc<dyn http::Handler>, None, None),
    };
    let https = match &acme_certificate {
        Some(certificate) => Some(certificate),
        None => https.as_ref(),
    };
    let served = https.map(|certificate| certificate.https().clone());
    let server = Server::bind_https(config.addr, limits.clone(), handler, &gauge, served)?;
    let scheme = if https.is_some() { "https" } else { "http" };
    log_start(config, &storage, scheme, server.local_addr());
    if let Some(https) = https {
        https.start_renewals(tls::names)?;
    }
    let acme = match (&config.acme, https, &ready) {
        (Some(settings), Some(certificate), Some(ready)) => Some(acme::start(
            settings,
            certificate.https(),
            Arc::clone(ready),
            &gauge,
            &limits,
            server.local_addr().port(),
        )),
        _ => None,
    };
    Ok(Instance {
        server,
        app,
        https: https.cloned(),
        acme: acme.transpose()?,
    })
}

/// The start-up lines: where the tokens came from, the configuration's
/// warnings, where the server listens and its storage, where the page and
/// the API's description are, the webhooks' URLs.
fn log_start(config: &Config, storage: &str, scheme: &str, addr: SocketAddr) {
    if config.token_source == TokenSource::Flag {
        warn!(target: "plantstore", "--token is visible in the process list; prefer --token-file");
    }
    log_tokens(config);
    for warning in &config.warnings {
        warn!(target: "plantstore", "{warning}");
    }
    if let Some(setup) = config.https() {
        tls::validity_warning(setup.validity());
    }

    let mut base = format!("{scheme}://{addr}");
    if addr.ip().is_unspecified() {
        // No one can open http://0.0.0.0:8080: say where it can be reached.
        let urls = reach::urls(scheme, addr);
        info!(
            target: "plantstore",
            "plantstore {} listening on every address, port {} ({addr}), storage: {storage}; \
             reachable at {}",
            env!("CARGO_PKG_VERSION"),
            addr.port(),
            urls.join(", "),
        );
        base = urls.into_iter().next().unwrap_or(base);
    } else {
        info!(
            target: "plantstore",
            "plantstore {} listening on {scheme}://{addr}, storage: {storage}",
            env!("CARGO_PKG_VERSION"),
        );
    }
    // One line, the page's URL first unless --no-ui.
    let (page, url, then) = match config.ui {
        true => ("the page: ", base.as_str(), "/, "),
        false => ("", "", ""),
    };
    info!(target: "plantstore", "{page}{url}{then}the API's description: {base}/openapi.json");
    for target in &config.webhook.targets {
        info!(target: "plantstore", "announcing new plants to {}", target.url);
    }
}

/// Where the tokens came from and what they may do, for the start-up log
/// (a warning when none was configured): "3 tokens from
/// /etc/plantstore/tokens: 2 write, 1 read". Never a token. One log call
/// with its parts as arguments: each call and each `format!` costs the
/// plain build.
fn log_tokens(config: &Config) {
    let count = config.tokens.len();
    let reads = config
        .tokens
        .iter()
        .filter(|grant| grant.scope == Scope::Read)
        .count();
    let (level, from) = match config.token_source {
        TokenSource::File => (Level::Info, "from "),
        TokenSource::Flag => (Level::Info, "from --token"),
        TokenSource::Env => (Level::Info, "from PLANTSTORE_TOKEN"),
        TokenSource::Generated => (Level::Warn, "generated for this run, printed above"),
    };
    let file = match config.token_source {
        TokenSource::File => config.token_file.as_deref(),
        _ => None,
    };
    log!(
        target: "plantstore",
        level,
        "{count} token{} {from}{}: {} write, {reads} read",
        plural(count as u64),
        file.unwrap_or(Path::new("")).display(),
        count - reads
    );
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
            target: "plantstore",
            "open-file limit {limit} allows {fit} connection{}, not --max-connections \
             {max_connections}; serving {fit} (raise LimitNOFILE= in systemd, or ulimit -n)",
            plural(fit as u64)
        );
        return fit;
    }
    max_connections
}
