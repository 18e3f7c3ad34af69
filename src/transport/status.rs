//! What `/metrics` reads of the ACME thread (`acme/`), in every build:
//! the engine's gauge holds one whichever features are on, and only a
//! server with `--acme-domain` sets it, so the families appear exactly
//! when ACME is in use.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// What `/metrics` reads of the ACME thread: failed orders, and when the
/// last one failed.
#[derive(Debug, Clone, Default)]
pub struct AcmeStatus(Arc<Counts>);

#[derive(Debug, Default)]
struct Counts {
    failures: AtomicU64,
    /// Unix seconds; 0: none yet.
    last_failure: AtomicI64,
}

impl AcmeStatus {
    /// Orders that failed since start.
    pub fn failures(&self) -> u64 {
        self.0.failures.load(Ordering::Relaxed)
    }

    /// When the last order failed (Unix seconds), if one has.
    pub fn last_failure(&self) -> Option<i64> {
        Some(self.0.last_failure.load(Ordering::Relaxed)).filter(|&at| at != 0)
    }

    /// Counts a failed order at `at` (Unix seconds).
    pub fn failed(&self, at: i64) {
        self.0.failures.fetch_add(1, Ordering::Relaxed);
        self.0.last_failure.store(at.max(1), Ordering::Relaxed);
    }
}
