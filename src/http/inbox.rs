//! The input side of one connection: the bytes read and not yet parsed,
//! and the body of the request being handled, which a `Request` reads
//! through it.
//!
//! The body is decoded lazily, only once the handler asks for it, so a
//! request refused by routing or auth never has its body read, and a
//! `100 Continue` is owed only to a request that got that far (at most one
//! per request). Bytes past the body stay in the input for the next head.
//!
//! What it does not do: parse heads, keep time, or decide when to close.
//! The protocol does those and tells the inbox when a request starts and
//! ends; the inbox only answers whether the body it saw leaves bytes on
//! the connection that could not be read as the next request.

use super::body::{BodyError, DecodeStep, Decoder, Framing};

/// The request being handled: where its body stands.
#[derive(Debug, Default)]
enum RequestBody {
    /// The handler has not asked for it.
    #[default]
    Unread,
    /// Asked for and still arriving.
    Reading(Decoder),
    /// Complete.
    Read(Vec<u8>),
    /// Could not be read (refused, timed out, closed).
    Failed(BodyError),
}

/// The input side of a connection that a `Request` reads its body from.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    input: Vec<u8>,
    framing: Option<Framing>,
    body: RequestBody,
    max_body: usize,
    /// A `100 Continue` is owed: the handler asked for a body the client
    /// waits to send.
    continue_due: bool,
    continue_sent: bool,
}

impl Inbox {
    /// An empty inbox whose bodies may be at most `max_body` bytes.
    pub(super) fn new(max_body: usize) -> Inbox {
        Inbox {
            max_body,
            ..Inbox::default()
        }
    }

    /// Whether the current request declares a body (one of zero length
    /// counts as none).
    pub(crate) fn has_body(&self) -> bool {
        !matches!(self.framing, None | Some(Framing::None))
    }

    /// The body, decoding what is buffered; see `Request::body`.
    pub(crate) fn body(&mut self, expects_continue: bool) -> Result<&[u8], BodyError> {
        if let RequestBody::Unread = self.body {
            let framing = self.framing.unwrap_or(Framing::None);
            self.body = match Decoder::new(framing, self.max_body) {
                Ok(decoder) => {
                    if expects_continue && self.has_body() && !self.continue_sent {
                        self.continue_due = true;
                    }
                    RequestBody::Reading(decoder)
                }
                Err(e) => RequestBody::Failed(e),
            };
            self.decode();
        }
        match &self.body {
            RequestBody::Read(bytes) => Ok(bytes),
            RequestBody::Failed(e) => Err(e.clone()),
            RequestBody::Reading(_) => Err(BodyError::NotYet),
            RequestBody::Unread => Err(BodyError::Closed),
        }
    }

    /// Whether the handler has asked for the current request's body.
    pub(crate) fn body_asked(&self) -> bool {
        !matches!(self.body, RequestBody::Unread)
    }

    /// Whether the body was asked for and is still arriving.
    pub(crate) fn awaits_body(&self) -> bool {
        matches!(self.body, RequestBody::Reading(_))
    }

    /// Bytes read and not yet consumed by a head or a body.
    pub(super) fn input(&self) -> &[u8] {
        &self.input
    }

    /// Bytes read from the client.
    pub(super) fn receive(&mut self, bytes: &[u8]) {
        self.input.extend_from_slice(bytes);
    }

    /// The first `n` bytes of input were a head.
    pub(super) fn consume(&mut self, n: usize) {
        self.input.drain(..n);
    }

    /// Capacity held by the input buffer.
    pub(super) fn capacity(&self) -> usize {
        self.input.capacity()
    }

    /// Drops the input and gives back its buffer.
    pub(super) fn release(&mut self) {
        self.input = Vec::new();
    }

    /// A new request whose body is framed by `framing`: its body is unread
    /// and no `100 Continue` has been sent for it.
    pub(super) fn start(&mut self, framing: Framing) {
        self.framing = Some(framing);
        self.body = RequestBody::Unread;
        self.continue_sent = false;
    }

    /// The handler has returned and its answer comes later: the body's
    /// bytes are freed now, in the turn that allocated them, not when the
    /// answer is written (a batch of answers later, with the bodies of
    /// every request answered with it). It still counts as read.
    pub(super) fn free_body(&mut self) {
        if let RequestBody::Read(bytes) = &mut self.body {
            *bytes = Vec::new();
        }
    }

    /// The current request is answered: its body is forgotten.
    pub(super) fn finish(&mut self) {
        self.body = RequestBody::Unread;
        self.framing = None;
    }

