//! `/metrics` beyond the request counters: the duration histogram, build
//! information, the `process_*` metrics and the journal's. The duration
//! histogram on each store: from the database an answer is counted when
//! its worker completes it, from the request's head.

use std::thread;
use std::time::Duration;

use crate::support::{AUTH, JSON, Kind, TempFile, TestServer, durable_config, request};

/// The exposition text, as an authorised client sees it.
fn scrape(server: &TestServer) -> String {
    let reply = server.send("GET", "/metrics", &[AUTH], "");
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.text()
}

/// The value of the sample `series` (name and labels, as written).
fn value(text: &str, series: &str) -> f64 {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{series} missing from:\n{text}"));
    line.parse()
        .unwrap_or_else(|_| panic!("{series} is not a number: {line}"))
}

fn bucket(route: &str, le: &str) -> String {
    format!("plantstore_request_duration_seconds_bucket{{route=\"{route}\",le=\"{le}\"}}")
}

fn fast_requests_count_in_the_low_buckets_of_their_route(kind: Kind) {
    let server = TestServer::on(kind);
    for _ in 0..5 {
        assert_eq!(server.send("GET", "/healthz", &[], "").status, 200);
    }
    let text = scrape(&server);
    // A loaded machine may take a while, but not a second for /healthz.
    assert_eq!(value(&text, &bucket("/healthz", "1")), 5.0);
    assert_eq!(value(&text, &bucket("/healthz", "+Inf")), 5.0);
    let count = "plantstore_request_duration_seconds_count{route=\"/healthz\"}";
    assert_eq!(value(&text, count), 5.0);
    let sum = "plantstore_request_duration_seconds_sum{route=\"/healthz\"}";
    assert!(value(&text, sum) < 5.0);
    // The scrape itself is counted once it is answered.
    assert_eq!(value(&scrape(&server), &bucket("/metrics", "+Inf")), 1.0);
}

fn a_request_whose_body_comes_late_counts_the_wait_from_its_head(kind: Kind) {
    let server = TestServer::on(kind);
    let body = r#"{"id":1,"name":"slow"}"#;
    let mut client = server.client();
    let mut head = request(
        "POST",
        "/plants",
        &[AUTH, JSON, ("Expect", "100-continue")],
        body,
    );
    head.truncate(head.len() - body.len());
    client.send(&head);
    // The 100 Continue shows the head was parsed: the clock has started.
    assert_eq!(client.reply().status, 100);
    thread::sleep(Duration::from_millis(300));
    client.send(body.as_bytes());
    assert_eq!(client.reply().status, 200);
    let text = scrape(&server);
    assert_eq!(value(&text, &bucket("/plants", "0.25")), 0.0);
    assert_eq!(value(&text, &bucket("/plants", "10")), 1.0);
    assert_eq!(value(&text, &bucket("/plants", "+Inf")), 1.0);
    let sum = "plantstore_request_duration_seconds_sum{route=\"/plants\"}";
    assert!(value(&text, sum) >= 0.3);
}

#[test]
fn build_and_process_metrics_are_present_and_plausible() {
    let server = TestServer::start();
    let text = scrape(&server);
    let version = env!("CARGO_PKG_VERSION");
    let build = format!("plantstore_build_info{{version=\"{version}\",target=\"");
    assert!(text.contains(&build), "{build} missing from:\n{text}");
    assert!(value(&text, "process_resident_memory_bytes") > 1e6);
    assert!(value(&text, "process_open_fds") >= 3.0);
    assert!(value(&text, "process_cpu_seconds_total") >= 0.0);
    let started = value(&text, "process_start_time_seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        started <= now && started > now - 600.0,
        "{started} vs {now}"
    );
    assert!(!text.contains("plantstore_journal"), "no journal in memory");
}

/// The TLS families are written exactly when the build speaks TLS: a
/// plain build has no handshake to count (the transport's stand-ins), a
/// build with TLS counts them from zero even on a plain-HTTP listener.
#[test]
fn the_tls_families_are_written_exactly_in_a_build_with_tls() {
    let server = TestServer::on(Kind::Memory);
    let text = scrape(&server);
    let failures = "plantstore_tls_handshake_failures_total";
    if cfg!(feature = "tls") {
        assert_eq!(value(&text, failures), 0.0);
    } else {
        assert!(!text.contains("plantstore_tls_"), "{text}");
    }
}

#[test]
fn the_journal_reports_its_size_and_compactions() {
    let file = TempFile::new("metrics.journal");
    let server = TestServer::with(durable_config(&file.0));
    let before = value(&scrape(&server), "plantstore_journal_bytes");
    assert_eq!(server.create(r#"{"id":1,"name":"a"}"#).status, 200);
    let text = scrape(&server);
    let after = value(&text, "plantstore_journal_bytes");
    assert!(after > before, "{before} -> {after}");
    // The records' bytes: the file also holds the zeros written ahead.
    let bytes = std::fs::read(&file.0).unwrap();
    let records = plantstore::store::journal::scan(&bytes, |_| {})
        .unwrap()
        .valid_len;
    assert_eq!(after, records as f64);
    assert_eq!(value(&text, "plantstore_journal_compactions_total"), 0.0);
    // A deferred answer (sync always) is counted once, when it is sent.
    assert_eq!(value(&text, &bucket("/plants", "+Inf")), 1.0);
}

crate::on_each_store!(
    fast_requests_count_in_the_low_buckets_of_their_route,
    a_request_whose_body_comes_late_counts_the_wait_from_its_head,
);
