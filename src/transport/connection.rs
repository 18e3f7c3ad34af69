//! HTTPS on the event loop: a connection's TLS state ([`ServerTls`], a rustls
//! `ServerConnection`, sans-I/O like the protocol) sits between its socket
//! and its protocol, in the loop that owns the connection. No thread per
//! connection, no async runtime: the loop reads ciphertext when the socket
//! is readable, rustls turns it into plaintext for the protocol, and the
//! protocol's output goes out encrypted when the socket is writable.
//!
//! Budgets hold as for plain HTTP: the protocol's head deadline runs from
//! the accept, and the protocol gets no byte before the handshake is done,
//! so a client that stalls its handshake is closed like a slow header.
//! rustls buffers at most `BUFFERED` bytes of output per connection (what
//! the protocol offers beyond that waits in the protocol, bounded there),
//! and at most 16 KiB of plaintext read ahead.
//!
//! A plain-HTTP request on the TLS port (a first byte that is an ASCII
//! letter, where a TLS client sends a handshake record, 0x16) is answered
//! with a 400 that says to use https, then closed, as nginx does. Other
//! bytes that are no TLS are closed on (after an alert, where rustls sends
//! one). A failed handshake is one line in the log (level info: a scanner
//! can make many) and counted in `plantstore_tls_handshake_failures_total`.

use std::io::{self, Read as _, Write as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use mio::net::TcpStream;
use rustls::{ServerConfig, ServerConnection};

use super::Read;

/// Bytes of encrypted output rustls may hold for one connection.
const BUFFERED: usize = 64 * 1024;

/// The first byte of a TLS handshake record.
const HANDSHAKE: u8 = 0x16;

/// What a connection's TLS state reads from and writes to: its socket (or,
/// in the replay harness, a script).
pub(crate) trait Wire: io::Read + io::Write {
    /// Reads without taking the bytes.
    fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize>;
}

impl Wire for TcpStream {
    fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        TcpStream::peek(self, buf)
    }
}

/// One connection's TLS state, boxed: rustls' state is large, and a
/// connection without TLS holds only the empty `Option` of it.
pub(crate) struct ServerTls(Box<State>);

struct State {
    conn: ServerConnection,
    /// No byte read yet: the first says whether the client speaks TLS.
    fresh: bool,
    /// While rustls holds encrypted output the socket has not taken: when
    /// it must have left (the protocol, which handed it over, no longer
    /// times it).
    drain_by: Option<Instant>,
}

impl ServerTls {
    pub(crate) fn new(config: Arc<ServerConfig>) -> Option<ServerTls> {
        let mut conn = ServerConnection::new(config).ok()?;
        conn.set_buffer_limit(Some(BUFFERED));
        Some(ServerTls(Box::new(State {
            conn,
            fresh: true,
            drain_by: None,
        })))
    }

    /// When the encrypted output held must have left: the deadline set
    /// when this wait began, or `at` if it begins now.
    pub(crate) fn drain_by(&mut self, at: Instant) -> Instant {
        *self.0.drain_by.get_or_insert(at)
    }

    /// Nothing encrypted waits for the socket any more.
    pub(crate) fn drained(&mut self) {
        self.0.drain_by = None;
    }

    /// When the encrypted output held must have left, while some is held.
    pub(crate) fn drain_deadline(&self) -> Option<Instant> {
        self.0.drain_by
    }

