//! One connection's HTTP/1.1 protocol as a state machine, with no socket in
//! it (sans-I/O): bytes in, parsed requests and deadlines out; responses
//! in, bytes out. This file owns the state, the input side (heads, bodies
//! asked for, deadlines) and the handler's side; `output` queues answers
//! and decides what follows them (the next head, close, linger), and
//! `stream` pulls streamed bodies.
//!
//! The driver (an event loop, or the replay harness) feeds what it reads
//! with [`Protocol::received`] and [`Protocol::closed_by_peer`], asks
//! [`Protocol::poll`] for the next thing to do, runs the handler when told
//! a request is ready, answers with [`Protocol::answer`] (or later with
//! [`Protocol::complete`]), writes [`Protocol::output`] as the socket takes
//! it and reports [`Protocol::sent`]. It sleeps until new input, writable
//! space or [`Protocol::deadline`], whichever comes first; `poll` itself
//! acts on deadlines that have passed. What is parsed and answered depends
//! on nothing but the bytes received so far and the time, so how the
//! input was cut into reads never changes it.
//!
//! Requests are answered strictly in order: a pipelined head is parsed only
//! once the previous response is queued, and only while less than
//! `OUT_HIGH` bytes of output wait for the client; reading stops too, so a
//! client that does not read its answers holds at most that much. Every
//! wait has a deadline: the head timeout (from accept, then from the first
//! byte of each later head), the idle timeout between requests, the body
//! timeout (silence while a body arrives), and the write timeout for all of
//! a response to leave. A connection with nothing in flight keeps at most
//! `IDLE_KEEP` bytes of buffers (so a keep-alive request costs no
//! allocation for them), under 2 KiB in all.
//!
//! What it does not do: touch a socket, keep its own time (the driver
//! passes `now` in; only the access line's duration reads the clock), run
//! the handler (`session` does), or decode a body the handler did not ask
//! for (while a response streams, what follows is only held, a head's
//! worth at most).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::Limits;
use super::body::BodyError;
use super::head::{Head, HeadError};
use super::inbox::Inbox;
use super::request::Notes;
use super::response::Response;

#[cfg(test)]
mod hold_tests;
mod output;
mod stream;
#[cfg(test)]
mod tests;

use stream::Streaming;

/// Lingering close: at most this long, and at most this many bytes.
const LINGER_TIME: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 1 << 20;
/// Buffer bytes an idle connection may keep for its next request; past
/// this it gives them all back.
const IDLE_KEEP: usize = 1024;
/// Pipelined requests are parsed only while less output than this waits.
const OUT_HIGH: usize = 64 * 1024;
/// A streamed body is pulled in pieces of about this many bytes, the next
/// one once less than this waits to be sent.
const CHUNK: usize = 32 * 1024;

/// What the driver should do next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// A request head is ready: run the handler, then `answer`.
    Request,
    /// The body the handler asked for is in (or failed): run the handler
    /// again, then `answer`.
    Body,
    /// Nothing until more input, writable space, a completion or the
    /// deadline.
    Wait,
}

/// How the handler answered.
#[derive(Debug)]
pub(crate) enum Handled {
    /// The response, to send now.
    Now(Response),
    /// The handler deferred: `complete` brings the response, to be held
    /// for this many milliseconds (the placeholder's `held_for`).
    Later(u32),
    /// The handler asked for a body still arriving: its response is
    /// dropped, and it runs again when the body is in.
    NeedsBody,
}

/// Where a connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the next head (idle while nothing is buffered).
    Head,
    /// Receiving a body the handler asked for.
    Body,
    /// Waiting for a deferred response, or for a held one's time
    /// (`Protocol::held`).
    Waiting,
    /// Sending a streamed body (`Protocol::streaming` has it).
    Streaming,
    /// The last response is queued; close once it is sent (lingering when
    /// input may still come).
    Closing { linger: bool },
    /// Our side is shut; discarding what the client still sends.
    Lingering,
    /// Done: the driver drops the connection.
    Closed,
}

