//! One connection's HTTP/1.1 protocol as a state machine, with no socket in
//! it (sans-I/O): bytes in, parsed requests and deadlines out; responses
//! in, bytes out.
//!
//! The driver (an event loop, or the replay harness) feeds what it reads
//! with [`Protocol::received`] and [`Protocol::closed_by_peer`], asks
//! [`Protocol::poll`] for the next thing to do, runs the handler when told
//! a request is ready, answers with [`Protocol::answer`] (or later with
//! [`Protocol::complete`]), writes [`Protocol::output`] as the socket takes
//! it and reports [`Protocol::sent`]. It sleeps until new input, writable
//! space or [`Protocol::deadline`], whichever comes first; `poll` itself
//! acts on deadlines that have passed. Only `poll` and `answer` produce
//! output, and they depend on nothing but the bytes received so far and
//! the time, so how the input was cut into reads never changes what is
//! parsed or answered.
//!
//! A streamed body (`Response::stream`) is pulled a chunk at a time: the
//! next chunk is made only once less than `CHUNK` bytes of output wait, so
//! a client that does not read holds about one chunk. While it streams,
//! each chunk must leave within the write timeout (the timeout bounds the
//! client's pace, not the length of the whole body), and nothing else is
//! read or parsed on the connection. A stream that answers `Fill::Pending`
//! (its pieces are made on another thread) is not pulled again until the
//! driver reports its waker woken with [`Protocol::resume`]; meanwhile
//! what it gave keeps leaving, and the write deadline of its last piece
//! keeps running, so one that never wakes is cut short like a client that
//! stops reading.
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
//! The connection is closed when the client asks, when a body was left
//! unread (never drained: it may be unbounded), when the head was refused,
//! and when the server is stopping. Before closing with input possibly
//! unread we "linger" (our side shut, reading and discarding for at most
//! `LINGER_TIME` and `LINGER_BYTES`) so the kernel does not answer the
//! client's remaining bytes with a reset that would destroy our last
//! response in flight.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use log::info;

use super::Limits;
use super::access;
use super::body::BodyError;
use super::chunk;
use super::head::{Head, HeadError};
use super::inbox::Inbox;
use super::response::{Delimit, Fill, Persist, Response, Stream};

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
pub(crate) enum Event {
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
pub(crate) enum Answer {
    /// The response, to send now.
    Now(Response),
    /// The handler deferred: `complete` brings the response.
    Later,
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
    /// Waiting for a deferred response.
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
    /// Requests whose heads were parsed; the current one's number.
    requests: u64,
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
            requests: 0,
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
    /// connection with none closes now.
    pub(crate) fn stop(&mut self) {
        self.stopping = true;
        if self.phase == Phase::Head && self.output().is_empty() && self.inbox.input().is_empty() {
            self.phase = Phase::Closed;
        }
    }