    /// Reads plaintext into `buf`: what rustls holds, else what the socket
    /// has, decrypted (answering the handshake on the way).
    pub(crate) fn read(
        &mut self,
        socket: &mut impl Wire,
        buf: &mut [u8],
        peer: &dyn std::fmt::Display,
        failures: &AtomicU64,
    ) -> Read {
        let failed = |why: &str| {
            failures.fetch_add(1, Ordering::Relaxed);
            log::info!(target: "plantstore::tls", "TLS handshake with {peer} failed: {why}");
            Read::Failed
        };
        loop {
            match self.0.conn.reader().read(buf) {
                Ok(0) => return Read::Closed,
                Ok(n) => return Read::Bytes(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // A TCP close without close_notify: what most HTTP clients do.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Read::Closed,
                Err(_) => return Read::Failed,
            }
            if self.0.fresh {
                let mut first = [0u8; 1];
                match socket.peek(&mut first) {
                    Ok(0) => return Read::Closed,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Read::Blocked,
                    Err(e) => return failed(&e.to_string()),
                }
                self.0.fresh = false;
                if first[0] != HANDSHAKE {
                    if first[0].is_ascii_alphabetic() {
                        return Read::PlainHttp;
                    }
                    return failed("not a TLS handshake");
                }
            }
            match self.0.conn.read_tls(socket) {
                Ok(0) => {
                    // The socket ended: rustls says how (clean or not).
                    return match self.0.conn.process_new_packets() {
                        Ok(_) if self.0.conn.is_handshaking() => {
                            failed("closed during the handshake")
                        }
                        Ok(_) => match self.0.conn.reader().read(buf) {
                            Ok(n) if n > 0 => Read::Bytes(n),
                            _ => Read::Closed,
                        },
                        Err(e) => failed(&e.to_string()),
                    };
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Read::Blocked,
                // A reset during the handshake is a failed one.
                Err(e) if self.0.conn.is_handshaking() => return failed(&e.to_string()),
                Err(_) => return Read::Failed,
            }
            if let Err(e) = self.0.conn.process_new_packets() {
                // Sends the alert rustls queued, if the socket takes it.
                let _ = self.flush(socket);
                let handshaking = self.0.conn.is_handshaking();
                return if handshaking {
                    failed(&e.to_string())
                } else {
                    Read::Failed
                };
            }
            // Handshake messages to send back, as far as the socket takes
            // them now (the rest when it is writable).
            if let Err(e) = self.flush(socket)
                && e.kind() != io::ErrorKind::WouldBlock
            {
                return Read::Failed;
            }
        }
    }

    /// Takes as much of `out` as rustls may buffer, encrypted, and writes
    /// what it holds to the socket; `WouldBlock` when rustls is full until
    /// the socket drains. Output before the handshake is done (only a
    /// deadline's answer can come then) cannot be sent: `NotConnected`,
    /// and the connection is closed.
    pub(crate) fn write(&mut self, socket: &mut impl Wire, out: &[u8]) -> io::Result<usize> {
        self.flush(socket)?;
        if self.0.conn.is_handshaking() {
            return Err(io::ErrorKind::NotConnected.into());
        }
        let taken = self.0.conn.writer().write(out)?;
        match self.flush(socket) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ if taken == 0 => Err(io::ErrorKind::WouldBlock.into()),
            _ => Ok(taken),
        }
    }

    /// Writes what rustls holds (handshake messages, alerts, encrypted
    /// output) until it holds nothing or the socket would block.
    pub(crate) fn flush(&mut self, socket: &mut impl Wire) -> io::Result<()> {
        while self.0.conn.wants_write() {
            match self.0.conn.write_tls(socket) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Whether encrypted output waits for the socket.
    pub(crate) fn has_output(&self) -> bool {
        self.0.conn.wants_write()
    }

    /// Queues a close_notify (sent by the next `flush`).
    pub(crate) fn close(&mut self) {
        self.0.conn.send_close_notify();
    }

    /// The protocol closed the connection before the handshake was done
    /// (the head deadline, or the server stopping): a failed handshake,
    /// logged and counted like the others.
    pub(crate) fn abandoned(&self, peer: &dyn std::fmt::Display, failures: &AtomicU64) {
        if self.0.conn.is_handshaking() && !self.0.fresh {
            failures.fetch_add(1, Ordering::Relaxed);
            log::info!(target: "plantstore::tls", "TLS handshake with {peer} failed: not done within the head timeout");
        }
    }
}
