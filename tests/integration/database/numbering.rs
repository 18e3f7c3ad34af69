//! The numberer's edges (schema version 6): a transaction left open in
//! the cluster holds the change feed back, and the follower's log names
//! it; the benchmark's switch `PLANTSTORE_BENCH_NO_CHANGE_LOG=1` writes
//! without the change log. Each on the binary, whose log is read and
//! whose environment is its own.

use std::time::{Duration, Instant};

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