    /// Whether a `100 Continue` is owed now; once true, it is counted as
    /// sent.
    pub(super) fn take_continue(&mut self) -> bool {
        if !self.continue_due {
            return false;
        }
        self.continue_due = false;
        self.continue_sent = true;
        true
    }

    /// Moves buffered input into the body being read.
    pub(super) fn decode(&mut self) {
        let RequestBody::Reading(decoder) = &mut self.body else {
            return;
        };
        match decoder.advance(&self.input) {
            Ok((used, step)) => {
                self.input.drain(..used);
                if step == DecodeStep::Done {
                    let RequestBody::Reading(decoder) = std::mem::take(&mut self.body) else {
                        return;
                    };
                    self.body = RequestBody::Read(decoder.into_body());
                }
            }
            Err(e) => self.body = RequestBody::Failed(e),
        }
    }

    /// The body still arriving will not: it fails with `error`.
    pub(super) fn fail(&mut self, error: BodyError) {
        self.body = RequestBody::Failed(error);
    }

    /// Whether bytes of this request's body may still sit unread on the
    /// connection, so that it cannot carry another request.
    pub(super) fn leaves_input_unread(&self) -> bool {
        match self.body {
            RequestBody::Unread => self.has_body(),
            RequestBody::Read(_) => false,
            RequestBody::Reading(_) | RequestBody::Failed(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_decoded_only_when_asked_and_what_follows_it_stays_buffered() {
        let mut inbox = Inbox::new(64);
        inbox.start(Framing::Length(5));
        inbox.receive(b"hel");
        assert!(inbox.has_body());
        assert!(
            inbox.leaves_input_unread(),
            "unread, it cannot carry a request"
        );
        assert_eq!(inbox.input(), b"hel", "nothing is decoded before the ask");
        assert_eq!(inbox.body(false), Err(BodyError::NotYet));
        assert!(inbox.awaits_body() && inbox.leaves_input_unread());
        inbox.receive(b"loGET / HTTP/1.1\r\n");
        inbox.decode();
        assert_eq!(inbox.body(false), Ok(&b"hello"[..]));
        assert!(!inbox.leaves_input_unread());
        assert_eq!(inbox.input(), b"GET / HTTP/1.1\r\n", "the next head stays");
        inbox.finish();
        assert!(!inbox.has_body() && !inbox.leaves_input_unread());
    }

    #[test]
    fn a_continue_is_owed_once_per_request_and_only_for_a_body_asked_for() {
        let mut inbox = Inbox::new(64);
        inbox.start(Framing::Length(5));
        assert!(!inbox.take_continue(), "not before the handler asks");
        assert!(!inbox.body_asked(), "a request's first call is not resumed");
        assert_eq!(inbox.body(true), Err(BodyError::NotYet));
        assert!(inbox.body_asked(), "the next call is");
        assert!(inbox.take_continue());
        assert!(!inbox.take_continue(), "once");
        // A handler run again for the rest of the body owes none.
        assert_eq!(inbox.body(true), Err(BodyError::NotYet));
        assert!(!inbox.take_continue());
        // A request without a body owes none either.
        inbox.finish();
        assert!(!inbox.body_asked(), "the next request starts afresh");
        inbox.start(Framing::None);
        assert_eq!(inbox.body(true), Ok(&b""[..]));
        assert!(!inbox.take_continue());
    }

    #[test]
    fn a_declared_length_over_the_limit_fails_without_reading_and_leaves_input_unread() {
        let mut inbox = Inbox::new(4);
        inbox.start(Framing::Length(5));
        inbox.receive(b"hello");
        assert_eq!(inbox.body(true), Err(BodyError::TooLarge(4)));
        assert!(
            !inbox.take_continue(),
            "no invitation to send a refused body"
        );
        assert_eq!(inbox.input(), b"hello");
        assert!(inbox.leaves_input_unread());
    }

    #[test]
    fn a_body_that_stops_arriving_fails_and_leaves_input_unread() {
        let mut inbox = Inbox::new(64);
        inbox.start(Framing::Chunked);
        inbox.receive(b"5\r\nhe");
        assert_eq!(inbox.body(false), Err(BodyError::NotYet));
        inbox.fail(BodyError::Timeout);
        assert_eq!(inbox.body(false), Err(BodyError::Timeout));
        assert!(!inbox.awaits_body() && inbox.leaves_input_unread());
    }
}
