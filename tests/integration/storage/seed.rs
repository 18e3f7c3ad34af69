//! `--seed FILE` through the built binary: both formats loaded and listed,
//! a bad record or a limit stopping start-up (exit 2) with its position and
//! reason, and with `--data` a seed that is loaded once and never undoes
//! the changes made since. Loading and refusing run on each store; the
//! journal's tests and `--max-plants`/`--max-data` (which bound only the
//! in-memory store) are the in-memory store's. The database's own seed
//! rules (an empty table only, in one transaction) are in `database.rs`.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};

use crate::process::binary::{Running, run_to_exit};
use crate::support::{AUTH, Client, JSON, Kind, TOKEN, TempFile, request, store_args};

fn seed_file(name: &str, contents: &str) -> TempFile {
    let file = TempFile::new(name);
    std::fs::write(&file.0, contents).unwrap();
    file
}

fn path(file: &TempFile) -> &str {
    file.0.to_str().unwrap()
}

/// Every plant, as `GET /plants` lists them.
fn list(addr: SocketAddr) -> Value {
    let mut client = Client::connect(addr);
    client.send(&request("GET", "/plants?limit=1000", &[AUTH], ""));
    let reply = client.reply();
    assert_eq!(reply.status, 200);
    reply.json()
}

fn send(addr: SocketAddr, method: &str, path: &str, body: &str) -> u16 {
    let mut client = Client::connect(addr);
    client.send(&request(method, path, &[AUTH, JSON], body));
    client.reply().status
}

fn stop(mut server: Running) -> Vec<String> {
    server.signal("TERM");
    assert!(server.wait(crate::support::PATIENCE).success());
    server.log()
}

/// Starts the binary with `args` and expects it to refuse: exit 2 and a
/// message naming the seed file and each of `needles`.
fn refused(args: &[&str], needles: &[&str]) {
    refused_on(Kind::Memory, args, needles)
}

