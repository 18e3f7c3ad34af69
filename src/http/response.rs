//! The project's own `Response` and its serialisation to HTTP/1.1 bytes.
//!
//! A response is a status, a few extra headers and a body: either complete
//! (written with one buffered write) or a [`Stream`] that the engine pulls
//! from as the client reads (a body too large to build in memory, such as
//! an export of every plant). The engine adds the framing headers itself
//! (`Content-Length`, `Transfer-Encoding`, `Connection: close`), and
//! `Date` (the loop's, `date`), so handlers cannot get them wrong: every complete response carries
//! `Content-Length` except 1xx, 204 and 304, and a HEAD response carries
//! the length of the body it leaves out. A streamed body is sent chunked to an
//! HTTP/1.1 client, and to an HTTP/1.0 client as the bytes up to the close
//! (it has no chunked coding); a HEAD answer to it carries the same
//! framing header and no body.
//! `Connection` is the engine's too: `close` when it will close, and
//! `keep-alive` for an HTTP/1.0 client that asked to keep the connection
//! (without it such a client waits for the close, as ApacheBench does).
//!
//! What it does not do: decide whether the connection persists or how a
//! streamed body is delimited (the protocol decides and passes both in),
//! or pull and frame a streamed body (the protocol and `chunk` do).

use std::time::Duration;

use serde::Serialize;

/// What the `Connection` header of a response says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Persist {
    /// No header: HTTP/1.1 keeps the connection by default.
    Default,
    /// `Connection: keep-alive`, for an HTTP/1.0 client that asked for it.
    KeepAlive,
    /// `Connection: close`: the engine closes after this response.
    Close,
}

/// A body produced piece by piece, as the client takes it.
///
/// The engine calls [`fill`](Stream::fill) on the event loop whenever less
/// than a chunk of output waits for the client, so a stream must not wait
/// (it may take a lock briefly, as the store's listing does) and holds
/// what it needs itself (`'static`). A client that does not read holds at
/// most one chunk and what its socket buffers.
///
/// A stream whose pieces are made on another thread (a database worker)
/// answers [`Fill::Pending`] when it has nothing ready, and that thread
/// calls the [`StreamWaker`](super::Waker) the handler got from
/// [`Request::waker`](super::Request::waker) each time it has made more:
/// the engine pulls again then, and not before. A wake may find nothing
/// new (`fill` answers `Pending` again). The stream is dropped when the
/// connection goes, complete or not: a producer that sees its channel
/// closed may stop.
pub trait Stream: Send {
    /// Appends the next piece of the body to `out`, about `want` bytes
    /// (more is fine, a little less too).
    fn fill(&mut self, out: &mut Vec<u8>, want: usize) -> Fill;
}

/// What [`Stream::fill`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Appended at least one byte; more follows.
    More,
    /// Appended what was left (possibly nothing): the body is complete.
    Done,
    /// Could not go on. The engine closes the connection without ending
    /// the body, so the client sees it cut short rather than complete.
    Failed,
    /// Nothing more for now: what was appended, if anything, is sent, and
    /// the engine pulls again only once the stream's
    /// [`StreamWaker`](super::Waker) is woken. The write timeout runs on from the
    /// last piece that had bytes, so a stream that is never woken is cut
    /// short like a `Failed` one.
    Pending,
    /// Nothing for now, and nothing owed: a live feed between events. As
    /// with `Pending`, what was appended is sent and the stream is pulled
    /// again only once woken; unlike it, no timeout runs once its output
    /// has left, so it may wait for its waker as long as the connection
    /// lasts. When the server stops, an idle stream is ended cleanly (the
    /// last chunk, or the close for HTTP/1.0).
    Idle,
}

/// The body of a response.
enum ResponseBody {
    /// All of it, known before the head is written.
    Complete(Vec<u8>),
    /// Produced as the client reads.
    Streamed(Box<dyn Stream>),
}

/// An HTTP response as handlers build it.
pub struct Response {
    status: u16,
    content_type: Option<&'static str>,
    headers: Vec<(&'static str, String)>,
    body: ResponseBody,
    /// Milliseconds the engine holds it before writing it (`held_for`).
    hold_ms: u32,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Response");
        out.field("status", &self.status)
            .field("content_type", &self.content_type)
            .field("headers", &self.headers);
        match &self.body {
            ResponseBody::Complete(body) => out.field("body", &String::from_utf8_lossy(body)),
            ResponseBody::Streamed(_) => out.field("body", &"(streamed)"),
        };
        out.finish()
    }
}

const JSON: &str = "application/json";

/// The status of [`Response::gone`].
pub(crate) const GONE: u16 = 499;

impl Response {
    /// A response with this status and no body.
    pub fn empty(status: u16) -> Response {
        Response {
            status,
            content_type: None,
            headers: Vec::new(),
            body: ResponseBody::Complete(Vec::new()),
            hold_ms: 0,
        }
    }

