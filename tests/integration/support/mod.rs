//! The `TestServer` fixture (in-process, port 0, stops in `Drop`) and a raw
//! HTTP/1.1 client that can send malformed bytes and read pipelined replies.

#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use plantstore::api::{Cors, Grant, Guard};
use plantstore::config::{Config, TokenSource};
use plantstore::http::{Limits, Stopper};
use plantstore::model::{Durability, SyncMode, TextLimits};
use plantstore::store::{OpenError, Store};
use plantstore::webhook::WebhookConfig;
use plantstore::{Instance, Reloader, StartError};

pub const TOKEN: &str = "test-token";

/// How long a test waits for something the code does in the background
/// (a log line, a closed connection, a counter): milliseconds on an idle
/// machine, so the bound only says when to give up, generous enough for a
/// loaded one. How fast things happen is measured by bench/run.sh.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Polls `done` every 10 ms until it holds or `PATIENCE` has passed;
/// whether it held. Used in place of a fixed sleep wherever a test waits
/// for something to happen: `assert!(eventually(|| ...), "what did not")`.
pub fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

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
        #[cfg(feature = "postgres")]
        database: None,
        #[cfg(feature = "tls")]
        tls: None,
    }
}

/// Which store a test runs on. A test written once runs on each (see
/// `on_each_store!`); the PostgreSQL runs need `PLANTSTORE_TEST_DATABASE`
/// (`scripts/with-postgres.sh` sets it) and fail without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Memory,
    #[cfg(feature = "postgres")]
    Postgres,
}

/// Generates, for each named test `fn name(kind: Kind)`, a `#[test]` per
/// store: `memory::name` and, with the `postgres` feature,
/// `postgres::name`.
#[macro_export]
macro_rules! on_each_store {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(#[test]
            fn $name() {
                super::$name($crate::support::Kind::Memory)
            })*
        }
        #[cfg(feature = "postgres")]
        mod postgres {
            $(#[test]
            fn $name() {
                super::$name($crate::support::Kind::Postgres)
            })*
        }
    };
}

/// A database of its own for one test, made in the cluster that
/// `PLANTSTORE_TEST_DATABASE` names and dropped with it.
#[cfg(feature = "postgres")]
pub struct FreshDatabase {
    /// Its URL.
    pub url: String,
    name: String,
    admin: String,
    /// Its share of the cluster (see `Turn`); `None` for the test that
    /// holds the cluster alone.
    _turn: Option<Turn>,
}

/// Tests share the one cluster, except the one that stops it: each
/// database holds a shared turn while it exists, and that test takes the
/// cluster alone ([`Turn::alone`]), waiting until no other test has a
/// database and keeping new ones waiting until it is done.
#[cfg(feature = "postgres")]
pub struct Turn {
    alone: bool,
}

#[cfg(feature = "postgres")]
static TURNS: std::sync::Mutex<(usize, bool)> = std::sync::Mutex::new((0, false));
#[cfg(feature = "postgres")]
static TURN_FREED: std::sync::Condvar = std::sync::Condvar::new();

#[cfg(feature = "postgres")]
impl Turn {
    fn shared() -> Turn {
        let mut turns = TURNS.lock().unwrap_or_else(|p| p.into_inner());
        while turns.1 {
            turns = TURN_FREED.wait(turns).unwrap_or_else(|p| p.into_inner());
        }
        turns.0 += 1;
        Turn { alone: false }
    }

    /// The cluster for this test alone, until the turn is dropped.
    pub fn alone() -> Turn {
        let mut turns = TURNS.lock().unwrap_or_else(|p| p.into_inner());
        while turns.1 || turns.0 > 0 {
            turns = TURN_FREED.wait(turns).unwrap_or_else(|p| p.into_inner());
        }
        turns.1 = true;
        Turn { alone: true }
    }
}

#[cfg(feature = "postgres")]
impl Drop for Turn {
    fn drop(&mut self) {
        let mut turns = TURNS.lock().unwrap_or_else(|p| p.into_inner());
        if self.alone {
            turns.1 = false;
        } else {
            turns.0 -= 1;
        }
        TURN_FREED.notify_all();
    }
}

#[cfg(feature = "postgres")]
impl FreshDatabase {
    /// A database, sharing the cluster with other tests.
    pub fn new() -> FreshDatabase {
        FreshDatabase::make(Some(Turn::shared()))
    }

    /// A database for the test that holds `Turn::alone`.
    pub fn within(_alone: &Turn) -> FreshDatabase {
        FreshDatabase::make(None)
    }

