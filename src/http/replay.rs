//! Driving the engine without a socket: one connection whose client sends a
//! scripted list of reads and then closes its side.
//!
//! The protocol core and the session run exactly as they do on an event
//! loop, with a handler that records every request it is given and answers
//! with what it saw, so a caller can check what the engine accepted and
//! what it wrote.
//! Compiled only for the unit tests and the fuzz targets (`--cfg fuzzing`),
//! never into the server.

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
    let peer = SocketAddr::from(([127, 0, 0, 1], 1));
    let now = Instant::now();
    let mut protocol = Protocol::new(limits, peer, now);
    let mut output = Vec::new();
    let mut step = |protocol: &mut Protocol| {
        session::drive(protocol, &recorder, peer, None, false, now);
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
    let seen = std::mem::take(&mut *lock(&recorder.seen));
    Exchange { seen, output }
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

    #[cfg(feature = "tls")]
    fn test_config() -> std::sync::Arc<rustls::ServerConfig> {
        let cert = include_str!("../../tests/data/tls/cert.pem");
        let key = include_str!("../../tests/data/tls/key.pem");
        crate::tls::from_pem(cert, key).unwrap().config
    }

    #[cfg(feature = "tls")]
    #[test]
    fn a_client_hello_cut_anywhere_gets_the_same_handshake_and_no_plaintext() {
        for hello in [
            &include_bytes!("../../tests/data/tls/client_hello_tls13.bin")[..],
            include_bytes!("../../tests/data/tls/client_hello_tls12.bin"),
        ] {
            let whole = tls_exchange(&[hello], test_config());
            // The server answered (its hello, certificate, ...) and then
            // the client left mid-handshake.
            assert!(whole.written > 300, "{whole:?}");
            assert_eq!((whole.end, whole.plaintext), (TlsEnd::Failed, 0));
            for cut in 1..hello.len() {
                let split = tls_exchange(&[&hello[..cut], &hello[cut..]], test_config());
                assert_eq!((split.end, split.plaintext), (whole.end, 0), "cut at {cut}");
                assert!(split.written > 300, "cut at {cut}: {split:?}");
            }
        }
    }

    #[cfg(feature = "tls")]
    #[test]
    fn plain_http_and_bytes_that_are_not_tls_end_before_any_plaintext() {
        let plain = tls_exchange(&[b"GET / HTTP/1.1\r\n\r\n"], test_config());
        assert_eq!(
            (plain.end, plain.plaintext, plain.written),
            (TlsEnd::PlainHttp, 0, 0)
        );
        let garbage = tls_exchange(&[&[0x01, 0x02, 0x03]], test_config());
        assert_eq!((garbage.end, garbage.plaintext), (TlsEnd::Failed, 0));
        // A handshake record header claiming more than a record may hold.
        let huge = tls_exchange(&[&[0x16, 0x03, 0x01, 0xff, 0xff, 0x01]], test_config());
        assert_eq!((huge.end, huge.plaintext), (TlsEnd::Failed, 0));
        let silent = tls_exchange(&[], test_config());
        assert_eq!(silent.end, TlsEnd::Closed);
    }
}

/// What a scripted connection to the TLS port came to.
#[cfg(feature = "tls")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsEnd {
    /// Told to use https (the first byte was a letter).
    PlainHttp,
    /// Closed on: not TLS, a failed handshake, a bad record.
    Failed,
    /// The client's bytes ran out, and then its side closed.
    Closed,
}

/// What a scripted TLS connection produced.
#[cfg(feature = "tls")]
#[derive(Debug)]
pub struct TlsExchange {
    pub end: TlsEnd,
    /// Bytes of plaintext handed to the HTTP protocol.
    pub plaintext: usize,
    /// Bytes the server wrote (handshake messages, alerts).
    pub written: usize,
}

/// Serves one connection on the TLS port (`config`) whose client sends
/// `reads` (each one read, as a socket would give them) and then closes:
/// the connection's TLS state exactly as an event loop drives it, its
/// plaintext fed to the protocol.
#[cfg(feature = "tls")]
pub fn tls_exchange(reads: &[&[u8]], config: std::sync::Arc<rustls::ServerConfig>) -> TlsExchange {
    use super::tls::{Read, Tls};
    let mut wire = Script {
        reads: reads
            .iter()
            .filter(|r| !r.is_empty())
            .map(|r| r.to_vec())
            .collect(),
        at: 0,
        written: 0,
    };
    let peer = SocketAddr::from(([127, 0, 0, 1], 1));
    let now = Instant::now();
    let mut protocol = Protocol::new(Limits::default(), peer, now);
    let Some(mut tls) = Tls::new(config) else {
        return TlsExchange {
            end: TlsEnd::Failed,
            plaintext: 0,
            written: 0,
        };
    };
    let failures = std::sync::atomic::AtomicU64::new(0);
    let mut buf = [0u8; 4096];
    let mut plaintext = 0;
    // Each read is one readiness edge; after the last, the end of the
    // stream. Bounded: every turn consumes a read or ends.
    for _ in 0..=wire.reads.len() + 1 {
        loop {
            match tls.read(&mut wire, &mut buf, &peer, &failures) {
                Read::Bytes(n) => {
                    plaintext += n;
                    protocol.received(&buf[..n], now);
                }
                Read::Blocked => break,
                Read::Closed => {
                    return TlsExchange {
                        end: TlsEnd::Closed,
                        plaintext,
                        written: wire.written,
                    };
                }
                Read::PlainHttp => {
                    return TlsExchange {
                        end: TlsEnd::PlainHttp,
                        plaintext,
                        written: wire.written,
                    };
                }
                Read::Failed => {
                    return TlsExchange {
                        end: TlsEnd::Failed,
                        plaintext,
                        written: wire.written,
                    };
                }
            }
        }
        wire.next();
    }
    unreachable!("the script ends with the end of the stream")
}

/// The client's side of a scripted TLS connection: one read at a time,
/// `WouldBlock` when a read is used up until the next edge, then the end.
#[cfg(feature = "tls")]
struct Script {
    reads: Vec<Vec<u8>>,
    /// The read now available (`reads.len()`: the end of the stream).
    at: usize,
    written: usize,
}

#[cfg(feature = "tls")]
impl Script {
    fn next(&mut self) {
        if self.at < self.reads.len() && self.reads[self.at].is_empty() {
            self.at += 1;
        }
    }
}

#[cfg(feature = "tls")]
impl std::io::Read for Script {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = super::tls::Wire::peek(self, buf)?;
        if let Some(read) = self.reads.get_mut(self.at) {
            read.drain(..n);
        }
        Ok(n)
    }
}

#[cfg(feature = "tls")]
impl std::io::Write for Script {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.written += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(feature = "tls")]
impl super::tls::Wire for Script {
    fn peek(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.reads.get(self.at) {
            None => Ok(0),
            Some(read) if read.is_empty() => Err(std::io::ErrorKind::WouldBlock.into()),
            Some(read) => {
                let n = buf.len().min(read.len());
                buf[..n].copy_from_slice(&read[..n]);
                Ok(n)
            }
        }
    }
}
