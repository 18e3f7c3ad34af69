//! `POST /plants/reset` (`--allow-reset`): every plant replaced by the
//! seed's at once, durably; the feed's `reset` event, live and on resume;
//! writers racing a reset land wholly before it or after it; without the
//! flag the path is a 404 like any unknown path. (A read token's 403:
//! `access.rs`, which walks every row.)

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use plantstore::config::Config;
use serde_json::{Value, json};

use super::changes::{Feed, plant_body};
use crate::support::{AUTH, JSON, Kind, TempFile, TestServer, config, durable_config, request};

/// The seed every test resets to.
const SEED: &str = r#"[{"id":1,"name":"Fern","tag":"green"},{"id":2,"name":"Moss"},
{"id":3,"name":"Ivy","tag":"green"}]"#;

/// The seed file, and `config` with `--allow-reset` and `--seed` on it.
pub(crate) fn resettable(config: Config) -> (Config, TempFile) {
    let seed = TempFile::new("reset-seed.json");
    std::fs::write(&seed.0, SEED).unwrap();
    let config = Config {
        allow_reset: true,
        seed: Some(seed.0.clone()),
        ..config
    };
    (config, seed)
}

/// Every plant, by id, as one listing page has them.
fn listed(server: &TestServer) -> BTreeMap<i64, Value> {
    let page = server.send("GET", "/plants?limit=1000", &[AUTH], "");
    assert_eq!(page.status, 200, "{}", page.text());
    let plants = page.json().as_array().unwrap().clone();
    plants
        .into_iter()
        .map(|p| (p["id"].as_i64().unwrap(), p))
        .collect()
}

fn seed_plants() -> BTreeMap<i64, Value> {
    let seed: Vec<Value> = serde_json::from_str(SEED).unwrap();
    seed.into_iter()
        .map(|p| (p["id"].as_i64().unwrap(), p))
        .collect()
}

fn reset(server: &TestServer) -> Value {
    let reply = server.send("POST", "/plants/reset", &[AUTH], "");
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json()
}

fn reset_gives_exactly_the_seeds_plants(kind: Kind) {
    let (seeded, _seed) = resettable(config());
    let server = TestServer::on_with(kind, seeded);
    assert_eq!(listed(&server), seed_plants(), "loaded at start");
    assert_eq!(server.create(&plant_body(100, "Rose", None)).status, 200);
    let deleted = server.send("DELETE", "/plants/1", &[AUTH], "");
    assert_eq!(deleted.status, 204);
    let replaced = server.send(
        "PUT",
        "/plants/2",
        &[AUTH, JSON],
        &plant_body(2, "Oak", None),
    );
    assert_eq!(replaced.status, 200);
    assert_eq!(reset(&server), json!({"plants": 3}));
    assert_eq!(listed(&server), seed_plants());
    // Twice is the same; a GET is a 405 naming the one method.
    assert_eq!(reset(&server), json!({"plants": 3}));
    assert_eq!(listed(&server), seed_plants());
    let get = server.send("GET", "/plants/reset", &[AUTH], "");
    assert_eq!((get.status, get.header("allow")), (405, Some("POST")));
    // Without --seed: none.
    let bare = TestServer::on_with(
        kind,
        Config {
            allow_reset: true,
            ..config()
        },
    );
    assert_eq!(bare.create(&plant_body(5, "Rose", None)).status, 200);
    assert_eq!(reset(&bare), json!({"plants": 0}));
    assert!(listed(&bare).is_empty());
}

fn without_the_flag_the_path_is_a_404(kind: Kind) {
    let server = TestServer::on(kind);
    let unknown = server.send("POST", "/plants/nowhere/x", &[AUTH], "");
    assert_eq!(unknown.status, 404);
    for method in ["POST", "GET", "DELETE"] {
        let reply = server.send(method, "/plants/reset", &[AUTH], "");
        assert_eq!(reply.status, 404, "{method}");
        assert_eq!(reply.body, unknown.body, "{method}: as an unknown path");
    }
}

