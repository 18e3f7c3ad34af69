//! The in-process `TestServer` (port 0, stops in `Drop`, restarts on the
//! same data) and the configurations tests start it with.

use std::net::SocketAddr;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use plantstore::api::{Cors, Grant, Guard};
use plantstore::config::{Config, TokenSource};
use plantstore::http::{Limits, Stopper};
use plantstore::model::{Durability, SyncMode, TextLimits};
use plantstore::store::{OpenError, Store};
use plantstore::webhook::WebhookConfig;
use plantstore::{Instance, Reloader, StartError};

use super::{AUTH, Client, JSON, Keep, Kind, PATIENCE, Reply, TOKEN, config_on, request};

/// A configuration for tests: port 0, one known token.
pub fn config() -> Config {
    Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        limits: Limits::default(),
        max_plants: 1_000_000,
        text_limits: TextLimits::default(),
        max_data: 256 << 20,
        tokens: vec![Grant::write(TOKEN.to_string())],
        read_only: false,
        // No limit on failed authentications: a test that means one sets it.
        guard: Guard::default(),
        ticket_ttl: Duration::from_secs(60),
        token_source: TokenSource::Flag,
        token_file: None,
        webhook_secret_file: None,
        warnings: Vec::new(),
        log_level: log::LevelFilter::Info,
        log_format: plantstore::logging::Format::Text,
        data: None,
        webhook: WebhookConfig::new(Vec::new(), None, 1024),
        seed: None,
        cors: Cors::default(),
        ui: true,
        delay: None,
        allow_reset: false,
        database: None,
        tls: None,
        hsts: None,
        acme: None,
    }
}

/// Lets `config` take a plant named with `chars` ASCII characters, for a
/// test that needs an answer that large: a listing page holds its first
/// plant however large (and only then ends early at its byte cap).
pub fn allow_names_of(config: &mut Config, chars: usize) {
    config.limits.max_body = chars + 1024;
    config.text_limits.name = chars;
}

/// A configuration whose store is the journal `path` (sync always).
pub fn durable_config(path: &std::path::Path) -> Config {
    Config {
        data: Some(Durability {
            path: path.to_path_buf(),
            sync: SyncMode::Always,
            compact_min: plantstore::config::COMPACT_MIN,
        }),
        ..config()
    }
}

/// A running in-process server; stops (and joins) when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    config: Config,
    stopper: Stopper,
    thread: Option<JoinHandle<usize>>,
    /// What SIGHUP drives: re-reads the token file (and the shared key).
    /// Dropped when the server stops: it holds the application (and so
    /// the journal's lock).
    reloader: Option<Reloader>,
    /// Its store's database, if any: dropped after the server stops.
    pub keep: Option<Keep>,
}

impl TestServer {
    pub fn start() -> TestServer {
        TestServer::with(config())
    }

    /// A server on `kind`'s store with the test configuration.
    pub fn on(kind: Kind) -> TestServer {
        TestServer::on_with(kind, config())
    }

    /// A server on `kind`'s store with `config`.
    pub fn on_with(kind: Kind, config: Config) -> TestServer {
        let (config, keep) = config_on(kind, config);
        let mut server = TestServer::with(config);
        server.keep = keep;
        server
    }

    pub fn with(config: Config) -> TestServer {
        let server = plantstore::start(&config).expect("server starts");
        TestServer::running(server, config)
    }

    /// A server over a store the test built (e.g. with a faulty disk).
    pub fn with_store(config: Config, store: Store) -> TestServer {
        let server = plantstore::serve(&config, store).expect("server binds");
        TestServer::running(server, config)
    }

    fn running(server: Instance, config: Config) -> TestServer {
        let addr = server.local_addr();
        let stopper = server.stopper();
        let reloader = server.reloader(&config);
        let thread = thread::spawn(move || server.run(Duration::from_secs(5)));
        TestServer {
            addr,
            config,
            stopper,
            thread: Some(thread),
            reloader: Some(reloader),
            keep: None,
        }
    }

    /// What a SIGHUP does: re-reads the configuration's token file, and
    /// on a database its tickets' key; returns once done.
    pub fn reload(&self) {
        self.reloader.as_ref().expect("a running server").reload();
    }

    /// Stops the server and starts a new one with the same configuration
    /// (so on the same data file); the address changes.
    pub fn restart(&mut self) {
        self.stop();
        // Connection threads drop their handle on the store just after the
        // server returns; until then the journal's lock is still held.
        let deadline = Instant::now() + PATIENCE;
        let server = loop {
            match plantstore::start(&self.config) {
                Err(StartError::Store(OpenError::Locked(_))) if Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(10))
                }
                other => break other.expect("server restarts"),
            }
        };
        let keep = self.keep.take();
        *self = TestServer::running(server, self.config.clone());
        self.keep = keep;
    }

    fn stop(&mut self) {
        self.stopper.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.reloader = None;
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    /// One request on a fresh connection.
    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut client = self.client();
        client.send(&request(method, path, headers, body));
        if method == "HEAD" {
            client.reply_head()
        } else {
            client.reply()
        }
    }

    /// An authorised JSON POST /plants.
    pub fn create(&self, body: &str) -> Reply {
        self.send("POST", "/plants", &[AUTH, JSON], body)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
    }
}
