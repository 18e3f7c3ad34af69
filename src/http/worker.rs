//! One event loop: a thread that owns its connections, on non-blocking
//! sockets, with readiness from `mio` (epoll, edge-triggered).
//!
//! Every loop holds a copy of the one listening socket and accepts from
//! it, so connections spread over the loops that are free to take them.
//! A connection lives in one slot of its loop for its whole life; the
//! loop reads what the socket has (while the protocol wants input), runs
//! the handlers inline, and writes as the socket takes it. A connection
//! that keeps the loop busy is served at most `MAX_ROUNDS` reads, or
//! `WRITE_SHARE` bytes of output (a streamed body never ends on its own
//! while the client reads fast), at a time, then the others get their turn.
//!
//! Deadlines are checked by a sweep every `SWEEP` (they are whole seconds;
//! a sweep of 10,000 connections is a few microseconds). Deferred
//! responses, and wakes for streams that said they were pending, arrive
//! through the loop's mailbox, whose waker interrupts `poll`; until woken,
//! a pending stream's connection waits for events like any other.
//! A connection past `max_connections` is answered 503 as it is accepted
//! and closed. Stopping: the loop drops its listener, closes connections
//! with nothing in flight, and lets the rest finish until the grace period
//! ends.
//!
//! What it does not do: parse or frame anything (the protocol does), or
//! run a handler anywhere but inline, through `session`. A connection that
//! owes its client part of a response when it goes is reset, never closed
//! cleanly.
//!
//! Why `mio` and not `polling`: measured with the same loop ported to
//! each, `polling` made the binary 3.4 KB larger, cost 3-6% more server CPU
//! per request (its epoll backend re-arms a timer and a wake-up counter:
//! five syscalls per wait where `mio` makes one), and registering a socket
//! is `unsafe` there, which this crate forbids.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use log::{error, warn};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use super::access;
use super::deferred::{self, Mailbox, Ticket};
use super::protocol::Protocol;
use super::response::{Delimit, Persist, Response};
use super::session::{self, Home};
use super::{Handler, Limits};
use crate::lock::lock;

const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX);
/// How often deadlines are checked.
const SWEEP: Duration = Duration::from_millis(100);
/// Rounds (a read, or output drained) served to one connection before the
/// others get their turn.
const MAX_ROUNDS: usize = 16;
/// Unsent bytes the kernel may hold for a connection before it stops
/// taking more (`TCP_NOTSENT_LOWAT`).
const NOTSENT_LOWAT: u32 = 64 * 1024;
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
struct Scratch(Box<[u8]>);

impl Scratch {
    fn get(&mut self) -> &mut [u8] {
        if self.0.is_empty() {
            self.0 = vec![0u8; READ_SIZE].into_boxed_slice();
        }
        &mut self.0
    }
}

/// What every event loop of one server shares: the limits, the handler,
/// the count of open connections and the stopping flag.
pub(crate) struct ServerState {
    pub(crate) limits: Limits,
    pub(crate) handler: Arc<dyn Handler>,
    /// Connections open over all loops.
    pub(crate) open: Arc<AtomicUsize>,
    /// TLS handshakes that failed, for `/metrics`.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(crate) failed_handshakes: Arc<AtomicU64>,
    pub(crate) stopping: Arc<AtomicBool>,
    /// With HTTPS: the certificate new connections are served.
    #[cfg(feature = "tls")]
    pub(crate) https: Option<Arc<super::tls::Https>>,
}

impl ServerState {
    fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }
}

/// A loop's mailbox: responses completed and streams woken by other
/// threads, and the waker that tells the loop about them.
pub(crate) struct Postbox {
    queue: Mutex<Vec<(Ticket, Letter)>>,
    waker: Arc<Waker>,
}

/// What another thread sends a connection.
enum Letter {
    /// Its deferred response.
    Response(Response),
    /// Its stream has more; the flag is the waker's `queued`.
    Wake(Arc<AtomicBool>),
}

impl Postbox {
    fn post(&self, ticket: Ticket, letter: Letter) {
        let mut queue = lock(&self.queue);
        queue.push((ticket, letter));
        if queue.len() == 1 {
            // The loop takes the whole queue when woken; wake it only for
            // the first entry since it last did.
            let _ = self.waker.wake();
        }
    }
}

impl Mailbox for Postbox {
    fn deliver(&self, ticket: Ticket, response: Response) {
        self.post(ticket, Letter::Response(response));
    }

    fn wake(&self, ticket: Ticket, queued: Arc<AtomicBool>) {
        self.post(ticket, Letter::Wake(queued));
    }
}

