//! What every event loop of one server shares (`ServerState`): built by
//! `server.rs`, held by each loop (`worker.rs`) and read by the
//! connections it serves (`conn.rs`). A file of its own so that those
//! import it one way: the loop uses its connections, not the reverse.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::{Handler, Limits};
use crate::transport::Https;

/// What every event loop of one server shares: the limits, the handler,
/// the count of open connections and the stopping flag.
pub(crate) struct ServerState {
    pub(crate) limits: Limits,
    pub(crate) handler: Arc<dyn Handler>,
    /// Connections open over all loops.
    pub(crate) open: Arc<AtomicUsize>,
    /// TLS handshakes that failed, for `/metrics`.
    pub(crate) failed_handshakes: Arc<AtomicU64>,
    pub(crate) stopping: Arc<AtomicBool>,
    /// With HTTPS: the certificate new connections are served.
    pub(crate) https: Option<Https>,
}

impl ServerState {
    pub(super) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }
}