/// One connection's protocol state. See the module header.
#[derive(Debug)]
pub(crate) struct Protocol {
    limits: Limits,
    peer: SocketAddr,
    phase: Phase,
    head: Head,
    inbox: Inbox,
    out: Vec<u8>,
    /// Bytes of `out` already sent.
    sent: usize,
    /// The streamed body being sent, in `Phase::Streaming`.
    streaming: Option<Streaming>,
    /// A streamed body was cut short: the connection must be reset.
    cut: bool,
    /// The hold, in milliseconds, for the deferred response awaited.
    hold: u32,
    /// A response held until `deadline` (in `Phase::Waiting`), and whether
    /// the driver has yet to be told when (`take_timer`).
    held: Option<Box<Response>>,
    timer: bool,
    /// Requests whose heads were parsed; the current one's number.
    requests: u64,
    /// What the handler keeps across requests, and the shared word that
    /// tells a deferred answer its client left.
    notes: Notes,
    /// When the current request's head was parsed (for the access log and
    /// the handler's `Request::started`).
    started: Instant,
    /// The deadline of the current wait for the client (head, idle, body
    /// or linger), and whether it is the idle one (expiry closes quietly).
    deadline: Option<Instant>,
    idle: bool,
    /// All of the queued output must have left by then.
    write_deadline: Option<Instant>,
    peer_closed: bool,
    stopping: bool,
    /// Our side should be shut down now (for lingering).
    shutdown_due: bool,
    lingered: usize,
}

impl Protocol {
    /// A connection accepted at `now`: its first head is due within the
    /// head timeout.
    pub(crate) fn new(limits: Limits, peer: SocketAddr, now: Instant) -> Protocol {
        let deadline = Some(now + limits.head_timeout);
        Protocol {
            inbox: Inbox::new(limits.max_body),
            limits,
            peer,
            phase: Phase::Head,
            head: Head::default(),
            out: Vec::new(),
            sent: 0,
            streaming: None,
            cut: false,
            hold: 0,
            held: None,
            timer: false,
            requests: 0,
            notes: Notes::default(),
            started: now,
            deadline,
            idle: false,
            write_deadline: None,
            peer_closed: false,
            stopping: false,
            shutdown_due: false,
            lingered: 0,
        }
    }

    /// Bytes read from the client.
    pub(crate) fn received(&mut self, bytes: &[u8], now: Instant) {
        match self.phase {
            Phase::Closed => {}
            Phase::Lingering => {
                self.lingered += bytes.len();
                if self.lingered >= LINGER_BYTES {
                    self.phase = Phase::Closed;
                }
            }
            _ => {
                self.inbox.receive(bytes);
                match self.phase {
                    Phase::Head if self.idle => {
                        self.wait_for_client(now + self.limits.head_timeout)
                    }
                    Phase::Body => self.wait_for_client(now + self.limits.body_timeout),
                    _ => {}
                }
            }
        }
    }

    /// The client closed its sending side (or the connection failed).
    pub(crate) fn closed_by_peer(&mut self) {
        self.peer_closed = true;
        if self.phase == Phase::Lingering {
            self.phase = Phase::Closed;
        }
    }

    /// The server is stopping: requests in flight finish, and so does one
    /// already received (their responses say `Connection: close`); a
    /// connection with none closes now, and an idle stream (a live feed
    /// between events) ends.
    pub(crate) fn stop(&mut self, now: Instant) {
        self.stopping = true;
        self.release(now);
        self.end_idle_stream(now);
        if self.phase == Phase::Head && self.output().is_empty() && self.inbox.input().is_empty() {
            self.phase = Phase::Closed;
        }
    }

    /// The next thing to do at `now`; acts on expired deadlines.
    pub(crate) fn poll(&mut self, now: Instant) -> Action {
        if self.write_deadline.is_some_and(|d| now >= d) {
            self.phase = Phase::Closed;
        }
        let expired = self.deadline.is_some_and(|d| now >= d);
        match self.phase {
            Phase::Head => self.next_head(now, expired),
            Phase::Body => {
                self.inbox.decode();
                if self.inbox.awaits_body() {
                    if expired {
                        self.inbox.fail(BodyError::Timeout);
                    } else if self.peer_closed {
                        self.inbox.fail(BodyError::Closed);
                    } else {
                        return Action::Wait;
                    }
                }
                self.deadline = None;
                Action::Body
            }
            // The client left (or half-closed) while its answer waited: a
            // held answer is dropped at once; one still to come is told,
            // so that work done only for it may be skipped, and is written
            // if it comes all the same (a half-closed client may read it).
            Phase::Waiting if self.peer_closed && self.held.is_some() => {
                self.abandon(now);
                Action::Wait
            }
            Phase::Waiting if self.peer_closed => {
                self.tell_left();
                Action::Wait
            }
            Phase::Waiting if expired => {
                self.release(now);
                Action::Wait
            }
            Phase::Lingering if expired => {
                self.phase = Phase::Closed;
                Action::Wait
            }
            // The client has gone (or shut its sending side, which a stream
            // never asks for): a stream that owes nothing ends as at a stop.
            // One still owing its body goes on until written or cut short.
            Phase::Streaming if self.peer_closed => {
                self.end_idle_stream(now);
                Action::Wait
            }
            _ => Action::Wait,
        }
    }

