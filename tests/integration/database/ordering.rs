//! The change feed's order under concurrent writers (schema version 6:
//! the log numbered without a lock over the cluster): two instances of one
//! database, writers on both changing the same few ids (creates, replaces
//! with names of their own, deletes), both feeds read to the end. No
//! acknowledged change is missing and none is there twice, both feeds
//! carry the same events in the same order, and each id's changes are in
//! the order the store applied them: each feed, replayed, is a history the
//! store could have had and ends as the table, and a change acknowledged
//! before another to the same id was sent comes first. Then the same with
//! PostgreSQL crashing (`pg_ctl stop -m immediate`) and starting again
//! under the writers, where a change without an answer may be there, once,
//! or not at all.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::api::changes::{Feed, Message, plant_body};
use crate::support::{
    AUTH, Client, FreshDatabase, JSON, PATIENCE, TestServer, Turn, config, request,
};

/// Ids the writers share: many changes meet on each.
const IDS: i64 = 8;
/// Writers, alternately on each instance.
const WRITERS: usize = 4;
/// Changes a writer has answered (applied or refused) at most: the feeds,
/// read at the end, keep far less than their history's 1 MiB waiting.
/// Requests without an answer (the database down) do not count: while the
/// cluster restarts they come back at once, and would use up the writer
/// before the restart is over.
const REQUESTS: usize = 400;
/// What a writer waits after a request without an answer, as a client
/// would before trying again.
const AGAIN: Duration = Duration::from_millis(50);
/// Created through the first instance once every writer is done: every
/// change acknowledged comes before it.
const MARKER: i64 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Create,
    Replace,
    Delete,
}

/// What the answer said of a request's change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Applied,
    /// 409 or 404: not applied.
    Refused,
    /// 503, or no answer: applied or not.
    Unknown,
}

#[derive(Debug)]
struct Sent {
    id: i64,
    op: Op,
    /// Of a create or replace: the writer's and the request's number.
    name: String,
    sent: Instant,
    answered: Instant,
    outcome: Outcome,
}

/// How long the writers go on writing once what runs meanwhile (a crash
/// and a restart) has returned, and how they pace their requests.
#[derive(Clone, Copy)]
struct Plan {
    write_for: Duration,
    pause: Duration,
}

/// A writer's choices (xorshift), the same on every run.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The request for `op` on `id`, with `name` for a create or replace.
fn change(op: Op, id: i64, name: &str) -> Vec<u8> {
    let path = format!("/plants/{id}");
    match op {
        Op::Create => request(
            "POST",
            "/plants",
            &[AUTH, JSON],
            &plant_body(id, name, None),
        ),
        Op::Replace => request(
            "PUT",
            &path,
            &[AUTH, JSON],
            &format!(r#"{{"name":"{name}"}}"#),
        ),
        Op::Delete => request("DELETE", &path, &[AUTH], ""),
    }
}

/// One writer's requests through `addr`, each with what became of it.
fn write(addr: SocketAddr, writer: usize, plan: Plan, stop: &AtomicBool) -> Vec<Sent> {
    // However slowly the machine goes, a writer ends.
    let deadline = Instant::now() + PATIENCE;
    let mut dice = Dice(0x9E37_79B9_7F4A_7C15 ^ (writer as u64 + 1));
    let mut client = Client::connect(addr);
    let mut sent = Vec::new();
    let mut answered = 0;
    for n in 0.. {
        if answered == REQUESTS || stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
            break;
        }
        let id = 1 + dice.below(IDS as u64) as i64;
        let op = [Op::Create, Op::Replace, Op::Delete][dice.below(3) as usize];
        let name = format!("w{writer}-{n}");
        let at = Instant::now();
        let status = client
            .try_send(&change(op, id, &name))
            .ok()
            .and_then(|()| client.try_reply())
            .map(|reply| reply.status);
        let outcome = match (op, status) {
            (Op::Create | Op::Replace, Some(200)) | (Op::Delete, Some(204)) => Outcome::Applied,
            (Op::Create, Some(409)) | (Op::Replace | Op::Delete, Some(404)) => Outcome::Refused,
            (_, None | Some(503)) => {
                client = Client::connect(addr);
                Outcome::Unknown
            }
            (_, Some(other)) => panic!("{op:?} of {id}: {other}"),
        };
        sent.push(Sent {
            id,
            op,
            name,
            sent: at,
            answered: Instant::now(),
            outcome,
        });
        if outcome == Outcome::Unknown {
            thread::sleep(AGAIN);
        } else {
            answered += 1;
            thread::sleep(plan.pause);
        }
    }
    sent
}