struct Conn {
    socket: TcpStream,
    protocol: Protocol,
    peer: SocketAddr,
    id: u64,
    /// The socket may have more to read / room to write (edge-triggered:
    /// known until a call says `WouldBlock`).
    readable: bool,
    writable: bool,
    /// With HTTPS: the connection's TLS state, between socket and protocol.
    #[cfg(feature = "tls")]
    tls: Option<Box<super::tls::Tls>>,
    /// With HTTPS, while rustls holds encrypted output the socket has not
    /// taken: when it must have left (the protocol, which handed it over,
    /// no longer times it).
    #[cfg(feature = "tls")]
    drain_by: Option<Instant>,
}

/// One event loop, built by the server before it runs.
pub(crate) struct Worker {
    poll: Poll,
    listener: Option<TcpListener>,
    postbox: Arc<Postbox>,
    mailbox: Arc<dyn Mailbox>,
    shared: Arc<ServerState>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    next_id: u64,
    /// Connections to serve again without waiting for an event.
    again: Vec<usize>,
    /// Accepting failed (out of descriptors): try again at this time.
    accept_retry: Option<Instant>,
}

/// What serving a connection left.
#[derive(PartialEq, Eq)]
enum Left {
    Open,
    /// More to do: serve again soon.
    Busy,
    Closed,
}

impl Worker {
    /// A loop accepting from `listener`.
    pub(crate) fn new(
        listener: std::net::TcpListener,
        shared: Arc<ServerState>,
    ) -> io::Result<Worker> {
        listener.set_nonblocking(true)?;
        let mut listener = TcpListener::from_std(listener);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let postbox = Arc::new(Postbox {
            queue: Mutex::new(Vec::new()),
            waker,
        });
        Ok(Worker {
            poll,
            listener: Some(listener),
            mailbox: Arc::clone(&postbox) as Arc<dyn Mailbox>,
            postbox,
            shared,
            conns: Vec::new(),
            free: Vec::new(),
            next_id: 0,
            again: Vec::new(),
            accept_retry: None,
        })
    }

    /// The waker that interrupts this loop's `poll` (for stopping).
    pub(crate) fn waker(&self) -> Arc<Waker> {
        Arc::clone(&self.postbox.waker)
    }

