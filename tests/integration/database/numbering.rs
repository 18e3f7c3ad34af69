//! The numberer's edges (schema version 6): a transaction left open in
//! the cluster holds the change feed back, and the follower's log names
//! it; the benchmark's switch `PLANTSTORE_BENCH_NO_CHANGE_LOG=1` writes
//! without the change log. Each on the binary, whose log is read and
//! whose environment is its own; and what a write logs, through the
//! library's connection as a pool's worker writes: only what it applied,
//! under a ticket taken only when it applied anything.

use std::time::{Duration, Instant};

use plantstore::model::{Edit, Plant};

use super::reset::connect;
use crate::api::changes::{Feed, plant_body};
use crate::process::binary::{Running, server_command};
use crate::support::{AUTH, FreshDatabase, JSON, PATIENCE, TOKEN, Turn, eventually, send_to};

/// After how long the follower says that it waits (`database::number`).
const WAIT_WARNING: Duration = Duration::from_secs(10);

/// An instance on `database`, with `env` set.
fn instance(database: &FreshDatabase, env: &[(&str, &str)]) -> Running {
    let args = ["--database", &database.url, "--database-pool", "2"];
    let mut command = server_command(&args, Some(TOKEN));
    command.envs(env.iter().copied());
    Running::spawn(command, PATIENCE)
}

fn send(server: &Running, method: &str, path: &str, body: &str) -> u16 {
    send_to(server.addr, method, path, &[AUTH, JSON], body).status
}

/// Rows of the pending changes and of the log, and whether a ticket was
/// ever taken.
fn logged(database: &FreshDatabase) -> (i64, i64, bool) {
    let row = database
        .client()
        .query_one(
            "SELECT (SELECT count(*) FROM plant_changes_pending),
                (SELECT count(*) FROM plant_changes),
                (SELECT is_called FROM plant_changes_ticket)",
            &[],
        )
        .expect("the version 6 schema");
    (row.get(0), row.get(1), row.get(2))
}

#[test]
fn a_transaction_left_open_in_the_cluster_holds_the_feed_back_and_is_named_in_the_log() {
    // It holds back every database's feed: alone.
    let alone = Turn::alone();
    let database = FreshDatabase::within(&alone);
    let server = instance(&database, &[]);
    let mut feed = Feed::open(server.addr, &[], "");
    feed.opening();
    // Another database's session, in a transaction that has written.
    let other = FreshDatabase::within(&alone);
    let mut holder = other.client();
    holder.batch_execute("CREATE TABLE held (x int)").unwrap();
    let mut open = holder.transaction().unwrap();
    open.batch_execute("INSERT INTO held VALUES (1)").unwrap();
    let held = Instant::now();
    assert_eq!(
        send(&server, "POST", "/plants", &plant_body(1, "fern", None)),
        200
    );
    let warned = |server: &Running| {
        let log = server.log();
        log.into_iter()
            .find(|l| l.contains("the change feed has waited"))
    };
    assert!(
        eventually(|| warned(&server).is_some()),
        "{:?}",
        server.log()
    );
    let line = warned(&server).unwrap();
    assert!(held.elapsed() >= WAIT_WARNING, "{line}");
    assert!(
        line.contains(&format!("database {}", other.name())),
        "{line}"
    );
    assert!(line.contains("idle in transaction"), "{line}");
    assert!(
        line.contains("idle_in_transaction_session_timeout"),
        "{line}"
    );
    assert!(
        send(&server, "GET", "/plants/1", "") == 200,
        "the write went on"
    );
    assert_eq!(logged(&database), (1, 0, true), "stored, not numbered");
    open.rollback().unwrap();
    let event = feed.next_event();
    assert_eq!(event.data(), serde_json::json!({"id": 1, "name": "fern"}));
    assert_eq!(event.seq(), 1);
}

