//! The HTTP/1.1 engine: event loops on non-blocking sockets, around a
//! sans-I/O protocol core, on `httparse`.
//!
//! From the socket inwards: `server` binds and runs `limits.threads` event
//! loops (`worker`, on `mio`); each owns its connections (`conn`: a
//! connection's socket, reads, writes and TLS state) and feeds their
//! bytes to a `protocol` (one connection's HTTP/1.1 state machine, with no
//! socket in it: bytes in, requests and deadlines out, responses in, bytes
//! out), built on `head` (request heads), `inbox` (a connection's unparsed
//! input and the body of its current request), `body` (incremental body
//! decoding), `response` (response bytes), `date` (the `Date` line each
//! loop makes once a second), `chunk` (chunked coding of a streamed body)
//! and `access` (one access line per answer). `session`
//! runs the handler for each request a protocol has ready, inline on the
//! loop; a handler that must wait hands its answer to another thread
//! (`deferred`), which wakes the loop when done, and a streamed body made
//! on another thread says it is pending and is woken the same way.
//!
//! With HTTPS a connection holds its TLS state (`transport::ServerTls`)
//! between its socket and its protocol, in the same loop, and the loops
//! share the certificate served (`transport::Https`). Both come from
//! `crate::transport`, the TLS seam, and exist in every build: in the
//! plain one they have no value, so no file here names the `tls` feature
//! and each TLS branch compiles away. What the loops share is `state`
//! (`ServerState`), a file of its own so that `server`, `worker` and
//! `conn` import it one way.
//!
//! The rest of the crate sees `Server` (with `Limits`, `Gauge`, `Stopper`
//! and `raise_open_file_limit`) to run the engine, and `Request`
//! (with `BodyError`), `Response` (with a `Stream` and its `Fill` for a
//! body made as it is sent), `Deferred`, `StreamWaker` and the `Handler`
//! trait to answer it. Every limit and timeout lives in `Limits`. What it
//! does not do: certificates (`crate::certs`) or rustls (`crate::transport`),
//! HTTP/2, compression, routing or anything about plants, or draining an
//! unread body (the connection is closed instead).

mod access;
mod body;
mod chunk;
mod conn;
mod date;
mod deferred;
mod head;
mod inbox;
mod protocol;
#[cfg(any(test, fuzzing))]
pub mod replay;
mod request;
mod response;
mod server;
mod session;
mod state;
mod worker;

use std::time::Duration;

pub use body::BodyError;
#[cfg(test)]
pub(crate) use deferred::counting_waker;
pub use deferred::{Address, Deferred, Errand, StreamWaker};
pub use head::MAX_TARGET;
pub use request::Request;
pub use response::{Fill, Response, Stream};
pub use server::{Gauge, Server, Stopper, raise_open_file_limit};

/// The application side of the engine: one response for each request.
pub trait Handler: Send + Sync + 'static {
    /// Answers a request, inline on an event loop: it must not wait (for
    /// the disk, the network); see [`Request::defer`] for what does, and
    /// [`Request::waker`] for a streamed body made elsewhere. May
    /// read the body with [`Request::body`]; a body left unread makes the
    /// engine close the connection after responding.
    fn handle(&self, request: &mut Request<'_>) -> Response;

    /// Called by an event loop after it has handled everything that was
    /// ready: the moment to start work batched over those requests (the
    /// journal's write and sync for all the changes they made).
    fn flush(&self) {}
}

/// Every limit and timeout of the engine.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Event loops (threads serving connections).
    pub threads: usize,
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
    /// Time allowed for the whole of one response to leave.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            threads: crate::os::available_cpus(),
            max_connections: 10_000,
            max_body: 64 * 1024,
            max_head: 16 * 1024,
            head_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(10),
        }
    }
}
