//! Who may do what, on each store: a read token against every row of the
//! endpoint table (each change 403 with an Error body naming the scope,
//! each read served), `--read-only` refusing every change to every token,
//! and a reload that removes a token: its open streams end and its
//! tickets are refused, while the tokens that stay go on. The binary says
//! `--read-only` in its start-up line.

use plantstore::api::{Grant, ROUTES, Scope};

use crate::api::changes::{Feed, plant_body};
use crate::on_each_store;
use crate::process::binary::{Running, run_to_exit};
use crate::support::{AUTH, JSON, Kind, PATIENCE, TempFile, TestServer, config, request};

pub(crate) const READER: &str = "reader-token-0123456789";
pub(crate) const READ_AUTH: (&str, &str) = ("Authorization", "Bearer reader-token-0123456789");

/// The test configuration with the write token and a read token (and
/// `--allow-reset`, so that the walks meet `POST /plants/reset` too).
pub(crate) fn with_reader() -> plantstore::config::Config {
    let reader = Grant {
        token: READER.into(),
        scope: Scope::Read,
    };
    plantstore::config::Config {
        tokens: vec![Grant::write(crate::support::TOKEN.into()), reader],
        allow_reset: true,
        ..config()
    }
}

/// `method` on `path` with `auth`; the status, and the Error body's
/// message where there is one. The feed's GET reads the head alone (its
/// stream never ends).
fn call(server: &TestServer, method: &str, path: &str, auth: (&str, &str)) -> (u16, String) {
    let body = match method {
        "POST" if path == "/plants" => plant_body(1000, "refused", None),
        "POST" | "HEAD" | "GET" | "DELETE" => String::new(),
        _ => plant_body(7, "refused", None),
    };
    let mut client = server.client();
    client.send(&request(method, path, &[auth, JSON], &body));
    let reply = if method == "HEAD" || path == "/plants/changes" {
        client.reply_head()
    } else {
        client.reply()
    };
    let message = match reply.status {
        403 => {
            reply.assert_error(403, "");
            reply.json()["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        }
        _ => String::new(),
    };
    (reply.status, message)
}

/// Every method of every row that needs a token, with `auth`: a change is
/// 403 naming `why`, anything else is served (not 401 nor 403).
fn walk(server: &TestServer, auth: (&str, &str), why: &str) -> usize {
    let mut changes = 0;
    for route in ROUTES.iter().filter(|r| r.auth) {
        let path = route.path.replace("{id}", "7");
        for method in route.methods {
            let (status, message) = call(server, method.name, &path, auth);
            let name = method.name;
            if method.scope == Scope::Write {
                changes += 1;
                assert_eq!(status, 403, "{name} {path}");
                assert!(message.contains(why), "{name} {path}: {message}");
            } else {
                // Served: plant 7 may not exist (nothing is stored with
                // --read-only), a 404 is an answer too.
                assert!(
                    (200..300).contains(&status) || status == 404,
                    "{name} {path}: {status} for a read"
                );
            }
        }
    }
    changes
}

fn a_read_token_may_read_every_route_and_change_none(kind: Kind) {
    let server = TestServer::on_with(kind, with_reader());
    assert_eq!(server.create(&plant_body(7, "seen", None)).status, 200);
    let changes = walk(&server, READ_AUTH, "scope is read");
    let what = "POST /plants, PUT and DELETE /plants/{id}, POST /plants/reset";
    assert_eq!(changes, 4, "{what}");
    // Nothing was changed: plant 7 is as it was, 1000 was never made.
    let listed = server.send("GET", "/plants", &[READ_AUTH], "").json();
    assert_eq!(listed, serde_json::json!([{"id": 7, "name": "seen"}]));
    // The write token changes what the read token could not.
    assert_eq!(walk_writes(&server), 4);
}

/// The changes of the table with the write token: none is 403.
fn walk_writes(server: &TestServer) -> usize {
    let mut changes = 0;
    for route in ROUTES.iter().filter(|r| r.auth) {
        let path = route.path.replace("{id}", "7");
        for method in route.methods.iter().filter(|m| m.scope == Scope::Write) {
            let (status, _) = call(server, method.name, &path, AUTH);
            assert!(
                (200..300).contains(&status),
                "{} {path}: {status}",
                method.name
            );
            changes += 1;
        }
    }
    changes
}

fn read_only_refuses_every_change_to_every_token_and_serves_the_rest(kind: Kind) {
    let server = TestServer::on_with(
        kind,
        plantstore::config::Config {
            read_only: true,
            ..with_reader()
        },
    );
    for auth in [AUTH, READ_AUTH] {
        assert_eq!(walk(&server, auth, "the server is read-only"), 4);
    }
    let listed = server.send("GET", "/plants", &[AUTH], "").json();
    assert_eq!(listed, serde_json::json!([]), "nothing was stored");
    let minted = server.send("POST", "/plants/changes/tickets", &[AUTH], "");
    assert_eq!(minted.status, 200, "a ticket is a read: {}", minted.text());
}

fn a_reload_ends_the_streams_of_a_removed_token_and_refuses_its_tickets(kind: Kind) {
    let file = TempFile::new("access-reload-tokens");
    let both = format!("{}\n{READER} read\n", crate::support::TOKEN);
    std::fs::write(&file.0, &both).unwrap();
    let config = plantstore::config::Config {
        token_file: Some(file.0.clone()),
        ..with_reader()
    };
    let server = TestServer::on_with(kind, config);
    let ticket = |auth| {
        let minted = server.send("POST", "/plants/changes/tickets", &[auth], "");
        assert_eq!(minted.status, 200, "{}", minted.text());
        minted.json()["ticket"].as_str().unwrap().to_owned()
    };
    let (reader_ticket, writer_ticket) = (ticket(READ_AUTH), ticket(AUTH));
    let mut by_token = Feed::try_open_with(server.addr, &[READ_AUTH], "").unwrap();
    let query = format!("?ticket={reader_ticket}");
    let mut by_ticket = Feed::try_open_with(server.addr, &[], &query).unwrap();
    let mut kept = Feed::try_open_with(server.addr, &[AUTH], "").unwrap();
    for feed in [&mut by_token, &mut by_ticket, &mut kept] {
        feed.opening();
    }
    // The read token leaves; the write token stays.
    std::fs::write(&file.0, format!("{}\n", crate::support::TOKEN)).unwrap();
    server.reload();
    assert_eq!(by_token.next_message(), None, "the token's stream ended");
    assert_eq!(by_ticket.next_message(), None, "its ticket's stream too");
    let refused = Feed::try_open_with(server.addr, &[], &query).err();
    assert!(
        refused
            .as_deref()
            .is_some_and(|h| h.starts_with("HTTP/1.1 401")),
        "its ticket is refused: {refused:?}"
    );
    assert_eq!(server.create(&plant_body(1, "after", None)).status, 200);
    assert_eq!(kept.next_event().data()["name"], "after", "the rest go on");
    let query = format!("?ticket={writer_ticket}");
    let mut again = Feed::try_open_with(server.addr, &[], &query).unwrap();
    again.opening();
    // Back again: a new flag, and its new tickets work.
    std::fs::write(&file.0, &both).unwrap();
    server.reload();
    let query = format!("?ticket={}", ticket(READ_AUTH));
    assert!(Feed::try_open_with(server.addr, &[], &query).is_ok());
    // The write token stayed through both reloads: its ticket's stream too.
    assert_eq!(server.create(&plant_body(2, "later", None)).status, 200);
    assert_eq!(again.next_event().data()["name"], "later");
}

on_each_store!(
    a_read_token_may_read_every_route_and_change_none,
    read_only_refuses_every_change_to_every_token_and_serves_the_rest,
    a_reload_ends_the_streams_of_a_removed_token_and_refuses_its_tickets,
);

#[test]
fn read_only_is_said_at_start_and_a_ticket_lifetime_out_of_range_stops_it() {
    let server = Running::start(&["--read-only"], Some(READER));
    let line = server
        .log()
        .into_iter()
        .find(|l| l.contains("listening on"))
        .expect("a start-up line");
    assert!(
        line.contains("read-only: every change is refused"),
        "{line}"
    );
    drop(server);
    let plain = Running::start(&[], Some(READER));
    let line = plain.log().into_iter().find(|l| l.contains("listening on"));
    assert!(!line.unwrap_or_default().contains("read-only"));
    for bad in ["0", "3601", "x"] {
        let (code, stderr) = run_to_exit(&["--ticket-ttl", bad], Some(READER), PATIENCE);
        assert_eq!(code, Some(2), "--ticket-ttl {bad}: {stderr}");
        assert!(stderr.contains("--ticket-ttl"), "{stderr}");
    }
}
