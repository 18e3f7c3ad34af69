//! The project's own `Response` and its serialisation to HTTP/1.1 bytes.
//!
//! A response is a status, a few extra headers and a complete body; it is
//! written with one buffered write. The engine adds the framing headers
//! itself (`Content-Length`, `Connection: close`), so handlers cannot get
//! them wrong: every response carries `Content-Length` except 1xx and 204,
//! and a HEAD response carries the length of the body it leaves out.
//! `Connection` is the engine's too: `close` when it will close, and
//! `keep-alive` for an HTTP/1.0 client that asked to keep the connection
//! (without it such a client waits for the close, as ApacheBench does).

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

/// An HTTP response as handlers build it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    status: u16,
    content_type: Option<&'static str>,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

const JSON: &str = "application/json";

impl Response {
    /// A response with this status and no body.
    pub fn empty(status: u16) -> Response {
        Response {
            status,
            content_type: None,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// What a handler returns after [`Request::defer`](super::Request::defer):
    /// a placeholder (status 0) that is never sent; the `Deferred` brings
    /// the real response.
    pub fn deferred() -> Response {
        Response::empty(0)
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
            body,
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

    /// Adds a header. Framing headers are the engine's and must not be set.
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The body bytes.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Appends the serialised response to `out`: the body is left out for
    /// HEAD (`head_only`); `persist` decides the `Connection` header.
    pub(crate) fn write_to(&self, out: &mut Vec<u8>, head_only: bool, persist: Persist) {
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(itoa::Buffer::new().format(self.status).as_bytes());
        out.push(b' ');
        out.extend_from_slice(reason(self.status).as_bytes());
        out.extend_from_slice(b"\r\n");
        if let Some(content_type) = self.content_type {
            header(out, "Content-Type", content_type);
        }
        for (name, value) in &self.headers {
            header(out, name, value);
        }
        if self.status != 204 && self.status >= 200 {
            header(
                out,
                "Content-Length",
                itoa::Buffer::new().format(self.body.len()),
            );
        }
        match persist {
            Persist::Default => {}
            Persist::KeepAlive => header(out, "Connection", "keep-alive"),
            Persist::Close => header(out, "Connection", "close"),
        }
        out.extend_from_slice(b"\r\n");
        if !head_only && self.status != 204 {
            out.extend_from_slice(&self.body);
        }
    }
}

fn header(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The reason phrase for every status the server sends.
fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        304 => "Not Modified",
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
        431 => "Request Header Fields Too Large",
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

    fn text(response: &Response, head_only: bool, close: bool) -> String {
        let persist = if close {
            Persist::Close
        } else {
            Persist::Default
        };
        let mut out = Vec::new();
        response.write_to(&mut out, head_only, persist);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn error_body_repeats_the_status() {
        let r = Response::error(404, "no plant with id 7");
        assert_eq!(r.body(), br#"{"error":404,"message":"no plant with id 7"}"#);
        assert_eq!(
            text(&r, false, false),
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n\
             Content-Length: 44\r\n\r\n{\"error\":404,\"message\":\"no plant with id 7\"}"
        );
    }

    #[test]
    fn head_keeps_length_but_drops_body_and_close_is_announced() {
        let r = Response::json(200, &[1, 2]);
        assert_eq!(
            text(&r, true, true),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
             Content-Length: 5\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn an_http_1_0_keep_alive_is_announced() {
        let mut out = Vec::new();
        Response::no_content().write_to(&mut out, false, Persist::KeepAlive);
        assert_eq!(
            out,
            b"HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\n\r\n"
        );
    }

    #[test]
    fn no_content_has_no_length() {
        assert_eq!(
            text(
                &Response::no_content().with_header("X-A", "b"),
                false,
                false
            ),
            "HTTP/1.1 204 No Content\r\nX-A: b\r\n\r\n"
        );
    }
}