    /// What a handler returns after [`Request::defer`](super::Request::defer):
    /// a placeholder (status 0) that is never sent; the `Deferred` brings
    /// the real response.
    pub fn deferred() -> Response {
        Response::empty(0)
    }

    /// The answer to a request whose client has gone (its status 499, as
    /// nginx logs such a request): never written, the connection is closed
    /// instead. A handler that finds no one waits (`Deferred::wanted`)
    /// answers it.
    pub fn gone() -> Response {
        Response::empty(GONE)
    }

    /// `204 No Content`.
    pub fn no_content() -> Response {
        Response::empty(204)
    }

    /// A JSON response; `value` is serialised here.
    pub fn json<T: Serialize + ?Sized>(status: u16, value: &T) -> Response {
        // Serialising our own plain data types into a Vec cannot fail: they
        // have string keys and no fallible Serialize impls.
        let body = serde_json::to_vec(value).unwrap_or_default();
        Response::bytes(status, JSON, body)
    }

    /// A response with a body of the given content type.
    pub fn bytes(status: u16, content_type: &'static str, body: Vec<u8>) -> Response {
        Response {
            status,
            content_type: Some(content_type),
            headers: Vec::new(),
            body: ResponseBody::Complete(body),
            hold_ms: 0,
        }
    }

    /// A response whose body `stream` produces as the client reads it.
    pub fn stream(
        status: u16,
        content_type: &'static str,
        stream: impl Stream + 'static,
    ) -> Response {
        Response {
            status,
            content_type: Some(content_type),
            headers: Vec::new(),
            body: ResponseBody::Streamed(Box::new(stream)),
            hold_ms: 0,
        }
    }

    /// The project's Error body: `{"error": <status>, "message": <message>}`.
    pub fn error(status: u16, message: &str) -> Response {
        #[derive(Serialize)]
        struct Error<'a> {
            error: u16,
            message: &'a str,
        }
        Response::json(
            status,
            &Error {
                error: status,
                message,
            },
        )
    }

    /// Adds a header. Delimit headers are the engine's and must not be set.
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    /// Makes the engine write it no sooner than `hold` after its request
    /// arrived (whole milliseconds), on its event loop's timer: no thread
    /// waits. On the placeholder of a deferred response, the hold is the
    /// real response's.
    pub fn held_for(mut self, hold: Duration) -> Response {
        self.hold_ms = u32::try_from(hold.as_millis()).unwrap_or(u32::MAX);
        self
    }

    /// The hold `held_for` set, in milliseconds.
    pub(crate) fn hold_ms(&self) -> u32 {
        self.hold_ms
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The body bytes (empty for a streamed body).
    pub fn body(&self) -> &[u8] {
        match &self.body {
            ResponseBody::Complete(body) => body,
            ResponseBody::Streamed(_) => &[],
        }
    }

    /// Whether the body is streamed (the protocol must then choose how it
    /// is delimited before the head is written).
    pub(crate) fn is_streamed(&self) -> bool {
        matches!(self.body, ResponseBody::Streamed(_))
    }

    /// Appends the serialised response to `out`: the body is left out for
    /// HEAD (`head_only`); `persist` decides the `Connection` header.
    ///
    /// A streamed body is not written: its head announces `delimit`, and
    /// the stream is handed back for the caller to pull from (`None` when
    /// there is nothing to send: HEAD, 204, 1xx).
    pub(crate) fn write_to(
        self,
        out: &mut Vec<u8>,
        head_only: bool,
        persist: Persist,
        delimit: Delimit,
    ) -> Option<Box<dyn Stream>> {
        // Fixed parts are written whole where they can be: each write into
        // the buffer is a call, and a create's head took about twenty.
        match status_start(self.status) {
            Some(start) => out.extend_from_slice(&start),
            None => {
                out.extend_from_slice(b"HTTP/1.1 ");
                out.extend_from_slice(itoa::Buffer::new().format(self.status).as_bytes());
                out.push(b' ');
            }
        }
        out.extend_from_slice(reason(self.status).as_bytes());
        out.extend_from_slice(b"\r\n");
        super::date::write(out);
        if let Some(content_type) = self.content_type {
            line(out, "Content-Type: ", content_type);
        }
        for (name, value) in &self.headers {
            header(out, name, value);
        }
        // 1xx, 204 and 304 never have a body (RFC 9110 6.4.1); a 304 sends
        // no length either, rather than one that is not the 200's.
        let has_body = self.status >= 200 && self.status != 204 && self.status != 304;
        match (&self.body, delimit) {
            (_, _) if !has_body => {}
            (ResponseBody::Complete(body), _) => {
                line(
                    out,
                    "Content-Length: ",
                    itoa::Buffer::new().format(body.len()),
                );
            }
            (ResponseBody::Streamed(_), Delimit::Chunked) => {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n")
            }
            (ResponseBody::Streamed(_), Delimit::UntilClose) => {}
        }
        match persist {
            Persist::Default => {}
            Persist::KeepAlive => out.extend_from_slice(b"Connection: keep-alive\r\n"),
            Persist::Close => out.extend_from_slice(b"Connection: close\r\n"),
        }
        out.extend_from_slice(b"\r\n");
        match self.body {
            _ if head_only || !has_body => None,
            ResponseBody::Complete(body) => {
                out.extend_from_slice(&body);
                None
            }
            ResponseBody::Streamed(stream) => Some(stream),
        }
    }
}

