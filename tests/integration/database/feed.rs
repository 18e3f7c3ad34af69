//! The change feed on PostgreSQL: every instance's feed carries the
//! changes made through any instance, numbered once for the cluster (an
//! id means the same on every instance, so a stream resumes on any
//! instance: one that never had a stream reads what it lacks back from the
//! change log, one whose follower is a round behind waits for it), and
//! goes on, losing nothing, after the database restarts; a version 5 log
//! keeps its ids through the upgrade to version 6.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use plantstore::database::ensure_schema;

use super::start::versions;
use crate::api::changes::{Feed, Message, feed_metric, plant_body};
use crate::support::{
    AUTH, FreshDatabase, JSON, PATIENCE, TestServer, Turn, allow_names_of, config, eventually,
};

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

#[test]
fn an_instance_without_a_stream_yet_resumes_an_id_of_another_from_the_change_log() {
    let database = FreshDatabase::new();
    let a = TestServer::with(database.config(config()));
    let b = TestServer::with(database.config(config()));
    let mut on_a = Feed::open(a.addr, &[], "");
    on_a.opening();
    for id in 1..=5 {
        let tag = (id % 2 == 0).then_some("even");
        assert_eq!(
            a.create(&plant_body(id, &format!("p{id}"), tag)).status,
            200
        );
    }
    let from_a: Vec<Message> = (0..5).map(|_| on_a.next_event()).collect();
    // B's follower has been handed all five, and B has had no stream:
    // only the change log still holds them.
    assert!(eventually(|| feed_metric(
        &b,
        "plantstore_feed_events_total"
    ) == 5));
    assert_eq!(feed_metric(&b, "plantstore_feed_subscribers"), 0);
    let second = from_a[1].id.clone().unwrap();
    let mut resumed = Feed::open(b.addr, &[("Last-Event-ID", &second)], "");
    // Each checked as it comes: after a reset, the stream would wait.
    for expected in &from_a[2..] {
        let message = resumed.next_message().expect("the stream goes on");
        assert_eq!(message.event, expected.event, "{message:?}");
        assert_eq!(seen(&message), seen(expected));
    }
    // Then the next change, once.
    assert_eq!(a.send("DELETE", "/plants/1", &[AUTH], "").status, 204);
    let deleted = resumed.next_message().unwrap();
    assert_eq!(
        (deleted.event.as_deref(), deleted.seq()),
        (Some("deleted"), 6)
    );
    // A filtered stream is filled from the same log.
    let mut even = Feed::open(b.addr, &[("Last-Event-ID", &second)], "?tag=even");
    assert_eq!(even.next_event().seq(), 4);
    assert_eq!(even.next_event().seq(), 6, "every delete");
}

#[test]
fn reading_back_from_the_change_log_keeps_to_the_history_bytes() {
    let database = FreshDatabase::new();
    let mut big_names = config();
    allow_names_of(&mut big_names, 70_000);
    let a = TestServer::with(database.config(big_names));
    let b = TestServer::with(database.config(config()));
    let mut on_a = Feed::open(a.addr, &[], "");
    on_a.opening();
    // 21 events of 65 KB: more than the history's 1 MiB.
    let big = "n".repeat(65_000);
    assert_eq!(a.create(&plant_body(1, &big, None)).status, 200);
    let mut ids = vec![on_a.next_event().id.unwrap()];
    for _ in 0..20 {
        // A connection each: the wait on the feed may outlast the idle
        // timeout on a loaded machine.
        let put = plant_body(1, &big, None);
        assert_eq!(a.send("PUT", "/plants/1", &[AUTH, JSON], &put).status, 200);
        ids.push(on_a.next_event().id.unwrap());
    }
    assert!(eventually(|| feed_metric(
        &b,
        "plantstore_feed_events_total"
    ) == 21));
    // Ten events back (650 KB) fit: read back, in order.
    let mut resumed = Feed::open(b.addr, &[("Last-Event-ID", &ids[10])], "");
    for id in &ids[11..] {
        let event = resumed.next_message().unwrap();
        assert_eq!(event.event.as_deref(), Some("replaced"));
        assert_eq!(event.id.as_ref(), Some(id));
    }
    drop(resumed);
    // Twenty back do not: a reset that goes on from the last event.
    let mut late = Feed::open(b.addr, &[("Last-Event-ID", &ids[0])], "");
    let reset = late.next_message().unwrap();
    assert_eq!(reset.event.as_deref(), Some("reset"));
    assert_eq!(reset.data()["reason"], "too far behind");
    assert_eq!(reset.id.as_ref(), ids.last());
    let history = feed_metric(&b, "plantstore_feed_history_bytes");
    // Filled from the newest down as far as its 1 MiB takes: one more
    // event (65,000 bytes and change) would not have fitted.
    assert!(
        ((1 << 20) - 65_200..=1 << 20).contains(&history),
        "filled up to its bound: {history}"
    );
}

