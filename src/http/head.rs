//! Request heads: parsing one into a reusable `Head`, and the decisions
//! the engine makes from it.
//!
//! `httparse` does the tokenising; this module owns the decisions on top of
//! it: the head, target and header-count limits (431/414), body framing
//! (one well-formed `Content-Length`, or `Transfer-Encoding: chunked` alone
//! on HTTP/1.1; anything ambiguous is refused, so no request can be
//! smuggled past us), exactly one `Host` on HTTP/1.1 (RFC 9112 §3.2),
//! absolute-form targets served by their path (§3.2.2), persistence
//! (`Connection`, HTTP/1.0 vs 1.1) and `Expect: 100-continue`.
//!
//! What it does not do: hold input (it parses the window the protocol
//! hands it) or read a body (it only says how the body is framed).

use std::ops::Range;

use super::body::Framing;

/// Most header lines in a request head.
const MAX_HEADERS: usize = 100;
/// Longest request target, in bytes.
pub const MAX_TARGET: usize = 8 * 1024;

/// Why a request head was refused; each maps to a status and a close.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeadError {
    /// 431: the head is larger than the buffer, or has too many headers.
    TooLarge,
    /// 414: the request target is longer than `MAX_TARGET`.
    TargetTooLong,
    /// 400: not HTTP/1.x, or ambiguous framing.
    Malformed(&'static str),
    /// 501: a transfer coding other than chunked.
    UnsupportedCoding,
}

impl HeadError {
    pub(crate) fn status(&self) -> u16 {
        match self {
            HeadError::TooLarge => 431,
            HeadError::TargetTooLong => 414,
            HeadError::Malformed(_) => 400,
            HeadError::UnsupportedCoding => 501,
        }
    }

    pub(crate) fn message(&self) -> &'static str {
        match self {
            HeadError::TooLarge => {
                "request head is larger than 16 KiB or has more than 100 headers"
            }
            HeadError::TargetTooLong => "request target is longer than 8 KiB",
            HeadError::Malformed(what) => what,
            HeadError::UnsupportedCoding => "only the chunked transfer coding is supported",
        }
    }
}

/// A parsed request head: its bytes and where each part lies in them.
#[derive(Default, Debug)]
pub(crate) struct Head {
    bytes: Vec<u8>,
    /// The method and then the target (origin form), as text: checked as
    /// UTF-8 once here (httparse hands them over as `&str`), not on each of
    /// the several reads a request makes of them.
    line: String,
    /// Where the target starts in `line`.
    method_len: usize,
    minor_version: u8,
    headers: Vec<(Range<usize>, Range<usize>)>,
    /// Which of the headers the engine itself reads are present (the bits
    /// below), so the common request skips looking for the absent ones.
    present: u8,
    /// `Host` lines seen.
    hosts: u8,
}

/// The headers the engine reads on every request, as bits of `present`.
const CONNECTION: u8 = 1;
const TRANSFER_ENCODING: u8 = 2;
const CONTENT_LENGTH: u8 = 4;
const EXPECT: u8 = 8;
const HOST: u8 = 16;

/// The `present` bit of a header name, or 0.
fn known(name: &[u8]) -> u8 {
    let (bit, known): (u8, &[u8]) = match name.len() {
        4 => (HOST, b"host"),
        6 => (EXPECT, b"expect"),
        10 => (CONNECTION, b"connection"),
        14 => (CONTENT_LENGTH, b"content-length"),
        17 => (TRANSFER_ENCODING, b"transfer-encoding"),
        _ => return 0,
    };
    if name.eq_ignore_ascii_case(known) {
        bit
    } else {
        0
    }
}

impl Head {
    /// Parses a complete head from the start of `buf`: `Ok(None)` means more
    /// bytes are needed, `Ok(Some((head, len)))` consumed `len` bytes.
    #[cfg(test)]
    pub(crate) fn parse(buf: &[u8], max_head: usize) -> Result<Option<(Head, usize)>, HeadError> {
        let mut head = Head::default();
        Ok(head.parse_into(buf, max_head)?.map(|len| (head, len)))
    }