fn the_feed_sends_a_reset_event_in_order_and_on_resume(kind: Kind) {
    let (config, _seed) = resettable(config());
    let server = TestServer::on_with(kind, config);
    let mut feed = Feed::open(server.addr, &[], "?tag=blue");
    feed.opening();
    assert_eq!(
        server.create(&plant_body(5, "Rose", Some("blue"))).status,
        200
    );
    reset(&server);
    assert_eq!(
        server.create(&plant_body(6, "Lily", Some("blue"))).status,
        200
    );
    let created = feed.next_event();
    assert_eq!(created.event.as_deref(), Some("created"));
    let reset_event = feed.next_event();
    assert_eq!(
        reset_event.event.as_deref(),
        Some("reset"),
        "whatever the tag"
    );
    assert_eq!(
        reset_event.data(),
        json!({"reason": "the plants were reset"})
    );
    assert_eq!(
        reset_event.seq(),
        created.seq() + 1,
        "numbered like a change"
    );
    let after = feed.next_event();
    assert_eq!(
        (after.event.as_deref(), after.data()["id"].as_i64()),
        (Some("created"), Some(6))
    );
    // Resuming from before the reset gets it, then what followed.
    let id = created.id.clone().unwrap();
    let mut resumed = Feed::open(server.addr, &[("Last-Event-ID", &id)], "");
    let again = resumed.next_event();
    assert_eq!((again.event, again.id), (reset_event.event, reset_event.id));
    assert_eq!(resumed.next_event().data()["id"].as_i64(), Some(6));
}

/// Four writers create plants of their own, one at a time, from before
/// the first of five resets to after the last: the feed, replayed (a
/// reset back to the seed), is the listing, and each writer's plants
/// left are the last of its creates, none missing in between (a create
/// lands wholly before a reset or after).
fn writers_racing_resets_leave_no_half_state(server: &TestServer) {
    let mut feed = Feed::open(server.addr, &[], "");
    feed.opening();
    let done = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (1..=4)
        .map(|writer| {
            let (addr, done) = (server.addr, Arc::clone(&done));
            thread::spawn(move || {
                let mut client = crate::support::Client::connect(addr);
                let (mut made, mut after) = (0, 0);
                // Bounded: 10 more once the resets are done (the count only
                // keeps ids apart: a fast writer makes thousands first).
                while after < 10 && made < 100_000 {
                    after += i64::from(done.load(Ordering::Acquire));
                    let body = plant_body(writer * 1_000_000 + made, "w", None);
                    client.send(&request("POST", "/plants", &[AUTH, JSON], &body));
                    assert_eq!(client.reply().status, 200);
                    made += 1;
                }
                made
            })
        })
        .collect();
    for _ in 0..5 {
        thread::sleep(Duration::from_millis(5));
        assert_eq!(reset(server), json!({"plants": 3}));
    }
    done.store(true, Ordering::Release);
    let made: Vec<i64> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let mut replayed = seed_plants();
    let (mut resets, mut gone) = (0, 0);
    for n in 1..=(made.iter().sum::<i64>() as u64 + 5) {
        let event = feed.next_event();
        assert_eq!(event.seq(), n, "numbered in order, none skipped");
        match event.event.as_deref().unwrap() {
            "reset" => {
                gone += replayed.len() - 3;
                resets += 1;
                replayed = seed_plants();
            }
            "created" => {
                let data = event.data();
                let id = data["id"].as_i64().unwrap();
                assert!(replayed.insert(id, data).is_none(), "created twice: {id}");
            }
            other => panic!("event {other}"),
        }
    }
    assert_eq!(resets, 5);
    assert!(gone > 0, "no create raced a reset");
    assert_eq!(listed(server), replayed);
    for (writer, made) in (1..=4).zip(made) {
        let mine: Vec<i64> = replayed
            .keys()
            .filter(|&&id| id / 1_000_000 == writer)
            .map(|id| id % 1_000_000)
            .collect();
        let first = mine.first().copied().unwrap_or(made);
        assert_eq!(mine, (first..made).collect::<Vec<_>>(), "writer {writer}");
        assert!(first < made, "writer {writer}: its last creates stay");
    }
}

fn four_writers_racing_a_reset_leave_no_half_state(kind: Kind) {
    let (config, _seed) = resettable(config());
    writers_racing_resets_leave_no_half_state(&TestServer::on_with(kind, config));
}

#[test]
fn with_a_journal_writers_racing_resets_leave_no_half_state_and_a_restart_keeps_it() {
    let file = TempFile::new("reset-race.journal");
    let (config, _seed) = resettable(durable_config(&file.0));
    let mut server = TestServer::with(config);
    writers_racing_resets_leave_no_half_state(&server);
    let before = listed(&server);
    server.restart();
    assert_eq!(listed(&server), before, "the journal holds the same");
    // A reset then a change, restarted: the seed and the change.
    reset(&server);
    assert_eq!(server.create(&plant_body(77, "after", None)).status, 200);
    server.restart();
    let mut want = seed_plants();
    want.insert(77, json!({"id": 77, "name": "after"}));
    assert_eq!(listed(&server), want);
}

crate::on_each_store!(
    reset_gives_exactly_the_seeds_plants,
    without_the_flag_the_path_is_a_404,
    the_feed_sends_a_reset_event_in_order_and_on_resume,
    four_writers_racing_a_reset_leave_no_half_state,
);