/// Runs the writers on `a` and `b` while `meanwhile` runs; every request.
fn writers(a: SocketAddr, b: SocketAddr, plan: Plan, meanwhile: impl FnOnce()) -> Vec<Sent> {
    let stop = Arc::new(AtomicBool::new(false));
    let running: Vec<_> = (0..WRITERS)
        .map(|w| {
            let addr = if w % 2 == 0 { a } else { b };
            let stop = Arc::clone(&stop);
            thread::spawn(move || write(addr, w, plan, &stop))
        })
        .collect();
    meanwhile();
    thread::sleep(plan.write_for);
    stop.store(true, Ordering::Relaxed);
    running
        .into_iter()
        .flat_map(|w| w.join().expect("a writer"))
        .collect()
}

/// Creates the marker through `server`, once the database takes writes.
fn mark(server: &TestServer) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match server.create(&plant_body(MARKER, "marker", None)).status {
            200 => return,
            503 if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
            other => panic!("the marker: {other}"),
        }
    }
}

/// A feed's events up to the marker.
fn to_marker(feed: &mut Feed) -> Vec<Message> {
    let deadline = Instant::now() + 2 * PATIENCE;
    let mut events = Vec::new();
    loop {
        let message = feed.next_message().expect("the feed goes on");
        assert!(
            Instant::now() < deadline,
            "no marker after {}",
            events.len()
        );
        if message.data.is_none() {
            continue;
        }
        let marker = message.data()["id"] == MARKER;
        events.push(message);
        if marker {
            return events;
        }
    }
}

/// Every plant but the marker, as the table holds it: id and name.
fn table(server: &TestServer) -> BTreeMap<i64, String> {
    let reply = server.send("GET", "/plants?limit=1000", &[AUTH], "");
    assert_eq!(reply.status, 200, "{}", reply.text());
    let listed = reply.json();
    let plants = listed.as_array().expect("a list");
    plants
        .iter()
        .map(|p| {
            (
                p["id"].as_i64().unwrap(),
                p["name"].as_str().unwrap().into(),
            )
        })
        .filter(|(id, _)| *id != MARKER)
        .collect()
}

/// (id, event, data) of each event: what must be equal on every feed.
fn seen(events: &[Message]) -> Vec<(String, String, Value)> {
    let seen = |e: &Message| (e.id.clone().unwrap(), e.event.clone().unwrap(), e.data());
    events.iter().map(seen).collect()
}

/// Checks one feed's events (the marker last) against what was sent and
/// the table at the end.
fn check(events: &[Message], sent: &[Sent], table: &BTreeMap<i64, String>) {
    for pair in events.windows(2) {
        assert_eq!(pair[1].seq(), pair[0].seq() + 1, "{:?}", pair[1]);
    }
    let by_name: HashMap<&str, &Sent> = sent.iter().map(|s| (s.name.as_str(), s)).collect();
    let mut place: HashMap<&str, usize> = HashMap::new();
    let mut plants: BTreeMap<i64, String> = BTreeMap::new();
    let mut deletes: HashMap<i64, usize> = HashMap::new();
    for (at, event) in events[..events.len() - 1].iter().enumerate() {
        let data = event.data();
        let id = data["id"].as_i64().expect("an id");
        let op = match event.event.as_deref() {
            Some("created") => Op::Create,
            Some("replaced") => Op::Replace,
            Some("deleted") => {
                assert!(
                    plants.remove(&id).is_some(),
                    "{at}: a delete of absent {id}"
                );
                *deletes.entry(id).or_default() += 1;
                continue;
            }
            other => panic!("{at}: {other:?}"),
        };
        let name = data["name"].as_str().expect("a name");
        let s = by_name
            .get(name)
            .unwrap_or_else(|| panic!("{name}: sent by nobody"));
        assert_eq!((s.id, s.op), (id, op), "{at}: {name}");
        assert_ne!(
            s.outcome,
            Outcome::Refused,
            "{at}: {s:?} refused, yet on the feed"
        );
        assert!(place.insert(&s.name, at).is_none(), "{at}: {name} twice");
        let was = plants.insert(id, name.to_owned());
        assert_eq!(was.is_some(), op == Op::Replace, "{at}: {s:?} over {was:?}");
    }
    assert_eq!(&plants, table, "the feed, replayed, ends as the table");
    for id in 1..=IDS {
        let of = |outcome| {
            let deletes = sent.iter().filter(|s| s.id == id && s.op == Op::Delete);
            deletes.filter(|s| s.outcome == outcome).count()
        };
        let on_feed = deletes.get(&id).copied().unwrap_or(0);
        let (applied, unknown) = (of(Outcome::Applied), of(Outcome::Unknown));
        assert!(
            (applied..=applied + unknown).contains(&on_feed),
            "id {id}: {on_feed} deletes on the feed, {applied} acknowledged, {unknown} unknown"
        );
    }
    let named: Vec<&Sent> = sent
        .iter()
        .filter(|s| s.op != Op::Delete && s.outcome == Outcome::Applied)
        .collect();
    for s in &named {
        assert!(
            place.contains_key(s.name.as_str()),
            "{s:?}: not on the feed"
        );
    }
    for (a, b) in named.iter().flat_map(|a| named.iter().map(move |b| (a, b))) {
        if a.id == b.id && a.answered < b.sent {
            assert!(
                place[a.name.as_str()] < place[b.name.as_str()],
                "{a:?} after {b:?}"
            );
        }
    }
}

