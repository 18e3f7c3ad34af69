//! The API's own lines of `/metrics`: requests by route and status, their
//! durations, the build, connections and uptime (the store, the webhook
//! sender and the process render theirs through the same
//! `metrics::Exposition`).
//!
//! Requests are counted by route, method and status, and their durations
//! by route in a `Histogram`, in fixed tables of atomics, so counting
//! costs no lock on the hot path. Methods are the five the API answers,
//! `OPTIONS` and `other` for every other (a client cannot grow the table
//! or the exposition by inventing methods). A duration runs from when the request's
//! head was parsed to when its answer is queued: the wait for the body and
//! for the journal included. Statuses the engine answers on its own (431,
//! 414, 503 at the connection cap, ...) never reach the application and
//! are not counted here; the access log has them. The rest (build,
//! connections, uptime) is read at each scrape.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crate::http::Gauge;
use crate::metrics::{Exposition, Histogram, Kind, render_process};

/// The target triple the binary was built for (set by `build.rs`).
const TARGET: &str = env!("PLANTSTORE_TARGET");

/// Method labels, in the order of each route's table; the last takes
/// every other method.
pub const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "other"];

/// The `METHODS` index of `method`.
pub fn method_label(method: &str) -> usize {
    METHODS[..METHODS.len() - 1]
        .iter()
        .position(|&m| m == method)
        .unwrap_or(METHODS.len() - 1)
}

/// Statuses the application answers, in the order of each row.
const STATUSES: [u16; 17] = [
    200, 204, 304, 400, 401, 403, 404, 405, 408, 409, 413, 415, 429, 499, 500, 503, 507,
];

/// The server's counters.
pub struct Metrics {
    started: Instant,
    /// `started` on the wall clock, for `process_start_time_seconds`.
    started_at: SystemTime,
    /// The route labels, given at start: one per row of the endpoint
    /// table (its path), then `other` for a request that found none. They
    /// are given, not imported, so that counting knows nothing of the
    /// handlers the table names.
    routes: Box<[&'static str]>,
    /// By route, method and status.
    requests: Box<[[[AtomicU64; STATUSES.len()]; METHODS.len()]]>,
    /// By route.
    latency: Box<[Histogram]>,
    connections: Gauge,
}

impl Metrics {
    /// Counts one request answered `elapsed` after its head was parsed
    /// (`route` indexes the route labels, `method` indexes `METHODS`). Its duration is
    /// counted whatever the status; a status the table has no column for
    /// is not counted.
    pub fn record(&self, route: usize, method: usize, status: u16, elapsed: Duration) {
        if let Some(latency) = self.latency.get(route) {
            latency.observe(elapsed);
        }
        let column = STATUSES.iter().position(|&s| s == status);
        let row = self.requests.get(route).and_then(|r| r.get(method));
        if let (Some(row), Some(column)) = (row, column) {
            row[column].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counters for the `routes` labels (`other` last) that report the
    /// open connections `gauge` counts.
    pub fn new(gauge: Gauge, routes: Box<[&'static str]>) -> Metrics {
        let zeros = || std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0)));
        Metrics {
            started: Instant::now(),
            started_at: SystemTime::now(),
            requests: routes.iter().map(|_| zeros()).collect(),
            latency: routes.iter().map(|_| Histogram::default()).collect(),
            routes,
            connections: gauge,
        }
    }

