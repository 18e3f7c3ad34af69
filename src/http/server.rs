//! The server: binds the listener, builds one event loop per thread, runs
//! them, and stops them.
//!
//! Built in construction order, with no cycles: the caller makes a
//! [`Gauge`] and hands it to the application (for `/metrics`) and to
//! [`Server::bind`] with the handler; the loops share the handler, the
//! limits, the gauge's counter and the stopping flag. [`Stopper::stop`]
//! sets the flag and wakes every loop. [`raise_open_file_limit`] lives here
//! because each connection the server holds needs a descriptor.
//!
//! What it does not do: serve connections (each loop does, on its own
//! thread; the first runs on the caller's).

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use log::{error, warn};
use mio::Waker;

use super::state::ServerState;
use super::worker::Worker;
use super::{Handler, Limits};
use crate::transport::{self, AcmeStatus, Expiry, Https};

/// Connections the kernel may hold waiting to be accepted.
const BACKLOG: i32 = 1024;

/// Reads how many connections are open (and, with HTTPS, how many
/// handshakes failed), for `/metrics`.
#[derive(Clone, Default, Debug)]
pub struct Gauge {
    open: Arc<AtomicUsize>,
    failed_handshakes: Arc<AtomicU64>,
    /// With HTTPS: the certificate served (for its expiry).
    certificate: Expiry,
    /// With ACME: its failures.
    acme: Arc<std::sync::OnceLock<AcmeStatus>>,
}

impl Gauge {
    /// A gauge no server counts into yet (reads 0).
    pub fn new() -> Gauge {
        Gauge::default()
    }

    /// Connections open right now.
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// TLS handshakes that failed since start; `None` in a build without
    /// TLS, where there is no handshake to count.
    pub fn failed_handshakes(&self) -> Option<u64> {
        transport::WITH_TLS.then(|| self.failed_handshakes.load(Ordering::Relaxed))
    }

    /// With HTTPS: when the certificate served expires (Unix seconds).
    pub fn certificate_expires(&self) -> Option<i64> {
        self.certificate.get()
    }

    /// Reports the failures of `acme` from now on.
    pub fn watch_acme(&self, acme: &AcmeStatus) {
        let _ = self.acme.set(acme.clone());
    }

    /// With ACME: its failed orders and when the last one failed.
    pub fn acme(&self) -> Option<&AcmeStatus> {
        self.acme.get()
    }
}

/// A bound HTTP server, ready to `run`.
pub struct Server {
    addr: SocketAddr,
    workers: Vec<Worker>,
    stopper: Stopper,
}

/// Stops a running server from another thread (a signal handler, a test).
#[derive(Clone)]
pub struct Stopper {
    // Only the flag and the wakers: holding the `ServerState` would keep
    // the handler (and the store's file lock) alive as long as any stopper
    // exists.
    stopping: Arc<AtomicBool>,
    wakers: Arc<[Arc<Waker>]>,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port) and builds `limits.threads`
    /// event loops serving `handler`, counting connections in `gauge`.
    pub fn bind(
        addr: SocketAddr,
        limits: Limits,
        handler: Arc<dyn Handler>,
        gauge: &Gauge,
    ) -> io::Result<Server> {
        Server::bind_with(addr, limits, handler, gauge, None)
    }

    /// As [`bind`](Self::bind), serving HTTPS with the certificate `https`
    /// holds (`None`: plain HTTP, the only choice in a build without TLS).
    pub fn bind_https(
        addr: SocketAddr,
        limits: Limits,
        handler: Arc<dyn Handler>,
        gauge: &Gauge,
        https: Option<Https>,
    ) -> io::Result<Server> {
        if let Some(https) = &https {
            gauge.certificate.watch(https);
        }
        Server::bind_with(addr, limits, handler, gauge, https)
    }

    fn bind_with(
        addr: SocketAddr,
        limits: Limits,
        handler: Arc<dyn Handler>,
        gauge: &Gauge,
        https: Option<Https>,
    ) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        // A deeper accept queue than the standard library's 128: a burst of
        // new connections waits there for a loop instead of being refused
        // and retried a second later (the kernel caps it at somaxconn).
        socket2::SockRef::from(&listener).listen(BACKLOG)?;
        let addr = listener.local_addr()?;
        let stopping = Arc::new(AtomicBool::new(false));
        let threads = limits.threads.max(1);
        let shared = Arc::new(ServerState {
            limits,
            handler,
            open: Arc::clone(&gauge.open),
            failed_handshakes: Arc::clone(&gauge.failed_handshakes),
            stopping: Arc::clone(&stopping),
            https,
        });
        let workers = (0..threads)
            .map(|_| Worker::new(listener.try_clone()?, Arc::clone(&shared)))
            .collect::<io::Result<Vec<_>>>()?;
        let wakers = workers.iter().map(Worker::waker).collect();
        Ok(Server {
            addr,
            workers,
            stopper: Stopper { stopping, wakers },
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// A handle that stops this server.
    pub fn stopper(&self) -> Stopper {
        self.stopper.clone()
    }

    /// Serves until stopped, then lets the requests in flight finish for at
    /// most `grace`. Returns how many connections were still open.
    pub fn run(self, grace: Duration) -> usize {
        let mut workers = self.workers;
        let first = workers.remove(0);
        let others: Vec<_> = workers
            .into_iter()
            .enumerate()
            .filter_map(|(i, worker)| {
                thread::Builder::new()
                    .name(format!("loop-{}", i + 1))
                    .spawn(move || worker.run(grace))
                    .inspect_err(|e| error!("cannot start event loop {}: {e}", i + 1))
                    .ok()
            })
            .collect();
        let mut still_open = first.run(grace);
        for handle in others {
            still_open += handle.join().unwrap_or_else(|_| {
                warn!("an event loop panicked");
                0
            });
        }
        still_open
    }
}

impl Stopper {
    /// Stops accepting; the server's `run` then finishes what is in flight
    /// and returns.
    pub fn stop(&self) {
        if !self.stopping.swap(true, Ordering::Relaxed) {
            for waker in self.wakers.iter() {
                let _ = waker.wake();
            }
        }
    }
}

/// Raises this process's soft open-file limit to its hard limit (each
/// connection needs a descriptor) and returns the soft limit now in force;
/// `None` where it cannot be read.
pub fn raise_open_file_limit() -> Option<u64> {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => Some(limit),
        Err(e) => {
            warn!("cannot raise the open-file limit: {e}");
            crate::os::open_file_limit().map(|soft| soft as u64)
        }
    }
}