    /// As `parse`, into this head, reusing its buffers (one connection
    /// parses every head into the same `Head`, allocating only when a head
    /// is larger than any before it). `Ok(Some(len))` consumed `len` bytes.
    pub(crate) fn parse_into(
        &mut self,
        buf: &[u8],
        max_head: usize,
    ) -> Result<Option<usize>, HeadError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let len = match req.parse(buf) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return partial(buf, max_head),
            Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
            Err(_) => return Err(HeadError::Malformed("malformed request head")),
        };
        if len > max_head {
            return Err(too_large(buf));
        }
        // httparse also ends lines at a bare LF; a proxy that does not
        // would read other headers than we do.
        let head = &buf[..len];
        if head
            .iter()
            .enumerate()
            .any(|(i, &b)| b == b'\n' && (i == 0 || head[i - 1] != b'\r'))
        {
            return Err(HeadError::Malformed("request head line ended by a bare LF"));
        }
        let base = buf.as_ptr() as usize;
        let span = |s: &[u8]| {
            let start = s.as_ptr() as usize - base;
            start..start + s.len()
        };
        // httparse guarantees all three on Complete; be defensive anyway.
        let (Some(method), Some(target), Some(minor_version)) = (req.method, req.path, req.version)
        else {
            return Err(HeadError::Malformed("malformed request line"));
        };
        if target.len() > MAX_TARGET {
            return Err(HeadError::TargetTooLong);
        }
        self.line.clear();
        self.line.push_str(method);
        self.line.push_str(origin_form(target));
        self.method_len = method.len();
        self.minor_version = minor_version;
        self.headers.clear();
        self.present = 0;
        self.hosts = 0;
        for h in req.headers.iter() {
            let bit = known(h.name.as_bytes());
            self.present |= bit;
            if bit == HOST {
                self.hosts = self.hosts.saturating_add(1);
                if !h.value.iter().all(|&b| authority_byte(b)) {
                    return Err(HeadError::Malformed("invalid Host header"));
                }
            }
            self.headers.push((span(h.name.as_bytes()), span(h.value)));
        }
        if self.hosts > 1 || (minor_version == 1 && self.hosts == 0) {
            return Err(HeadError::Malformed(
                "an HTTP/1.1 request needs exactly one Host header (and any request at most one)",
            ));
        }
        self.bytes.clear();
        self.bytes.extend_from_slice(&buf[..len]);
        Ok(Some(len))
    }

    pub(crate) fn headers<'a, 'n>(
        &'a self,
        name: &'n str,
    ) -> impl Iterator<Item = &'a [u8]> + use<'a, 'n> {
        // The length first: most names differ in it, and it is read
        // without touching the bytes.
        self.headers
            .iter()
            .filter(move |(n, _)| {
                n.len() == name.len() && self.bytes[n.clone()].eq_ignore_ascii_case(name.as_bytes())
            })
            .map(|(_, v)| &self.bytes[v.clone()])
    }

    /// Whether a comma-separated header (`Connection`, `Expect`) lists `token`.
    pub(crate) fn lists(&self, name: &str, token: &str) -> bool {
        self.headers(name).any(|v| {
            v.split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
        })
    }

    /// How the body is framed, refusing anything ambiguous.
    pub(crate) fn framing(&self) -> Result<Framing, HeadError> {
        if self.present & (TRANSFER_ENCODING | CONTENT_LENGTH) == 0 {
            return Ok(Framing::None);
        }
        if self.present & TRANSFER_ENCODING == 0 {
            return content_length(self.headers("content-length"));
        }
        let mut coding = self.headers("transfer-encoding");
        match coding.next() {
            Some(_) if self.minor_version == 0 => Err(HeadError::Malformed(
                "Transfer-Encoding is not allowed in an HTTP/1.0 request",
            )),
            Some(_) if self.headers("content-length").next().is_some() => Err(
                HeadError::Malformed("both Content-Length and Transfer-Encoding are present"),
            ),
            Some(value)
                if coding.next().is_none()
                    && value.trim_ascii().eq_ignore_ascii_case(b"chunked") =>
            {
                Ok(Framing::Chunked)
            }
            Some(_) => Err(HeadError::UnsupportedCoding),
            None => content_length(self.headers("content-length")),
        }
    }

    /// Whether the client asked to keep the connection open.
    pub(crate) fn keep_alive(&self) -> bool {
        if self.present & CONNECTION == 0 {
            return self.minor_version != 0;
        }
        if self.minor_version == 0 {
            self.lists("connection", "keep-alive")
        } else {
            !self.lists("connection", "close")
        }
    }

    /// The method, as sent.
    pub(crate) fn method(&self) -> &str {
        self.line.get(..self.method_len).unwrap_or("")
    }

    /// The target in origin form (path and query).
    pub(crate) fn target(&self) -> &str {
        match self.line.get(self.method_len..).unwrap_or("") {
            "" => "/",
            target => target,
        }
    }

    /// The minor HTTP version (`1` for HTTP/1.1).
    pub(crate) fn minor_version(&self) -> u8 {
        self.minor_version
    }

    /// Whether the client sent `Expect: 100-continue` (HTTP/1.1 only).
    pub(crate) fn expects_continue(&self) -> bool {
        self.minor_version == 1
            && self.present & EXPECT != 0
            && self.lists("expect", "100-continue")
    }

    /// Every header line, in order, as name and value.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn lines(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let bytes = &self.bytes;
        self.headers
            .iter()
            .map(|(n, v)| (bytes[n.clone()].to_vec(), bytes[v.clone()].to_vec()))
            .collect()
    }

    /// Bytes of heap this head holds.
    pub(crate) fn bytes_held(&self) -> usize {
        self.bytes.capacity()
            + self.headers.capacity() * std::mem::size_of::<(Range<usize>, Range<usize>)>()
    }

    /// Gives back the buffers (an idle connection keeps none).
    pub(crate) fn release(&mut self) {
        *self = Head::default();
    }
}