    /// The next thing to do at `now`; acts on expired deadlines.
    pub(crate) fn poll(&mut self, now: Instant) -> Event {
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
                        return Event::Wait;
                    }
                }
                self.deadline = None;
                Event::Body
            }
            Phase::Lingering if expired => {
                self.phase = Phase::Closed;
                Event::Wait
            }
            _ => Event::Wait,
        }
    }

    fn next_head(&mut self, now: Instant, expired: bool) -> Event {
        if self.output().len() >= OUT_HIGH {
            return Event::Wait; // the client reads its answers first
        }
        if self.inbox.input().is_empty() {
            // Nothing of a head yet: closing loses nothing.
            if expired || self.peer_closed || self.stopping {
                self.close(false, now);
            }
            return Event::Wait;
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
                        Event::Request
                    }
                    Err(e) => self.refused(e, now),
                }
            }
            Ok(None) if self.peer_closed || self.stopping => {
                self.close(false, now);
                Event::Wait
            }
            Ok(None) if expired => {
                self.refuse(408, "request head timed out", now);
                Event::Wait
            }
            Ok(None) => Event::Wait,
            Err(e) => self.refused(e, now),
        }
    }

    fn refused(&mut self, e: HeadError, now: Instant) -> Event {
        self.refuse(e.status(), e.message(), now);
        Event::Wait
    }

    /// The head and the inbox, to build the handler's `Request` from.
    pub(crate) fn request_parts(&mut self) -> (&Head, &mut Inbox) {
        (&self.head, &mut self.inbox)
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
    pub(crate) fn answer(&mut self, answer: Answer, now: Instant) {
        self.owe_continue(now);
        match answer {
            Answer::Now(response) => self.respond(response, now),
            Answer::Later => {
                self.phase = Phase::Waiting;
                self.deadline = None;
            }
            Answer::NeedsBody => {
                self.phase = Phase::Body;
                self.wait_for_client(now + self.limits.body_timeout);
            }
        }
    }

    /// A deferred response arrived for request number `request`; ignored
    /// unless that request is still waiting for it.
    pub(crate) fn complete(&mut self, request: u64, response: Response, now: Instant) {
        if self.phase == Phase::Waiting && request == self.requests {
            self.respond(response, now);
        }
    }

    /// The waker of request number `request` was woken: pulls its stream
    /// again. Ignored unless that request's stream is pending, so a stray,
    /// repeated or late wake does nothing.
    pub(crate) fn resume(&mut self, request: u64, now: Instant) {
        if self.phase != Phase::Streaming || request != self.requests {
            return;
        }
        if let Some(streaming) = self.streaming.as_mut()
            && streaming.pending
        {
            streaming.pending = false;
            self.pump(now);
        }
    }

    fn owe_continue(&mut self, now: Instant) {
        if self.inbox.take_continue() {
            self.queue(b"HTTP/1.1 100 Continue\r\n\r\n", now);
        }
    }

    /// Queues the response to the current request (the head of a streamed
    /// one) and moves on.
    fn respond(&mut self, response: Response, now: Instant) {
        let unread = self.inbox.leaves_input_unread();
        let http_1_0 = self.head.minor_version() == 0;
        let head_only = self.head.method() == "HEAD";
        // An HTTP/1.0 client has no chunked coding: a streamed body to it
        // ends with the connection (a HEAD answer, with no body, does not).
        let until_close = http_1_0 && response.is_streamed();
        let close = unread
            || (until_close && !head_only)
            || !self.head.keep_alive()
            || self.stopping
            || self.peer_closed;
        let persist = if close {
            Persist::Close
        } else if http_1_0 {
            Persist::KeepAlive
        } else {
            Persist::Default
        };
        let delimit = if until_close {
            Delimit::UntilClose
        } else {
            Delimit::Chunked
        };
        self.start_output(now);
        let queued = self.out.len();
        let status = response.status();
        let stream = response.write_to(&mut self.out, head_only, persist, delimit);
        access::log(
            self.head.method(),
            self.head.target(),
            status,
            self.started,
            self.out.len() - queued,
            self.peer,
        );
        self.inbox.finish();
        let linger = unread || !self.inbox.input().is_empty();
        match stream {
            Some(source) => {
                self.phase = Phase::Streaming;
                self.deadline = None;
                self.streaming = Some(Streaming {
                    source,
                    delimit,
                    close,
                    linger,
                    chunk: Vec::new(),
                    pending: false,
                });
                self.pump(now);
            }
            None => self.responded(close, linger, now),
        }
    }

    /// Pulls the streamed body while less than a chunk of it waits and it
    /// is not pending; once it is complete, moves on as after any response.
    fn pump(&mut self, now: Instant) {
        while self.output().len() < CHUNK {
            let Some(streaming) = self.streaming.as_mut().filter(|s| !s.pending) else {
                return;
            };
            streaming.chunk.clear();
            let fill = streaming.source.fill(&mut streaming.chunk, CHUNK);
            let Streaming {
                delimit,
                close,
                linger,
                ref chunk,
                ..
            } = *streaming;
            let bytes = chunk.len();
            // What was sent goes; the rest moves to the front.
            self.out.drain(..self.sent);
            self.sent = 0;
            match delimit {
                Delimit::Chunked => chunk::write(&mut self.out, chunk),
                Delimit::UntilClose => self.out.extend_from_slice(chunk),
            }
            // Each piece has the write timeout to leave. A `Pending` that
            // gave nothing is no piece: the last one's deadline runs on, so
            // a stream that is never woken is cut short.
            if bytes > 0 || fill != Fill::Pending {
                self.write_deadline = Some(now + self.limits.write_timeout);
            }
            match fill {
                Fill::More if bytes > 0 => {}
                // Bytes with `Pending` are sent, then the stream waits too.
                Fill::Pending => {
                    streaming.pending = true;
                    return;
                }
                Fill::Done => {
                    if delimit == Delimit::Chunked {
                        chunk::write_last(&mut self.out);
                    }
                    self.streaming = None;
                    self.responded(close, linger, now);
                    return;
                }
                // A failed stream, or one that promised more and gave
                // nothing: cut the body short, never end it cleanly.
                Fill::More | Fill::Failed => {
                    if fill == Fill::Failed {
                        info!("a streamed response failed; resetting its connection");
                    }
                    self.streaming = None;
                    self.cut = true;
                    self.phase = Phase::Closed;
                    return;
                }
            }
        }
    }

    /// After the whole of a response is queued: close, or wait for the
    /// next request.
    fn responded(&mut self, close: bool, linger: bool, now: Instant) {
        if close {
            self.close(linger, now);
            return;
        }
        self.phase = Phase::Head;
        if self.inbox.input().is_empty() {
            // Idle once the answer has left (`after_output` starts the
            // clock); until then the write deadline runs.
            self.idle = true;
            self.deadline = None;
        } else {
            self.wait_for_client(now + self.limits.head_timeout);
        }
    }

    /// Answers an unacceptable request with an Error body and closes.
    fn refuse(&mut self, status: u16, message: &str, now: Instant) {
        self.start_output(now);
        let queued = self.out.len();
        Response::error(status, message).write_to(
            &mut self.out,
            false,
            Persist::Close,
            Delimit::Chunked,
        );
        access::log("-", "-", status, now, self.out.len() - queued, self.peer);
        self.close(true, now);
    }

    fn queue(&mut self, bytes: &[u8], now: Instant) {
        self.start_output(now);
        self.out.extend_from_slice(bytes);
    }

    /// The write deadline runs from when output starts to wait.
    fn start_output(&mut self, now: Instant) {
        if self.output().is_empty() {
            self.write_deadline = Some(now + self.limits.write_timeout);
        }
    }

    fn close(&mut self, linger: bool, now: Instant) {
        self.deadline = None;
        self.phase = Phase::Closing { linger };
        self.after_output(now);
    }

    fn wait_for_client(&mut self, deadline: Instant) {
        self.idle = false;
        self.deadline = Some(deadline);
    }

    /// Output waiting to be sent.
    pub(crate) fn output(&self) -> &[u8] {
        &self.out[self.sent..]
    }

    /// `n` bytes of `output` were sent.
    pub(crate) fn sent(&mut self, n: usize, now: Instant) {
        self.sent += n;
        if self.phase == Phase::Streaming && self.output().len() < CHUNK {
            self.pump(now);
        }
        if self.sent >= self.out.len() {
            self.out.clear();
            self.sent = 0;
            // A pending stream is still owed: its deadline runs on.
            if self.streaming.is_none() {
                self.write_deadline = None;
            }
            self.after_output(now);
        }
    }

    /// Once all output is sent: close, start lingering, or give back the
    /// buffers of an idle connection.
    fn after_output(&mut self, now: Instant) {
        if !self.output().is_empty() {
            return;
        }
        match self.phase {
            Phase::Closing { linger: true } if !self.peer_closed => {
                self.phase = Phase::Lingering;
                self.shutdown_due = true;
                self.deadline = Some(now + LINGER_TIME);
                self.inbox.release();
            }
            Phase::Closing { .. } => self.phase = Phase::Closed,
            Phase::Head if self.inbox.input().is_empty() && self.stopping => {
                self.phase = Phase::Closed;
            }
            Phase::Head if self.inbox.input().is_empty() => {
                if self.idle {
                    self.deadline = Some(now + self.limits.idle_timeout);
                }
                // Small buffers are kept for the next request (no
                // allocation per request); large ones given back.
                let held = self.inbox.capacity() + self.out.capacity() + self.head.bytes_held();
                if held > IDLE_KEEP {
                    self.inbox.release();
                    self.out = Vec::new();
                    self.head.release();
                }
            }
            _ => {}
        }
    }

    /// Whether the driver should shut down our sending side now (once).
    pub(crate) fn take_shutdown(&mut self) -> bool {
        std::mem::take(&mut self.shutdown_due)
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

    /// Whether the connection ends owing the client part of a response
    /// (the write timeout passed, a stream failed, or the server stopped
    /// before it was sent). The driver then resets it rather than closing
    /// it: a close would let a body delimited by the close (HTTP/1.0) look
    /// complete, and leave what the kernel holds for the client queued.
    pub(crate) fn cut_short(&self) -> bool {
        self.cut || !self.output().is_empty() || self.streaming.is_some()
    }

    /// Whether the connection is done and can be dropped.
    pub(crate) fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// Bytes this connection holds in buffers right now.
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.out.capacity() + self.inbox.capacity() + self.head.bytes_held()
    }
}

/// A streamed body being sent.
struct Streaming {
    source: Box<dyn Stream>,
    delimit: Delimit,
    /// Close the connection once it is complete (and linger first).
    close: bool,
    linger: bool,
    /// The piece being made (kept, so each piece costs no allocation).
    chunk: Vec<u8>,
    /// It answered `Fill::Pending`: not pulled until `resume`.
    pending: bool,
}

impl std::fmt::Debug for Streaming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streaming")
            .field("delimit", &self.delimit)
            .field("close", &self.close)
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