#[test]
fn an_id_from_one_instance_resumes_on_another_right_after_its_commit() {
    let database = FreshDatabase::new();
    let a = TestServer::with(database.config(config()));
    let b = TestServer::with(database.config(config()));
    let mut on_a = Feed::open(a.addr, &[], "");
    let opening = on_a.opening();
    let epoch = opening
        .id
        .as_deref()
        .unwrap()
        .split_once('-')
        .unwrap()
        .0
        .to_owned();
    let mut number = opening.seq();
    // A connection each: a round's waits on the feeds may outlast the
    // idle timeout on a loaded machine.
    let create = |id: i64| assert_eq!(a.create(&plant_body(id, "p", None)).status, 200);
    // Each follower reads the log every 50 ms, and the one that numbers
    // reads it at once: resumed as soon as A's feed has it, the id is
    // often one B has not been handed yet.
    let mut behind = 0;
    for round in 0..60 {
        create(2 * round);
        number += 1;
        let id = format!("{epoch}-{number}");
        assert_eq!(on_a.next_event().id, Some(id.clone()), "round {round}");
        behind += usize::from(feed_metric(&b, "plantstore_feed_events_total") < number);
        let mut on_b = Feed::open(b.addr, &[("Last-Event-ID", &id)], "");
        create(2 * round + 1);
        number += 1;
        let first = on_b.next_message().unwrap();
        assert_eq!(
            (first.event.as_deref(), first.seq()),
            (Some("created"), number),
            "round {round}: {first:?}"
        );
        assert_eq!(first.data()["id"], 2 * round + 1);
        assert_eq!(on_a.next_event().id, Some(format!("{epoch}-{number}")));
    }
    assert!(behind >= 6, "B was behind A {behind} times of 60");
    // An id past every instance's last is still no id of the feed.
    let future = format!("{epoch}-{}", number + 1000);
    let mut foreign = Feed::open(b.addr, &[("Last-Event-ID", &future)], "");
    let reset = foreign.next_message().unwrap();
    assert_eq!(reset.event.as_deref(), Some("reset"));
    assert_eq!(reset.data()["reason"], "not an event id of this feed");
    assert_eq!(reset.seq(), number);
}

/// A version 5 database, its log numbered by the batches themselves, is
/// upgraded at start: its log and the ids of its feed stay, and new
/// changes are numbered after them.
#[test]
fn a_version_5_log_keeps_its_ids_and_the_feed_goes_on_after_it() {
    let database = FreshDatabase::new();
    let mut client = database.client();
    ensure_schema(&mut client).expect("the schema is made");
    client
        .batch_execute(
            "DROP TRIGGER plantstore_feed_numbered ON plantstore_feed;
             DROP FUNCTION plantstore_feed_numbered();
             ALTER TABLE plantstore_feed DROP COLUMN ticket;
             DROP TABLE plant_changes_pending;
             DROP SEQUENCE plant_changes_ticket;
             DELETE FROM plantstore_schema WHERE version = 6;
             INSERT INTO plants (id, name, tag, name_folded) VALUES (2, 'two'::bytea, NULL, 'two');
             INSERT INTO plant_changes (seq, ids, kinds, names, tags) VALUES
                 (1, ARRAY[1, 2]::bigint[], ARRAY[1, 1]::smallint[],
                     ARRAY['one'::bytea, 'two'::bytea], ARRAY[NULL::bytea, NULL::bytea]),
                 (3, ARRAY[1]::bigint[], ARRAY[3]::smallint[],
                     ARRAY[NULL::bytea], ARRAY[NULL::bytea]);
             UPDATE plantstore_feed SET last = 3;",
        )
        .unwrap();
    assert_eq!(versions(&mut client), [1, 2, 3, 4, 5]);
    let epoch: i64 = client
        .query_typed_one("SELECT epoch FROM plantstore_feed", &[])
        .unwrap()
        .get(0);
    let a = TestServer::with(database.config(config()));
    assert_eq!(versions(&mut client), [1, 2, 3, 4, 5, 6]);
    let b = TestServer::with(database.config(config()));
    let first = format!("{epoch}-1");
    let mut on_b = Feed::open(b.addr, &[("Last-Event-ID", &first)], "");
    assert_eq!(a.create(&plant_body(3, "three", None)).status, 200);
    let deleted = b.send("DELETE", "/plants/2", &[AUTH], "");
    assert_eq!(deleted.status, 204, "{}", deleted.text());
    let events: Vec<(String, String, serde_json::Value)> =
        (0..4).map(|_| seen(&on_b.next_event())).collect();
    let id = |n: u64| format!("{epoch}-{n}");
    let kinds: Vec<(String, String, serde_json::Value)> = events
        .iter()
        .map(|(id, event, data)| (id.clone(), event.clone(), data["id"].clone()))
        .collect();
    let expected = [
        (2, "created", 2),
        (3, "deleted", 1),
        (4, "created", 3),
        (5, "deleted", 2),
    ];
    assert_eq!(
        kinds,
        expected.map(|(n, event, plant)| (id(n), event.to_string(), serde_json::json!(plant)))
    );
    assert_eq!(events[0].2, serde_json::json!({"id": 2, "name": "two"}));
    // An instance of the older build still running numbers its batch
    // itself: refused, so that it cannot be out of order.
    let old = client
        .batch_execute("UPDATE plantstore_feed SET last = last + 1")
        .unwrap_err();
    let message = old.as_db_error().map(|e| e.message().to_string());
    assert!(
        message
            .as_deref()
            .unwrap_or("")
            .contains("schema version 6"),
        "{old:?}"
    );
}
