//! What only the PostgreSQL store (`--database`) has while serving: names
//! and tags kept as `bytea` (U+0000 included) answered as the in-memory
//! store answers them, 503s while the database refuses this instance and
//! service again without a restart, and an export read a piece at a time.
//!
//! Each test has a database of its own (`FreshDatabase`) and looks at it,
//! or changes it, from outside with a client of its own.

use std::io::Read;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{
    AUTH, FreshDatabase, JSON, Kind, Reply, TEST_POOL, TempFile, TestServer, config,
};

/// Status, content type, `Link` and body of two answers are the same.
fn assert_same(memory: &Reply, database: &Reply, what: &str) {
    assert_eq!(
        memory.status,
        database.status,
        "{what}: {}",
        database.text()
    );
    for header in ["content-type", "link", "retry-after"] {
        assert_eq!(
            memory.header(header),
            database.header(header),
            "{what}: {header}"
        );
    }
    assert_eq!(memory.text(), database.text(), "{what}");
}

/// JSON names (as escaped in a body) and what they are. PostgreSQL's
/// `text` refuses U+0000; the `bytea` columns must take it and the rest.
const ODD_NAMES: &[(&str, &str)] = &[
    (r"nul\u0000inside", "nul\0inside"),
    (r"\u0000", "\0"),
    (r"\u0001\u001f\u007f", "\u{1}\u{1f}\u{7f}"),
    (r"\u0080\u009f", "\u{80}\u{9f}"),
    (r"\u2028\u2029", "\u{2028}\u{2029}"),
    (r"\ufeffbom", "\u{feff}bom"),
    (r"\uffff\ufffe", "\u{ffff}\u{fffe}"),
    (r"\ud83c\udf35 cactus", "\u{1f335} cactus"),
    (r"\udbff\udfff", "\u{10ffff}"),
    (r#"\"\\/"#, "\"\\/"),
    (r"e\u0301", "e\u{301}"),
    (r"\u202eleft", "\u{202e}left"),
    ("% &=?#+ 中文 é", "% &=?#+ 中文 é"),
];

#[test]
fn names_and_tags_with_nul_and_other_odd_characters_round_trip_as_in_memory() {
    let memory = TestServer::on(Kind::Memory);
    let database = FreshDatabase::new();
    let server = TestServer::with(database.config(config()));
    let mut client = database.client();
    let both = |method: &str, path: &str, body: &str| {
        let headers: &[(&str, &str)] = if body.is_empty() {
            &[AUTH]
        } else {
            &[AUTH, JSON]
        };
        let answers = (
            memory.send(method, path, headers, body),
            server.send(method, path, headers, body),
        );
        assert_same(&answers.0, &answers.1, &format!("{method} {path} {body}"));
        answers.1
    };
    for (id, (json_name, name)) in ODD_NAMES.iter().enumerate() {
        let body = format!(r#"{{"id":{id},"name":"{json_name}","tag":"t\u0000{id}"}}"#);
        assert_eq!(both("POST", "/plants", &body).status, 200, "{body}");
        let got = both("GET", &format!("/plants/{id}"), "");
        assert_eq!(got.json()["name"], *name, "{json_name}");
        let row = client
            .query_one(
                "SELECT name, tag FROM plants WHERE id = $1",
                &[&(id as i64)],
            )
            .unwrap();
        assert_eq!(row.get::<_, &[u8]>(0), name.as_bytes(), "{json_name}");
        let tag = format!("t\0{id}");
        assert_eq!(row.get::<_, &[u8]>(1), tag.as_bytes());
        let filtered = both("GET", &format!("/plants?tag=t%00{id}"), "");
        assert_eq!(filtered.json().as_array().unwrap().len(), 1, "{json_name}");
    }
    both("GET", "/plants?limit=1000", "");
    both("GET", "/export", "");
    both(
        "PUT",
        "/plants/0",
        r#"{"name":"\u0000 again","tag":"\u0000"}"#,
    );
    both("GET", "/plants?tag=%00", "");
    // A lone surrogate is no character: refused alike.
    both("POST", "/plants", r#"{"id":100,"name":"\ud800"}"#).assert_error(400, "");
}

/// Refuses this instance's database every connection, ending those open
/// now (`ALTER DATABASE ... ALLOW_CONNECTIONS`), or allows them again.
fn refuse_connections(database: &FreshDatabase, refuse: bool) {
    let mut admin = database.admin();
    let allow = if refuse { "false" } else { "true" };
    admin
        .batch_execute(&format!(
            "ALTER DATABASE {} ALLOW_CONNECTIONS {allow}",
            database.name()
        ))
        .unwrap();
    if refuse {
        admin
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[&database.name()],
            )
            .unwrap();
    }
}

/// Asks `ask` every 20 ms until it gives `Some`, for at most `limit`.
fn within<T>(limit: Duration, what: &str, mut ask: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + limit;
    loop {
        if let Some(found) = ask() {
            return found;
        }
        assert!(Instant::now() < until, "no {what} within {limit:?}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// A 503 from the database being unavailable.
fn assert_unavailable(reply: &Reply, what: &str) {
    assert_eq!(reply.status, 503, "{what}: {}", reply.text());
    reply.assert_error(503, "try again shortly");
    assert_eq!(reply.header("retry-after"), Some("1"), "{what}");
}

/// One line's value in `/metrics`.
pub(super) fn metric(server: &TestServer, line: &str) -> u64 {
    let text = server.send("GET", "/metrics", &[AUTH], "").text();
    let prefix = format!("{line} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {line} in {text}"))
        .parse()
        .unwrap()
}

#[test]
fn while_the_database_refuses_this_instance_requests_get_503_then_it_serves_again_by_itself() {
    let database = FreshDatabase::new();
    let server = TestServer::with(database.config(config()));
    assert_eq!(server.create(r#"{"id":1,"name":"before"}"#).status, 200);
    // Every worker connected before the refusal, so each connection made
    // after it is a reconnect (a worker still making its first would not
    // count as one, and could be the one that serves again).
    within(Duration::from_secs(5), "every worker connected", || {
        (metric(&server, "plantstore_database_connections") == TEST_POOL as u64).then_some(())
    });
    refuse_connections(&database, true);
    // Every request is answered at once; within about a second, 503.
    let mut refused = 0;
    let first = within(Duration::from_millis(1500), "503", || {
        let asked = Instant::now();
        let reply = server.send("GET", "/plants/1", &[AUTH], "");
        assert!(
            asked.elapsed() < Duration::from_secs(1),
            "{:?}",
            asked.elapsed()
        );
        (reply.status == 503).then_some(reply)
    });
    refused += 1;
    assert_unavailable(&first, "the first refusal");
    // The heartbeat asks every 250 ms.
    let health = within(Duration::from_millis(1500), "failing /healthz", || {
        let reply = server.send("GET", "/healthz", &[], "");
        (reply.status == 503).then_some(reply)
    });
    let health = health.json();
    assert_eq!(health["status"], "failing", "{health}");
    let reason = health["reason"].as_str().unwrap();
    assert!(reason.starts_with("database unreachable: "), "{reason}");
    for (method, path, body) in [
        ("GET", "/plants/1", ""),
        ("GET", "/plants", ""),
        ("POST", "/plants", r#"{"id":2,"name":"refused"}"#),
        ("PUT", "/plants/1", r#"{"name":"refused"}"#),
        ("DELETE", "/plants/1", ""),
        ("GET", "/export", ""),
    ] {
        let asked = Instant::now();
        let reply = server.send(method, path, &[AUTH, JSON], body);
        assert!(asked.elapsed() < Duration::from_secs(1), "{method} {path}");
        assert_unavailable(&reply, &format!("{method} {path}"));
        refused += 1;
    }
    // The heartbeat turned the instance away first; the idle workers find
    // their connections gone at their next check, within `PING`.
    within(Duration::from_secs(3), "no connection", || {
        (metric(&server, "plantstore_database_connections") == 0).then_some(())
    });
    let counted = metric(
        &server,
        "plantstore_database_refused_total{reason=\"down\"}",
    ) + metric(
        &server,
        "plantstore_database_refused_total{reason=\"failed\"}",
    );
    assert_eq!(counted, refused, "every 503 counted");

    refuse_connections(&database, false);
    let back = within(Duration::from_secs(5), "200", || {
        let reply = server.send("GET", "/plants/1", &[AUTH], "");
        (reply.status == 200).then_some(reply)
    });
    assert_eq!(back.json(), json!({"id": 1, "name": "before"}), "unchanged");
    assert_eq!(server.send("GET", "/healthz", &[], "").status, 200);
    assert_eq!(server.send("GET", "/plants/2", &[AUTH], "").status, 404);
    assert!(metric(&server, "plantstore_database_reconnects_total") >= 1);
}

/// Every plant, following the listing's `Link` headers.
fn every_listed(server: &TestServer) -> Vec<Value> {
    let mut all = Vec::new();
    let mut next = Some("/plants?limit=1000".to_string());
    while let Some(target) = next.take() {
        let reply = server.send("GET", &target, &[AUTH], "");
        assert_eq!(reply.status, 200);
        all.extend(reply.json().as_array().unwrap().iter().cloned());
        next = reply
            .header("link")
            .map(|link| link[1..link.find('>').unwrap()].to_string());
    }
    all
}

/// The lines of an export, parsed.
fn lines(body: &[u8]) -> Vec<Value> {
    assert!(body.is_empty() || body.ends_with(b"\n"));
    body.split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("each line is JSON"))
        .collect()
}

/// `GET /export` over HTTP/1.1 (chunked, in more than one piece) and over
/// HTTP/1.0 (to the close) both give the listing, in id order.
fn assert_export_is_the_listing(server: &TestServer, count: usize) {
    let listing = every_listed(server);
    assert_eq!(listing.len(), count);
    let ids: Vec<i64> = listing.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ascending");
    let reply = server.send("GET", "/export", &[AUTH], "");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("transfer-encoding"), Some("chunked"));
    assert!(reply.chunks > 1, "{} chunks", reply.chunks);
    assert_eq!(lines(&reply.body), listing);
    let mut client = server.client();
    client.send(b"GET /export HTTP/1.0\r\nAuthorization: Bearer test-token\r\n\r\n");
    let mut wire = Vec::new();
    client.stream.read_to_end(&mut wire).expect("to the close");
    let end = wire.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(wire.starts_with(b"HTTP/1.1 200 "));
    assert_eq!(lines(&wire[end..]), listing);
}

#[test]
fn an_export_of_several_pieces_is_the_listing_in_id_order_over_http_1_1_and_1_0() {
    let database = FreshDatabase::new();
    // 1024 plants, ids spread over negatives and positives and written out
    // of order: two full pieces of 512, then an empty read ends it.
    let seed = TempFile::new("export.ndjson");
    let text: String = (0..1024i64)
        .map(|i| (i * 389) % 1024 * 1000 - 500_000)
        .map(|id| format!("{{\"id\":{id},\"name\":\"plant {id}\"}}\n"))
        .collect();
    std::fs::write(&seed.0, text).unwrap();
    let mut config = database.config(config());
    config.seed = Some(seed.0.clone());
    let server = TestServer::with(config);
    assert_export_is_the_listing(&server, 1024);
    assert_eq!(server.create(r#"{"id":-1,"name":"one more"}"#).status, 200);
    assert_export_is_the_listing(&server, 1025);
}
