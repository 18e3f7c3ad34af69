//! One connection's life: read a head, run the handler, write the response,
//! repeat while the connection may persist.
//!
//! Requests on a connection are answered strictly in order (pipelining
//! falls out of reading the next head from what is already buffered). The
//! connection is closed when the client asks, when a body was left unread
//! (never drained: it may be unbounded), when the head was refused, and when
//! the server is stopping. Before closing with input possibly unread we
//! "linger" (shut down our side, then read and discard for a bounded time
//! and byte count) so the kernel does not answer the client's remaining
//! bytes with a reset that would destroy our error response in flight.

use std::net::{SocketAddr, TcpStream};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use log::{error, info, log_enabled};

use super::Response;
use super::input::{Input, Transport, is_timeout};
use super::request::{Head, HeadError, Request};
use super::response::Persist;
use super::server::Shared;

/// How often an idle connection checks whether the server is stopping.
const IDLE_SLICE: Duration = Duration::from_millis(250);
/// Lingering close: at most this long, and at most this many bytes.
const LINGER_TIME: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 1 << 20;

/// What waiting for the next request head produced.
enum Next {
    /// A head was parsed into the connection's `Head`.
    Head,
    /// The client closed, stayed idle too long, or the server is stopping.
    Closed,
    /// The head started but did not complete in time: 408.
    TimedOut,
    /// The head is unacceptable: answer and close.
    Refused(HeadError),
}

/// Serves one TCP connection until it closes.
pub(crate) fn serve_tcp(stream: TcpStream, peer: SocketAddr, shared: &Shared) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(shared.limits.write_timeout));
    serve(Box::new(stream), peer, shared);
}

/// Serves one connection until it closes.
pub(crate) fn serve(stream: Box<dyn Transport>, peer: SocketAddr, shared: &Shared) {
    let mut input = Input::new(stream, shared.limits.max_head);
    let mut out = Vec::with_capacity(512);
    let mut head = Head::default();
    let mut deadline = Some(Instant::now() + shared.limits.head_timeout);
    loop {
        match next_head(&mut input, &mut head, shared, deadline.take()) {
            Next::Head => {}
            Next::Closed => return,
            Next::TimedOut => {
                return refuse(&mut input, &mut out, peer, 408, "request head timed out");
            }
            Next::Refused(e) => return refuse(&mut input, &mut out, peer, e.status(), e.message()),
        };
        let framing = match head.framing() {
            Ok(framing) => framing,
            Err(e) => return refuse(&mut input, &mut out, peer, e.status(), e.message()),
        };
        let started = Instant::now();
        let mut request = Request::new(&head, framing, peer, &mut input, &shared.limits);
        let response = catch_unwind(AssertUnwindSafe(|| shared.handler.handle(&mut request)))
            .unwrap_or_else(|_| {
                error!(
                    "handler panicked on {} {}",
                    request.method(),
                    request.path()
                );
                Response::error(500, "internal error")
            });
        let unread = request.leaves_input_unread();
        let close = unread || !request.keep_alive() || shared.is_stopping();
        let head_only = request.method() == "HEAD";
        let persist = if close {
            Persist::Close
        } else if request.minor_version() == 0 {
            Persist::KeepAlive
        } else {
            Persist::Default
        };
        if log_enabled!(target: "access", log::Level::Info) {
            let (method, path) = (request.method(), request.path());
            access(method, path, response.status(), started, peer);
        }
        out.clear();
        response.write_to(&mut out, head_only, persist);
        if input.stream().write_all(&out).is_err() {
            return;
        }
        if close {
            if unread || !input.buffered().is_empty() {
                linger(&mut input);
            }
            return;
        }
    }
}

/// Waits for the next complete head. `deadline` is set for the first
/// request (the head timeout counts from accept); later requests first wait
/// up to the idle timeout for a byte, then get the head timeout from there.
fn next_head(
    input: &mut Input,
    head: &mut Head,
    shared: &Shared,
    deadline: Option<Instant>,
) -> Next {
    let limits = &shared.limits;
    let idle_until = deadline.unwrap_or_else(|| Instant::now() + limits.idle_timeout);
    while input.buffered().is_empty() {
        let left = idle_until.saturating_duration_since(Instant::now());
        if shared.is_stopping() || left.is_zero() {
            return Next::Closed;
        }
        match input.fill(left.min(IDLE_SLICE)) {
            Ok(0) => return Next::Closed,
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {}
            Err(_) => return Next::Closed,
        }
    }
    let deadline = deadline.unwrap_or_else(|| Instant::now() + limits.head_timeout);
    loop {
        match head.parse_into(input.buffered(), limits.max_head) {
            Ok(Some(len)) => {
                input.consume(len);
                return Next::Head;
            }
            Ok(None) => {}
            Err(e) => return Next::Refused(e),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Next::TimedOut;
        }
        match input.fill(left) {
            Ok(0) => return Next::Closed,
            Ok(_) => {}
            Err(e) if is_timeout(&e) => return Next::TimedOut,
            Err(_) => return Next::Closed,
        }
    }
}

/// Answers an unacceptable request with an Error body and closes.
fn refuse(input: &mut Input, out: &mut Vec<u8>, peer: SocketAddr, status: u16, message: &str) {
    access("-", "-", status, Instant::now(), peer);
    out.clear();
    Response::error(status, message).write_to(out, false, Persist::Close);
    if input.stream().write_all(out).is_ok() {
        linger(input);
    }
}

/// Closes our side, then reads and discards what the client still sends,
/// for a bounded time and byte count, so our last response is not lost to
/// a TCP reset.
fn linger(input: &mut Input) {
    input.stream().shutdown_write();
    let until = Instant::now() + LINGER_TIME;
    let mut budget = LINGER_BYTES;
    loop {
        let n = input.buffered().len();
        input.consume(n);
        budget = budget.saturating_sub(n);
        let left = until.saturating_duration_since(Instant::now());
        if budget == 0 || left.is_zero() {
            return;
        }
        match input.fill(left) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// The access log line: method, path, status, duration, peer. Never headers,
/// query strings or bodies.
fn access(method: &str, path: &str, status: u16, started: Instant, peer: SocketAddr) {
    let micros = started.elapsed().as_micros();
    info!(target: "access", "{method} {path} {status} {micros}us {peer}");
}
