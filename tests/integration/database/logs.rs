//! The log of an instance on PostgreSQL at `--log-level trace`: no name
//! or tag of a plant in it, whatever path the plant took (the client
//! library logs each statement's parameters below warn, so the logger
//! keeps other crates at warn and above), and an idle instance is quiet
//! (the follower's poll, the heartbeat and the workers' pings log
//! nothing). A start whose statements would run without a timeout (its
//! connections' options dropped by a pooler) says so.

use std::thread;
use std::time::Duration;

use crate::api::changes::{Feed, plant_body};
use crate::process::binary::{Running, server_command};
use crate::support::{AUTH, FreshDatabase, JSON, PATIENCE, TOKEN, eventually, send_to};

/// An instance on `database`, logging everything it would.
fn at_trace(database: &FreshDatabase) -> Running {
    let args = [
        "--database",
        &database.url,
        "--database-pool",
        "2",
        "--log-level",
        "trace",
    ];
    Running::spawn(server_command(&args, Some(TOKEN)), PATIENCE)
}

/// The ways a client library may write `text`: as it is, and as the
/// Debug form of its bytes (`[90, 97, ...]`, without the brackets).
fn forms(text: &str) -> [String; 2] {
    let bytes = format!("{:?}", text.as_bytes());
    [text.to_owned(), bytes[1..bytes.len() - 1].to_owned()]
}

#[test]
fn at_trace_no_name_or_tag_of_a_plant_reaches_the_log() {
    let database = FreshDatabase::new();
    let mut server = at_trace(&database);
    let secrets = [
        "Quokkafern",
        "quokkatag",
        "Quokkarose",
        "redquokka",
        "Quokkaivy",
    ];
    let send = |method, path, body: &str| send_to(server.addr, method, path, &[AUTH, JSON], body);
    let created = plant_body(1, secrets[0], Some(secrets[1]));
    assert_eq!(send("POST", "/plants", &created).status, 200);
    let replaced = plant_body(1, secrets[2], Some(secrets[3]));
    assert_eq!(send("PUT", "/plants/1", &replaced).status, 200);
    let read = send("GET", "/plants/1", "");
    assert!(read.status == 200 && read.text().contains(secrets[2]));
    let listed = send("GET", "/plants?tag=redquokka", "");
    assert!(listed.status == 200 && listed.text().contains(secrets[2]));
    // The first stream, once the follower was handed both changes: its
    // opening names the epoch, then a change reaches it through the
    // follower.
    let handed = || {
        send("GET", "/metrics", "")
            .text()
            .contains("\nplantstore_feed_events_total 2\n")
    };
    assert!(eventually(handed), "the follower was handed both changes");
    let mut feed = Feed::open(server.addr, &[], "");
    let opening = feed.opening().id.unwrap();
    let epoch = opening.split_once('-').unwrap().0;
    assert_eq!(
        send("POST", "/plants", &plant_body(2, secrets[4], None)).status,
        200
    );
    assert_eq!(feed.next_event().data()["name"], secrets[4]);
    // From the first change on: the two before the stream are read back
    // from the change log.
    let first = format!("{epoch}-0");
    let mut resumed = Feed::open(server.addr, &[("Last-Event-ID", &first)], "");
    // Each checked as it comes: after a reset, the stream would wait.
    let expected = [("created", 0), ("replaced", 2), ("created", 4)];
    for (event, secret) in expected {
        let message = resumed.next_message().expect("the stream goes on");
        assert_eq!(message.event.as_deref(), Some(event), "{message:?}");
        assert_eq!(message.data()["name"], secrets[secret]);
    }
    drop((feed, resumed));
    server.signal("TERM");
    assert!(server.wait(PATIENCE).success());
    let log = server.log();
    assert!(
        log.iter().any(|line| line.contains("POST /plants 200")),
        "the log was written: {log:?}"
    );
    for secret in secrets {
        for form in forms(secret) {
            let found: Vec<&String> = log.iter().filter(|line| line.contains(&form)).collect();
            assert!(
                found.is_empty(),
                "{secret} as {form:?} in the log: {found:?}"
            );
        }
    }
}

#[test]
fn an_idle_instance_at_trace_writes_fewer_than_10_lines_a_minute() {
    let database = FreshDatabase::new();
    let server = at_trace(&database);
    let started = server.log().len();
    // A whole minute, as a quiet log is promised for: other tests run
    // meanwhile (one thread of the harness sleeps).
    thread::sleep(Duration::from_secs(60));
    let log = server.log();
    let idle = &log[started..];
    assert!(
        idle.len() < 10,
        "{} lines in an idle minute, the first: {:?}",
        idle.len(),
        &idle[..idle.len().min(10)]
    );
}

/// The `statement_timeout` a connection made as the server makes its own
/// gets: `0` where something between drops the connection's options (a
/// pooler such as pgbouncer with `ignore_startup_parameters = options`).
fn statement_timeout_seen(url: &str) -> String {
    let config = plantstore::dbconfig::DatabaseConfig::parse(url, 1).expect("the test URL parses");
    let mut client = config
        .client()
        .connect(postgres::NoTls)
        .expect("the test database answers");
    let rows = client.simple_query("SHOW statement_timeout").unwrap();
    let value = rows.iter().find_map(|message| match message {
        postgres::SimpleQueryMessage::Row(row) => row.get(0),
        _ => None,
    });
    value.expect("SHOW gives a row").to_owned()
}

#[test]
fn the_start_warns_of_statements_without_a_timeout_exactly_when_they_have_none() {
    let database = FreshDatabase::new();
    let server = Running::start(&["--database", &database.url], Some(TOKEN));
    let seen = statement_timeout_seen(&database.url);
    let log = server.log();
    let said: Vec<&String> = log
        .iter()
        .filter(|line| line.contains("without a timeout"))
        .collect();
    if seen == "0" {
        // Behind a pooler that dropped the options: said once, with the
        // line that mends it.
        assert_eq!(said.len(), 1, "{log:#?}");
        assert!(
            said[0].contains("ALTER ROLE plantstore SET statement_timeout = '5s'"),
            "{said:?}"
        );
    } else {
        // Directly: the options set it, and nothing is said.
        assert_eq!(seen, "5s");
        assert!(said.is_empty(), "{said:?}");
    }
}
