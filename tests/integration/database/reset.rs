//! The reset on PostgreSQL (schema version 5), at the database's level:
//! one transaction that leaves exactly the seed's plants and logs one
//! change of kind `Reset`, writes racing it that land wholly before or
//! wholly after, the count of resets that a read in pieces checks, a
//! reset that cannot finish in time changing nothing, the upgrade from
//! version 4, and the follower of another instance handing the reset on.
//!
//! Each test has a database of its own and reaches it through the
//! library's connections, as the pool's workers do; the log is numbered
//! (`number_committed`, as a follower does) before it is read.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use plantstore::database::{
    Connect, Connection, InGeneration, RESET_FOR, ResetFailed, ensure_schema, follow,
    number_committed,
};
use plantstore::dbconfig::DatabaseConfig;
use plantstore::model::{ChangeKind, Edit, Plant, PlantChange};

use super::start::versions;
use crate::support::{FreshDatabase, PATIENCE};

/// A connection as a worker's, to a database with the schema.
pub(super) fn connect(database: &FreshDatabase) -> Connection {
    let mut client = database.client();
    ensure_schema(&mut client).expect("the schema is made");
    let config = DatabaseConfig::parse(&database.url, 1).expect("the test URL parses");
    config.connect().expect("the test database answers")
}

/// Numbers what was committed (as a follower would); the log's last
/// number.
fn numbered(connection: &mut Connection) -> u64 {
    number_committed(connection, PATIENCE).expect("the log is numbered")
}

fn plant(name: &str, tag: Option<&str>) -> Plant {
    Plant {
        name: name.into(),
        tag: tag.map(Into::into),
    }
}

/// Every plant, by id, as the table holds it.
fn table(database: &FreshDatabase) -> BTreeMap<i64, Plant> {
    let rows = database
        .client()
        .query("SELECT id, name, tag FROM plants ORDER BY id", &[])
        .expect("the plants table exists");
    rows.iter()
        .map(|row| {
            let name: Vec<u8> = row.get(1);
            let tag: Option<Vec<u8>> = row.get(2);
            let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
            (
                row.get(0),
                Plant {
                    name: text(name),
                    tag: tag.map(text),
                },
            )
        })
        .collect()
}

fn creates(connection: &mut Connection, ids: impl Iterator<Item = i64>) {
    let changes: Vec<(i64, Edit)> = ids
        .map(|id| (id, Edit::Create(plant(&format!("old {id}"), Some("old")))))
        .collect();
    let applied = connection.apply(&changes).expect("the creates commit");
    assert!(applied.iter().all(|a| *a), "each id is new");
}

fn seed() -> Arc<[(i64, Plant)]> {
    let mut seed = vec![(1, plant("Fern", Some("green"))), (7, plant("Rose", None))];
    // Enough to take more than one insert.
    seed.extend((1000..3500).map(|id| (id, plant(&format!("seeded {id}"), Some("many")))));
    seed.into()
}

#[test]
fn a_reset_leaves_exactly_the_seeds_plants_and_logs_one_change_of_its_own_kind() {
    let database = FreshDatabase::new();
    let mut connection = connect(&database);
    creates(&mut connection, 1..=50);
    let before = numbered(&mut connection);
    assert_eq!(before, 50);
    assert_eq!(connection.generation().unwrap(), 0);
    let seed = seed();
    let done = connection.reset(&seed).expect("the reset commits");
    assert_eq!((done.generation, done.plants), (1, seed.len()));
    assert!(done.ticket > 1, "after the creates' ticket: {done:?}");
    assert_eq!(numbered(&mut connection), before + 1);
    let expected: BTreeMap<i64, Plant> = seed.iter().cloned().collect();
    assert_eq!(table(&database), expected, "the seed's plants and no other");
    // Written as every write is: the folded columns a search compares.
    let folded: String = database
        .client()
        .query_one("SELECT name_folded FROM plants WHERE id = 1", &[])
        .unwrap()
        .get(0);
    assert_eq!(folded, "fern");
    let reset = PlantChange {
        seq: before + 1,
        id: 0,
        kind: ChangeKind::Reset,
        plant: None,
    };
    assert_eq!(
        connection.changes_after(before, 64).unwrap(),
        std::slice::from_ref(&reset)
    );
    let back = connection
        .changes_back(before - 1, before + 1, 1 << 20)
        .unwrap();
    assert_eq!(back.last(), Some(&reset), "read back too");
    assert_eq!(back[0].kind, ChangeKind::Created);
    assert_eq!(connection.log_last().unwrap(), before + 1);
    assert_eq!(connection.generation().unwrap(), 1);
    // No seed: no plants.
    let again = connection.reset(&[]).expect("an empty reset commits");
    assert_eq!((again.generation, again.plants), (2, 0));
    assert!(again.ticket > done.ticket);
    assert!(table(&database).is_empty());
}

