//! Driving the engine without a socket: one connection whose client sends a
//! scripted list of reads and then closes its side.
//!
//! The protocol core and the session run exactly as they do on an event
//! loop, with a handler that records every request it is given and answers
//! with what it saw, so a caller can check what the engine accepted and
//! what it wrote.
//! Compiled only for the unit tests and the fuzz targets (`--cfg fuzzing`),
//! never into the server. A connection on the TLS port has its own harness
//! beside its TLS state (`transport::replay`).

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Instant;

use super::protocol::Protocol;
use super::session;
use super::{BodyError, Handler, Limits, Request, Response};
use crate::lock::lock;

/// One request as the handler saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The method, as sent.
    pub method: String,
    /// The request target.
    pub target: String,
    /// `0` for HTTP/1.0, `1` for HTTP/1.1.
    pub minor_version: u8,
    /// Every header line, in order.
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// The body, for requests whose path starts with `/b` (the recording
    /// handler reads no other body).
    pub body: Option<Result<Vec<u8>, BodyError>>,
}

/// What one scripted connection produced.
#[derive(Debug)]
pub struct Exchange {
    /// The requests handed to the handler, in order.
    pub seen: Vec<Seen>,
    /// Every byte the server wrote.
    pub output: Vec<u8>,
}

/// Serves one connection whose client sends `reads` (one read each; empty
/// ones are skipped) and then closes its sending side. No time passes, so
/// no deadline fires; every byte the protocol offers is "sent" at once.
pub fn exchange(reads: &[&[u8]], limits: Limits) -> Exchange {
    let recorder = Recorder::default();
    let output = serve(&recorder, reads, limits);
    let seen = std::mem::take(&mut *lock(&recorder.seen));
    Exchange { seen, output }
}

/// [`exchange`] with `handler` answering instead of the recorder: every
/// byte the server wrote.
pub fn serve(handler: &dyn Handler, reads: &[&[u8]], limits: Limits) -> Vec<u8> {
    let peer = SocketAddr::from(([127, 0, 0, 1], 1));
    let now = Instant::now();
    let mut protocol = Protocol::new(limits, peer, now);
    let mut output = Vec::new();
    let mut step = |protocol: &mut Protocol| {
        session::drive(protocol, handler, peer, None, None, now);
        // Sending may let a streamed body make more.
        while !protocol.output().is_empty() {
            let out = protocol.output();
            output.extend_from_slice(out);
            let n = out.len();
            protocol.sent(n, now);
        }
    };
    step(&mut protocol);
    for read in reads.iter().filter(|r| !r.is_empty()) {
        if protocol.is_closed() {
            break;
        }
        protocol.received(read, now);
        step(&mut protocol);
    }
    protocol.closed_by_peer();
    step(&mut protocol);
    output
}

/// Records each request; reads the body when the path starts with `/b`
/// and echoes it, otherwise echoes the target.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
}

impl Handler for Recorder {
    fn handle(&self, request: &mut Request<'_>) -> Response {
        let body = request
            .path()
            .starts_with("/b")
            .then(|| request.body().map(<[u8]>::to_vec));
        if request.awaits_body() {
            // Called again once the body is in; record that call only.
            return Response::empty(0);
        }
        let response = match &body {
            Some(Ok(bytes)) => Response::bytes(200, "application/octet-stream", bytes.clone()),
            Some(Err(e)) => Response::error(400, &e.to_string()),
            None => Response::bytes(200, "text/plain", request.target().as_bytes().to_vec()),
        };
        let seen = Seen {
            method: request.method().to_owned(),
            target: request.target().to_owned(),
            minor_version: request.minor_version(),
            headers: request.header_lines(),
            body,
        };
        lock(&self.seen).push(seen);
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipelined_requests_split_anywhere_are_seen_alike() {
        let text: &[u8] = b"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
            3\r\nabc\r\n0\r\n\r\nGET /x?y HTTP/1.1\r\nHost: x\r\nA: b\r\n\r\n";
        let whole = exchange(&[text], Limits::default());
        assert_eq!(whole.seen.len(), 2);
        assert_eq!(whole.seen[0].body, Some(Ok(b"abc".to_vec())));
        assert_eq!(whole.seen[1].target, "/x?y");
        for cut in 1..text.len() {
            let split = exchange(&[&text[..cut], &text[cut..]], Limits::default());
            assert_eq!(split.seen, whole.seen, "cut at {cut}");
            assert_eq!(split.output, whole.output, "cut at {cut}");
        }
    }

    #[test]
    fn a_refused_head_is_answered_and_ends_the_connection() {
        let ex = exchange(
            &[b"GET / HTTP/1.1\r\nA b\r\n\r\nGET / HTTP/1.1\r\n\r\n"],
            Limits::default(),
        );
        assert!(ex.seen.is_empty());
        assert!(ex.output.starts_with(b"HTTP/1.1 400 Bad Request\r\n"));
    }

    #[test]
    fn bytes_past_the_head_limit_never_change_the_verdict() {
        // Found by the engine fuzz target: a bad byte just past the limit
        // made a whole read a 400 while small reads stopped at the limit
        // (431).
        let limits = Limits {
            max_head: 256,
            ..Limits::default()
        };
        let mut text = b"GET /".to_vec();
        text.extend_from_slice(&[b'a'; 300]);
        text.push(0x01);
        let whole = exchange(&[&text], limits.clone());
        assert!(whole.output.starts_with(b"HTTP/1.1 431 "));
        let reads: Vec<&[u8]> = text.chunks(17).collect();
        assert_eq!(exchange(&reads, limits).output, whole.output);
    }
}
