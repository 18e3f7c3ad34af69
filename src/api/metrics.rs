//! Counters for `/metrics`, in the Prometheus text exposition format.
//!
//! Requests are counted by route and status, and their durations by route
//! in a histogram (`latency`), in fixed tables of atomics, so counting
//! costs no lock on the hot path. A duration runs from when the request's
//! head was parsed to when its answer is queued: the wait for the body and
//! for the journal included. Statuses the engine answers on its own (431,
//! 414, 503 at the connection cap, ...) never reach the application and
//! are not counted here; the access log has them. The rest (build, process,
//! journal, webhooks, plants, connections, uptime) is read at each scrape.

mod latency;
mod process;

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crate::http::Gauge;
use crate::store::JournalStats;
use crate::webhook::Counters;
pub(crate) use latency::Latency;

/// The target triple the binary was built for (set by `build.rs`).
const TARGET: &str = env!("PLANTSTORE_TARGET");

/// Route labels, in the order of `Metrics::requests` and `Metrics::latency`.
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
    /// `started` on the wall clock, for `process_start_time_seconds`.
    started_at: SystemTime,
    requests: [[AtomicU64; STATUSES.len()]; ROUTES.len()],
    latency: [Latency; ROUTES.len()],
    connections: Gauge,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            started: Instant::now(),
            started_at: SystemTime::now(),
            requests: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            latency: std::array::from_fn(|_| Latency::default()),
            connections: Gauge::new(),
        }
    }
}

impl Metrics {
    /// Counts one request answered `elapsed` after its head was parsed
    /// (`route` indexes `ROUTES`). Its duration is counted whatever the
    /// status; a status the table has no column for is not counted.
    pub fn record(&self, route: usize, status: u16, elapsed: Duration) {
        if let Some(latency) = self.latency.get(route) {
            latency.observe(elapsed);
        }
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

    /// The exposition text; the journal's lines only with a journal, the
    /// plants' count only where it is known without a scan.
    pub fn render(
        &self,
        plants: Option<usize>,
        webhooks: &Counters,
        journal: Option<JournalStats>,
    ) -> String {
        let mut out = String::with_capacity(8192);
        let _ = writeln!(
            out,
            "# HELP plantstore_build_info The version and target the server was built as.\n\
             # TYPE plantstore_build_info gauge\n\
             plantstore_build_info{{version=\"{}\",target=\"{TARGET}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
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
        self.render_latency(&mut out);
        if let Some(journal) = journal {
            render_journal(&mut out, journal);
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
        if let Some(plants) = plants {
            let _ = writeln!(
                out,
                "# HELP plantstore_plants Plants stored.\n# TYPE plantstore_plants gauge\n\
                 plantstore_plants {plants}"
            );
        }
        for (name, kind, help, value) in [
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
        process::render(&mut out, self.started_at);
        out
    }

    /// The duration histogram of every route that has answered.
    fn render_latency(&self, out: &mut String) {
        const NAME: &str = "plantstore_request_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {NAME} Time from a request's head parsed to its answer queued, by route.\n\
             # TYPE {NAME} histogram"
        );
        for (route, latency) in ROUTES.iter().zip(&self.latency) {
            if latency.count() > 0 {
                latency.render(out, NAME, &format!("route=\"{route}\""));
            }
        }
    }
}

/// The journal's size and compactions.
fn render_journal(out: &mut String, journal: JournalStats) {
    let _ = writeln!(
        out,
        "# HELP plantstore_journal_bytes Length of the journal file, records queued for it \
         included.\n# TYPE plantstore_journal_bytes gauge\nplantstore_journal_bytes {}\n\
         # HELP plantstore_journal_compactions_total Journal compactions completed since \
         start-up.\n# TYPE plantstore_journal_compactions_total counter\n\
         plantstore_journal_compactions_total {}",
        journal.bytes, journal.compactions
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_route_and_status() {
        let metrics = Metrics::default();
        let fast = Duration::from_micros(50);
        metrics.record(0, 200, fast);
        metrics.record(0, 200, fast);
        metrics.record(1, 404, fast);
        metrics.record(1, 999, fast); // not a status we answer: ignored, no panic
        metrics.record(99, 200, fast); // not a route: ignored, no panic
        let text = metrics.render(Some(7), &Counters::default(), None);
        assert!(text.contains("plantstore_requests_total{route=\"/plants\",status=\"200\"} 2\n"));
        assert!(
            text.contains("plantstore_requests_total{route=\"/plants/{id}\",status=\"404\"} 1\n")
        );
        assert!(text.contains("\nplantstore_plants 7\n"));
    }

    #[test]
    fn durations_by_route_build_and_journal() {
        let metrics = Metrics::default();
        metrics.record(0, 200, Duration::from_millis(3));
        metrics.record(0, 409, Duration::from_millis(30));
        let stats = JournalStats {
            bytes: 4096,
            compactions: 2,
        };
        let text = metrics.render(Some(0), &Counters::default(), Some(stats));
        let version = env!("CARGO_PKG_VERSION");
        for line in [
            format!("plantstore_build_info{{version=\"{version}\",target=\"{TARGET}\"}} 1\n"),
            "# TYPE plantstore_request_duration_seconds histogram\n".into(),
            "_bucket{route=\"/plants\",le=\"0.0025\"} 0\n".into(),
            "_bucket{route=\"/plants\",le=\"0.005\"} 1\n".into(),
            "_bucket{route=\"/plants\",le=\"0.05\"} 2\n".into(),
            "_count{route=\"/plants\"} 2\n".into(),
            "_sum{route=\"/plants\"} 0.033\n".into(),
            "\nplantstore_journal_bytes 4096\n".into(),
            "\nplantstore_journal_compactions_total 2\n".into(),
        ] {
            assert!(text.contains(&line), "{line:?} missing from:\n{text}");
        }
        // Only routes that answered have a histogram.
        assert!(!text.contains("route=\"/healthz\",le="));
        let memory = metrics.render(Some(0), &Counters::default(), None);
        assert!(!memory.contains("plantstore_journal"));
    }
}
