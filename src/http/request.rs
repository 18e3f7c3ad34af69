//! The project's own `Request`: what a handler sees of one request.
//!
//! The body is read lazily, when the handler asks for it, so that routing,
//! auth and content-type checks run first and a `100 Continue` is only sent
//! to a request that passed them. When the handler asks before the whole
//! body has arrived, `body` answers [`BodyError::NotYet`]: the engine drops
//! that call's response, reads the rest of the body without blocking, and
//! calls the handler again, when `body` has its answer; on that call
//! [`Request::resumed`] is true, so the checks need not be made twice. A
//! handler must do nothing lasting before it reads the body (checks only).
//!
//! A `Request` owns nothing: it borrows the connection's parsed head and
//! its inbox (where the body is decoded) for one call of the handler. It
//! does not parse, buffer or time anything itself.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use super::body::BodyError;
use super::deferred::{Deferred, Mailbox, StreamWaker, Ticket};
use super::head::Head;
use super::inbox::Inbox;

/// Lets a request hand out a [`Deferred`] and [`StreamWaker`]s for itself.
pub(crate) struct Deferral<'a> {
    pub(crate) mailbox: &'a Arc<dyn Mailbox>,
    pub(crate) ticket: Ticket,
}

/// What a connection keeps for the handler across its requests.
#[derive(Debug, Default)]
pub(crate) struct Notes {
    /// The handler's word (`Request::note`).
    pub(crate) note: u128,
    /// The number of the last request whose client left before its
    /// deferred answer came (`Deferred::wanted`); made at the first
    /// deferral, shared with each `Deferred` of the connection.
    pub(crate) left: Option<Arc<AtomicU64>>,
}

/// One HTTP request, as handlers see it.
pub struct Request<'c> {
    head: &'c Head,
    inbox: &'c mut Inbox,
    /// The connection's notes (`note`, `defer`).
    notes: &'c mut Notes,
    peer: SocketAddr,
    started: Instant,
    deferral: Option<Deferral<'c>>,
    deferred: bool,
    /// It came over TLS.
    secure: bool,
    /// An earlier call asked for the body (see `resumed`).
    resumed: bool,
}

impl<'c> Request<'c> {
    pub(crate) fn new(
        head: &'c Head,
        inbox: &'c mut Inbox,
        notes: &'c mut Notes,
        peer: SocketAddr,
        started: Instant,
        deferral: Option<Deferral<'c>>,
        secure: bool,
    ) -> Request<'c> {
        Request {
            resumed: inbox.body_asked(),
            head,
            inbox,
            notes,
            peer,
            started,
            deferral,
            deferred: false,
            secure,
        }
    }

    /// The scheme of the listener it came on: `https` over TLS, else
    /// `http`.
    pub fn scheme(&self) -> &'static str {
        if self.secure { "https" } else { "http" }
    }

    /// The method, as sent (`GET`, `POST`, ...).
    pub fn method(&self) -> &str {
        self.head.method()
    }

    /// The request target: path and query (an absolute-form target is
    /// given by its path and query).
    pub fn target(&self) -> &str {
        self.head.target()
    }

    /// The path, without the query.
    pub fn path(&self) -> &str {
        let target = self.target();
        target.split_once('?').map_or(target, |(path, _)| path)
    }

    /// The query string, without the `?`.
    pub fn query(&self) -> Option<&str> {
        self.target().split_once('?').map(|(_, query)| query)
    }

    /// The first value of a header (name compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.head.headers(name).next()
    }

    /// Every value of a header, in the order received (a list header such
    /// as `X-Forwarded-For` may come in several lines).
    pub fn headers<'a, 'n>(
        &'a self,
        name: &'n str,
    ) -> impl Iterator<Item = &'a [u8]> + use<'a, 'n, 'c> {
        self.head.headers(name)
    }

    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The word the handler keeps for this request's connection (0 until
    /// it sets one), so that something done once for a client (the API
    /// records a token proven right) need not be done on each of its
    /// requests.
    pub fn note(&self) -> u128 {
        self.notes.note
    }

    /// Sets the connection's word for the requests that follow on it.
    pub fn set_note(&mut self, note: u128) {
        self.notes.note = note;
    }

    /// When its head was parsed: the same instant on every call of the
    /// handler for this request, so a duration measured from it includes
    /// the wait for the body.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Whether this is the engine's second call for this request: the first
    /// asked for a body that had not all arrived, and it is now in (or
    /// failed, which `body` says). What the first call checked before
    /// asking passed; what it did otherwise was dropped with its response.
    pub fn resumed(&self) -> bool {
        self.resumed
    }

    /// Whether the request carries a non-empty body.
    pub fn has_body(&self) -> bool {
        self.inbox.has_body()
    }

    /// The whole body, at most the configured `max_body` bytes. A declared
    /// length over the limit is refused before anything is read.
    /// [`BodyError::NotYet`] means the rest is still to come: return at
    /// once (`?` does); the engine calls the handler again when it is in.
    pub fn body(&mut self) -> Result<&[u8], BodyError> {
        self.inbox.body(self.head.expects_continue())
    }

    /// Whether this call's response will be dropped because the handler
    /// asked for a body that has not fully arrived (see [`Request::body`]).
    pub fn awaits_body(&self) -> bool {
        self.inbox.awaits_body()
    }

    /// Promises the response for later: return
    /// [`Response::deferred`](super::Response::deferred) now and complete
    /// the `Deferred` from any thread. `None` where the engine cannot defer (it then expects the
    /// handler to answer at once), and on a second call.
    pub fn defer(&mut self) -> Option<Deferred> {
        if self.deferred {
            return None;
        }
        let deferral = self.deferral.as_ref()?;
        self.deferred = true;
        let left = self.notes.left.get_or_insert_with(Default::default);
        Some(Deferred::new(
            Arc::clone(deferral.mailbox),
            deferral.ticket,
            Arc::clone(left),
        ))
    }

    /// A waker for the [`Stream`](super::Stream) that will answer this
    /// request, whether returned now or through a `Deferred`: another
    /// thread calls [`StreamWaker::wake`] when it has more of the body after the
    /// stream answered [`Fill::Pending`](super::Fill::Pending). `None`
    /// where the engine cannot defer (a stream must then never be
    /// pending).
    pub fn waker(&self) -> Option<StreamWaker> {
        let deferral = self.deferral.as_ref()?;
        Some(StreamWaker::new(
            Arc::clone(deferral.mailbox),
            deferral.ticket,
        ))
    }

    /// Whether the handler deferred its response.
    pub(crate) fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// The minor HTTP version (`1` for HTTP/1.1).
    #[cfg(any(test, fuzzing))]
    pub(crate) fn minor_version(&self) -> u8 {
        self.head.minor_version()
    }

    /// Every header line, in order, as name and value.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn header_lines(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.head.lines()
    }
}
