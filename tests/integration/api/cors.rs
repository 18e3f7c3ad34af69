//! `--cors-origin`: the headers that let a page from another origin call
//! the API, the preflight answered before auth, and nothing at all without
//! the flag. Headless Chromium checks the same from a real page
//! (`scripts/browser/browser.sh`). The answers that reach the store are checked
//! on each store: from the database they are completed by a pool worker,
//! after the handler returned, and must carry the same headers.

use std::time::Duration;

use plantstore::api::Cors;

use crate::process::binary::run_to_exit;
use crate::support::{AUTH, JSON, Kind, Reply, TempFile, TestServer, config, durable_config};

const PAGE: &str = "http://localhost:3000";
const ORIGIN: (&str, &str) = ("Origin", PAGE);

fn cors(origins: &[&str]) -> Cors {
    Cors::parse(&origins.iter().map(|o| o.to_string()).collect::<Vec<_>>()).unwrap()
}

fn server(origins: &[&str]) -> TestServer {
    server_on(Kind::Memory, origins)
}

fn server_on(kind: Kind, origins: &[&str]) -> TestServer {
    let config = plantstore::config::Config {
        cors: cors(origins),
        ..config()
    };
    TestServer::on_with(kind, config)
}

/// Asserts the headers every answer to an allowed origin carries.
fn assert_allowed(reply: &Reply, origin: &str) {
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some(origin),
        "{reply:?}"
    );
    assert_eq!(reply.header("vary"), Some("Origin"));
    assert_eq!(
        reply.header("access-control-expose-headers"),
        Some("Link, Location, WWW-Authenticate, Retry-After, X-Total-Count")
    );
}

/// Asserts that no `Access-Control-*` header was sent.
fn assert_no_cors(reply: &Reply) {
    let cors: Vec<_> = reply
        .headers
        .iter()
        .filter(|(name, _)| name.to_ascii_lowercase().starts_with("access-control-"))
        .collect();
    assert!(cors.is_empty(), "{cors:?}");
}

fn preflight(server: &TestServer, path: &str, origin: &str, method: &str) -> Reply {
    let headers = [
        ("Origin", origin),
        ("Access-Control-Request-Method", method),
        (
            "Access-Control-Request-Headers",
            "authorization,content-type",
        ),
    ];
    server.send("OPTIONS", path, &headers, "")
}