#[test]
fn the_benchmarks_switch_writes_without_the_change_log() {
    let database = FreshDatabase::new();
    let server = instance(&database, &[("PLANTSTORE_BENCH_NO_CHANGE_LOG", "1")]);
    assert_eq!(
        send(&server, "POST", "/plants", &plant_body(1, "a", None)),
        200
    );
    assert_eq!(
        send(&server, "POST", "/plants", &plant_body(2, "b", None)),
        200
    );
    assert_eq!(send(&server, "PUT", "/plants/1", r#"{"name":"c"}"#), 200);
    assert_eq!(send(&server, "DELETE", "/plants/2", ""), 204);
    assert_eq!(
        send(&server, "POST", "/plants", &plant_body(1, "d", None)),
        409
    );
    let read = send_to(server.addr, "GET", "/plants/1", &[AUTH], "");
    assert_eq!(read.json(), serde_json::json!({"id": 1, "name": "c"}));
    assert_eq!(logged(&database), (0, 0, false), "nothing logged");
    let log = server.log().join("\n");
    assert!(log.contains("PLANTSTORE_BENCH_NO_CHANGE_LOG=1"), "{log}");
    drop(server);
    // Without it, the same database's writes are logged and numbered.
    let server = instance(&database, &[]);
    assert_eq!(send(&server, "DELETE", "/plants/1", ""), 204);
    assert!(eventually(|| logged(&database) == (0, 1, true)));
}

/// The pending rows, oldest first: ticket, ids, kinds, names and tags as
/// text (NULL as "-").
type Pending = (i64, Vec<i64>, Vec<i16>, Vec<String>, Vec<String>);

fn pending(database: &FreshDatabase) -> Vec<Pending> {
    let text = |values: Vec<Option<Vec<u8>>>| -> Vec<String> {
        let text = |v: Vec<u8>| String::from_utf8(v).unwrap();
        values
            .into_iter()
            .map(|v| v.map_or("-".into(), text))
            .collect()
    };
    database
        .client()
        .query(
            "SELECT ticket, ids, kinds, names, tags FROM plant_changes_pending ORDER BY ticket",
            &[],
        )
        .expect("the version 6 schema")
        .iter()
        .map(|row| {
            (
                row.get(0),
                row.get(1),
                row.get(2),
                text(row.get(3)),
                text(row.get(4)),
            )
        })
        .collect()
}

/// The sequence's last ticket (0 before the first).
fn last_ticket(database: &FreshDatabase) -> i64 {
    database
        .client()
        .query_one(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM plant_changes_ticket",
            &[],
        )
        .expect("the version 6 schema")
        .get(0)
}

#[test]
fn a_write_logs_what_it_applied_and_takes_a_ticket_only_when_it_applied_anything() {
    let database = FreshDatabase::new();
    let mut writer = connect(&database);
    let plant = |name: &str, tag: Option<&str>| Plant {
        name: name.into(),
        tag: tag.map(Into::into),
    };
    let creates: Vec<(i64, Edit)> = vec![
        (3, Edit::Create(plant("c", Some("x")))),
        (1, Edit::Create(plant("a", None))),
        (2, Edit::Create(plant("b", Some("y")))),
    ];
    assert_eq!(writer.apply(&creates).unwrap(), [true; 3]);
    let batch = pending(&database);
    assert_eq!(batch.len(), 1, "one row for the batch: {batch:?}");
    let (ticket, ids, kinds, names, tags) = batch[0].clone();
    assert_eq!((ticket, kinds), (1, vec![1i16; 3]));
    // Each change's fields together, whatever order the row holds them in.
    let mut logged: Vec<_> = (0..3).map(|i| (ids[i], &names[i], &tags[i])).collect();
    logged.sort();
    let (a, b, c, x, y, none) = (
        "a".into(),
        "b".into(),
        "c".into(),
        "x".into(),
        "y".into(),
        "-".into(),
    );
    assert_eq!(logged, [(1, &a, &none), (2, &b, &y), (3, &c, &x)]);

    // Nothing applied, in a batch and alone: no row, no ticket.
    let refused: Vec<(i64, Edit)> = vec![
        (1, Edit::Create(plant("again", None))),
        (8, Edit::Replace(plant("absent", None))),
        (9, Edit::Delete),
    ];
    assert_eq!(writer.apply(&refused).unwrap(), [false; 3]);
    for (id, change) in refused {
        assert_eq!(writer.apply(&[(id, change)]).unwrap(), [false]);
    }
    assert_eq!((pending(&database).len(), last_ticket(&database)), (1, 1));

    // Some applied, some not: those applied, under the next ticket.
    let mixed: Vec<(i64, Edit)> = vec![
        (1, Edit::Replace(plant("A", Some("z")))),
        (4, Edit::Create(plant("d", None))),
        (2, Edit::Create(plant("taken", None))),
        (3, Edit::Delete),
        (9, Edit::Delete),
    ];
    assert_eq!(
        writer.apply(&mixed).unwrap(),
        [true, true, false, true, false]
    );
    let rows = pending(&database);
    let (ticket, ids, kinds, names, tags) = rows[1].clone();
    assert_eq!(ticket, 2);
    let mut logged: Vec<_> = (0..ids.len())
        .map(|i| (ids[i], kinds[i], names[i].as_str(), tags[i].as_str()))
        .collect();
    logged.sort();
    assert_eq!(
        logged,
        [(1, 2, "A", "z"), (3, 3, "-", "-"), (4, 1, "d", "-")]
    );

    // Alone, each kind: its own row and ticket.
    assert_eq!(
        writer
            .apply(&[(5, Edit::Create(plant("e", Some("t"))))])
            .unwrap(),
        [true]
    );
    assert_eq!(
        writer
            .apply(&[(5, Edit::Replace(plant("E", None)))])
            .unwrap(),
        [true]
    );
    assert_eq!(writer.apply(&[(5, Edit::Delete)]).unwrap(), [true]);
    let alone: Vec<Pending> = pending(&database).into_iter().skip(2).collect();
    let one = |ticket, kind, name: &str, tag: &str| {
        (
            ticket,
            vec![5i64],
            vec![kind],
            vec![name.to_string()],
            vec![tag.to_string()],
        )
    };
    assert_eq!(
        alone,
        [
            one(3, 1, "e", "t"),
            one(4, 2, "E", "-"),
            one(5, 3, "-", "-")
        ]
    );
    assert_eq!(last_ticket(&database), 5);
}
