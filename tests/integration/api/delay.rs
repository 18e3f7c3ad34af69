//! `--delay MIN..MAX`: every API answer (plants, export, tickets, errors
//! on those routes) is held for a random time in the range, counted from
//! its request's arrival and kept to the millisecond by the event loop's
//! timer; health, metrics, the document, the page and the feed are not
//! held; a pipelined answer waits behind a held one; an answer deferred
//! to the journal's committer is held too; a client that leaves meanwhile
//! frees its connection, and a stop writes held answers at once. On each
//! store.

use std::time::{Duration, Instant};

use plantstore::config::{Config, Delay};

use super::changes::Feed;
use crate::on_each_store;
use crate::support::{
    AUTH, Client, JSON, Kind, TOKEN, TempFile, TestServer, config, durable_config, eventually,
    open_connections, request,
};

const MS: Duration = Duration::from_millis(1);

/// `config` holding API answers `min..max` milliseconds.
fn delayed(config: Config, min: u32, max: u32) -> Config {
    Config {
        delay: Some(Delay {
            min: MS * min,
            max: MS * max,
        }),
        ..config
    }
}

/// One request on `client`, its reply's status and how long it took.
fn timed(client: &mut Client, method: &str, path: &str, body: &str) -> (u16, Duration) {
    let headers: &[(&str, &str)] = if body.is_empty() {
        &[AUTH]
    } else {
        &[AUTH, JSON]
    };
    let start = Instant::now();
    client.send(&request(method, path, headers, body));
    let reply = if method == "HEAD" {
        client.reply_head()
    } else {
        client.reply()
    };
    (reply.status, start.elapsed())
}