fn every_answer_to_an_allowed_origin_carries_the_cors_headers(kind: Kind) {
    let server = server_on(kind, &["https://other.example", PAGE]);
    let created = server.send(
        "POST",
        "/plants",
        &[AUTH, JSON, ORIGIN],
        r#"{"id":1,"name":"a"}"#,
    );
    assert_eq!(created.status, 200);
    assert_allowed(&created, PAGE);
    server.create(r#"{"id":2,"name":"b"}"#);
    let page = server.send("GET", "/plants?limit=1", &[AUTH, ORIGIN], "");
    assert_eq!(page.status, 200);
    assert!(page.header("link").is_some());
    assert_allowed(&page, PAGE);
    // Refusals too, or the page could not read why.
    let refused = server.send("GET", "/plants", &[ORIGIN], "");
    refused.assert_error(401, "missing");
    assert_allowed(&refused, PAGE);
    let missing = server.send("GET", "/plants/9", &[AUTH, ORIGIN], "");
    missing.assert_error(404, "9");
    assert_allowed(&missing, PAGE);
    let health = server.send("GET", "/healthz", &[ORIGIN], "");
    assert_allowed(&health, PAGE);
}

fn a_disallowed_origin_gets_no_cors_headers(kind: Kind) {
    let server = server_on(kind, &[PAGE]);
    for origin in [
        "http://localhost:3001",
        "https://localhost:3000",
        "http://localhost:3000/",
        "null",
    ] {
        let reply = server.send("GET", "/plants", &[AUTH, ("Origin", origin)], "");
        assert_eq!(reply.status, 200);
        assert_no_cors(&reply);
        // The answer depends on the origin: a cache must know.
        assert_eq!(reply.header("vary"), Some("Origin"));
    }
    let without = server.send("GET", "/plants", &[AUTH], "");
    assert_no_cors(&without);
    assert_eq!(without.header("vary"), Some("Origin"));
}

fn a_star_allows_every_origin_and_answers_star(kind: Kind) {
    let server = server_on(kind, &["*"]);
    for origin in [PAGE, "https://anywhere.example:8443", "null"] {
        let reply = server.send("GET", "/plants", &[AUTH, ("Origin", origin)], "");
        assert_allowed(&reply, "*");
    }
    let reply = preflight(&server, "/plants", "https://anywhere.example", "POST");
    assert_eq!(reply.status, 204);
    assert_allowed(&reply, "*");
}

#[test]
fn a_preflight_from_an_allowed_origin_is_204_without_a_token() {
    let server = server(&[PAGE]);
    let reply = preflight(&server, "/plants/7", PAGE, "PUT");
    assert_eq!(reply.status, 204, "{}", reply.text());
    assert_allowed(&reply, PAGE);
    assert_eq!(
        reply.header("access-control-allow-methods"),
        Some("GET, HEAD, PUT, DELETE")
    );
    assert_eq!(
        reply.header("access-control-allow-headers"),
        Some("Authorization, Content-Type, Last-Event-ID")
    );
    assert_eq!(reply.header("access-control-max-age"), Some("7200"));
    assert_eq!(reply.header("www-authenticate"), None);
    assert_eq!(reply.header("content-length"), None);
    assert!(reply.body.is_empty());
    let list = preflight(&server, "/plants", PAGE, "POST");
    assert_eq!(list.status, 204);
    assert_eq!(
        list.header("access-control-allow-methods"),
        Some("GET, HEAD, POST")
    );
}

fn a_preflight_lists_exactly_the_methods_each_path_answers(kind: Kind) {
    let server = server_on(kind, &[PAGE]);
    server.create(r#"{"id":1,"name":"a"}"#);
    for path in [
        "/plants",
        "/plants/1",
        "/openapi.json",
        "/healthz",
        "/metrics",
    ] {
        let reply = preflight(&server, path, PAGE, "GET");
        assert_eq!(reply.status, 204, "{path}");
        let listed = reply
            .header("access-control-allow-methods")
            .unwrap()
            .to_string();
        let listed: Vec<&str> = listed.split(", ").collect();
        for method in ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"] {
            let body = if matches!(method, "POST" | "PUT") {
                r#"{"id":2,"name":"b"}"#
            } else {
                ""
            };
            let answer = server.send(method, path, &[AUTH, JSON, ORIGIN], body);
            assert_eq!(
                answer.status == 405,
                !listed.contains(&method),
                "{method} {path}: {} (listed {listed:?})",
                answer.status
            );
            if answer.status == 405 {
                let allow: Vec<&str> = answer.header("allow").unwrap().split(", ").collect();
                assert_eq!(allow, listed, "{path}");
            }
        }
    }
}

#[test]
fn a_preflight_to_an_unknown_path_is_404() {
    let server = server(&[PAGE]);
    let reply = preflight(&server, "/plantz", PAGE, "GET");
    reply.assert_error(404, "no such resource");
    assert_allowed(&reply, PAGE);
    assert_eq!(reply.header("access-control-allow-methods"), None);
}

#[test]
fn a_preflight_from_a_disallowed_origin_is_a_plain_options_405() {
    let server = server(&[PAGE]);
    let reply = preflight(&server, "/plants", "http://localhost:3001", "POST");
    reply.assert_error(405, "allowed");
    assert_eq!(reply.header("allow"), Some("GET, HEAD, POST"));
    assert_no_cors(&reply);
}

#[test]
fn an_options_that_is_not_a_preflight_is_405_with_the_cors_headers() {
    let server = server(&[PAGE]);
    let reply = server.send("OPTIONS", "/plants", &[ORIGIN], "");
    reply.assert_error(405, "allowed");
    assert_eq!(reply.header("allow"), Some("GET, HEAD, POST"));
    assert_allowed(&reply, PAGE);
    assert_eq!(reply.header("access-control-allow-methods"), None);
}

fn without_the_flag_nothing_changes(kind: Kind) {
    let server = TestServer::on(kind);
    let reply = preflight(&server, "/plants", PAGE, "POST");
    reply.assert_error(405, "allowed");
    assert_eq!(reply.header("allow"), Some("GET, HEAD, POST"));
    assert_no_cors(&reply);
    assert_eq!(reply.header("vary"), None);
    let page = server.send("GET", "/plants", &[AUTH, ORIGIN], "");
    assert_eq!(page.status, 200);
    assert_no_cors(&page);
    assert_eq!(page.header("vary"), None);
}

fn changes_answered_after_the_handler_returned_carry_the_cors_headers(kind: Kind) {
    // With --data every change is answered by the committer thread after
    // the journal's sync, with --database by the pool worker that ran its
    // statement: after the handler returned, and with the headers too.
    let file = TempFile::new("cors.journal");
    let stored = match kind {
        Kind::Memory => durable_config(&file.0),
        #[cfg(feature = "postgres")]
        Kind::Postgres => config(),
    };
    let config = plantstore::config::Config {
        cors: cors(&[PAGE]),
        ..stored
    };
    let server = TestServer::on_with(kind, config);
    let body = r#"{"id":5,"name":"fern","tag":"green"}"#;
    let created = server.send("POST", "/plants", &[AUTH, JSON, ORIGIN], body);
    assert_eq!(created.status, 200, "{}", created.text());
    assert_allowed(&created, PAGE);
    let duplicate = server.send("POST", "/plants", &[AUTH, JSON, ORIGIN], body);
    duplicate.assert_error(409, "5");
    assert_allowed(&duplicate, PAGE);
    let replaced = server.send("PUT", "/plants/5", &[AUTH, JSON, ORIGIN], r#"{"name":"f"}"#);
    assert_eq!(replaced.status, 200);
    assert_allowed(&replaced, PAGE);
    let deleted = server.send("DELETE", "/plants/5", &[AUTH, ORIGIN], "");
    assert_eq!(deleted.status, 204);
    assert_allowed(&deleted, PAGE);
    let other = server.send(
        "POST",
        "/plants",
        &[AUTH, JSON, ("Origin", "http://localhost:3001")],
        r#"{"id":6,"name":"moss"}"#,
    );
    assert_eq!(other.status, 200);
    assert_no_cors(&other);
    assert_eq!(other.header("vary"), Some("Origin"));
}

#[test]
fn an_origin_that_could_never_match_stops_start_up() {
    for (origin, why) in [
        ("https://plants.example/", "ends with a slash"),
        ("https://plants.example/app", "has a path"),
        ("plants.example", "is not *"),
        ("https://plants.example:99999", "has a port"),
    ] {
        let (code, stderr) = run_to_exit(
            &["--cors-origin", PAGE, "--cors-origin", origin],
            Some("t"),
            Duration::from_secs(10),
        );
        assert_eq!(code, Some(2), "{origin}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.starts_with(&format!("plantstore: --cors-origin {origin:?} {why}")),
            "{stderr}"
        );
    }
}

crate::on_each_store!(
    every_answer_to_an_allowed_origin_carries_the_cors_headers,
    a_disallowed_origin_gets_no_cors_headers,
    a_star_allows_every_origin_and_answers_star,
    a_preflight_lists_exactly_the_methods_each_path_answers,
    without_the_flag_nothing_changes,
    changes_answered_after_the_handler_returned_carry_the_cors_headers,
);
