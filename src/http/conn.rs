//! One connection of an event loop: its socket, its protocol and (with
//! HTTPS) its TLS state; `serve` reads what the socket has, runs the
//! handlers inline, and writes what the socket takes, each in a bounded
//! share, then says whether the connection stays, wants another turn, or
//! is done. How a connection ends: an orderly close when nothing is owed,
//! a reset when something is (`reset_if_cut_short`), a refusal answered
//! at once past the connection cap (`reject`).
//!
//! The loop (`worker`) owns the connections and their slots, accepts,
//! delivers deferred answers and sweeps deadlines; it calls `serve`.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::time::{Duration, Instant};

use mio::net::TcpStream;

use super::protocol::Protocol;
use super::response::{Delimit, Persist, Response};
use super::session::{self, Home};
use super::state::ServerState;
use crate::transport::{self, ServerTls};

/// Rounds (a read, or output drained) served to one connection before the
/// others get their turn.
const MAX_ROUNDS: usize = 16;
/// Bytes written to one connection before the others get their turn:
/// one streamed piece (`protocol::CHUNK`), so a large page or an export,
/// made as it leaves, costs its loop about two pieces of work per turn.
const WRITE_SHARE: usize = 32 * 1024;
/// Size of the loop's read buffer (each connection's own input buffer
/// holds only what a read leaves unparsed).
const READ_SIZE: usize = 16 * 1024;

/// The loop's read buffer, made at its first read: a loop that has read
/// nothing yet (an idle server's) holds none. Zeroed, so resident once
/// made: 16 KiB of idle RSS for each loop.
#[derive(Default)]
pub(super) struct Scratch(Box<[u8]>);

impl Scratch {
    fn get(&mut self) -> &mut [u8] {
        if self.0.is_empty() {
            self.0 = vec![0u8; READ_SIZE].into_boxed_slice();
        }
        &mut self.0
    }
}

pub(super) struct Conn {
    pub(super) socket: TcpStream,
    pub(super) protocol: Protocol,
    pub(super) peer: SocketAddr,
    pub(super) id: u64,
    /// The socket may have more to read / room to write (edge-triggered:
    /// known until a call says `WouldBlock`).
    pub(super) readable: bool,
    pub(super) writable: bool,
    /// An edge said the client closed its side (`EPOLLRDHUP`): a short
    /// read does not mean the socket is drained of that close.
    pub(super) hung_up: bool,
    /// With HTTPS: the connection's TLS state, between socket and protocol
    /// (in the plain build the `Option` of a type with no value: always
    /// `None`, no byte, and each branch on it compiled away).
    pub(super) tls: Option<ServerTls>,
}

/// What serving a connection left.
#[derive(PartialEq, Eq)]
pub(super) enum Left {
    Open,
    /// More to do: serve again soon.
    Busy,
    Closed,
}