    /// Writes the API's families and the process's.
    pub fn render(&self, out: &mut Exposition) {
        out.family(
            "plantstore_build_info",
            Kind::Gauge,
            "The version and target the server was built as.",
        );
        out.sample(
            "plantstore_build_info",
            &[("version", env!("CARGO_PKG_VERSION")), ("target", TARGET)],
            1,
        );
        const REQUESTS: &str = "plantstore_requests_total";
        out.family(
            REQUESTS,
            Kind::Counter,
            "Requests answered, by route, method and status.",
        );
        for (&route, table) in self.routes.iter().zip(&self.requests) {
            for (method, row) in METHODS.iter().zip(table) {
                for (status, count) in STATUSES.iter().zip(row) {
                    let count = count.load(Ordering::Relaxed);
                    if count > 0 {
                        let status = status.to_string();
                        let labels = [("route", route), ("method", method), ("status", &status)];
                        out.sample(REQUESTS, &labels, count);
                    }
                }
            }
        }
        const DURATION: &str = "plantstore_request_duration_seconds";
        out.family(
            DURATION,
            Kind::Histogram,
            "Time from a request's head parsed to its answer queued, by route.",
        );
        for (&route, latency) in self.routes.iter().zip(&self.latency) {
            if latency.count() > 0 {
                latency.render(out, DURATION, ("route", route));
            }
        }
        out.single(
            "plantstore_connections_open",
            Kind::Gauge,
            "Connections open.",
            self.connections.open_connections(),
        );
        // Both only in a build with TLS (the gauge says `None` without).
        if let Some(failed) = self.connections.failed_handshakes() {
            out.single(
                "plantstore_tls_handshake_failures_total",
                Kind::Counter,
                "TLS handshakes that failed (with HTTPS).",
                failed,
            );
        }
        if let Some(expires) = self.connections.certificate_expires() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            out.single(
                "plantstore_tls_certificate_expiry_seconds",
                Kind::Gauge,
                "Seconds until the served certificate expires (negative: expired).",
                expires - now,
            );
        }
        // Only with ACME (--acme-domain): its failed orders.
        if let Some(acme) = self.connections.acme() {
            out.single(
                "plantstore_acme_failures_total",
                Kind::Counter,
                "ACME orders that failed (the certificate in use was kept).",
                acme.failures(),
            );
            out.single(
                "plantstore_acme_last_failure_timestamp_seconds",
                Kind::Gauge,
                "When the last ACME order failed (Unix seconds; 0: none yet).",
                acme.last_failure().unwrap_or(0),
            );
        }
        // Uptime to the millisecond, formatted with integers.
        let uptime = self.started.elapsed();
        out.single(
            "plantstore_uptime_seconds",
            Kind::Gauge,
            "Seconds since start-up.",
            format_args!("{}.{:03}", uptime.as_secs(), uptime.subsec_millis()),
        );
        render_process(out, self.started_at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ApiError;

    /// Counters for three routes and `other`.
    fn metrics() -> Metrics {
        let routes = ["/plants", "/plants/{id}", "/healthz", "other"];
        Metrics::new(Gauge::new(), routes.into())
    }

    #[test]
    fn every_status_the_gate_and_the_handlers_answer_has_a_column() {
        use crate::http::BodyError;
        let errors = [
            ApiError::NoRoute,
            ApiError::MethodNotAllowed(String::new()),
            ApiError::Unauthorized { presented: true },
            ApiError::Ticket,
            ApiError::Forbidden("read"),
            ApiError::Throttled {
                retry_after: 1,
                everyone: true,
            },
            ApiError::UnsupportedMediaType,
            ApiError::BadParameter("id"),
            ApiError::Body(BodyError::TooLarge(1)),
            ApiError::Body(BodyError::Timeout),
        ];
        for error in errors {
            let status = error.status();
            assert!(STATUSES.contains(&status), "{status} ({error})");
        }
    }

    fn text(metrics: &Metrics) -> String {
        let mut out = Exposition::new();
        metrics.render(&mut out);
        out.into_text()
    }

    #[test]
    fn counts_by_route_and_status() {
        let metrics = metrics();
        let fast = Duration::from_micros(50);
        let (get, post) = (method_label("GET"), method_label("POST"));
        metrics.record(0, post, 200, fast);
        metrics.record(0, post, 200, fast);
        metrics.record(0, get, 200, fast);
        metrics.record(1, get, 404, fast);
        metrics.record(1, get, 999, fast); // not a status we answer: ignored, no panic
        metrics.record(99, get, 200, fast); // not a route: ignored, no panic
        metrics.record(1, 99, 200, fast); // not a method label: ignored, no panic
        let text = text(&metrics);
        for line in [
            "plantstore_requests_total{route=\"/plants\",method=\"POST\",status=\"200\"} 2\n",
            "plantstore_requests_total{route=\"/plants\",method=\"GET\",status=\"200\"} 1\n",
            "plantstore_requests_total{route=\"/plants/{id}\",method=\"GET\",status=\"404\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert_eq!(text.matches("plantstore_requests_total{").count(), 3);
        assert!(text.contains("\nplantstore_connections_open 0\n"));
    }

    #[test]
    fn methods_are_the_apis_and_one_label_for_every_other() {
        assert_eq!(METHODS[method_label("DELETE")], "DELETE");
        assert_eq!(METHODS[method_label("OPTIONS")], "OPTIONS");
        for odd in ["PATCH", "BREW", "get", "", "other"] {
            assert_eq!(method_label(odd), METHODS.len() - 1, "{odd}");
        }
    }

    #[test]
    fn durations_by_route_and_build() {
        let metrics = metrics();
        metrics.record(0, 2, 200, Duration::from_millis(3));
        metrics.record(0, 2, 409, Duration::from_millis(30));
        let text = text(&metrics);
        let version = env!("CARGO_PKG_VERSION");
        for line in [
            format!("plantstore_build_info{{version=\"{version}\",target=\"{TARGET}\"}} 1\n"),
            "# TYPE plantstore_request_duration_seconds histogram\n".into(),
            "_bucket{route=\"/plants\",le=\"0.0025\"} 0\n".into(),
            "_bucket{route=\"/plants\",le=\"0.005\"} 1\n".into(),
            "_bucket{route=\"/plants\",le=\"0.05\"} 2\n".into(),
            "_count{route=\"/plants\"} 2\n".into(),
            "_sum{route=\"/plants\"} 0.033\n".into(),
            "\nprocess_open_fds ".into(),
        ] {
            assert!(text.contains(&line), "{line:?} missing from:\n{text}");
        }
        // Only routes that answered have a histogram.
        assert!(!text.contains("route=\"/healthz\",le="));
    }
}