/// The path and query of a target: an absolute-form target
/// (`http://host/path?q`) is served by its path (RFC 9112 §3.2.2); `*` and
/// origin-form pass as they are.
fn origin_form(target: &str) -> &str {
    let Some(scheme_end) = target.find("://") else {
        return target;
    };
    let scheme = &target[..scheme_end];
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return target;
    }
    let rest = &target[scheme_end + 3..];
    match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => &rest[i..],
        // `http://host` is `/`; so is `http://host?q` (a query with no
        // path: no resource that reads a query lives at `/`). Empty here,
        // so that it still lies in the head's bytes; `target` says `/`.
        _ => &rest[rest.len()..],
    }
}

/// Whether `b` may appear in a `Host` value (RFC 3986 authority without
/// userinfo: unreserved, percent-encoded, sub-delims, `:` and IPv6 brackets).
fn authority_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=:[]".contains(&b)
}

/// A partial head: decide whether waiting for more bytes is still allowed.
fn partial(buf: &[u8], max_head: usize) -> Result<Option<usize>, HeadError> {
    let line_ended = buf.contains(&b'\n');
    // The request line alone is already longer than any allowed one.
    if !line_ended && buf.len() > MAX_TARGET + 32 {
        return Err(HeadError::TargetTooLong);
    }
    if buf.len() >= max_head {
        return Err(too_large(buf));
    }
    Ok(None)
}

/// 414 when the request line is the reason the head is too big, else 431.
fn too_large(buf: &[u8]) -> HeadError {
    let line = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
    if line > MAX_TARGET {
        HeadError::TargetTooLong
    } else {
        HeadError::TooLarge
    }
}

