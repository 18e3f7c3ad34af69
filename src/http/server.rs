//! The listener, the accept loop and graceful shutdown.
//!
//! The acceptor hands each connection to the pool; past the connection cap
//! it answers `503` with `Retry-After: 1` itself and closes at once, so a
//! flood never leaves a client hanging in the backlog. Shutdown sets a flag
//! and wakes the blocking `accept` with a connection to ourselves; the
//! listener is then closed and open connections get a grace period to
//! finish the request in flight.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown as Side, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::Duration;

use log::{info, warn};

use super::pool::Pool;
use super::response::Persist;
use super::{Handler, Limits, Response, conn};

/// What every connection thread shares.
pub(crate) struct Shared {
    pub(crate) limits: Limits,
    pub(crate) handler: Arc<dyn Handler>,
    stopping: Arc<AtomicBool>,
}

impl Shared {
    pub(crate) fn new(limits: Limits, handler: Arc<dyn Handler>) -> Shared {
        Shared {
            limits,
            handler,
            stopping: Arc::new(AtomicBool::new(false)),
        }
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }
}

/// A bound HTTP server, ready to `run`.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    pool: Arc<Pool>,
}

/// Stops a running server from another thread (a signal handler, a test).
#[derive(Clone)]
pub struct Stopper {
    // Only the flag: holding `Shared` would keep the handler (and the
    // store's file lock) alive as long as any stopper exists.
    stopping: Arc<AtomicBool>,
    wake: SocketAddr,
}

/// Reads how many connections are open, for `/metrics`.
#[derive(Clone)]
pub struct Gauge {
    // Weak: the handler that holds the gauge is itself held by the pool, and
    // a strong reference would keep both (and the store's file) alive
    // forever.
    pool: Weak<Pool>,
}

impl Gauge {
    /// Connections open right now (0 once the server is gone).
    pub fn open_connections(&self) -> usize {
        self.pool.upgrade().map_or(0, |pool| pool.open())
    }
}

impl Server {
    /// Binds `addr` (port 0 picks a free port).
    pub fn bind(
        addr: SocketAddr,
        limits: Limits,
        handler: Arc<dyn Handler>,
    ) -> std::io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        let shared = Arc::new(Shared::new(limits, handler));
        let for_pool = Arc::clone(&shared);
        let serve = Box::new(move |stream, peer| conn::serve_tcp(stream, peer, &for_pool));
        let pool = Pool::new(shared.limits.max_connections, serve);
        Ok(Server {
            listener,
            shared,
            pool,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        // A bound listener always has a local address.
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// A handle that stops this server.
    pub fn stopper(&self) -> Stopper {
        let mut wake = self.local_addr();
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            });
        }
        Stopper {
            stopping: Arc::clone(&self.shared.stopping),
            wake,
        }
    }

    /// A reader of the open-connection count.
    pub fn gauge(&self) -> Gauge {
        Gauge {
            pool: Arc::downgrade(&self.pool),
        }
    }

    /// Accepts and serves until stopped, then waits up to `grace` for the
    /// requests in flight. Returns how many connections were still open.
    pub fn run(self, grace: Duration) -> usize {
        for stream in self.listener.incoming() {
            if self.shared.is_stopping() {
                break;
            }
            match stream {
                Ok(stream) => self.admit(stream),
                Err(e) => {
                    // Typically out of file descriptors: back off briefly
                    // rather than spin; the backlog holds the client.
                    warn!("accept failed: {e}");
                    thread::sleep(Duration::from_millis(10));
                }
            }
        }
        drop(self.listener);
        self.pool.drain(grace)
    }

    fn admit(&self, stream: TcpStream) {
        let Ok(peer) = stream.peer_addr() else {
            return; // already gone
        };
        if let Err(stream) = self.pool.submit(stream, peer) {
            info!(target: "access", "- - 503 0us {peer}");
            reject(stream);
        }
    }
}

impl Stopper {
    /// Stops accepting; the server's `run` then drains and returns.
    pub fn stop(&self) {
        if !self.stopping.swap(true, Ordering::Relaxed) {
            // Wake the blocking accept. If this fails the listener is gone.
            let _ = TcpStream::connect_timeout(&self.wake, Duration::from_secs(1));
        }
    }
}

/// Answers a connection past the cap without ever blocking the acceptor.
fn reject(mut stream: TcpStream) {
    let _ = stream.set_nonblocking(true);
    // Discard what already arrived, so closing does not reset the
    // connection and destroy the answer before the client reads it.
    let mut scratch = [0u8; 4096];
    for _ in 0..4 {
        if !matches!(stream.read(&mut scratch), Ok(n) if n > 0) {
            break;
        }
    }
    let mut out = Vec::with_capacity(160);
    Response::error(503, "server is at its connection limit, retry shortly")
        .with_header("Retry-After", "1")
        .write_to(&mut out, false, Persist::Close);
    let _ = stream.write_all(&out);
    let _ = stream.shutdown(Side::Write);
}
