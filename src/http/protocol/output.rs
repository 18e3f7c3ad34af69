//! The output side of the protocol: queuing answers (a `100 Continue`, a
//! response, a refusal), handing them to the driver as the socket takes
//! them, and what follows once the last byte of one has left.
//!
//! The engine, not the handler, decides how a response is framed and
//! whether the connection persists: it closes when the client asks, when
//! a body was left unread (never drained: it may be unbounded), when the
//! head was refused, and when the server is stopping. Before closing with
//! input possibly unread it lingers (our side shut, reading and discarding
//! for at most `LINGER_TIME` and `LINGER_BYTES`) so the kernel does not
//! answer the client's remaining bytes with a reset that would destroy
//! our last response in flight. Once all output has left, an idle
//! connection gives back buffers over `IDLE_KEEP` bytes.
//!
//! Invariants: all queued output must leave by the write deadline, which
//! runs from when output starts to wait; each response is logged once, as
//! it is queued. What it does not do: write to a socket (the driver
//! does), or pull a streamed body (`stream` does).

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use super::{CHUNK, IDLE_KEEP, LINGER_TIME, Phase, Protocol};
use crate::http::access;
use crate::http::response::{Delimit, GONE, Persist, Response};

impl Protocol {
    /// Sends the `100 Continue` owed since the handler asked for a body
    /// the client waits to send: it must go before the handler's answer.
    pub(super) fn owe_continue(&mut self, now: Instant) {
        if self.inbox.take_continue() {
            self.queue(b"HTTP/1.1 100 Continue\r\n\r\n", now);
        }
    }

    /// Queues the response to the current request, or holds it (nothing
    /// else is parsed meanwhile, so pipelined answers keep their order)
    /// until its hold after the request's arrival has passed: `poll` then
    /// queues it, and so does `stop` at once.
    pub(super) fn respond_or_hold(&mut self, response: Response, now: Instant) {
        if response.status() == GONE {
            return self.abandon(now);
        }
        let hold = response.hold_ms().max(std::mem::take(&mut self.hold));
        if hold == 0 || self.stopping {
            return self.respond(response, now);
        }
        if self.peer_closed {
            // Gone before its answer came: nothing to hold it for.
            return self.abandon(now);
        }
        let due = self.started + Duration::from_millis(hold.into());
        if due <= now {
            return self.respond(response, now);
        }
        self.phase = Phase::Waiting;
        self.deadline = Some(due);
        self.held = Some(Box::new(response));
        self.timer = true;
    }

    /// Drops the answer held or awaited for a client that has gone and
    /// closes: logged as nginx logs such a request, 499. What the request
    /// changed stays changed.
    pub(super) fn abandon(&mut self, now: Instant) {
        self.held = None;
        self.tell_left();
        access::log(
            self.head.method(),
            self.head.target(),
            499,
            self.started,
            0,
            self.peer,
        );
        self.close(false, now);
    }

    /// Tells the deferred answer of the current request, if one is still
    /// to come, that its client has gone (`Deferred::wanted`), so that
    /// work done for it alone may be skipped.
    pub(super) fn tell_left(&mut self) {
        if let Some(left) = &self.notes.left {
            left.store(self.requests, Relaxed);
        }
    }

    /// The connection is dropped (reset by the client, a failed read or
    /// write, the server's stop): an answer it waited for is abandoned.
    pub(crate) fn dropped(&mut self, now: Instant) {
        if self.phase == Phase::Waiting {
            self.abandon(now);
        }
    }

    /// Queues the held response, if any.
    pub(super) fn release(&mut self, now: Instant) {
        if let Some(response) = self.held.take() {
            self.deadline = None;
            self.respond(*response, now);
        }
    }

    /// When a response held since the last call is due: once per hold,
    /// for the driver's timer (the deadline has it too).
    pub(crate) fn take_timer(&mut self) -> Option<Instant> {
        if std::mem::take(&mut self.timer) {
            self.deadline
        } else {
            None
        }
    }

    /// Queues the response to the current request (the head of a streamed
    /// one) and moves on.
    pub(super) fn respond(&mut self, response: Response, now: Instant) {
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
            Some(source) => self.start_stream(source, delimit, close, linger, now),
            None => self.responded(close, linger, now),
        }
    }

    /// After the whole of a response is queued: close, or wait for the
    /// next request.
    pub(super) fn responded(&mut self, close: bool, linger: bool, now: Instant) {
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
    pub(super) fn refuse(&mut self, status: u16, message: &str, now: Instant) {
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

    /// Queues bytes that are not a response (a `100 Continue`).
    pub(super) fn queue(&mut self, bytes: &[u8], now: Instant) {
        self.start_output(now);
        self.out.extend_from_slice(bytes);
    }

    /// The write deadline runs from when output starts to wait.
    pub(super) fn start_output(&mut self, now: Instant) {
        if self.output().is_empty() {
            self.write_deadline = Some(now + self.limits.write_timeout);
        }
    }

    /// Closes once all output has left, lingering first if `linger`.
    pub(super) fn close(&mut self, linger: bool, now: Instant) {
        self.deadline = None;
        self.phase = Phase::Closing { linger };
        self.after_output(now);
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
            if self.stream_owes_nothing() {
                self.write_deadline = None;
            }
            self.after_output(now);
        }
    }

    /// Once all output is sent: close, start lingering, or give back the
    /// buffers of an idle connection.
    pub(super) fn after_output(&mut self, now: Instant) {
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

    /// Whether the connection ends owing the client part of a response
    /// (the write timeout passed, a stream failed, or the server stopped
    /// before it was sent). The driver then resets it rather than closing
    /// it: a close would let a body delimited by the close (HTTP/1.0) look
    /// complete, and leave what the kernel holds for the client queued.
    pub(crate) fn cut_short(&self) -> bool {
        self.cut || !self.output().is_empty() || self.streaming.is_some()
    }

    /// Bytes this connection holds in buffers right now.
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.out.capacity() + self.inbox.capacity() + self.head.bytes_held()
    }
}