/// How a streamed body is delimited on the wire (a complete one always
/// has `Content-Length`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delimit {
    /// `Transfer-Encoding: chunked` (HTTP/1.1).
    Chunked,
    /// The bytes up to the close (an HTTP/1.0 client, which has no
    /// chunked coding).
    UntilClose,
}

fn header(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    line(out, ": ", value);
}

/// `start` (a header's name and `: `, spelled out) and `value`, and the
/// line's end.
fn line(out: &mut Vec<u8>, start: &str, value: &str) {
    out.extend_from_slice(start.as_bytes());
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `HTTP/1.1 `, the status's three digits and a space; `None` for a
/// status of another width (the server sends none).
fn status_start(status: u16) -> Option<[u8; 13]> {
    if !(100..1000).contains(&status) {
        return None;
    }
    let mut start = *b"HTTP/1.1 000 ";
    let mut n = status;
    for digit in start[9..12].iter_mut().rev() {
        *digit = b'0' + (n % 10) as u8;
        n /= 10;
    }
    Some(start)
}

/// The reason phrase for every status the server sends.
fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        304 => "Not Modified",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        // Never sent (`Response::gone`).
        499 => "Client Closed Request",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        507 => "Insufficient Storage",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(response: Response, head_only: bool, close: bool) -> String {
        let persist = if close {
            Persist::Close
        } else {
            Persist::Default
        };
        let mut out = Vec::new();
        let stream = response.write_to(&mut out, head_only, persist, Delimit::Chunked);
        assert!(stream.is_none(), "a complete body is written whole");
        String::from_utf8(out).unwrap()
    }

    /// A stream of `n` pieces "ab".
    struct Pieces(usize);

    impl Stream for Pieces {
        fn fill(&mut self, out: &mut Vec<u8>, _want: usize) -> Fill {
            out.extend_from_slice(b"ab");
            self.0 -= 1;
            if self.0 == 0 { Fill::Done } else { Fill::More }
        }
    }

    #[test]
    fn a_streamed_head_announces_its_framing_and_hands_the_stream_back() {
        let streamed = || Response::stream(200, "text/plain", Pieces(2));
        let mut out = Vec::new();
        let stream = streamed().write_to(&mut out, false, Persist::Default, Delimit::Chunked);
        assert!(stream.is_some());
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        // HTTP/1.0: no length, no chunked coding, the body ends at the close.
        let mut out = Vec::new();
        let stream = streamed().write_to(&mut out, false, Persist::Close, Delimit::UntilClose);
        assert!(stream.is_some());
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
        );
        // HEAD: the same framing header, and nothing to pull.
        let mut out = Vec::new();
        let stream = streamed().write_to(&mut out, true, Persist::Default, Delimit::Chunked);
        assert!(stream.is_none());
        assert!(out.ends_with(b"Transfer-Encoding: chunked\r\n\r\n"));
    }

    #[test]
    fn the_status_line_reads_as_the_status_and_its_reason() {
        for status in [100, 200, 204, 308, 404, 499, 503, 599, 99, 1000, 65535] {
            let head = text(Response::empty(status), true, false);
            let line = head.lines().next().unwrap();
            assert_eq!(line, format!("HTTP/1.1 {status} {}", reason(status)));
        }
    }

    #[test]
    fn error_body_repeats_the_status() {
        let r = Response::error(404, "no plant with id 7");
        assert_eq!(r.body(), br#"{"error":404,"message":"no plant with id 7"}"#);
        assert_eq!(
            text(r, false, false),
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n\
             Content-Length: 44\r\n\r\n{\"error\":404,\"message\":\"no plant with id 7\"}"
        );
    }

    #[test]
    fn head_keeps_length_but_drops_body_and_close_is_announced() {
        let r = Response::json(200, &[1, 2]);
        assert_eq!(
            text(r, true, true),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
             Content-Length: 5\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn an_http_1_0_keep_alive_is_announced() {
        let mut out = Vec::new();
        Response::no_content().write_to(&mut out, false, Persist::KeepAlive, Delimit::Chunked);
        assert_eq!(
            out,
            b"HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\n\r\n"
        );
    }

    #[test]
    fn no_content_has_no_length() {
        assert_eq!(
            text(Response::no_content().with_header("X-A", "b"), false, false),
            "HTTP/1.1 204 No Content\r\nX-A: b\r\n\r\n"
        );
    }
}