    fn next_head(&mut self, now: Instant, expired: bool) -> Action {
        if self.output().len() >= OUT_HIGH {
            return Action::Wait; // the client reads its answers first
        }
        if self.inbox.input().is_empty() {
            // Nothing of a head yet: closing loses nothing.
            if expired || self.peer_closed || self.stopping {
                self.close(false, now);
            }
            return Action::Wait;
        }
        // Never more than a head's worth: what lies past it must not change
        // the verdict (a read that stopped there would not have seen it).
        let input = self.inbox.input();
        let window = &input[..input.len().min(self.limits.max_head)];
        match self.head.parse_into(window, self.limits.max_head) {
            Ok(Some(len)) => {
                self.inbox.consume(len);
                match self.head.framing() {
                    Ok(framing) => {
                        self.inbox.start(framing);
                        self.requests += 1;
                        self.started = now;
                        self.deadline = None;
                        Action::Request
                    }
                    Err(e) => self.refused(e, now),
                }
            }
            Ok(None) if self.peer_closed || self.stopping => {
                self.close(false, now);
                Action::Wait
            }
            Ok(None) if expired => {
                self.refuse(408, "request head timed out", now);
                Action::Wait
            }
            Ok(None) => Action::Wait,
            Err(e) => self.refused(e, now),
        }
    }

    fn refused(&mut self, e: HeadError, now: Instant) -> Action {
        self.refuse(e.status(), e.message(), now);
        Action::Wait
    }

    /// The head and the inbox, to build the handler's `Request` from.
    pub(crate) fn request_parts(&mut self) -> (&Head, &mut Inbox, &mut Notes) {
        (&self.head, &mut self.inbox, &mut self.notes)
    }

    /// The current request's number, for deferring its response.
    pub(crate) fn request_number(&self) -> u64 {
        self.requests
    }

    /// When the current request's head was parsed.
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// The handler's answer to the current request.
    pub(crate) fn answer(&mut self, answer: Handled, now: Instant) {
        self.owe_continue(now);
        match answer {
            Handled::Now(response) => self.respond_or_hold(response, now),
            Handled::Later(hold) => {
                self.inbox.free_body();
                self.phase = Phase::Waiting;
                self.deadline = None;
                self.hold = hold;
            }
            Handled::NeedsBody => {
                self.phase = Phase::Body;
                self.wait_for_client(now + self.limits.body_timeout);
            }
        }
    }

    /// A deferred response arrived for request number `request`; ignored
    /// unless that request is still waiting for it.
    pub(crate) fn complete(&mut self, request: u64, response: Response, now: Instant) {
        if self.phase == Phase::Waiting && request == self.requests && self.held.is_none() {
            self.respond_or_hold(response, now);
        }
    }

    fn wait_for_client(&mut self, deadline: Instant) {
        self.idle = false;
        self.deadline = Some(deadline);
    }

    /// Whether the driver should read more input now.
    pub(crate) fn wants_input(&self) -> bool {
        match self.phase {
            Phase::Head => {
                !self.peer_closed
                    && self.output().len() < OUT_HIGH
                    && self.inbox.input().len() < self.limits.max_head
            }
            Phase::Body => !self.peer_closed,
            // Read while a body streams, though nothing is parsed until it
            // ends: a pipelined request waits in the inbox (a head's worth
            // at most), and the client's close is seen at once, so an idle
            // stream whose client has gone frees its slot (`poll`) instead
            // of holding it until a heartbeat's write fails.
            Phase::Streaming => {
                !self.peer_closed && self.inbox.input().len() < self.limits.max_head
            }
            // The same while an answer is held or still to come (a
            // deferred one): a client that leaves frees its slot at once,
            // and work done for it alone may be skipped (`abandon`).
            Phase::Waiting => !self.peer_closed && self.inbox.input().len() < self.limits.max_head,
            Phase::Lingering => true,
            _ => false,
        }
    }

    /// When `poll` next has something to do without new input.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match (self.deadline, self.write_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the connection is done and can be dropped.
    pub(crate) fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }
}
