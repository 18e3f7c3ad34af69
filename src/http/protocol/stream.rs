//! Sending a streamed body (`Response::stream`): the part of the protocol
//! that pulls pieces from a [`Stream`] as the client takes them.
//!
//! The next piece is made only once less than `CHUNK` bytes of output
//! wait, so a client that does not read holds about one piece. Each piece
//! must leave within the write timeout (the timeout bounds the client's
//! pace, not the length of the whole body), and while a body streams
//! nothing else is parsed on the connection (what the client sends is
//! read into the inbox, a head's worth at most, so that its close is
//! seen). A stream that answers
//! `Fill::Pending` (its pieces are made on another thread) is not pulled
//! again until the driver reports its waker woken with
//! [`Protocol::resume`]; meanwhile what it gave keeps leaving, and the
//! write deadline of its last piece keeps running, so one that never
//! wakes is cut short like a client that stops reading. A stream that
//! answers `Fill::Idle` (a live feed with no event to send) waits the same
//! way, but with no deadline once its output has left, and is ended
//! cleanly when the server stops or the client closes its side.
//!
//! Invariants: a body is ended cleanly (the last chunk, or the close for
//! HTTP/1.0) only after `Fill::Done`; a stream that fails, or promises more
//! and gives nothing, is cut short and the connection reset, so the client
//! never takes a partial body for a complete one. What it does not do:
//! choose the framing (`respond` does, before the head is written) or
//! encode chunks (`chunk` does).

use std::time::Instant;

use log::info;

use super::{CHUNK, Phase, Protocol};
use crate::http::chunk;
use crate::http::response::{Delimit, Fill, Stream};

impl Protocol {
    /// Starts sending a streamed body whose head is queued; `close` and
    /// `linger` say what follows it, as for a complete response.
    pub(super) fn start_stream(
        &mut self,
        source: Box<dyn Stream>,
        delimit: Delimit,
        close: bool,
        linger: bool,
        now: Instant,
    ) {
        self.phase = Phase::Streaming;
        self.deadline = None;
        self.streaming = Some(Streaming {
            source,
            delimit,
            close,
            linger,
            piece: Vec::new(),
            pending: false,
            idle: false,
        });
        self.pump(now);
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
            streaming.idle = false;
            self.pump(now);
        }
    }

    /// The server is stopping: an idle stream ends now, cleanly, and the
    /// connection closes once that has left. Any other stream goes on.
    pub(super) fn end_idle_stream(&mut self, now: Instant) {
        let Some(streaming) = self.streaming.take_if(|s| s.idle) else {
            return;
        };
        self.start_output(now);
        if streaming.delimit == Delimit::Chunked {
            chunk::write_last(&mut self.out);
        }
        let linger = streaming.linger || !self.inbox.input().is_empty();
        self.responded(true, linger, now);
    }

    /// Whether the stream being sent owes nothing now (`Fill::Idle`): no
    /// write deadline once its output has left.
    pub(super) fn stream_owes_nothing(&self) -> bool {
        self.streaming.as_ref().is_none_or(|s| s.idle)
    }

    /// Pulls the streamed body while less than a chunk of it waits and it
    /// is not pending; once it is complete, moves on as after any response.
    pub(super) fn pump(&mut self, now: Instant) {
        while self.output().len() < CHUNK {
            let Some(streaming) = self.streaming.as_mut().filter(|s| !s.pending) else {
                return;
            };
            streaming.piece.clear();
            let fill = streaming.source.fill(&mut streaming.piece, CHUNK);
            let Streaming {
                delimit,
                close,
                linger,
                ref piece,
                ..
            } = *streaming;
            let bytes = piece.len();
            // Drop what was sent before adding a piece, so the buffer holds
            // about one piece however long the body.
            self.out.drain(..self.sent);
            self.sent = 0;
            match delimit {
                Delimit::Chunked => chunk::write(&mut self.out, piece),
                Delimit::UntilClose => self.out.extend_from_slice(piece),
            }
            // Each piece has the write timeout to leave. A `Pending` that
            // gave nothing is no piece: the last one's deadline runs on, so
            // a stream that is never woken is cut short.
            // An `Idle` one owes nothing: no deadline once its output left.
            if bytes > 0 || !matches!(fill, Fill::Pending | Fill::Idle) {
                self.write_deadline = Some(now + self.limits.write_timeout);
            }
            match fill {
                Fill::More if bytes > 0 => {}
                // Bytes with `Pending` are sent, then the stream waits too.
                Fill::Pending => {
                    streaming.pending = true;
                    return;
                }
                Fill::Idle => {
                    streaming.pending = true;
                    streaming.idle = true;
                    if self.sent >= self.out.len() {
                        self.write_deadline = None;
                    }
                    return;
                }
                Fill::Done => {
                    if delimit == Delimit::Chunked {
                        chunk::write_last(&mut self.out);
                    }
                    self.streaming = None;
                    // Input read while it streamed is unread too.
                    let linger = linger || !self.inbox.input().is_empty();
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
}

/// A streamed body being sent.
pub(super) struct Streaming {
    source: Box<dyn Stream>,
    delimit: Delimit,
    /// Close the connection once it is complete (and linger first).
    close: bool,
    linger: bool,
    /// The piece being made (kept, so each piece costs no allocation).
    piece: Vec<u8>,
    /// It answered `Fill::Pending` or `Fill::Idle`: not pulled until
    /// `resume`.
    pending: bool,
    /// It answered `Fill::Idle`: it owes nothing until woken.
    idle: bool,
}

impl std::fmt::Debug for Streaming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streaming")
            .field("delimit", &self.delimit)
            .field("close", &self.close)
            .field("pending", &self.pending)
            .field("idle", &self.idle)
            .finish_non_exhaustive()
    }
}