/// Two instances, their feeds open, the writers on both while
/// `meanwhile` runs, then the marker: both feeds read to it and checked.
/// Every request, for the caller's own checks.
fn run(database: &FreshDatabase, plan: Plan, meanwhile: impl FnOnce()) -> Vec<Sent> {
    let a = TestServer::with(database.config(config()));
    let b = TestServer::with(database.config(config()));
    let mut on_a = Feed::open(a.addr, &[], "");
    let mut on_b = Feed::open(b.addr, &[], "");
    assert_eq!(on_a.opening().id, on_b.opening().id, "one numbering");
    let sent = writers(a.addr, b.addr, plan, meanwhile);
    mark(&a);
    let (from_a, from_b) = (to_marker(&mut on_a), to_marker(&mut on_b));
    assert_eq!(
        seen(&from_a),
        seen(&from_b),
        "the same events in the same order"
    );
    let table = table(&a);
    check(&from_a, &sent, &table);
    sent
}

#[test]
fn writers_on_two_instances_meet_one_order_on_both_feeds_with_every_change_once() {
    let database = FreshDatabase::new();
    let plan = Plan {
        write_for: Duration::from_secs(3),
        pause: Duration::ZERO,
    };
    let sent = run(&database, plan, || {});
    let unknown: Vec<&Sent> = sent
        .iter()
        .filter(|s| s.outcome == Outcome::Unknown)
        .collect();
    assert!(unknown.is_empty(), "every request answered: {unknown:?}");
    let applied = sent.iter().filter(|s| s.outcome == Outcome::Applied);
    assert!(
        applied.count() > 200,
        "the writers wrote: {} requests",
        sent.len()
    );
}

#[test]
fn every_acknowledged_change_is_on_both_feeds_once_after_postgresql_crashes_under_writers() {
    // Crashing the cluster would fail every other test using it meanwhile.
    let alone = Turn::alone();
    let database = FreshDatabase::within(&alone);
    let plan = Plan {
        write_for: Duration::from_secs(5),
        pause: Duration::from_millis(10),
    };
    let sh = |variable: &str| {
        let line = std::env::var(variable).unwrap_or_else(|_| panic!("{variable} is not set"));
        let status = Command::new("sh").args(["-c", &line]).status().unwrap();
        assert!(status.success(), "{variable}: {line}");
    };
    let mut restarted = None;
    let sent = run(&database, plan, || {
        thread::sleep(Duration::from_millis(1500));
        sh("PLANTSTORE_TEST_PG_CRASH");
        sh("PLANTSTORE_TEST_PG_START");
        restarted = Some(Instant::now());
    });
    let restarted = restarted.expect("the cluster crashed and started");
    let acknowledged = |s: &&Sent| s.outcome == Outcome::Applied;
    let before = sent.iter().filter(|s| s.answered < restarted);
    assert!(
        before.filter(acknowledged).count() > 20,
        "writes before the crash"
    );
    let after: Vec<&Sent> = sent.iter().filter(|s| s.sent > restarted).collect();
    let unknown = after.iter().filter(|s| s.outcome == Outcome::Unknown);
    assert!(
        after.iter().filter(|s| acknowledged(s)).count() > 20,
        "writes after the restart: {} sent, {} without an answer",
        after.len(),
        unknown.count()
    );
}