    fn make(turn: Option<Turn>) -> FreshDatabase {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let admin = std::env::var("PLANTSTORE_TEST_DATABASE").expect(
            "PLANTSTORE_TEST_DATABASE is not set: run the tests of the postgres feature \
             through scripts/with-postgres.sh",
        );
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("plantstore_test_{}_{n}", std::process::id());
        let mut client = postgres::Client::connect(&admin, postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot reach PLANTSTORE_TEST_DATABASE: {e}"));
        // One statement each: neither may run in a transaction block.
        for statement in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            client
                .batch_execute(&statement)
                .expect("a test database is created");
        }
        let (base, _) = admin.rsplit_once('/').expect("a URL with /dbname");
        FreshDatabase {
            url: format!("{base}/{name}"),
            name,
            admin,
            _turn: turn,
        }
    }

    /// A client of this database, to look at it or change it from outside.
    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("the test database answers")
    }

    /// Its name in the cluster.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A client of the cluster's own database (`PLANTSTORE_TEST_DATABASE`),
    /// to do to this one what cannot be done from inside it (refuse it
    /// connections, end its sessions).
    pub fn admin(&self) -> postgres::Client {
        postgres::Client::connect(&self.admin, postgres::NoTls).expect("the cluster answers")
    }

    /// `config` set to use this database, with the tests' pool.
    pub fn config(&self, config: Config) -> Config {
        let parsed = plantstore::dbconfig::DatabaseConfig::parse(&self.url, TEST_POOL)
            .expect("the test URL parses");
        Config {
            database: Some(parsed),
            ..config
        }
    }
}

