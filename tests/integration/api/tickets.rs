//! Tickets for the change feed, on each store: `POST
//! /plants/changes/tickets` mints one with the token's scope; the feed
//! opens with it and no header, and with nothing else: not expired, not
//! altered or forged, not as a bearer token, not on another route; a
//! stream outlives its ticket; `lastEventId` resumes as `Last-Event-ID`
//! does. On PostgreSQL, instances share the key: a ticket of one is good
//! on another, and deleting the key rotates it.

use std::thread;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;

use crate::api::access::{READ_AUTH, with_reader};
use crate::api::changes::{Feed, plant_body};
use crate::on_each_store;
use crate::process::binary::Running;
use crate::support::{AUTH, JSON, Kind, PATIENCE, TestServer, send_to};

/// A ticket minted with `auth`, and the answer's scope and lifetime.
pub(crate) fn mint(server: &TestServer, auth: (&str, &str)) -> (String, String, u64) {
    let reply = server.send("POST", "/plants/changes/tickets", &[auth], "");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let answer = reply.json();
    let ticket = answer["ticket"].as_str().expect("a ticket").to_owned();
    let scope = answer["scope"].as_str().expect("a scope").to_owned();
    (
        ticket,
        scope,
        answer["expiresIn"].as_u64().expect("expiresIn"),
    )
}

/// The status line and headers of a feed opened with `query`, no token.
fn refused(server: &TestServer, query: &str) -> String {
    match Feed::try_open_with(server.addr, &[], query) {
        Ok(_) => panic!("{query}: opened"),
        Err(head) => head,
    }
}

fn a_ticket_opens_the_feed_with_the_scope_of_its_token(kind: Kind) {
    let server = TestServer::on_with(kind, with_reader());
    let (read, scope, lifetime) = mint(&server, READ_AUTH);
    assert_eq!((scope.as_str(), lifetime), ("read", 60));
    let (write, scope, _) = mint(&server, AUTH);
    assert_eq!(scope, "write");
    assert_ne!(read, write);
    let mut feeds: Vec<Feed> = [&read, &write]
        .iter()
        .map(|t| Feed::try_open_with(server.addr, &[], &format!("?ticket={t}")).unwrap())
        .collect();
    assert_eq!(server.create(&plant_body(1, "fern", None)).status, 200);
    for feed in &mut feeds {
        assert_eq!(feed.next_event().data()["name"], "fern");
    }
    // The route takes no ticket, and the feed's own header wins.
    let tickets = server.send("POST", "/plants/changes/tickets", &[], "");
    tickets.assert_error(401, "bearer");
    let query = format!("?ticket={read}");
    let mixed = Feed::try_open_with(server.addr, &[("Authorization", "Bearer x")], &query);
    assert!(mixed.err().is_some_and(|h| h.starts_with("HTTP/1.1 401")));
}

fn a_ticket_is_good_for_the_feed_alone_and_never_echoed(kind: Kind) {
    let server = TestServer::on_with(kind, with_reader());
    let (ticket, _, _) = mint(&server, AUTH);
    let as_bearer = format!("Bearer {ticket}");
    let reply = server.send(
        "GET",
        "/plants/changes",
        &[("Authorization", &as_bearer)],
        "",
    );
    reply.assert_error(401, "invalid bearer token");
    let on_plants = format!("/plants?ticket={ticket}");
    let reply = server.send("GET", &on_plants, &[AUTH], "");
    reply.assert_error(400, "unknown query parameter \"ticket\"");
    assert!(!reply.text().contains(&ticket));
    server
        .send("GET", &on_plants, &[], "")
        .assert_error(401, "missing bearer token");
    // Every byte altered, a forgery of the right shape, and garbage.
    let bytes = BASE64URL.decode(&ticket).unwrap();
    let mut tries: Vec<String> = (0..bytes.len())
        .map(|at| {
            let mut altered = bytes.clone();
            altered[at] ^= 0x40;
            BASE64URL.encode(altered)
        })
        .collect();
    tries.push(BASE64URL.encode([7u8; 58]));
    tries.extend(["", "x", "%ff", &"A".repeat(4000)].map(String::from));
    for bad in &tries {
        let reply = server.send("GET", &format!("/plants/changes?ticket={bad}"), &[], "");
        reply.assert_error(401, "ticket is not valid");
        if bad.len() > 8 {
            assert!(!reply.text().contains(bad.as_str()), "echoed");
        }
        let challenge = reply.header("www-authenticate").unwrap_or_default();
        assert!(challenge.contains("invalid_token"), "{challenge}");
    }
}

