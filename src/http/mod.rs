//! The HTTP/1.1 engine: a small, blocking server on `httparse`.
//!
//! Owns everything that touches a socket: accepting (`server`), the bounded
//! thread pool (`pool`), one connection's request loop (`conn`), buffered
//! input with per-read timeouts (`input`), request heads (`request`), bodies
//! (`body`) and response bytes (`response`). The rest of the crate sees only
//! `Request`, `Response` and the `Handler` trait.
//!
//! Every limit and timeout lives in `Limits`. What it does not do: TLS,
//! HTTP/2, compression, or draining an unread body (the connection is
//! closed instead).

mod body;
mod conn;
mod input;
mod pool;
#[cfg(any(test, fuzzing))]
pub mod replay;
mod request;
mod response;
mod server;

use std::time::Duration;

pub use body::BodyError;
pub use request::Request;
pub use response::Response;
pub use server::{Gauge, Server, Stopper};

/// The application side of the engine: one response for each request.
pub trait Handler: Send + Sync + 'static {
    /// Answers a request. May read the body with `Request::body`; a body
    /// left unread makes the engine close the connection after responding.
    fn handle(&self, request: &mut Request<'_>) -> Response;
}

/// Every limit and timeout of the engine.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections served at once; past it a new one is answered 503.
    pub max_connections: usize,
    /// Largest request body, in bytes (413 beyond).
    pub max_body: usize,
    /// Largest request head, in bytes (431 beyond).
    pub max_head: usize,
    /// Time allowed to deliver a whole request head.
    pub head_timeout: Duration,
    /// Longest silence allowed while a body is being sent.
    pub body_timeout: Duration,
    /// How long a keep-alive connection may sit idle between requests.
    pub idle_timeout: Duration,
    /// How long a response write may block.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 1024,
            max_body: 64 * 1024,
            max_head: 16 * 1024,
            head_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(10),
        }
    }
}
