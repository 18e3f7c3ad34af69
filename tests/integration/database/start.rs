//! What only the PostgreSQL store (`--database`) has at start-up: its
//! schema and the version recorded in it, the flags that go with it, a
//! database that is not there, and a seed loaded into an empty table only
//! and in one transaction. What it has while serving is in
//! `serving`.
//!
//! Each test has a database of its own (`FreshDatabase`) and looks at it,
//! or changes it, from outside with a client of its own.

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use plantstore::database::ensure_schema;

use crate::process::binary::{Running, run_to_exit};
use crate::support::{AUTH, FreshDatabase, JSON, TOKEN, TempFile, TestServer, config, send_to};

/// The versions `plantstore_schema` records.
pub(super) fn versions(client: &mut postgres::Client) -> Vec<i32> {
    client
        .query_typed(
            "SELECT version FROM plantstore_schema ORDER BY version",
            &[],
        )
        .expect("plantstore_schema exists")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// How many plants the table holds, counted by the database itself.
fn rows(client: &mut postgres::Client) -> i64 {
    client
        .query_one("SELECT count(*) FROM plants", &[])
        .expect("the plants table exists")
        .get(0)
}

/// The password in a `postgres://user:password@...` URL.
pub(super) fn password(url: &str) -> &str {
    let credentials = url.split("://").nth(1).unwrap().split('@').next().unwrap();
    credentials
        .split(':')
        .nth(1)
        .expect("a URL with a password")
}

#[test]
fn the_schema_is_created_at_version_6_on_first_start_and_a_second_start_keeps_the_plants() {
    let database = FreshDatabase::new();
    let mut client = database.client();
    let none: Option<String> = client
        .query_one("SELECT to_regclass('plantstore_schema')::text", &[])
        .unwrap()
        .get(0);
    assert_eq!(none, None, "a fresh database has no schema");
    let mut server = TestServer::with(database.config(config()));
    // Version 1, then what version 2 adds (the change log), then version 3
    // (the folded columns for search), then 4 (the tickets' shared key), then 5
    // (the reset), then 6 (the log numbered without a cluster-wide lock).
    assert_eq!(versions(&mut client), [1, 2, 3, 4, 5, 6]);
    let name_type: String = client
        .query_one(
            "SELECT data_type FROM information_schema.columns \
             WHERE table_name = 'plants' AND column_name = 'name'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(name_type, "bytea");
    assert_eq!(
        server.create(r#"{"id":1,"name":"kept","tag":"t"}"#).status,
        200
    );
    server.restart();
    assert_eq!(
        server.send("GET", "/plants/1", &[AUTH], "").json(),
        json!({"id": 1, "name": "kept", "tag": "t"})
    );
    assert_eq!(versions(&mut client), [1, 2, 3, 4, 5, 6], "recorded once");
    assert_eq!(rows(&mut client), 1);
}

#[test]
fn a_newer_schema_version_stops_start_up_with_exit_1_naming_both_versions() {
    let database = FreshDatabase::new();
    let mut client = database.client();
    ensure_schema(&mut client).expect("a fresh database takes the schema");
    client
        .execute("UPDATE plantstore_schema SET version = 7", &[])
        .unwrap();
    let args = ["--database", &database.url];
    let (code, stderr) = run_to_exit(&args, Some(TOKEN), Duration::from_secs(10));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("schema version 7") && stderr.contains("this build's 6"),
        "{stderr}"
    );
    assert!(!stderr.contains("listening"), "{stderr}");
    assert!(!stderr.contains(password(&database.url)), "{stderr}");
    assert_eq!(
        versions(&mut client),
        [7, 7, 7, 7, 7, 7],
        "left as it was found"
    );
}

#[test]
fn a_database_whose_encoding_cannot_hold_every_name_stops_start_up_saying_so() {
    let database = FreshDatabase::new();
    let mut admin = database.admin();
    for statement in [
        format!("DROP DATABASE {}", database.name()),
        format!(
            "CREATE DATABASE {} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' \
             TEMPLATE template0",
            database.name()
        ),
    ] {
        admin.batch_execute(&statement).unwrap();
    }
    let args = ["--database", &database.url];
    let (code, stderr) = run_to_exit(&args, Some(TOKEN), Duration::from_secs(10));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("encoding is LATIN1"), "{stderr}");
    assert!(stderr.contains("ENCODING 'UTF8'"), "{stderr}");
    assert!(!stderr.contains("listening"), "{stderr}");
}

#[test]
fn a_version_1_database_gets_the_change_log_and_keeps_its_plants() {
    let database = FreshDatabase::new();
    let mut client = database.client();
    // As an older build left it.
    client
        .batch_execute(
            "CREATE TABLE plantstore_schema (version integer NOT NULL);
             INSERT INTO plantstore_schema VALUES (1);
             CREATE TABLE plants (id bigint PRIMARY KEY, name bytea NOT NULL, tag bytea);
             CREATE INDEX plants_tag_id ON plants (tag, id);
             INSERT INTO plants VALUES (1, 'old'::bytea, NULL);",
        )
        .unwrap();
    let server = TestServer::with(database.config(config()));
    assert_eq!(versions(&mut client), [1, 2, 3, 4, 5, 6]);
    assert_eq!(
        server.send("GET", "/plants/1", &[AUTH], "").json(),
        json!({"id": 1, "name": "old"})
    );
    let mut feed = crate::api::changes::Feed::open(server.addr, &[], "");
    assert_eq!(feed.opening().seq(), 0, "an empty log");
    assert_eq!(server.create(r#"{"id":2,"name":"new"}"#).status, 200);
    let event = feed.next_event();
    assert_eq!(
        (event.seq(), event.data()),
        (1, json!({"id": 2, "name": "new"}))
    );
}

#[test]
fn database_flags_that_cannot_work_are_exit_2_with_one_line_and_no_password() {
    const URL: &str = "postgres://plantstore:hunter2-secret@127.0.0.1:5432/plants";
    let data = TempFile::new("both.journal");
    let data = data.0.to_str().unwrap();
    for (args, needle) in [
        (&["--database", URL, "--data", data][..], "not both"),
        (
            &["--database", URL, "--database-pool", "0"],
            "--database-pool must be greater than 0",
        ),
        (
            &["--database-pool", "4"],
            "--database-pool needs --database",
        ),
        (
            &["--database", "postgres://plantstore:hunter2-secret@/plants"],
            "--database: no host",
        ),
        // Regression: `%+a` was decoded as a line feed (sslrootcert) or
        // kept as text (the password).
        (
            &[
                "--database",
                "postgres://plantstore:hunter2%+a@127.0.0.1/plants",
            ],
            "two hex digits",
        ),
        (
            &[
                "--database",
                "postgres://plantstore:hunter2-secret@127.0.0.1/plants?sslrootcert=%+0",
            ],
            "two hex digits",
        ),
    ] {
        let (code, stderr) = run_to_exit(args, Some(TOKEN), Duration::from_secs(10));
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("hunter2"), "{args:?}: {stderr}");
    }
}

/// Regression: the message said only "error connecting to server", the
/// client's words for the kind of error, never why.
#[test]
fn an_unreachable_database_stops_start_up_within_seconds_saying_why_without_the_password() {
    // Bound, then released: nothing listens there now.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://plantstore:hunter2-secret@127.0.0.1:{port}/plants");
    let started = Instant::now();
    let (code, stderr) = run_to_exit(&["--database", &url], Some(TOKEN), Duration::from_secs(10));
    let took = started.elapsed();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let at = format!("database plantstore@127.0.0.1:{port}/plants: ");
    assert!(stderr.contains(&at), "{stderr}");
    assert!(stderr.contains("Connection refused"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
    assert!(!stderr.contains("listening"), "{stderr}");
}

/// A seed file of `count` plants, ids from 0 (every third tagged).
fn seed_of(count: i64) -> TempFile {
    let file = TempFile::new("database-seed.ndjson");
    let text: String = (0..count)
        .map(|id| match id % 3 {
            0 => format!("{{\"id\":{id},\"name\":\"p{id}\",\"tag\":\"t\"}}\n"),
            _ => format!("{{\"id\":{id},\"name\":\"p{id}\"}}\n"),
        })
        .collect();
    std::fs::write(&file.0, text).unwrap();
    file
}

fn path(file: &TempFile) -> &str {
    file.0.to_str().unwrap()
}

/// Every plant (at most 1000), as `GET /plants` lists them.
fn listed(addr: SocketAddr) -> Value {
    let reply = send_to(addr, "GET", "/plants?limit=1000", &[AUTH], "");
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json()
}

fn stop(mut server: Running) -> Vec<String> {
    server.signal("TERM");
    assert!(server.wait(Duration::from_secs(7)).success());
    server.log()
}

#[test]
fn a_seed_fills_an_empty_table_and_is_skipped_once_the_table_holds_plants() {
    let database = FreshDatabase::new();
    let seed = seed_of(3);
    let args = ["--database", &database.url, "--seed", path(&seed)];
    let server = Running::start(&args, Some(TOKEN));
    assert_eq!(
        listed(server.addr),
        json!([
            {"id": 0, "name": "p0", "tag": "t"},
            {"id": 1, "name": "p1"},
            {"id": 2, "name": "p2"},
        ])
    );
    let change = |method, path, body| send_to(server.addr, method, path, &[AUTH, JSON], body);
    assert_eq!(
        change("PUT", "/plants/1", r#"{"name":"renamed"}"#).status,
        200
    );
    assert_eq!(change("DELETE", "/plants/2", "").status, 204);
    assert_eq!(
        change("POST", "/plants", r#"{"id":3,"name":"new"}"#).status,
        200
    );
    let log = stop(server);
    assert!(
        log.iter().any(|l| l.contains("loaded 3 plants in")),
        "{log:?}"
    );

    let server = Running::start(&args, Some(TOKEN));
    assert_eq!(
        listed(server.addr),
        json!([
            {"id": 0, "name": "p0", "tag": "t"},
            {"id": 1, "name": "renamed"},
            {"id": 3, "name": "new"},
        ]),
        "neither doubled nor undone"
    );
    let log = stop(server);
    assert!(
        log.iter()
            .any(|l| l.contains("not loaded: the database already holds plants")),
        "{log:?}"
    );
    assert!(
        !log.iter().any(|l| l.contains("loaded 3 plants")),
        "{log:?}"
    );
}

/// The seed is loaded in one transaction: a database error part way (a
/// trigger refusing one plant of the second batch, after the first was
/// written) leaves nothing, as does a record the file's checks refuse.
#[test]
fn a_seed_refused_part_way_leaves_the_table_empty() {
    let database = FreshDatabase::new();
    let mut client = database.client();
    ensure_schema(&mut client).unwrap();
    client
        .batch_execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'plant 9000 refused by the test'; END $$; \
             CREATE TRIGGER refuse_9000 BEFORE INSERT ON plants FOR EACH ROW \
             WHEN (NEW.id = 9000) EXECUTE FUNCTION refuse();",
        )
        .unwrap();
    let seed = seed_of(10_000);
    let args = ["--database", &database.url, "--seed", path(&seed)];
    let (code, stderr) = run_to_exit(&args, Some(TOKEN), Duration::from_secs(30));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("plant 9000 refused by the test"),
        "{stderr}"
    );
    assert_eq!(rows(&mut client), 0, "the first batch was rolled back");

    let bad = TempFile::new("bad.ndjson");
    std::fs::write(&bad.0, "{\"id\":1,\"name\":\"a\"}\n{\"id\":2}\n").unwrap();
    let bad_args = ["--database", &database.url, "--seed", path(&bad)];
    let (code, stderr) = run_to_exit(&bad_args, Some(TOKEN), Duration::from_secs(10));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(": line 2: name: missing"), "{stderr}");
    assert_eq!(rows(&mut client), 0);

    client
        .batch_execute("DROP TRIGGER refuse_9000 ON plants")
        .unwrap();
    let server = Running::start_within(&args, Some(TOKEN), Duration::from_secs(30));
    assert_eq!(rows(&mut client), 10_000);
    let log = stop(server);
    assert!(
        log.iter().any(|l| l.contains("loaded 10000 plants in")),
        "{log:?}"
    );
}

/// `--database-file`: the URL with its password in a file rather than on
/// the command line. A FIFO, a device, a directory, an oversized file, an
/// empty one or one of two URLs is exit 2 naming the file and never its
/// text; a good file is used, with a warning when others may read it, and
/// `PLANTSTORE_DATABASE_FILE` works the same way.
#[test]
fn a_database_file_is_read_as_a_regular_file_of_one_url_and_refused_otherwise() {
    use std::os::unix::fs::PermissionsExt;

    use crate::process::files::Bad;
    use crate::support::TempDir;

    let dir = TempDir::new("database-file");
    let write = |name: &str, text: &str, mode: u32| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    };
    const URL: &str = "postgres://plantstore:hunter2-secret@127.0.0.1:5432/plants";
    let mut cases = vec![
        (
            write("empty", "# only a comment\n\n", 0o600),
            "holds no URL".to_string(),
        ),
        (
            write("two", &format!("{URL}\n{URL}\n"), 0o600),
            "more than one line".to_string(),
        ),
    ];
    let large = dir.join("large");
    std::fs::File::create(&large)
        .unwrap()
        .set_len(17 << 20)
        .unwrap();
    cases.push((large, "larger than".to_string()));
    for bad in Bad::ALL {
        let path = dir.join(&format!("{bad:?}"));
        bad.make(&path);
        cases.push((path, bad.reason().to_string()));
    }
    for (path, needle) in &cases {
        let path = path.to_str().unwrap();
        let started = Instant::now();
        let (code, stderr) = run_to_exit(
            &["--database-file", path],
            Some(TOKEN),
            Duration::from_secs(10),
        );
        assert_eq!(code, Some(2), "{path}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{path}: at once"
        );
        assert!(stderr.contains(path), "{path}: {stderr}");
        assert!(stderr.contains(needle.as_str()), "{path}: {stderr}");
        assert!(!stderr.contains("hunter2"), "{path}: {stderr}");
    }
    let both = write("both", URL, 0o600);
    let (code, stderr) = run_to_exit(
        &["--database", URL, "--database-file", both.to_str().unwrap()],
        Some(TOKEN),
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("not both"), "{stderr}");

    // A good file, readable by others: used, with a warning.
    let database = FreshDatabase::new();
    let open = write("open", &format!("# the plants\n{}\n", database.url), 0o644);
    let server = Running::start(&["--database-file", open.to_str().unwrap()], Some(TOKEN));
    let created = send_to(
        server.addr,
        "POST",
        "/plants",
        &[AUTH, JSON],
        r#"{"id":1,"name":"from a file"}"#,
    );
    assert_eq!(created.status, 200, "{}", created.text());
    let log = stop(server).join("\n");
    assert!(log.contains("may be read by others (mode 644)"), "{log}");
    assert!(!log.contains(password(&database.url)), "{log}");
    // From the environment, private: no warning.
    let private = write("private", &database.url, 0o600);
    let mut command = crate::process::binary::server_command(&[], Some(TOKEN));
    command.env("PLANTSTORE_DATABASE_FILE", &private);
    let server = Running::spawn(command, Duration::from_secs(10));
    let read = send_to(server.addr, "GET", "/plants/1", &[AUTH], "");
    assert_eq!(read.status, 200, "{}", read.text());
    let log = stop(server).join("\n");
    assert!(!log.contains("may be read by others"), "{log}");
}
