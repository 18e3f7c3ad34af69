//! The built-in page at `/`: served without a token, under a strict
//! Content-Security-Policy, revalidated by ETag, and gone with `--no-ui`.
//! Headless Chromium drives the page itself (`scripts/browser/browser.sh`).

use crate::process::binary::Running;
use crate::support::{AUTH, Reply, TestServer, config, request, send_to};

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

const FILES: [(&str, &str); 4] = [
    ("/", "text/html; charset=utf-8"),
    ("/ui.css", "text/css; charset=utf-8"),
    ("/ui.js", "text/javascript; charset=utf-8"),
    ("/ui.svg", "image/svg+xml"),
];

/// Asserts the headers every file of the page is served with.
fn assert_guarded(reply: &Reply) {
    assert_eq!(reply.header("content-security-policy"), Some(CSP));
    assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(reply.header("referrer-policy"), Some("no-referrer"));
    assert_eq!(reply.header("cache-control"), Some("no-cache"));
    let etag = reply.header("etag").expect("an ETag");
    assert!(
        etag.len() > 2 && etag.starts_with('"') && etag.ends_with('"'),
        "a strong tag: {etag}"
    );
}

#[test]
fn the_page_is_served_without_a_token_under_a_strict_policy() {
    let server = TestServer::start();
    let page = server.send("GET", "/", &[], "");
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_guarded(&page);
    let html = page.text();
    assert!(html.starts_with("<!doctype html>"), "{html}");
    assert!(html.contains(r#"<script src="/ui.js" defer></script>"#));
    assert!(html.contains(r#"<link rel="stylesheet" href="/ui.css">"#));
    assert!(html.contains("width=device-width"), "a viewport for phones");
}

#[test]
fn every_file_is_served_with_its_type_and_the_same_guards() {
    let server = TestServer::start();
    let mut etags = Vec::new();
    let mut total = 0;
    for (path, content_type) in FILES {
        let reply = server.send("GET", path, &[], "");
        assert_eq!(reply.status, 200, "{path}");
        assert_eq!(reply.header("content-type"), Some(content_type), "{path}");
        assert_guarded(&reply);
        assert!(!reply.body.is_empty());
        total += reply.body.len();
        let head = server.send("HEAD", path, &[], "");
        assert_eq!(head.status, 200);
        assert_eq!(head.header("etag"), reply.header("etag"));
        assert_eq!(
            head.header("content-length"),
            Some(reply.body.len().to_string().as_str())
        );
        etags.push(reply.header("etag").unwrap().to_string());
    }
    assert!(total <= 18 * 1024, "the page takes {total} bytes");
    etags.sort();
    etags.dedup();
    assert_eq!(etags.len(), FILES.len(), "each file has its own tag");
}

#[test]
fn a_matching_if_none_match_is_304_without_a_body() {
    let server = TestServer::start();
    for (path, _) in FILES {
        let etag = server
            .send("GET", path, &[], "")
            .header("etag")
            .unwrap()
            .to_string();
        let weak = format!("W/{etag}");
        let listed = format!("\"other\", {etag}");
        for tag in [etag.as_str(), &weak, &listed, "*"] {
            let mut client = server.client();
            client.send(&request("GET", path, &[("If-None-Match", tag)], ""));
            let reply = client.reply();
            assert_eq!(reply.status, 304, "{path} {tag}");
            assert_eq!(reply.header("etag"), Some(etag.as_str()));
            assert_eq!(reply.header("cache-control"), Some("no-cache"));
            assert!(reply.body.is_empty());
            assert_eq!(
                reply.header("content-length"),
                None,
                "no length unlike the 200's"
            );
            // Nothing followed the head: the connection serves a next request.
            client.send(&request("GET", "/healthz", &[], ""));
            assert_eq!(client.reply().status, 200);
        }
        let stale = server.send("GET", path, &[("If-None-Match", "\"stale\"")], "");
        assert_eq!(stale.status, 200, "{path}");
        assert!(!stale.body.is_empty());
    }
}

#[test]
fn the_page_answers_only_get_and_head() {
    let server = TestServer::start();
    for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
        let reply = server.send(method, "/", &[], "");
        reply.assert_error(405, "allowed");
        assert_eq!(reply.header("allow"), Some("GET, HEAD"));
    }
}

#[test]
fn no_ui_turns_the_page_and_its_files_off() {
    let server = TestServer::with(plantstore::config::Config {
        ui: false,
        ..config()
    });
    for (path, _) in FILES {
        let reply = server.send("GET", path, &[], "");
        reply.assert_error(404, "no such resource");
        assert_eq!(reply.header("content-security-policy"), None);
    }
    assert_eq!(server.send("POST", "/", &[], "").status, 404);
    assert_eq!(server.send("GET", "/healthz", &[], "").status, 200);
}

#[test]
fn the_no_ui_flag_reaches_the_server() {
    let with = Running::start(&[], Some("t"));
    let reply = send_to(with.addr, "GET", "/", &[], "");
    assert_eq!(reply.status, 200);
    let without = Running::start(&["--no-ui"], Some("t"));
    let reply = send_to(without.addr, "GET", "/", &[], "");
    reply.assert_error(404, "no such resource");
}

#[test]
fn the_page_and_its_files_are_counted_in_the_metrics() {
    let server = TestServer::start();
    let etag = server
        .send("GET", "/", &[], "")
        .header("etag")
        .unwrap()
        .to_string();
    server.send("GET", "/", &[("If-None-Match", &etag)], "");
    server.send("GET", "/ui.js", &[], "");
    let metrics = server.send("GET", "/metrics", &[AUTH], "").text();
    for line in [
        r#"plantstore_requests_total{route="/",method="GET",status="200"} 1"#,
        r#"plantstore_requests_total{route="/",method="GET",status="304"} 1"#,
        r#"plantstore_requests_total{route="/ui.js",method="GET",status="200"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
}

#[test]
fn the_page_and_its_files_are_not_api_operations() {
    let server = TestServer::start();
    let document = server.send("GET", "/openapi.json", &[], "").json();
    for (path, _) in FILES {
        assert!(
            document["paths"][path].is_null(),
            "{path} in the API document"
        );
    }
    // The API's own paths are all there.
    for path in ["/plants", "/plants/{id}", "/plants/changes", "/export"] {
        assert!(document["paths"][path].is_object(), "{path}");
    }
}
