//! Counters for `/metrics`, in the Prometheus text exposition format.
//!
//! Requests are counted by route and status in a fixed table of atomics, so
//! counting costs no lock on the hot path. Statuses the engine answers on
//! its own (431, 414, 503 at the connection cap, ...) never reach the
//! application and are not counted here; the access log has them.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::http::Gauge;
use crate::webhook::Counters;

/// Route labels, in the order of `Metrics::requests`.
pub const ROUTES: [&str; 11] = [
    "/plants",
    "/plants/{id}",
    "/openapi.json",
    "/healthz",
    "/metrics",
    "/export",
    "/",
    "/ui.css",
    "/ui.js",
    "/ui.svg",
    "other",
];
/// Statuses the application answers, in the order of each row.
const STATUSES: [u16; 14] = [
    200, 204, 304, 400, 401, 404, 405, 408, 409, 413, 415, 500, 503, 507,
];

/// The server's counters.
pub struct Metrics {
    started: Instant,
    requests: [[AtomicU64; STATUSES.len()]; ROUTES.len()],
    connections: Gauge,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            started: Instant::now(),
            requests: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            connections: Gauge::new(),
        }
    }
}

impl Metrics {
    /// Counts one answered request (`route` indexes `ROUTES`).
    pub fn record(&self, route: usize, status: u16) {
        let column = STATUSES.iter().position(|&s| s == status);
        if let (Some(row), Some(column)) = (self.requests.get(route), column) {
            row[column].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counters that report the open connections `gauge` counts.
    pub fn new(gauge: Gauge) -> Metrics {
        Metrics {
            connections: gauge,
            ..Metrics::default()
        }
    }

    /// The exposition text.
    pub fn render(&self, plants: usize, webhooks: &Counters) -> String {
        let mut out = String::with_capacity(2048);
        out.push_str("# HELP plantstore_requests_total Requests answered, by route and status.\n");
        out.push_str("# TYPE plantstore_requests_total counter\n");
        for (route, row) in ROUTES.iter().zip(&self.requests) {
            for (status, count) in STATUSES.iter().zip(row) {
                let count = count.load(Ordering::Relaxed);
                if count > 0 {
                    let _ = writeln!(
                        out,
                        "plantstore_requests_total{{route=\"{route}\",status=\"{status}\"}} {count}"
                    );
                }
            }
        }
        out.push_str(
            "# HELP plantstore_webhook_events_total Webhook events by outcome: delivered, \
             failed (after every attempt), retried (attempts scheduled again), dropped \
             (queue full or shutdown).\n# TYPE plantstore_webhook_events_total counter\n",
        );
        for (result, count) in [
            ("delivered", &webhooks.delivered),
            ("failed", &webhooks.failed),
            ("retried", &webhooks.retried),
            ("dropped", &webhooks.dropped),
        ] {
            let _ = writeln!(
                out,
                "plantstore_webhook_events_total{{result=\"{result}\"}} {}",
                count.load(Ordering::Relaxed)
            );
        }
        let open = self.connections.open_connections();
        // Uptime to the millisecond, formatted with integers: float
        // formatting would add about 10 KiB to the binary for this one line.
        let uptime = self.started.elapsed();
        let uptime = format!("{}.{:03}", uptime.as_secs(), uptime.subsec_millis());
        for (name, kind, help, value) in [
            (
                "plantstore_plants",
                "gauge",
                "Plants stored.",
                plants.to_string(),
            ),
            (
                "plantstore_connections_open",
                "gauge",
                "Connections open.",
                open.to_string(),
            ),
            (
                "plantstore_uptime_seconds",
                "gauge",
                "Seconds since start-up.",
                uptime,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_route_and_status() {
        let metrics = Metrics::default();
        metrics.record(0, 200);
        metrics.record(0, 200);
        metrics.record(1, 404);
        metrics.record(1, 999); // not a status we answer: ignored, no panic
        let text = metrics.render(7, &Counters::default());
        assert!(text.contains("plantstore_requests_total{route=\"/plants\",status=\"200\"} 2\n"));
        assert!(
            text.contains("plantstore_requests_total{route=\"/plants/{id}\",status=\"404\"} 1\n")
        );
        assert!(text.contains("\nplantstore_plants 7\n"));
    }
}