#[test]
fn a_read_in_pieces_learns_that_the_plants_were_reset_under_it() {
    let database = FreshDatabase::new();
    let mut connection = connect(&database);
    creates(&mut connection, 1..=3);
    let page = |c: &mut Connection| c.page(None, 2, None);
    let InGeneration::Read(first, generation) = connection.in_generation(None, page).unwrap()
    else {
        panic!("nothing was reset")
    };
    assert_eq!((first.len(), generation), (2, 0));
    let more = connection.in_generation(Some(0), page).unwrap();
    assert!(matches!(more, InGeneration::Read(_, 0)), "{more:?}");
    connection.reset(&seed()).unwrap();
    let after = connection.in_generation(Some(0), page).unwrap();
    assert_eq!(after, InGeneration::Reset(1), "a later piece is refused");
    let anew = connection.in_generation(None, page).unwrap();
    assert!(matches!(anew, InGeneration::Read(_, 1)), "{anew:?}");
}

/// Plays the logged changes after `from` onto `plants`.
fn replay(plants: &mut BTreeMap<i64, Plant>, changes: &[PlantChange]) {
    for change in changes {
        match (change.kind, &change.plant) {
            (ChangeKind::Deleted, _) => drop(plants.remove(&change.id)),
            (ChangeKind::Reset, _) => panic!("replayed from the last reset"),
            (_, Some(plant)) => drop(plants.insert(change.id, plant.clone())),
            (_, None) => panic!("a change without its plant: {change:?}"),
        }
    }
}

#[test]
fn writes_racing_resets_land_wholly_before_or_wholly_after_each() {
    let database = FreshDatabase::new();
    let mut connection = connect(&database);
    let seed = seed();
    let stop = Arc::new(AtomicBool::new(false));
    // Batches committed, over all writers.
    let batches = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..4i64)
        .map(|w| {
            let mut writer = connect(&database);
            let (stop, batches) = (Arc::clone(&stop), Arc::clone(&batches));
            thread::spawn(move || {
                let mut round = 0i64;
                // Bounded even if the test fails before it says stop.
                let limit = Instant::now() + Duration::from_secs(60);
                while !stop.load(Ordering::Relaxed) && Instant::now() < limit {
                    // A batch of three creates, a replace of a seed's plant
                    // and of one's own, and a delete: applied together or
                    // not at all.
                    let id = 10_000 + w * 1_000_000 + round * 3;
                    let changes = [
                        (id, Edit::Create(plant("new", None))),
                        (id + 1, Edit::Create(plant("new", Some("t")))),
                        (id + 2, Edit::Create(plant("new", None))),
                        (1000 + w, Edit::Replace(plant(&format!("by {w}"), None))),
                        (id - 3, Edit::Replace(plant("again", None))),
                        (id - 2, Edit::Delete),
                    ];
                    writer.apply(&changes).expect("a batch commits");
                    batches.fetch_add(1, Ordering::Relaxed);
                    round += 1;
                }
            })
        })
        .collect();
    // Writes land between the resets, whatever the load.
    let some_more = || {
        let before = batches.load(Ordering::Relaxed);
        while batches.load(Ordering::Relaxed) < before + 5 {
            thread::sleep(Duration::from_millis(5));
        }
    };
    let mut tickets = Vec::new();
    for _ in 0..5 {
        some_more();
        tickets.push(connection.reset(&seed).expect("a reset commits").ticket);
    }
    some_more();
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    assert!(tickets.is_sorted(), "{tickets:?}");
    let last = numbered(&mut connection);
    let mut log: Vec<PlantChange> = Vec::new();
    loop {
        let from = log.last().map_or(0, |c| c.seq);
        let more = connection.changes_after(from, 64).unwrap();
        if more.is_empty() {
            break;
        }
        log.extend(more);
    }
    let numbers: Vec<u64> = log.iter().map(|c| c.seq).collect();
    assert_eq!(numbers, (1..=last).collect::<Vec<_>>(), "the log is whole");
    let resets: Vec<usize> = (0..log.len())
        .filter(|&at| log[at].kind == ChangeKind::Reset)
        .collect();
    assert_eq!(resets.len(), 5, "each reset logged once");
    let after = &log[resets[4] + 1..];
    assert!(after.len() > 10, "writes landed after the last reset");
    let mut expected: BTreeMap<i64, Plant> = seed.iter().cloned().collect();
    replay(&mut expected, after);
    assert_eq!(
        table(&database),
        expected,
        "the seed, then exactly the changes numbered after the reset"
    );
}

