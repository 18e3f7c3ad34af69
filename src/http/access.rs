//! The engine's access log: one line for each answer queued on a
//! connection (`crate::logging` writes it, as text or JSON).
//!
//! A line is logged when a response is queued (for a streamed one, when
//! its head is), so its duration runs from the head to that moment and its
//! bytes are those queued with the head. An answer to no request (a
//! refused head, a connection over the cap) is logged with `-` for method
//! and path.
//!
//! What it does not do: log query strings, headers or bodies (a query may
//! carry a secret), or format the line (that is the logger's).

use std::net::SocketAddr;
use std::time::Instant;

use log::log_enabled;

use crate::logging::{self, AccessLine};

/// Logs the line of an answer queued now: method, the target's path,
/// status, time since `started`, bytes queued, peer.
pub(super) fn log(
    method: &str,
    target: &str,
    status: u16,
    started: Instant,
    bytes: usize,
    peer: SocketAddr,
) {
    // Checked first so that a server with access lines off does not read
    // the clock for them.
    if log_enabled!(target: "access", log::Level::Info) {
        logging::access(&AccessLine {
            method,
            path: without_query(target),
            status,
            duration_us: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            bytes,
            peer,
        });
    }
}

/// Logs the 503 sent to a connection over the cap, as it is accepted: no
/// request was read, so no time is counted.
pub(super) fn log_rejected(bytes: usize, peer: SocketAddr) {
    logging::access(&AccessLine {
        method: "-",
        path: "-",
        status: 503,
        duration_us: 0,
        bytes,
        peer,
    });
}

/// The path of a target, without the query (never logged).
fn without_query(target: &str) -> &str {
    target.split_once('?').map_or(target, |(path, _)| path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_is_never_logged() {
        assert_eq!(without_query("/plants?token=secret"), "/plants");
        assert_eq!(without_query("/plants?"), "/plants");
        assert_eq!(without_query("/plants"), "/plants");
        assert_eq!(without_query("-"), "-");
    }
}