/// `refused`, on `kind`'s store.
fn refused_on(kind: Kind, args: &[&str], needles: &[&str]) {
    let (store, _keep) = store_args(kind);
    let mut all: Vec<&str> = store.iter().map(String::as_str).collect();
    all.extend_from_slice(args);
    let (code, stderr) = run_to_exit(&all, Some(TOKEN), Duration::from_secs(10));
    assert_eq!(code, Some(2), "{args:?}: {stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("--seed "))
        .unwrap_or_else(|| panic!("no --seed line: {stderr}"));
    for needle in needles {
        assert!(line.contains(needle), "{needle:?} not in {line:?}");
    }
    assert!(!stderr.contains("listening"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

fn an_array_seed_is_listed_as_written(kind: Kind) {
    let seed = seed_file(
        "plants.json",
        "[\n  {\"id\": 3, \"name\": \"Fern\"},\n  {\"id\": -7, \"name\": \"Monstera \u{1F335}\", \"tag\": \"tropical\"},\n  {\"id\": 9.0, \"name\": \"Moss\", \"extra\": [1]}\n]\n",
    );
    let server = Running::on(kind, &["--seed", path(&seed)], Some(TOKEN));
    assert_eq!(
        list(server.addr),
        json!([
            {"id": -7, "name": "Monstera \u{1F335}", "tag": "tropical"},
            {"id": 3, "name": "Fern"},
            {"id": 9, "name": "Moss"},
        ])
    );
    let log = stop(server);
    assert!(
        log.iter().any(|l| l.contains("loaded 3 plants in")),
        "{log:?}"
    );
    // The start-up line counts the in-memory store's plants; the
    // database's would take a scan of its table.
    if kind == Kind::Memory {
        assert!(log.iter().any(|l| l.ends_with(", 3 plants")), "{log:?}");
    }
}

fn an_ndjson_seed_is_loaded_with_a_byte_order_mark_and_blank_lines(kind: Kind) {
    let seed = seed_file(
        "plants.ndjson",
        "\u{feff}{\"id\":1,\"name\":\"a\",\"tag\":\"x\"}\r\n\n  \n{\"id\":2,\"name\":\"b\"}\n",
    );
    let server = Running::on(kind, &["--seed", path(&seed)], Some(TOKEN));
    assert_eq!(
        list(server.addr),
        json!([{"id": 1, "name": "a", "tag": "x"}, {"id": 2, "name": "b"}])
    );
    // Seeded plants are ordinary plants.
    assert_eq!(
        send(server.addr, "POST", "/plants", r#"{"id":1,"name":"c"}"#),
        409
    );
    assert_eq!(send(server.addr, "DELETE", "/plants/2", ""), 204);
}

fn a_bad_record_stops_start_up_with_exit_2_naming_where_and_why(kind: Kind) {
    let refused = |args: &[&str], needles: &[&str]| refused_on(kind, args, needles);
    let ndjson = seed_file(
        "bad.ndjson",
        "{\"id\":1,\"name\":\"a\"}\n\n{\"id\":2,\"name\":null}\n",
    );
    refused(
        &["--seed", path(&ndjson)],
        &[path(&ndjson), ": line 3: name: must be a string"],
    );
    let array = seed_file(
        "bad.json",
        "[{\"id\":1,\"name\":\"a\"},\n {\"id\":\"2\",\"name\":\"b\"}]",
    );
    refused(
        &["--seed", path(&array)],
        &[": record 2 (line 2, column 2): id: must be an int64 integer"],
    );
    let broken = seed_file("broken.json", "[{\"id\":1,\"name\":\"a\"}\n {\"id\":2}]");
    refused(
        &["--seed", path(&broken)],
        &[": line 2, column 2: not valid JSON: expected `,` or `]`"],
    );
    let twice = seed_file(
        "twice.ndjson",
        "{\"id\":5,\"name\":\"a\"}\n{\"id\":6,\"name\":\"b\"}\n{\"id\":5,\"name\":\"c\"}\n",
    );
    refused(
        &["--seed", path(&twice)],
        &[": line 3: id 5 repeats line 1"],
    );
    let missing = TempFile::new("missing.json");
    refused(&["--seed", path(&missing)], &["cannot read it"]);
}

/// Three plants: names of 5, 6 and 1 characters, 13 bytes of names and
/// tags in all.
const LIMITS_SEED: &str = "{\"id\":1,\"name\":\"short\"}\n{\"id\":2,\"name\":\"longer\",\"tag\":\"t\"}\n{\"id\":3,\"name\":\"x\"}\n";

fn the_name_limit_applies_to_a_seed(kind: Kind) {
    let seed = seed_file("limits.ndjson", LIMITS_SEED);
    refused_on(
        kind,
        &["--seed", path(&seed), "--max-name", "5"],
        &[": line 2: name: longer than 5 characters (--max-name)"],
    );
    // At the limit, it loads.
    let server = Running::on(
        kind,
        &["--seed", path(&seed), "--max-name", "6"],
        Some(TOKEN),
    );
    assert_eq!(list(server.addr).as_array().unwrap().len(), 3);
}

/// `--max-plants` and `--max-data` bound the in-memory store only.
#[test]
fn the_plant_and_data_limits_apply_to_a_seed_in_memory() {
    let seed = seed_file("limits.ndjson", LIMITS_SEED);
    refused(
        &["--seed", path(&seed), "--max-plants", "2"],
        &[": line 3: more than --max-plants 2 plants"],
    );
    refused(
        &["--seed", path(&seed), "--max-data", "10"],
        &[": line 2: names and tags take more than --max-data 10 bytes"],
    );
    // At the limits, it loads.
    let server = Running::start(
        &[
            "--seed",
            path(&seed),
            "--max-plants",
            "3",
            "--max-data",
            "13",
        ],
        Some(TOKEN),
    );
    assert_eq!(list(server.addr).as_array().unwrap().len(), 3);
}

#[test]
fn with_data_a_restart_neither_doubles_the_seed_nor_undoes_changes() {
    let data = TempFile::new("seeded.journal");
    let seed = seed_file(
        "seed.ndjson",
        "{\"id\":1,\"name\":\"a\"}\n{\"id\":2,\"name\":\"b\",\"tag\":\"t\"}\n{\"id\":3,\"name\":\"c\"}\n",
    );
    let args = ["--seed", path(&seed), "--data", path(&data)];
    let server = Running::start(&args, Some(TOKEN));
    assert_eq!(list(server.addr).as_array().unwrap().len(), 3);
    assert_eq!(
        send(server.addr, "PUT", "/plants/1", r#"{"name":"renamed"}"#),
        200
    );
    assert_eq!(send(server.addr, "DELETE", "/plants/2", ""), 204);
    assert_eq!(
        send(server.addr, "POST", "/plants", r#"{"id":4,"name":"d"}"#),
        200
    );
    stop(server);
    let expected = json!([
        {"id": 1, "name": "renamed"},
        {"id": 3, "name": "c"},
        {"id": 4, "name": "d"},
    ]);
    let server = Running::start(&args, Some(TOKEN));
    assert_eq!(list(server.addr), expected);
    let log = stop(server);
    assert!(
        log.iter()
            .any(|l| l.contains("not loaded: the journal already holds")),
        "{log:?}"
    );
    // Even with every plant deleted, the journal is not seeded again.
    let server = Running::start(&args, Some(TOKEN));
    for id in [1, 3, 4] {
        assert_eq!(
            send(server.addr, "DELETE", &format!("/plants/{id}"), ""),
            204
        );
    }
    stop(server);
    let server = Running::start(&args, Some(TOKEN));
    assert_eq!(list(server.addr), json!([]));
}

#[test]
fn with_data_a_refused_seed_leaves_the_journal_to_a_corrected_one() {
    let data = TempFile::new("refused.journal");
    let seed = TempFile::new("fixed.ndjson");
    let mut text = String::new();
    for id in 0..50 {
        text.push_str(&format!("{{\"id\":{id},\"name\":\"p{id}\"}}\n"));
    }
    std::fs::write(&seed.0, format!("{text}{{\"id\":50}}\n")).unwrap();
    let args = ["--seed", path(&seed), "--data", path(&data)];
    refused(&args, &[": line 51: name: missing"]);
    // Nothing of the first 50 reached the journal, so the corrected seed
    // is loaded whole.
    std::fs::write(&seed.0, &text).unwrap();
    let server = Running::start(&args, Some(TOKEN));
    assert_eq!(list(server.addr).as_array().unwrap().len(), 50);
    let log = stop(server);
    assert!(
        log.iter().any(|l| l.contains("loaded 50 plants in")),
        "{log:?}"
    );
}

#[test]
fn help_documents_the_flag() {
    let out = crate::process::binary::command()
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--seed"), "{help}");
}

crate::on_each_store!(
    an_array_seed_is_listed_as_written,
    an_ndjson_seed_is_loaded_with_a_byte_order_mark_and_blank_lines,
    a_bad_record_stops_start_up_with_exit_2_naming_where_and_why,
    the_name_limit_applies_to_a_seed,
);