fn api_answers_are_held_within_the_range_and_the_service_is_not(kind: Kind) {
    // Long enough that an answer not held (the service's, below) comes
    // well before it, even on a loaded machine.
    let (min, max) = (600, 900);
    let server = TestServer::on_with(kind, delayed(config(), min, max));
    let mut client = server.client();
    let held = [
        ("POST", "/plants", r#"{"id":1,"name":"fern"}"#, 200),
        ("GET", "/plants/1", "", 200),
        ("HEAD", "/plants/1", "", 200),
        ("GET", "/plants?limit=5", "", 200),
        ("PUT", "/plants/1", r#"{"name":"ivy"}"#, 200),
        ("GET", "/plants/x", "", 400),
        ("GET", "/export", "", 200),
        ("POST", "/plants/changes/tickets", "", 200),
        ("DELETE", "/plants/1", "", 204),
        ("GET", "/plants/1", "", 404),
    ];
    let mut took = Vec::new();
    for (method, path, body, status) in held {
        let (got, elapsed) = timed(&mut client, method, path, body);
        assert_eq!(got, status, "{method} {path}");
        // Not far above the range: a loaded machine adds some.
        assert!(
            elapsed >= MS * min && elapsed < MS * (max + 1000),
            "{method} {path} took {elapsed:?}, outside {min}..{max} ms"
        );
        took.push(elapsed);
    }
    // Drawn, not fixed: ten draws from 301 values are not all within 5 ms.
    let spread = took
        .iter()
        .max()
        .unwrap()
        .saturating_sub(*took.iter().min().unwrap());
    assert!(spread > MS * 5, "{took:?}");
    // Not held: answered before the shortest hold could end.
    for (method, path) in [
        ("GET", "/healthz"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("GET", "/"),
        ("GET", "/ui.css"),
        ("GET", "/nowhere"),
    ] {
        let (status, elapsed) = timed(&mut client, method, path, "");
        assert!(status == 200 || status == 404, "{method} {path}: {status}");
        assert!(elapsed < MS * min, "{method} {path} was held: {elapsed:?}");
    }
    let start = Instant::now();
    let mut feed = Feed::open(server.addr, &[AUTH], "");
    feed.opening();
    assert!(
        start.elapsed() < MS * min,
        "the feed was held: {:?}",
        start.elapsed()
    );
}

/// A held answer keeps its place: a health check pipelined behind it is
/// answered after it, though not held itself.
fn pipelined_answers_keep_their_order(kind: Kind) {
    let server = TestServer::on_with(kind, delayed(config(), 200, 200));
    assert_eq!(server.create(r#"{"id":7,"name":"fern"}"#).status, 200);
    let mut client = server.client();
    let mut both = request("GET", "/plants/7", &[AUTH], "");
    both.extend(request("GET", "/healthz", &[], ""));
    let start = Instant::now();
    client.send(&both);
    let first = client.reply();
    assert_eq!(first.json()["id"], 7);
    let second = client.reply();
    assert_eq!(second.status, 200);
    assert!(second.json().get("id").is_none(), "{}", second.text());
    assert!(start.elapsed() >= MS * 200);
}

/// The hold is kept by the loop's timer, not the 100 ms deadline sweep:
/// answers held a fixed 130 ms, one after another, are late by a few
/// milliseconds (a sweep would make each about 70 ms late).
fn a_fixed_hold_is_kept_to_the_millisecond(kind: Kind) {
    let server = TestServer::on_with(kind, delayed(config(), 130, 130));
    let mut client = server.client();
    let mut late: Vec<Duration> = (0..15)
        .map(|_| {
            let (status, elapsed) = timed(&mut client, "GET", "/plants?limit=1", "");
            assert_eq!(status, 200);
            assert!(elapsed >= MS * 130, "{elapsed:?}");
            elapsed - MS * 130
        })
        .collect();
    late.sort();
    assert!(
        late[7] < MS * 30,
        "median lateness {:?} ({late:?})",
        late[7]
    );
}

/// A client that leaves while its answer is held: the answer is dropped
/// and the connection freed at once, not when the hold ends (a minute,
/// past the test's patience); a change it made stays made.
fn a_client_gone_while_held_frees_its_connection(kind: Kind) {
    let server = TestServer::on_with(kind, delayed(config(), 60_000, 60_000));
    for id in 0..20 {
        let mut client = server.client();
        let body = format!(r#"{{"id":{id},"name":"left"}}"#);
        client.send(&request("POST", "/plants", &[AUTH, JSON], &body));
    }
    assert!(
        eventually(|| open_connections(server.addr, TOKEN) == 1),
        "connections left open"
    );
    // The plants were stored all the same: a listing, held too, is
    // written at once when the server stops.
    let mut client = server.client();
    client.send(&request("GET", "/plants", &[AUTH], ""));
    let made = r#"plantstore_requests_total{route="/plants",method="GET",status="200"} 1"#;
    assert!(
        eventually(|| {
            let metrics = server.send("GET", "/metrics", &[AUTH], "").text();
            metrics.lines().any(|l| l == made)
        }),
        "the listing was not made"
    );
    let reader = std::thread::spawn(move || client.reply());
    drop(server);
    let listed = reader.join().unwrap().json();
    assert_eq!(listed.as_array().map(Vec::len), Some(20), "{listed}");
}

/// A stopping server writes held answers at once (and closes).
fn a_stop_writes_held_answers_at_once(kind: Kind) {
    let server = TestServer::on_with(kind, delayed(config(), 20_000, 20_000));
    let mut client = server.client();
    let start = Instant::now();
    client.send(&request("GET", "/plants", &[AUTH], ""));
    // Parked before the stop (a /healthz behind it would wait for it).
    std::thread::sleep(Duration::from_millis(200));
    let reader = std::thread::spawn(move || client.reply());
    drop(server);
    let reply = reader.join().unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("connection"), Some("close"));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

on_each_store!(
    api_answers_are_held_within_the_range_and_the_service_is_not,
    pipelined_answers_keep_their_order,
    a_fixed_hold_is_kept_to_the_millisecond,
    a_client_gone_while_held_frees_its_connection,
    a_stop_writes_held_answers_at_once,
);

/// With the journal, a change is answered by its committer once durable
/// (a deferred answer): it is held all the same.
#[test]
fn an_answer_deferred_to_the_committer_is_held() {
    let file = TempFile::new("delay-deferred");
    let server = TestServer::with(delayed(durable_config(&file.0), 250, 250));
    let mut client = server.client();
    for id in 0..3 {
        let body = format!(r#"{{"id":{id},"name":"fern"}}"#);
        let (status, elapsed) = timed(&mut client, "POST", "/plants", &body);
        assert_eq!(status, 200);
        assert!(elapsed >= MS * 250 && elapsed < MS * 1250, "{elapsed:?}");
    }
}