fn content_length<'a>(mut values: impl Iterator<Item = &'a [u8]>) -> Result<Framing, HeadError> {
    let mut length = None;
    for value in values.by_ref() {
        let value = value.trim_ascii();
        let parsed = std::str::from_utf8(value)
            .ok()
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or(HeadError::Malformed("malformed Content-Length"))?;
        if length.is_some_and(|l| l != parsed) {
            return Err(HeadError::Malformed("conflicting Content-Length values"));
        }
        length = Some(parsed);
    }
    Ok(match length {
        Some(0) | None => Framing::None,
        Some(n) => Framing::Length(n),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<(Head, usize)>, HeadError> {
        Head::parse(text.as_bytes(), 16 * 1024)
    }

    fn framing(text: &str) -> Result<Framing, HeadError> {
        parse(text).unwrap().unwrap().0.framing()
    }

    #[test]
    fn partial_head_waits_for_more() {
        assert!(
            parse("POST /plants HTTP/1.1\r\nHost: x\r\n")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn complete_head_reports_its_length_and_parts() {
        let text = "GET /a?b=1 HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nrest";
        let (head, len) = parse(text).unwrap().unwrap();
        assert_eq!(len, text.len() - 4);
        assert_eq!(head.target(), "/a?b=1");
        assert!(head.keep_alive());
    }

    #[test]
    fn framing_refuses_ambiguity() {
        let both =
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(framing(both), Err(HeadError::Malformed(_))));
        let two = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n";
        assert!(matches!(framing(two), Err(HeadError::Malformed(_))));
        let signed = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\n";
        assert!(matches!(framing(signed), Err(HeadError::Malformed(_))));
        let gzip = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
        assert_eq!(framing(gzip), Err(HeadError::UnsupportedCoding));
    }

    #[test]
    fn framing_accepts_the_plain_cases() {
        let same = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n";
        assert_eq!(framing(same), Ok(Framing::Length(3)));
        let chunked = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n";
        assert_eq!(framing(chunked), Ok(Framing::Chunked));
        assert_eq!(
            framing("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(Framing::None)
        );
    }

    #[test]
    fn long_target_is_414_and_big_head_is_431() {
        let target = format!("GET /{} HTTP/1.1\r\nHost: x\r\n", "a".repeat(20 * 1024));
        assert_eq!(parse(&target).err(), Some(HeadError::TargetTooLong));
        let headers = format!("GET / HTTP/1.1\r\nHost: x\r\n{}", "X-A: b\r\n".repeat(3000));
        assert_eq!(
            Head::parse(&headers.as_bytes()[..16 * 1024], 16 * 1024).err(),
            Some(HeadError::TooLarge)
        );
    }

    #[test]
    fn http_1_1_needs_exactly_one_host() {
        let refused =
            |text: &str| matches!(parse(text), Err(HeadError::Malformed(m)) if m.contains("Host"));
        assert!(refused("GET / HTTP/1.1\r\n\r\n"));
        assert!(refused("GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n"));
        assert!(refused("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n"));
        for bad in ["a b", "u@evil", "a/x", "a\"b"] {
            let text = format!("GET / HTTP/1.1\r\nHost: {bad}\r\n\r\n");
            assert!(
                matches!(parse(&text), Err(HeadError::Malformed(_))),
                "{bad}"
            );
        }
        for good in ["", "a.example:8080", "[::1]:80", "xn--d1a.example"] {
            let text = format!("GET / HTTP/1.1\r\nHost: {good}\r\n\r\n");
            assert!(parse(&text).unwrap().is_some(), "{good}");
        }
        assert!(parse("GET / HTTP/1.0\r\n\r\n").unwrap().is_some());
        assert!(
            parse("GET / HTTP/1.1\r\nHOST: a\r\n\r\n")
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn a_bare_lf_in_a_head_is_refused() {
        for text in [
            "GET / HTTP/1.1\nHost: x\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\nContent-Length: 3\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\n\n",
        ] {
            assert!(
                matches!(parse(text), Err(HeadError::Malformed(_))),
                "{text:?}"
            );
        }
    }

    #[test]
    fn absolute_form_is_served_by_its_path() {
        for (target, path) in [
            ("http://a.example/plants?limit=1", "/plants?limit=1"),
            ("HTTP://a:8080/healthz", "/healthz"),
            ("http://a", "/"),
            ("/plants", "/plants"),
            ("*", "*"),
        ] {
            let text = format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n");
            let (head, _) = parse(&text).unwrap().unwrap();
            assert_eq!(head.target(), path, "{target}");
        }
    }

    #[test]
    fn transfer_encoding_on_http_1_0_is_refused() {
        let text = "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(framing(text), Err(HeadError::Malformed(_))));
    }
}
