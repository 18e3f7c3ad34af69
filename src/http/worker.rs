//! One event loop: a thread that owns its connections, on non-blocking
//! sockets, with readiness from `mio` (epoll, edge-triggered).
//!
//! Every loop holds a copy of the one listening socket and accepts from
//! it, so connections spread over the loops that are free to take them.
//! A connection lives in one slot of its loop for its whole life; the
//! loop reads what the socket has (while the protocol wants input), runs
//! the handlers inline, and writes as the socket takes it. A connection
//! that keeps the loop busy is served (by `conn::serve`) at most
//! `MAX_ROUNDS` reads, or `WRITE_SHARE` bytes of output (a streamed body
//! never ends on its own while the client reads fast), at a time, then
//! the others get their turn.
//!
//! Deadlines are checked by a sweep every `SWEEP` (they are whole seconds;
//! a sweep of 10,000 connections is a few microseconds). A response the
//! handler asked to hold (`Response::held_for`) is due to the millisecond:
//! its time goes on the loop's timer heap, whose earliest entry shortens
//! `poll`'s timeout, so a held answer costs no thread and no wake-up
//! before it is due. An entry names the slot and the connection's id: one
//! for a connection that has gone (or already sent its answer) does
//! nothing. A connection holds at most one answer at a time, so the heap
//! holds about one entry per connection at most. Deferred
//! responses, and wakes for streams that said they were pending, arrive
//! through the loop's mailbox, which the loop reads after every `poll`
//! and after its turn's flush (with `--sync never` the flush's answers
//! are its own letters), and whose waker interrupts a `poll` that waits
//! (see `Mail`); until
//! woken, a pending stream's connection waits for events like any other.
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

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use log::{error, warn};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use super::access;
use super::conn::{Conn, Left, Scratch, reject, reset_if_cut_short, serve};
use super::date;
use super::deferred::{self, Errand, Mailbox, Ticket};
use super::protocol::Protocol;
use super::response::Response;
use super::session::{self, Home};
use super::state::ServerState;
use crate::lock::lock;
use crate::transport::Https;

const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX);
/// How often deadlines are checked.
const SWEEP: Duration = Duration::from_millis(100);
/// Unsent bytes the kernel may hold for a connection before it stops
/// taking more (`TCP_NOTSENT_LOWAT`).
const NOTSENT_LOWAT: u32 = 64 * 1024;
/// The most letters the postbox's spare list keeps room for.
const SPARE_LETTERS: usize = 4096;

/// A loop's mailbox: responses completed and streams woken by other
/// threads, and the waker that tells the loop about them.
pub(crate) struct Postbox {
    /// `None` once the loop has stopped.
    queue: Mutex<Option<Mail>>,
    waker: Arc<Waker>,
    /// With HTTPS (every connection of the loop is then TLS): what a
    /// response carries over it (`--hsts`).
    https: Option<Https>,
}

/// The letters waiting for a loop, and whether a new one must wake it.
#[derive(Default)]
struct Mail {
    letters: Vec<(Ticket, Letter)>,
    /// The loop waits in `poll`, or is about to, with no letter waiting:
    /// the next letter wakes it. While it runs (or once one woke it) a
    /// letter needs no wake-up, whose system call and extra `poll` cost
    /// as much as a small request: the loop looks for letters after each
    /// `poll` (and polls without waiting while some wait), which with
    /// `--sync never` are its own turn's answers.
    asleep: bool,
}

/// What another thread sends a connection.
enum Letter {
    /// Its deferred response.
    Response(Response),
    /// Work that makes its deferred response, to finish here.
    Errand(Box<dyn Errand>),
    /// Its stream has more; the flag is the waker's `queued`.
    Wake(Arc<AtomicBool>),
}

impl Postbox {
    fn post(&self, ticket: Ticket, letter: Letter) {
        let mut queue = lock(&self.queue);
        let Some(mail) = &mut *queue else {
            drop(queue);
            return undelivered(letter);
        };
        mail.letters.push((ticket, letter));
        let wake = std::mem::take(&mut mail.asleep);
        // Woken once the lock is free: a loop that ran at once would
        // otherwise find it held, and wait for this thread.
        drop(queue);
        if wake {
            let _ = self.waker.wake();
        }
    }

    /// The loop is about to `poll`: whether letters wait (then it polls
    /// without waiting); else the next letter wakes it.
    fn sleep(&self) -> bool {
        match &mut *lock(&self.queue) {
            Some(mail) if mail.letters.is_empty() => {
                mail.asleep = true;
                false
            }
            Some(_) => true,
            None => false,
        }
    }

    /// The loop has stopped: what waits, and whatever comes later, is
    /// undelivered.
    fn close(&self) {
        let waiting = lock(&self.queue).take();
        for (_, letter) in waiting.into_iter().flat_map(|mail| mail.letters) {
            undelivered(letter);
        }
    }
}

/// A letter for a connection that has gone, or a loop that has stopped:
/// an errand is finished all the same, its response dropped (the work that
/// makes it was promised once the change was made: a create's announcement
/// to the webhooks, the request counted in the metrics), on the loop or,
/// once it has stopped, on the sender's thread.
fn undelivered(letter: Letter) {
    if let Letter::Errand(errand) = letter {
        let _ = finish(errand);
    }
}

/// An errand's response; as a handler's panic is, one here is a 500.
fn finish(errand: Box<dyn Errand>) -> Response {
    catch_unwind(AssertUnwindSafe(|| errand.finish())).unwrap_or_else(|_| {
        error!("a deferred response's work panicked; answered 500");
        Response::error(500, "internal error")
    })
}