#[test]
fn a_reset_that_cannot_finish_in_time_changes_nothing() {
    let database = FreshDatabase::new();
    let mut connection = connect(&database);
    creates(&mut connection, 1..=5);
    let before = table(&database);
    let last = numbered(&mut connection);
    // A write that neither commits nor ends holds the table.
    let mut holder = database.client();
    let mut tx = holder.transaction().unwrap();
    tx.execute("UPDATE plants SET tag = NULL WHERE id = 1", &[])
        .unwrap();
    let started = Instant::now();
    let refused = connection.reset(&seed());
    let took = started.elapsed();
    assert!(
        matches!(refused, Err(ResetFailed::OutOfTime(_))),
        "{refused:?}"
    );
    assert!(
        took >= RESET_FOR - Duration::from_millis(100) && took < RESET_FOR + Duration::from_secs(2),
        "given up on after RESET_FOR: {took:?}"
    );
    tx.rollback().unwrap();
    assert_eq!(table(&database), before, "nothing changed");
    assert_eq!(numbered(&mut connection), last, "nothing logged");
    assert_eq!(connection.generation().unwrap(), 0);
    // The connection serves on.
    assert_eq!(connection.reset(&seed()).unwrap().generation, 1);
}

#[test]
fn a_version_4_database_is_upgraded_to_version_5_keeping_its_plants_and_log() {
    let database = FreshDatabase::new();
    let mut connection = connect(&database);
    creates(&mut connection, 1..=5);
    numbered(&mut connection);
    let log = connection.changes_after(0, 64).unwrap();
    assert_eq!(log.len(), 5);
    // Back to what version 4 made.
    let mut client = database.client();
    client
        .batch_execute(
            "DROP TRIGGER plantstore_feed_numbered ON plantstore_feed;
             DROP FUNCTION plantstore_feed_numbered();
             ALTER TABLE plantstore_feed DROP COLUMN generation, DROP COLUMN ticket;
             DROP TABLE plant_changes_pending;
             DROP SEQUENCE plant_changes_ticket;
             DELETE FROM plantstore_schema WHERE version >= 5;",
        )
        .unwrap();
    assert_eq!(versions(&mut client), [1, 2, 3, 4]);
    ensure_schema(&mut client).expect("version 4 is upgraded");
    assert_eq!(versions(&mut client), [1, 2, 3, 4, 5, 6]);
    let mut connection = connect(&database);
    assert_eq!(connection.generation().unwrap(), 0);
    assert_eq!(table(&database).len(), 5);
    assert_eq!(connection.changes_after(0, 64).unwrap(), log);
    assert_eq!(connection.reset(&seed()).unwrap().generation, 1);
}

#[test]
fn the_follower_of_another_instance_hands_the_reset_on_in_order() {
    let database = FreshDatabase::new();
    let mut connection = connect(&database);
    creates(&mut connection, 1..=2);
    let from = numbered(&mut connection);
    let seen: Arc<Mutex<Vec<PlantChange>>> = Arc::default();
    let alive = Arc::new(());
    let into = Arc::clone(&seen);
    let config = DatabaseConfig::parse(&database.url, 1).unwrap();
    let deliver = Box::new(move |c: &PlantChange| into.lock().unwrap().push(c.clone()));
    let weak: Weak<()> = Arc::downgrade(&alive);
    follow(config, from, deliver, weak).unwrap();
    creates(&mut connection, 3..=3);
    connection.reset(&seed()).unwrap();
    creates(&mut connection, 4..=4);
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap().len() < 3 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    drop(alive);
    let seen: Vec<(u64, i64, ChangeKind)> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|c| (c.seq, c.id, c.kind))
        .collect();
    assert_eq!(
        seen,
        [
            (from + 1, 3, ChangeKind::Created),
            (from + 2, 0, ChangeKind::Reset),
            (from + 3, 4, ChangeKind::Created),
        ]
    );
}

