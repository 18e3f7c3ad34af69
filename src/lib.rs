//! plantstore: a tiny, fast, blocking HTTP server for the Plant Store API.
//!
//! A tour, from the socket inwards:
//!
//! - [`http`]: our own HTTP/1.1 engine on `httparse`: the listener, a
//!   bounded pool of connection threads, request heads and bodies with every
//!   limit and timeout, responses. It exposes only `Request`, `Response` and
//!   the `Handler` trait.
//! - [`api`]: the Plant Store API as a `Handler`: one routing `match`,
//!   bearer auth, one small function per operation, `ApiError` to status.
//! - [`store`]: plants and their validation, in memory behind a `Mutex`.
//! - [`config`]: flags as typed, and the validated `Config`.
//!
//! `main.rs` only parses flags, sets up logging and turns errors into exit
//! codes; [`start`] is what both it and the integration tests call.

#![forbid(unsafe_code)]

pub mod api;
pub mod config;
pub mod http;
pub mod store;

use std::io;
use std::sync::Arc;

use log::{info, warn};

use api::{App, Tokens};
use config::{Config, TokenSource};
use http::Server;
use store::Store;

/// Builds the application from `config`, binds its address and logs the
/// start-up line. The caller runs the returned server.
pub fn start(config: &Config) -> io::Result<Server> {
    let store = Store::new(config.max_plants);
    let plants = store.len();
    let app = Arc::new(App::new(store, Tokens::new(config.tokens.clone())));
    let server = Server::bind(config.addr, config.limits.clone(), Arc::clone(&app) as _)?;
    app.attach(server.gauge());
    match config.token_source {
        TokenSource::Flag => warn!("--token is visible in the process list; prefer --token-file"),
        TokenSource::Generated => {
            warn!("no token configured; generated one for this run (printed above)")
        }
        TokenSource::File | TokenSource::Env => {}
    }
    warn_if_few_descriptors(config.limits.max_connections);
    info!(
        "plantstore {} listening on http://{}, storage: in memory only (a restart starts empty), {} plants",
        env!("CARGO_PKG_VERSION"),
        server.local_addr(),
        plants,
    );
    Ok(server)
}

/// Each connection needs a file descriptor; below the cap, accept would
/// fail before the 503 logic could answer.
fn warn_if_few_descriptors(max_connections: usize) {
    if let Some(soft) = open_file_limit().filter(|&soft| soft < max_connections + 64) {
        warn!(
            "open-file limit {soft} is low for --max-connections {max_connections}; \
             raise it (ulimit -n, or LimitNOFILE= in systemd)"
        );
    }
}

/// This process's soft open-file limit, read from /proc (so no unsafe
/// `getrlimit`); `None` where /proc is absent or the limit is unlimited.
pub fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
}