impl Mailbox for Postbox {
    fn deliver(&self, ticket: Ticket, response: Response) {
        let response = session::secured(response, self.https.as_ref());
        self.post(ticket, Letter::Response(response));
    }

    fn run(&self, ticket: Ticket, errand: Box<dyn Errand>) {
        self.post(ticket, Letter::Errand(errand));
    }

    fn wake(&self, ticket: Ticket, queued: Arc<AtomicBool>) {
        self.post(ticket, Letter::Wake(queued));
    }
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
    /// Held responses: when each is due, its slot and connection id.
    timers: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    /// The postbox's other list: swapped with its queue to take the
    /// letters, so each keeps its room (no list grown from nothing on the
    /// committer's thread and freed here, a batch at a time).
    letters: Vec<(Ticket, Letter)>,
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
            queue: Mutex::new(Some(Mail::default())),
            waker,
            https: shared.https.clone(),
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
            timers: BinaryHeap::new(),
            letters: Vec::new(),
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
                for conn in self.conns.iter_mut().flatten() {
                    conn.protocol.dropped(now);
                    reset_if_cut_short(conn);
                }
                self.postbox.close();
                return self.open();
            }
            let mut timeout = next_sweep.saturating_duration_since(now);
            if let Some(Reverse((at, ..))) = self.timers.peek() {
                timeout = timeout.min(at.saturating_duration_since(now));
            }
            // Only a poll that may wait marks the loop asleep: letters
            // that come meanwhile need no wake-up.
            if !self.again.is_empty() || timeout.is_zero() || self.postbox.sleep() {
                timeout = Duration::ZERO;
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout))
                && e.kind() != io::ErrorKind::Interrupted
            {
                warn!("event loop: poll failed: {e}");
            }
            let now = Instant::now();
            date::tick(now);
            // Letters, whether one woke the loop or they came while it ran.
            let _ = self.deliver(&mut scratch, now);
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(now),
                    // Taken above; a wake of its own is for stopping.
                    WAKER => {}
                    Token(slot) => {
                        if let Some(Some(conn)) = self.conns.get_mut(slot) {
                            conn.readable |= event.is_readable() || event.is_read_closed();
                            conn.hung_up |= event.is_read_closed();
                            conn.writable |= event.is_writable() || event.is_error();
                            self.serve(slot, &mut scratch, now);
                        }
                    }
                }
            }
            for slot in std::mem::take(&mut self.again) {
                self.serve(slot, &mut scratch, now);
            }
            self.fire(&mut scratch, now);
            if now >= next_sweep {
                next_sweep = now + SWEEP;
                self.sweep(&mut scratch, now);
            }
            self.shared.handler.flush();
            // With `--sync never` that flush answered the turn's changes,
            // as letters to this loop: sent now, not after one more
            // `poll`. A pipelined request that serves is flushed at once
            // too; anything later waits for the next turn.
            if self.deliver(&mut scratch, now) {
                self.shared.handler.flush();
            }
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
                conn.protocol.stop(now);
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
            if shared.https.is_some() {
                super::conn::discard_input(&mut socket);
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
        let tls = match &shared.https {
            None => None,
            Some(https) => match https.accept() {
                Some(tls) => Some(tls),
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
            hung_up: false,
            tls,
        });
    }

    /// Hands completed deferred responses and stream wakes to their
    /// connections; those for a connection that has gone are undelivered
    /// (and its wakers stay quiet: their flag is never cleared). Whether
    /// any letter was there.
    fn deliver(&mut self, scratch: &mut Scratch, now: Instant) -> bool {
        let mut letters = std::mem::take(&mut self.letters);
        if let Some(mail) = &mut *lock(&self.postbox.queue) {
            mail.asleep = false;
            std::mem::swap(&mut mail.letters, &mut letters);
        }
        let any = !letters.is_empty();
        for (ticket, letter) in letters.drain(..) {
            let conn = match self.conns.get_mut(ticket.slot) {
                Some(Some(conn)) if conn.id == ticket.conn => conn,
                _ => {
                    undelivered(letter);
                    continue;
                }
            };
            match letter {
                Letter::Response(response) => {
                    conn.protocol.complete(ticket.request, response, now);
                }
                Letter::Errand(errand) => {
                    let response = session::secured(finish(errand), self.postbox.https.as_ref());
                    conn.protocol.complete(ticket.request, response, now);
                }
                Letter::Wake(queued) => {
                    deferred::taken(&queued);
                    conn.protocol.resume(ticket.request, now);
                }
            }
            self.serve(ticket.slot, scratch, now);
        }
        if letters.capacity() <= SPARE_LETTERS {
            self.letters = letters;
        }
        any
    }

    /// Serves the connections whose held response is due.
    fn fire(&mut self, scratch: &mut Scratch, now: Instant) {
        while let Some(&Reverse((at, slot, id))) = self.timers.peek()
            && at <= now
        {
            self.timers.pop();
            if let Some(Some(conn)) = self.conns.get(slot)
                && conn.id == id
            {
                self.serve(slot, scratch, now);
            }
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
        if left != Left::Closed
            && let Some(at) = conn.protocol.take_timer()
        {
            self.timers.push(Reverse((at, slot, conn.id)));
        }
        match left {
            Left::Open => {}
            Left::Busy => self.again.push(slot),
            Left::Closed => {
                if let Some(mut conn) = self.conns[slot].take() {
                    conn.protocol.dropped(now);
                    reset_if_cut_short(&conn);
                    let _ = self.poll.registry().deregister(&mut conn.socket);
                }
                self.free.push(slot);
                self.shared.open.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}
