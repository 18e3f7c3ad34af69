//! An event as announced: its id, the same for every URL and every retry
//! (unique across restarts by a random prefix), and its JSON body.

use std::time::{SystemTime, UNIX_EPOCH};

/// One event as announced: its id and JSON body (the same in every
/// attempt).
pub(super) struct Announcement {
    pub(super) id: String,
    pub(super) body: Vec<u8>,
}

/// A prefix that makes event ids unique across restarts: random from the
/// OS, or the clock if the OS source is unavailable.
pub(super) fn id_prefix() -> String {
    crate::os::random_hex(8).unwrap_or_else(|_| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{:016x}", nanos as u64)
    })
}