/// Reads, runs handlers and writes for one connection until it would
/// block, or has had its share.
pub(super) fn serve(
    conn: &mut Conn,
    shared: &ServerState,
    home: &Home<'_>,
    scratch: &mut Scratch,
    now: Instant,
) -> Left {
    let mut rounds = 0;
    let mut written = 0;
    // In the plain build the TLS state has no value: `is_some` is known
    // false, so `https` is known `None` and what it guards is gone.
    let https = if conn.tls.is_some() {
        shared.https.as_ref()
    } else {
        None
    };
    loop {
        session::drive(
            &mut conn.protocol,
            &*shared.handler,
            conn.peer,
            Some(home),
            https,
            now,
        );
        // Output that leaves may let buffered pipelined requests go on (or
        // a stopping connection close): the protocol gets another turn even
        // with nothing new to read.
        let mut drained = false;
        if conn.writable
            && let Some(tls) = &mut conn.tls
        {
            match tls.flush(&mut conn.socket) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => conn.writable = false,
                Err(_) => return Left::Closed,
            }
        }
        while conn.writable && !conn.protocol.output().is_empty() {
            if written >= WRITE_SHARE {
                return Left::Busy;
            }
            match conn.write_out() {
                Ok(n) => {
                    written += n;
                    conn.protocol.sent(n, now);
                    drained = conn.protocol.output().is_empty();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => conn.writable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Left::Closed,
            }
        }
        // Encrypted output still waiting for the socket (which said
        // `WouldBlock`, so a writable event follows): nothing more (reading,
        // a shutdown, a close) until it has left, within the write timeout.
        // A connection the protocol gave up on is not waited for.
        if let Some(tls) = &mut conn.tls {
            if tls.has_output() {
                if conn.protocol.is_closed() && conn.protocol.cut_short() {
                    return Left::Closed;
                }
                if now >= tls.drain_by(now + shared.limits.write_timeout) {
                    return Left::Closed;
                }
                conn.writable = false;
                return Left::Open;
            }
            tls.drained();
        }
        if conn.protocol.take_shutdown() {
            conn.shut_down();
        }
        if conn.protocol.is_closed() {
            if let Some(tls) = &conn.tls {
                tls.abandoned(&conn.peer, &shared.failed_handshakes);
            }
            conn.close_notify();
            return Left::Closed;
        }
        let read = conn.readable && conn.protocol.wants_input();
        if !read && !drained {
            return Left::Open;
        }
        if rounds == MAX_ROUNDS {
            return Left::Busy;
        }
        rounds += 1;
        if !read {
            continue;
        }
        let buffer = scratch.get();
        if let Some(tls) = &mut conn.tls {
            match tls.read(
                &mut conn.socket,
                buffer,
                &conn.peer,
                &shared.failed_handshakes,
            ) {
                transport::Read::Bytes(n) => conn.protocol.received(&buffer[..n], now),
                transport::Read::Blocked => conn.readable = false,
                transport::Read::Closed => {
                    conn.readable = false;
                    conn.protocol.closed_by_peer();
                }
                transport::Read::PlainHttp => {
                    // What it sent is read first, so that the close does
                    // not reset the connection and destroy the answer.
                    discard_input(&mut conn.socket);
                    let mut out = Vec::with_capacity(200);
                    let body = transport::PLAIN_HTTP.to_vec();
                    Response::bytes(400, "text/plain; charset=utf-8", body).write_to(
                        &mut out,
                        false,
                        Persist::Close,
                        Delimit::Chunked,
                    );
                    let _ = conn.socket.write(&out);
                    let _ = conn.socket.shutdown(Shutdown::Write);
                    return Left::Closed;
                }
                transport::Read::Failed => return Left::Closed,
            }
            continue;
        }
        match conn.socket.read(buffer) {
            Ok(0) => {
                conn.readable = false;
                conn.protocol.closed_by_peer();
            }
            Ok(n) => {
                // A short read emptied the socket: more data will come
                // with a new edge, so skip the read that would only say
                // `WouldBlock` (one syscall per request saved). Unless the
                // client's close came with that edge: no other edge will
                // tell of it, and only a read sees it.
                conn.readable = n == buffer.len() || conn.hung_up;
                conn.protocol.received(&buffer[..n], now);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => conn.readable = false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Left::Closed,
        }
    }
}

impl Conn {
    /// When the sweep must serve it: the protocol's deadline, or with
    /// HTTPS the one for encrypted output still held, whichever is first.
    pub(super) fn deadline(&self) -> Option<Instant> {
        let protocol = self.protocol.deadline();
        if let Some(by) = self.tls.as_ref().and_then(ServerTls::drain_deadline) {
            return Some(protocol.map_or(by, |at| at.min(by)));
        }
        protocol
    }

    /// Whether closing now leaves the client short of what it was owed:
    /// the protocol's view, and with HTTPS encrypted output still held.
    fn cut_short(&self) -> bool {
        if self.tls.as_ref().is_some_and(|tls| tls.has_output()) {
            return true;
        }
        self.protocol.cut_short()
    }

    /// Writes of the protocol's output what the socket (through TLS, with
    /// HTTPS) takes now.
    fn write_out(&mut self) -> io::Result<usize> {
        if let Some(tls) = &mut self.tls {
            return tls.write(&mut self.socket, self.protocol.output());
        }
        self.socket.write(self.protocol.output())
    }

    /// With HTTPS, a connection that closes having sent all it owed says
    /// so with a close_notify (as far as the socket takes it now): a
    /// client that sees the TCP close without one may take the response
    /// for cut short, and OpenSSL then drops the session instead of
    /// resuming it.
    fn close_notify(&mut self) {
        if !self.cut_short()
            && let Some(tls) = &mut self.tls
        {
            tls.close();
            let _ = tls.flush(&mut self.socket);
        }
    }

    /// Ends the sending side: with HTTPS, a close_notify first (sent as far
    /// as the socket takes it now).
    fn shut_down(&mut self) {
        if let Some(tls) = &mut self.tls {
            tls.close();
            let _ = tls.flush(&mut self.socket);
        }
        let _ = self.socket.shutdown(Shutdown::Write);
    }
}

/// Makes dropping a connection that owes its client part of a response
/// send a reset (`SO_LINGER` 0), not an orderly close: the client must see
/// an error, never a shorter body that ends with the connection, and the
/// kernel drops what it still held for it.
pub(super) fn reset_if_cut_short(conn: &Conn) {
    if conn.cut_short() {
        let _ = socket2::SockRef::from(&conn.socket).set_linger(Some(Duration::ZERO));
    }
}

/// Reads (and drops) what a connection being answered and closed at once
/// already sent, at most 16 KiB: closing with unread input would reset the
/// connection and destroy the answer before the client reads it.
pub(super) fn discard_input(socket: &mut TcpStream) {
    let mut scratch = [0u8; 4096];
    for _ in 0..4 {
        if !matches!(socket.read(&mut scratch), Ok(n) if n > 0) {
            break;
        }
    }
}

/// Answers a connection past the cap with a 503 at once and closes it;
/// returns the bytes of the answer.
pub(super) fn reject(mut socket: TcpStream) -> usize {
    discard_input(&mut socket);
    let mut out = Vec::with_capacity(160);
    Response::error(503, "server is at its connection limit, retry shortly")
        .with_header("Retry-After", "1")
        .write_to(&mut out, false, Persist::Close, Delimit::Chunked);
    let _ = socket.write(&out);
    let _ = socket.shutdown(Shutdown::Write);
    out.len()
}