#[cfg(feature = "postgres")]
impl Drop for FreshDatabase {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = client.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// Workers per test server on PostgreSQL: tests run side by side on one
/// cluster.
#[cfg(feature = "postgres")]
pub const TEST_POOL: usize = 4;

/// `config` set to use `kind`'s store; for PostgreSQL, with the fresh
/// database to keep while it is used.
pub fn config_on(kind: Kind, config: Config) -> (Config, Option<Keep>) {
    match kind {
        Kind::Memory => (config, None),
        #[cfg(feature = "postgres")]
        Kind::Postgres => {
            let database = FreshDatabase::new();
            let config = database.config(config);
            (config, Some(Keep(std::sync::Arc::new(database))))
        }
    }
}

/// What a test server on a store must keep (its database), dropped after
/// the server stops.
#[derive(Clone)]
pub struct Keep(
    #[cfg(feature = "postgres")] pub std::sync::Arc<FreshDatabase>,
    #[cfg(not(feature = "postgres"))] (),
);

/// The flags that start the binary on `kind`'s store, and what to keep
/// while it runs.
pub fn store_args(kind: Kind) -> (Vec<String>, Option<Keep>) {
    match kind {
        Kind::Memory => (Vec::new(), None),
        #[cfg(feature = "postgres")]
        Kind::Postgres => {
            let database = FreshDatabase::new();
            let args = vec![
                "--database".to_string(),
                database.url.clone(),
                "--database-pool".to_string(),
                TEST_POOL.to_string(),
            ];
            (args, Some(Keep(std::sync::Arc::new(database))))
        }
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

/// A fresh path in the temp directory; the file (and a leftover
/// `.compact`) is removed when dropped.
pub struct TempFile(pub PathBuf);

/// A path in the temp directory that no other test uses.
fn temp_path(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("plantstore-test-{}-{n}-{name}", std::process::id()))
}

impl TempFile {
    pub fn new(name: &str) -> TempFile {
        let path = temp_path(name);
        let _ = std::fs::remove_file(&path);
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let mut compact = self.0.clone().into_os_string();
        compact.push(".compact");
        let _ = std::fs::remove_file(compact);
    }
}

/// A fresh directory in the temp directory; removed with all it holds
/// (FIFOs, links, directories) when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let path = temp_path(name);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
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

/// One request on a fresh connection to any server (a running binary).
pub fn send_to(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut client = Client::connect(addr);
    client.send(&request(method, path, headers, body));
    client.reply()
}

/// `plantstore_connections_open` from the server's `/metrics`, which
/// counts the connection that asks: 1 when no other client is connected.
pub fn open_connections(addr: SocketAddr, token: &str) -> u64 {
    let auth = format!("Bearer {token}");
    let reply = send_to(addr, "GET", "/metrics", &[("Authorization", &auth)], "");
    assert_eq!(reply.status, 200, "{}", reply.text());
    let text = reply.text();
    text.lines()
        .find_map(|l| l.strip_prefix("plantstore_connections_open "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no plantstore_connections_open in {text}"))
}

pub const AUTH: (&str, &str) = ("Authorization", "Bearer test-token");
pub const JSON: (&str, &str) = ("Content-Type", "application/json");

/// The bytes of a request with a Content-Length body.
pub fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        text.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    text.push_str("\r\n");
    text.push_str(body);
    text.into_bytes()
}

/// A parsed response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Chunks of a chunked body (0 for any other).
    pub chunks: usize,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Asserts an Error body: `error` repeats the status, `message` is text
    /// that mentions `needle`.
    pub fn assert_error(&self, status: u16, needle: &str) {
        assert_eq!(self.status, status, "body: {}", self.text());
        assert_eq!(self.header("content-type"), Some("application/json"));
        let body = self.json();
        assert_eq!(body["error"], status, "{body}");
        let message = body["message"].as_str().expect("message is a string");
        assert!(
            message.contains(needle),
            "{message:?} should mention {needle:?}"
        );
    }
}

/// A raw connection that keeps unread bytes between replies.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    /// Reads wait up to `PATIENCE`: a test that expects nothing to come
    /// sets a shorter timeout of its own.
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// A client on a connection the caller made (with its own timeouts).
    pub fn from_stream(stream: TcpStream) -> Client {
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// `send`, for a server that may be gone.
    pub fn try_send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// `reply`, or `None` where the connection failed or the read timed
    /// out (a server that may be gone).
    pub fn try_reply(&mut self) -> Option<Reply> {
        let read = std::panic::AssertUnwindSafe(|| self.read_reply(true));
        std::panic::catch_unwind(read).ok()
    }

    /// Reads one response with a body.
    pub fn reply(&mut self) -> Reply {
        self.read_reply(true)
    }

    /// Reads one response to HEAD: headers only.
    pub fn reply_head(&mut self) -> Reply {
        self.read_reply(false)
    }

    fn read_reply(&mut self, with_body: bool) -> Reply {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut parsed = httparse::Response::new(&mut headers);
            if let Ok(httparse::Status::Complete(len)) = parsed.parse(&self.buf) {
                let status = parsed.code.unwrap();
                let headers: Vec<(String, String)> = parsed
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_string(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect();
                let length = headers
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                    .map(|(_, v)| v.parse::<usize>().unwrap())
                    .unwrap_or(0);
                let has = |name: &str, value: &str| {
                    headers
                        .iter()
                        .any(|(n, v)| n.eq_ignore_ascii_case(name) && v.eq_ignore_ascii_case(value))
                };
                let chunked = has("transfer-encoding", "chunked");
                let until_close = !chunked
                    && has("connection", "close")
                    && !headers
                        .iter()
                        .any(|(n, _)| n.eq_ignore_ascii_case("content-length"));
                let with_body = with_body && status >= 200 && status != 204 && status != 304;
                self.buf.drain(..len);
                let (body, chunks) = if !with_body {
                    (Vec::new(), 0)
                } else if chunked {
                    self.chunked_body()
                } else if until_close {
                    while self.more() > 0 {}
                    (std::mem::take(&mut self.buf), 0)
                } else {
                    self.fill_to(length);
                    (self.buf.drain(..length).collect(), 0)
                };
                return Reply {
                    status,
                    headers,
                    body,
                    chunks,
                };
            }
            assert!(self.more() > 0, "connection closed before a full response");
        }
    }

    /// Decodes a chunked body (no trailers) at the front of the buffer:
    /// the body and how many chunks it came in.
    fn chunked_body(&mut self) -> (Vec<u8>, usize) {
        let mut body = Vec::new();
        let mut chunks = 0;
        // A stream (the change feed) never ends its body: a test that
        // reads one as a reply fails here instead of waiting forever.
        let until = std::time::Instant::now() + 2 * PATIENCE;
        loop {
            assert!(
                std::time::Instant::now() < until,
                "a chunked body still going after {:?}",
                2 * PATIENCE
            );
            let line = loop {
                if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                    break at;
                }
                assert!(self.more() > 0, "connection closed inside a chunk size");
            };
            let size = std::str::from_utf8(&self.buf[..line]).expect("a chunk size");
            let size = usize::from_str_radix(size, 16).expect("a hexadecimal chunk size");
            self.fill_to(line + 2 + size + 2);
            assert_eq!(&self.buf[line + 2 + size..line + 4 + size], b"\r\n");
            body.extend_from_slice(&self.buf[line + 2..line + 2 + size]);
            self.buf.drain(..line + 4 + size);
            if size == 0 {
                return (body, chunks);
            }
            chunks += 1;
        }
    }

    fn fill_to(&mut self, n: usize) {
        while self.buf.len() < n {
            assert!(self.more() > 0, "connection closed inside a body");
        }
    }

    fn more(&mut self) -> usize {
        let mut chunk = [0u8; 8192];
        let n = loop {
            match self.stream.read(&mut chunk) {
                // A signal arrived during the read: not the server's doing.
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                read => break read.expect("read"),
            }
        };
        self.buf.extend_from_slice(&chunk[..n]);
        n
    }

    /// Whether the server closed the connection (EOF, or a reset) with no
    /// further bytes.
    pub fn closed(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe),
        }
    }
}