/// An export read across a reset (here made through the API) ends cut
/// short, never going on with the other plants: each piece is checked
/// against the count of resets when the first was read.
#[test]
fn an_export_read_across_a_reset_is_cut_short() {
    use std::io::{Read, Write};
    let database = FreshDatabase::new();
    let seed = crate::support::TempFile::new("reset-export.ndjson");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&seed.0).unwrap());
    // About 5 MB of export, far more than the sockets hold.
    for id in 0..20_000 {
        writeln!(file, r#"{{"id":{id},"name":"{id:0>250}"}}"#).unwrap();
    }
    drop(file);
    let config = plantstore::config::Config {
        allow_reset: true,
        seed: Some(seed.0.clone()),
        ..database.config(crate::support::config())
    };
    let server = crate::support::TestServer::with(config);
    let mut client = server.client();
    client.send(b"GET /export HTTP/1.0\r\nAuthorization: Bearer test-token\r\n\r\n");
    let mut wire = vec![0u8; 64 * 1024];
    client
        .stream
        .read_exact(&mut wire)
        .expect("the export begins");
    // The reset takes about a second here; on a machine loaded past
    // RESET_FOR it is refused whole (changing nothing, the export going
    // on), and asked again: the export is what is tested.
    let mut reset = server.send("POST", "/plants/reset", &[crate::support::AUTH], "");
    for _ in 0..2 {
        if reset.status != 503 || !reset.text().contains("did not finish in time") {
            break;
        }
        reset = server.send("POST", "/plants/reset", &[crate::support::AUTH], "");
    }
    assert_eq!(reset.status, 200, "{}", reset.text());
    let end = client.stream.read_to_end(&mut wire);
    let error = end.expect_err("cut short by a reset of the connection, not a close");
    assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset, "{error}");
    assert!(wire.len() < 5_000_000, "cut before the end: {}", wire.len());
}

/// A reset made through one instance reaches the change feed of another
/// as the `reset` event of a reset, in order and with the same id, and
/// a third instance, which had no stream, reads it back from the change
/// log for a stream resuming from before it.
#[test]
fn a_reset_through_one_instance_reaches_the_feed_of_another_and_a_resume_from_the_log() {
    use crate::api::changes::{Feed, plant_body};
    use crate::support::{AUTH, TestServer, config};
    use serde_json::json;
    let database = FreshDatabase::new();
    let (resettable, _seed) = crate::api::reset::resettable(database.config(config()));
    let a = TestServer::with(resettable);
    let b = TestServer::with(database.config(config()));
    let mut on_b = Feed::open(b.addr, &[], "");
    on_b.opening();
    assert_eq!(a.create(&plant_body(5, "Rose", Some("blue"))).status, 200);
    let reset = a.send("POST", "/plants/reset", &[AUTH], "");
    assert_eq!(reset.status, 200, "{}", reset.text());
    assert_eq!(reset.json(), json!({"plants": 3}));
    assert_eq!(a.create(&plant_body(6, "Lily", None)).status, 200);
    let created = on_b.next_event();
    let was_reset = on_b.next_event();
    let after = on_b.next_event();
    assert_eq!(created.event.as_deref(), Some("created"));
    assert_eq!(was_reset.event.as_deref(), Some("reset"));
    assert_eq!(was_reset.data(), json!({"reason": "the plants were reset"}));
    assert_eq!(was_reset.seq(), created.seq() + 1);
    assert_eq!(after.data()["id"].as_i64(), Some(6));
    let listed = b.send("GET", "/plants", &[AUTH], "").json();
    let ids: Vec<i64> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3, 6], "the seed's, then what came after");
    let c = TestServer::with(database.config(config()));
    let from = created.id.clone().unwrap();
    let mut resumed = Feed::open(c.addr, &[("Last-Event-ID", &from)], "");
    let again = resumed.next_event();
    assert_eq!((&again.id, again.data()), (&was_reset.id, was_reset.data()));
    assert_eq!(resumed.next_event().data()["id"].as_i64(), Some(6));
}

/// Through the API: a reset that cannot finish in time is a 503 that
/// says so, and the plants are as they were.
#[test]
fn a_reset_out_of_time_is_a_503_that_says_so() {
    use crate::support::{AUTH, TestServer, config};
    let database = FreshDatabase::new();
    let (resettable, _seed) = crate::api::reset::resettable(database.config(config()));
    let server = TestServer::with(resettable);
    let before = table(&database);
    assert_eq!(before.len(), 3, "the seed, loaded at start");
    let mut holder = database.client();
    let mut tx = holder.transaction().unwrap();
    tx.execute("DELETE FROM plants WHERE id = 1", &[]).unwrap();
    let reply = server.send("POST", "/plants/reset", &[AUTH], "");
    assert_eq!(reply.status, 503, "{}", reply.text());
    assert!(
        reply.text().contains("did not finish in time"),
        "{}",
        reply.text()
    );
    tx.rollback().unwrap();
    assert_eq!(table(&database), before);
}