fn a_stream_outlives_its_ticket_and_an_expired_ticket_is_refused(kind: Kind) {
    let mut config = with_reader();
    config.ticket_ttl = Duration::from_secs(1);
    let server = TestServer::on_with(kind, config);
    let (ticket, _, lifetime) = mint(&server, READ_AUTH);
    assert_eq!(lifetime, 1);
    let query = format!("?ticket={ticket}");
    let mut feed = Feed::try_open_with(server.addr, &[], &query).unwrap();
    feed.opening();
    thread::sleep(Duration::from_millis(1100));
    let head = refused(&server, &query);
    assert!(head.starts_with("HTTP/1.1 401"), "expired: {head}");
    assert!(!head.contains(&ticket));
    assert_eq!(server.create(&plant_body(1, "later", None)).status, 200);
    assert_eq!(
        feed.next_event().data()["name"],
        "later",
        "the stream goes on"
    );
}

fn last_event_id_in_the_query_resumes_and_the_header_wins(kind: Kind) {
    let server = TestServer::on_with(kind, with_reader());
    let mut feed = Feed::try_open_with(server.addr, &[AUTH], "").unwrap();
    feed.opening();
    for id in 1..=3 {
        assert_eq!(server.create(&plant_body(id, "before", None)).status, 200);
    }
    let ids: Vec<String> = (0..3).map(|_| feed.next_event().id.unwrap()).collect();
    drop(feed);
    // Changes made while no stream is open: a new ticket and a new stream
    // from the last id lose none and repeat none.
    for id in 4..=5 {
        assert_eq!(server.create(&plant_body(id, "between", None)).status, 200);
    }
    let (ticket, _, _) = mint(&server, READ_AUTH);
    let query = format!("?ticket={ticket}&lastEventId={}", ids[2]);
    let mut resumed = Feed::try_open_with(server.addr, &[], &query).unwrap();
    let seen: Vec<u64> = (0..2)
        .map(|_| resumed.next_event().data()["id"].as_u64().unwrap())
        .collect();
    assert_eq!(seen, [4, 5]);
    assert_eq!(server.create(&plant_body(6, "after", None)).status, 200);
    assert_eq!(resumed.next_event().data()["id"], 6);
    let query = format!("?ticket={ticket}&lastEventId={}", ids[0]);
    let header = [("Last-Event-ID", ids[1].as_str())];
    let mut both = Feed::try_open_with(server.addr, &header, &query).unwrap();
    assert_eq!(both.next_event().data()["id"], 3, "the header wins");
}

fn a_ticket_is_in_no_log_line_even_at_trace_level(kind: Kind) {
    let token = "trace-token-0123456789";
    let auth = format!("Bearer {token}");
    let auth = ("Authorization", auth.as_str());
    let mut server = Running::on(kind, &["--log-level", "trace"], Some(token));
    let reply = send_to(server.addr, "POST", "/plants/changes/tickets", &[auth], "");
    assert_eq!(reply.status, 200, "{}", reply.text());
    let ticket = reply.json()["ticket"].as_str().unwrap().to_owned();
    let query = format!("?ticket={ticket}");
    let mut feed = Feed::try_open_with(server.addr, &[], &query).unwrap();
    feed.opening();
    let created = send_to(
        server.addr,
        "POST",
        "/plants",
        &[auth, JSON],
        &plant_body(1, "a", None),
    );
    assert_eq!(created.status, 200);
    assert_eq!(feed.next_event().data()["id"], 1);
    // A byte in the middle flipped: never the ticket itself, whatever its
    // characters (a last character swapped for another can decode to the
    // same bytes, or be the same character).
    let mut bytes = BASE64URL.decode(&ticket).unwrap();
    bytes[20] ^= 0x40;
    let altered = BASE64URL.encode(bytes);
    assert_ne!(altered, ticket);
    for (target, headers) in [
        (format!("/plants/changes?ticket={altered}"), vec![]),
        (format!("/plants?ticket={ticket}"), vec![auth]),
        (format!("/plants?ticket={ticket}"), vec![]),
        (
            "/plants/changes".to_owned(),
            vec![("Authorization", &*format!("Bearer {ticket}"))],
        ),
    ] {
        let status = send_to(server.addr, "GET", &target, &headers, "").status;
        assert!(status == 400 || status == 401, "{target}: {status}");
    }
    drop(feed);
    server.signal("TERM");
    assert!(server.wait(PATIENCE).success());
    let log = server.log();
    assert!(
        log.iter().any(|l| l.contains("/plants/changes")),
        "access lines: {log:?}"
    );
    for line in &log {
        for secret in [&ticket, &altered, &ticket[..40], token] {
            assert!(!line.contains(secret), "{line}");
        }
    }
}

on_each_store!(
    a_ticket_is_in_no_log_line_even_at_trace_level,
    a_ticket_opens_the_feed_with_the_scope_of_its_token,
    a_ticket_is_good_for_the_feed_alone_and_never_echoed,
    a_stream_outlives_its_ticket_and_an_expired_ticket_is_refused,
    last_event_id_in_the_query_resumes_and_the_header_wins,
);
