//! The change feed on PostgreSQL: every instance's feed carries the
//! changes made through any instance, numbered once for the cluster (an
//! id means the same on every instance), and goes on, losing nothing,
//! after the database restarts.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::api::changes::{Feed, Message, plant_body};
use crate::support::{AUTH, FreshDatabase, JSON, PATIENCE, TestServer, Turn, config};

/// (id, event, data) of an event: what must be equal on every instance.
fn seen(event: &Message) -> (String, String, serde_json::Value) {
    (
        event.id.clone().unwrap(),
        event.event.clone().unwrap(),
        event.data(),
    )
}

#[test]
fn a_change_through_one_instance_reaches_the_feed_of_every_instance() {
    let database = FreshDatabase::new();
    let a = TestServer::with(database.config(config()));
    let b = TestServer::with(database.config(config()));
    let mut on_a = Feed::open(a.addr, &[], "");
    let mut on_b = Feed::open(b.addr, &[], "");
    assert_eq!(on_a.opening().id, on_b.opening().id, "one numbering");
    assert_eq!(a.create(&plant_body(1, "fern", Some("green"))).status, 200);
    assert_eq!(b.create(&plant_body(2, "rose", None)).status, 200);
    let put = plant_body(2, "red rose", Some("red"));
    assert_eq!(a.send("PUT", "/plants/2", &[AUTH, JSON], &put).status, 200);
    assert_eq!(b.send("DELETE", "/plants/1", &[AUTH], "").status, 204);
    let from_a: Vec<Message> = (0..4).map(|_| on_a.next_event()).collect();
    let from_b: Vec<Message> = (0..4).map(|_| on_b.next_event()).collect();
    assert_eq!(
        from_a.iter().map(seen).collect::<Vec<_>>(),
        from_b.iter().map(seen).collect::<Vec<_>>()
    );
    let kinds: Vec<(u64, String)> = from_a
        .iter()
        .map(|e| (e.seq(), e.event.clone().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            (1, "created".into()),
            (2, "created".into()),
            (3, "replaced".into()),
            (4, "deleted".into())
        ]
    );
    assert_eq!(
        from_a[2].data(),
        serde_json::json!({"id": 2, "name": "red rose", "tag": "red"})
    );
    // An id from one instance resumes on the other.
    let first = from_a[0].id.clone().unwrap();
    let mut resumed = Feed::open(b.addr, &[("Last-Event-ID", &first)], "");
    let next: Vec<_> = (0..3).map(|_| seen(&resumed.next_event())).collect();
    assert_eq!(next, from_a[1..].iter().map(seen).collect::<Vec<_>>());
}

#[test]
fn the_feed_goes_on_after_the_database_restarts() {
    // Stopping the cluster would fail every other test using it meanwhile.
    let alone = Turn::alone();
    let database = FreshDatabase::within(&alone);
    let a = TestServer::with(database.config(config()));
    let b = TestServer::with(database.config(config()));
    let mut on_b = Feed::open(b.addr, &[], "");
    on_b.opening();
    assert_eq!(a.create(&plant_body(1, "before", None)).status, 200);
    let before = on_b.next_event();
    let sh = |line: &str| {
        let status = Command::new("sh").args(["-c", line]).status().unwrap();
        assert!(status.success(), "{line}");
    };
    sh(&std::env::var("PLANTSTORE_TEST_PG_STOP").expect("PLANTSTORE_TEST_PG_STOP"));
    sh(&std::env::var("PLANTSTORE_TEST_PG_START").expect("PLANTSTORE_TEST_PG_START"));
    // Through A as soon as it can write again (503 until then).
    let deadline = Instant::now() + PATIENCE;
    loop {
        match a.create(&plant_body(2, "after", None)).status {
            200 => break,
            503 if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
            other => panic!("create after the restart: {other}"),
        }
    }
    let after = on_b.next_event();
    assert_eq!(
        after.seq(),
        before.seq() + 1,
        "nothing lost, nothing skipped"
    );
    assert_eq!(after.data(), serde_json::json!({"id": 2, "name": "after"}));
}