    /// Serves until the server stops, then for at most `grace` while
    /// requests are in flight. Returns how many connections were still
    /// open at the end.
    pub(crate) fn run(mut self, grace: Duration) -> usize {
        let mut events = Events::with_capacity(1024);
        let mut scratch = Scratch::default();
        let mut next_sweep = Instant::now() + SWEEP;
        let mut stop_by: Option<Instant> = None;
        loop {
            let now = Instant::now();
            if stop_by.is_none() && self.shared.is_stopping() {
                stop_by = Some(now + grace);
                self.begin_stop(&mut scratch, now);
            }
            if let Some(until) = stop_by
                && (self.open() == 0 || now >= until)
            {
                for conn in self.conns.iter().flatten() {
                    reset_if_cut_short(conn);
                }
                return self.open();
            }
            let mut timeout = next_sweep.saturating_duration_since(now);
            if !self.again.is_empty() {
                timeout = Duration::ZERO;
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout))
                && e.kind() != io::ErrorKind::Interrupted
            {
                warn!("event loop: poll failed: {e}");
            }
            let now = Instant::now();
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(now),
                    WAKER => self.deliver(&mut scratch, now),
                    Token(slot) => {
                        if let Some(Some(conn)) = self.conns.get_mut(slot) {
                            conn.readable |= event.is_readable() || event.is_read_closed();
                            conn.writable |= event.is_writable() || event.is_error();
                            self.serve(slot, &mut scratch, now);
                        }
                    }
                }
            }
            for slot in std::mem::take(&mut self.again) {
                self.serve(slot, &mut scratch, now);
            }
            if now >= next_sweep {
                next_sweep = now + SWEEP;
                self.sweep(&mut scratch, now);
            }
            self.shared.handler.flush();
        }
    }

    fn open(&self) -> usize {
        self.conns.len() - self.free.len()
    }

    fn begin_stop(&mut self, scratch: &mut Scratch, now: Instant) {
        if let Some(mut listener) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut listener);
        }
        for slot in 0..self.conns.len() {
            if let Some(conn) = &mut self.conns[slot] {
                conn.protocol.stop();
                self.serve(slot, scratch, now);
            }
        }
    }

    /// Accepts every waiting connection; past the cap, answers 503.
    fn accept(&mut self, now: Instant) {
        if self.accept_retry.is_some_and(|at| now < at) {
            return;
        }
        self.accept_retry = None;
        loop {
            let Some(listener) = &self.listener else {
                return;
            };
            match listener.accept() {
                Ok((socket, peer)) => self.admit(socket, peer, now),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Typically out of file descriptors: the backlog holds
                    // the client; the sweep tries again shortly.
                    warn!("accept failed: {e}");
                    self.accept_retry = Some(now + Duration::from_millis(10));
                    return;
                }
            }
        }
    }

    fn admit(&mut self, mut socket: TcpStream, peer: SocketAddr, now: Instant) {
        let shared = &*self.shared;
        if shared.open.fetch_add(1, Ordering::Relaxed) >= shared.limits.max_connections {
            shared.open.fetch_sub(1, Ordering::Relaxed);
            // Over TLS a 503 in plain text could not be read: the
            // connection is closed at once.
            #[cfg(feature = "tls")]
            if shared.https.is_some() {
                discard_input(&mut socket);
                access::log_rejected(0, peer);
                return;
            }
            access::log_rejected(reject(socket), peer);
            return;
        }
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let registered = self.poll.registry().register(
            &mut socket,
            Token(slot),
            Interest::READABLE | Interest::WRITABLE,
        );
        if let Err(e) = registered {
            warn!("cannot watch a new connection: {e}");
            self.free.push(slot);
            shared.open.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let _ = socket.set_nodelay(true);
        // Writable only while under 64 KiB waits unsent in the kernel (not
        // the megabytes its send buffer may grow to): what a client that
        // reads slowly or not at all makes the server hold stays small,
        // and a streamed body's write timeout measures what the client
        // takes, not how fast the kernel's buffer drains.
        let _ = socket2::SockRef::from(&socket).set_tcp_notsent_lowat(NOTSENT_LOWAT);
        #[cfg(feature = "tls")]
        let tls = match &shared.https {
            None => None,
            Some(https) => match super::tls::Tls::new(https.current()) {
                Some(tls) => Some(Box::new(tls)),
                None => {
                    warn!("cannot set up TLS for a new connection");
                    let _ = self.poll.registry().deregister(&mut socket);
                    self.free.push(slot);
                    shared.open.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
            },
        };
        self.next_id += 1;
        self.conns[slot] = Some(Conn {
            socket,
            protocol: Protocol::new(shared.limits.clone(), peer, now),
            peer,
            id: self.next_id,
            readable: false,
            writable: false,
            #[cfg(feature = "tls")]
            tls,
            #[cfg(feature = "tls")]
            drain_by: None,
        });
    }

    /// Hands completed deferred responses and stream wakes to their
    /// connections; those for a connection that has gone are dropped (and
    /// its wakers stay quiet: their flag is never cleared).
    fn deliver(&mut self, scratch: &mut Scratch, now: Instant) {
        let letters = std::mem::take(&mut *lock(&self.postbox.queue));
        for (ticket, letter) in letters {
            let Some(Some(conn)) = self.conns.get_mut(ticket.slot) else {
                continue;
            };
            if conn.id != ticket.conn {
                continue;
            }
            match letter {
                Letter::Response(response) => {
                    conn.protocol.complete(ticket.request, response, now);
                }
                Letter::Wake(queued) => {
                    deferred::taken(&queued);
                    conn.protocol.resume(ticket.request, now);
                }
            }
            self.serve(ticket.slot, scratch, now);
        }
    }

    /// Serves every connection whose deadline has passed.
    fn sweep(&mut self, scratch: &mut Scratch, now: Instant) {
        if self.accept_retry.is_some() {
            self.accept(now);
        }
        for slot in 0..self.conns.len() {
            let due = self.conns[slot]
                .as_ref()
                .and_then(Conn::deadline)
                .is_some_and(|d| now >= d);
            if due {
                self.serve(slot, scratch, now);
            }
        }
    }

    fn serve(&mut self, slot: usize, scratch: &mut Scratch, now: Instant) {
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        let home = Home {
            mailbox: &self.mailbox,
            slot,
            conn: conn.id,
        };
        // Handlers run under their own catch_unwind (a 500); this one is
        // the engine's safety net: a bug in it closes one connection, not
        // the loop and every connection on it.
        let served = catch_unwind(AssertUnwindSafe(|| {
            serve(conn, &self.shared, &home, scratch, now)
        }));
        let left = served.unwrap_or_else(|_| {
            error!("engine bug while serving a connection; closed it");
            Left::Closed
        });
        match left {
            Left::Open => {}
            Left::Busy => self.again.push(slot),
            Left::Closed => {
                if let Some(mut conn) = self.conns[slot].take() {
                    reset_if_cut_short(&conn);
                    let _ = self.poll.registry().deregister(&mut conn.socket);
                }
                self.free.push(slot);
                self.shared.open.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// Reads, runs handlers and writes for one connection until it would
/// block, or has had its share.
fn serve(
    conn: &mut Conn,
    shared: &ServerState,
    home: &Home<'_>,
    scratch: &mut Scratch,
    now: Instant,
) -> Left {
    let mut rounds = 0;
    let mut written = 0;
    loop {
        session::drive(
            &mut conn.protocol,
            &*shared.handler,
            conn.peer,
            Some(home),
            now,
        );
        // Output that leaves may let buffered pipelined requests go on (or
        // a stopping connection close): the protocol gets another turn even
        // with nothing new to read.
        let mut drained = false;
        #[cfg(feature = "tls")]
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
        #[cfg(feature = "tls")]
        if conn.tls.as_ref().is_some_and(|tls| tls.has_output()) {
            if conn.protocol.is_closed() && conn.protocol.cut_short() {
                return Left::Closed;
            }
            let by = *conn
                .drain_by
                .get_or_insert(now + shared.limits.write_timeout);
            if now >= by {
                return Left::Closed;
            }
            conn.writable = false;
            return Left::Open;
        }
        #[cfg(feature = "tls")]
        {
            conn.drain_by = None;
        }
        if conn.protocol.take_shutdown() {
            conn.shut_down();
        }
        if conn.protocol.is_closed() {
            #[cfg(feature = "tls")]
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
        #[cfg(feature = "tls")]
        if let Some(tls) = &mut conn.tls {
            match tls.read(
                &mut conn.socket,
                buffer,
                &conn.peer,
                &shared.failed_handshakes,
            ) {
                super::tls::Read::Bytes(n) => conn.protocol.received(&buffer[..n], now),
                super::tls::Read::Blocked => conn.readable = false,
                super::tls::Read::Closed => {
                    conn.readable = false;
                    conn.protocol.closed_by_peer();
                }
                super::tls::Read::PlainHttp => {
                    // What it sent is read first, so that the close does
                    // not reset the connection and destroy the answer.
                    discard_input(&mut conn.socket);
                    let _ = conn.socket.write(super::tls::PLAIN_HTTP);
                    let _ = conn.socket.shutdown(Shutdown::Write);
                    return Left::Closed;
                }
                super::tls::Read::Failed => return Left::Closed,
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
                // `WouldBlock` (one syscall per request saved).
                conn.readable = n == buffer.len();
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
    fn deadline(&self) -> Option<Instant> {
        let protocol = self.protocol.deadline();
        #[cfg(feature = "tls")]
        if let Some(by) = self.drain_by {
            return Some(protocol.map_or(by, |at| at.min(by)));
        }
        protocol
    }

    /// Whether closing now leaves the client short of what it was owed:
    /// the protocol's view, and with HTTPS encrypted output still held.
    fn cut_short(&self) -> bool {
        #[cfg(feature = "tls")]
        if self.tls.as_ref().is_some_and(|tls| tls.has_output()) {
            return true;
        }
        self.protocol.cut_short()
    }

    /// Writes of the protocol's output what the socket (through TLS, with
    /// HTTPS) takes now.
    fn write_out(&mut self) -> io::Result<usize> {
        #[cfg(feature = "tls")]
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
        #[cfg(feature = "tls")]
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
        #[cfg(feature = "tls")]
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
fn reset_if_cut_short(conn: &Conn) {
    if conn.cut_short() {
        let _ = socket2::SockRef::from(&conn.socket).set_linger(Some(Duration::ZERO));
    }
}

/// Reads (and drops) what a connection being answered and closed at once
/// already sent, at most 16 KiB: closing with unread input would reset the
/// connection and destroy the answer before the client reads it.
fn discard_input(socket: &mut TcpStream) {
    let mut scratch = [0u8; 4096];
    for _ in 0..4 {
        if !matches!(socket.read(&mut scratch), Ok(n) if n > 0) {
            break;
        }
    }
}

/// Answers a connection past the cap with a 503 at once and closes it;
/// returns the bytes of the answer.
fn reject(mut socket: TcpStream) -> usize {
    discard_input(&mut socket);
    let mut out = Vec::with_capacity(160);
    Response::error(503, "server is at its connection limit, retry shortly")
        .with_header("Retry-After", "1")
        .write_to(&mut out, false, Persist::Close, Delimit::Chunked);
    let _ = socket.write(&out);
    let _ = socket.shutdown(Shutdown::Write);
    out.len()
}
