//! Driving a connection's TLS state without a socket: one connection on
//! the TLS port whose client sends a scripted list of reads and then
//! closes, read as an event loop reads it (`connection.rs`), so a caller
//! can check how it ended, what the server wrote and that no plaintext
//! came out. Compiled only for the unit tests and the fuzz targets
//! (`--cfg fuzzing`), with the `tls` feature, never into the server; the
//! engine's own harness (the HTTP protocol driven by a script) is
//! `http::replay`.

use std::net::SocketAddr;
use std::sync::Arc;

use super::Read;
use super::connection::{ServerTls, Wire};

/// The configuration a replayed connection is served with
/// ([`Served::server_config`](crate::transport::Served::server_config)).
pub type Config = Arc<rustls::ServerConfig>;

/// What a scripted connection to the TLS port came to.
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
#[derive(Debug)]
pub struct TlsExchange {
    pub end: TlsEnd,
    /// Bytes of plaintext the TLS state gave (what a loop hands to the
    /// HTTP protocol).
    pub plaintext: usize,
    /// Bytes the server wrote (handshake messages, alerts).
    pub written: usize,
}

/// Serves one connection on the TLS port (`config`) whose client sends
/// `reads` (each one read, as a socket would give them) and then closes:
/// the connection's TLS state exactly as an event loop drives it, its
/// plaintext counted (the HTTP protocol must never be handed any here: a
/// client without this handshake's keys cannot finish it).
pub fn tls_exchange(reads: &[&[u8]], config: Config) -> TlsExchange {
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
    let Some(mut tls) = ServerTls::new(config) else {
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
                Read::Bytes(n) => plaintext += n,
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
struct Script {
    reads: Vec<Vec<u8>>,
    /// The read now available (`reads.len()`: the end of the stream).
    at: usize,
    written: usize,
}

impl Script {
    fn next(&mut self) {
        if self.at < self.reads.len() && self.reads[self.at].is_empty() {
            self.at += 1;
        }
    }
}

impl std::io::Read for Script {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = Wire::peek(self, buf)?;
        if let Some(read) = self.reads.get_mut(self.at) {
            read.drain(..n);
        }
        Ok(n)
    }
}

impl std::io::Write for Script {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.written += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Wire for Script {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn test_config() -> Config {
        let cert = include_str!("../../tests/data/tls/cert.pem");
        let key = include_str!("../../tests/data/tls/key.pem");
        crate::transport::from_pem(cert, key)
            .unwrap()
            .server_config()
            .unwrap()
    }

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
