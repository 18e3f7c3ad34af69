//! The journal file seen from outside the server: a record a client plants
//! in a plant's name cannot stop a restart after a torn write, and a
//! version-1 journal is served and converted to version 4, and a restart
//! after a torn tail of a megabyte, whatever it holds, is quick. The files
//! are written by the oracle (`tests/shared/journal_oracle.rs`), not by the
//! server's encoder.

use std::fs;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;

use crate::process::binary::Running;
use crate::storage::oracle::{self, Change, Rules, planted, record};
use crate::support::{AUTH, Client, JSON, Reply, TOKEN, TempFile, request};

fn send(addr: SocketAddr, method: &str, path: &str, body: &str) -> Reply {
    let mut client = Client::connect(addr);
    client.send(&request(method, path, &[AUTH, JSON], body));
    client.reply()
}

fn create(addr: SocketAddr, id: i64, name: &str) {
    let body = serde_json::json!({"id": id, "name": name}).to_string();
    assert_eq!(send(addr, "POST", "/plants", &body).status, 200, "{name:?}");
}

/// Where the records of the journal at `path` end, as the oracle reads
/// it: the zeros the server writes ahead of them left out. The oracle
/// looks for a record at every offset after the end; it is shown the
/// file up to its last byte that is not zero and 64 zeros more (more than
/// any record's checks end with), not the megabyte written ahead.
fn records_end(path: &str) -> usize {
    let bytes = fs::read(path).unwrap();
    let written = bytes.iter().rposition(|&b| b != 0).map_or(0, |at| at + 1);
    let shown = &bytes[..bytes.len().min(written + 64)];
    match oracle::reference(shown) {
        oracle::Outcome::Read(_, _, end) => {
            assert!(end >= written, "zeros after the records");
            end
        }
        other => panic!("{path}: {other:?}"),
    }
}

fn listed(addr: SocketAddr) -> serde_json::Value {
    let reply = send(addr, "GET", "/plants", "");
    assert_eq!(reply.status, 200);
    reply.json()
}

/// A client plants a whole record in a name; the write of that plant is
/// torn after the planted record (a crash or a full disk mid-write). The
/// restart must cut the tail, not take the planted record for one after
/// damage and refuse to start, as it once did, on every restart.
#[test]
fn a_record_planted_in_a_name_and_torn_by_a_crash_does_not_stop_the_restart() {
    const BEFORE: &str = "a name with ";
    for rules in [
        "version 1",
        "version 2 under a guessed salt",
        "version 3 under a guessed salt",
        "version 4 under a guessed salt",
    ] {
        let file = TempFile::new("planted.journal");
        let path = file.0.to_str().unwrap();
        let server = Running::start(&["--data", path], Some(TOKEN));
        create(server.addr, 1, "fern");
        create(server.addr, 2, "moss");
        let start = records_end(path) as u64;
        let record = match rules {
            "version 1" => planted(Rules::V1),
            "version 2 under a guessed salt" => planted(Rules::V2([0; 8])),
            "version 3 under a guessed salt" => planted(Rules::V3([0; 8])),
            _ => planted(Rules::V4([0; 8])),
        };
        create(server.addr, 3, &format!("{BEFORE}{record} in it"));
        drop(server); // SIGKILL

        let bytes = fs::read(path).unwrap();
        let end = bytes
            .windows(record.len())
            .position(|w| w == record.as_bytes())
            .expect("the record is in the file as sent")
            + record.len();
        let cut = (end + records_end(path)) / 2;
        fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_len(cut as u64)
            .unwrap();

        let server = Running::start(&["--data", path], Some(TOKEN));
        assert_eq!(
            listed(server.addr),
            serde_json::json!([{"id": 1, "name": "fern"}, {"id": 2, "name": "moss"}]),
            "{rules}"
        );
        let log = server.log().join("\n");
        assert!(
            log.contains(&format!(
                "cut off a torn final record ({} bytes)",
                cut as u64 - start
            )),
            "{rules}: {log}"
        );
        assert_eq!(fs::metadata(path).unwrap().len(), start, "{rules}");
    }
}

/// Restart time once grew with the square of a torn tail: a megabyte of
/// `00 00 08 00` took minutes, and so did a megabyte-long name of planted
/// records torn by a crash. Each tail below must be cut, the plants before
/// it served, within a bound far above the goal (under 1 s, measured by
/// `bench/run.sh restart`) and far below what it took.
#[test]
fn a_restart_after_a_torn_megabyte_is_quick_whatever_the_tail_holds() {
    const MIB: usize = 1 << 20;
    let limits = ["--max-body", "16777216", "--max-name", "2000000"];
    let planted = planted(Rules::V4([0; 8])).repeat(MIB / 40);
    let mut random = 0x9E37_79B9_7F4A_7C15_u64;
    let random: Vec<u8> = (0..MIB)
        .map(|_| {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            random as u8
        })
        .collect();
    let tails: [(&str, Vec<u8>); 3] = [
        ("00 00 08 00", [0, 0, 8, 0].repeat(MIB / 4)),
        (
            "wrong checks",
            record(Rules::V4([1; 8]), &Change::put(5, "x", None)).repeat(MIB / 30),
        ),
        ("random bytes", random),
    ];
    for (what, tail) in tails
        .iter()
        .map(|(w, t)| (*w, Some(t)))
        .chain([("a torn name", None)])
    {
        let file = TempFile::new("tail.journal");
        let path = file.0.to_str().unwrap();
        let args = [&["--data", path][..], &limits].concat();
        let server = Running::start(&args, Some(TOKEN));
        create(server.addr, 1, "fern");
        create(server.addr, 2, "moss");
        let good = records_end(path) as u64;
        if tail.is_none() {
            create(server.addr, 3, &planted);
        }
        drop(server); // SIGKILL
        let mut bytes = fs::read(path).unwrap();
        bytes.truncate(records_end(path));
        match tail {
            Some(tail) => bytes.extend_from_slice(tail),
            None => bytes.truncate(bytes.len() - 100),
        }
        fs::write(path, &bytes).unwrap();

        let started = std::time::Instant::now();
        let server = Running::start(&args, Some(TOKEN));
        let took = started.elapsed();
        assert_eq!(
            listed(server.addr),
            serde_json::json!([{"id": 1, "name": "fern"}, {"id": 2, "name": "moss"}]),
            "{what}"
        );
        assert!(took.as_secs() < 20, "{what}: the restart took {took:?}");
        let torn = bytes.len() as u64 - good;
        let log = server.log().join("\n");
        let cut = format!("cut off a torn final record ({torn} bytes)");
        assert!(log.contains(&cut), "{what}: {log}");
    }
}

/// A journal written by a server of the first format: served as it was,
/// converted to version 2 at start-up (the log says so), and still whole
/// after a restart on the converted file.
#[test]
fn a_version_1_journal_is_served_converted_and_kept_across_restarts() {
    let file = TempFile::new("v1.journal");
    let path = file.0.to_str().unwrap();
    let records = [
        Change::put(1, "fern", Some("green")),
        Change::put(2, "moss", None),
        Change::put(3, "ivy", None),
        Change::put(2, "moss é", Some("wet")),
        Change::Delete(3),
    ];
    fs::write(path, oracle::journal(Rules::V1, &records)).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
    let expected = serde_json::json!([
        {"id": 1, "name": "fern", "tag": "green"},
        {"id": 2, "name": "moss é", "tag": "wet"},
    ]);
    {
        let server = Running::start(&["--data", path], Some(TOKEN));
        assert_eq!(listed(server.addr), expected);
        let log = server.log().join("\n");
        assert!(
            log.contains("converted from format version 1 to 5 (5 records)"),
            "{log}"
        );
        assert_eq!(&fs::read(path).unwrap()[..8], b"PLANTSJ5");
        let mode = fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the converted file keeps the journal's mode");
        // The identity checks follow the converted file: changes go on.
        create(server.addr, 4, "after");
    }
    let server = Running::start(&["--data", path], Some(TOKEN));
    let mut expected = expected;
    expected
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"id": 4, "name": "after"}));
    assert_eq!(listed(server.addr), expected);
    assert!(!server.log().join("\n").contains("converted"));
}

#[test]
fn a_torn_version_1_tail_is_cut_and_the_rest_converted() {
    let file = TempFile::new("v1-torn.journal");
    let path = file.0.to_str().unwrap();
    let fern = Change::put(1, "fern", None);
    let kept = oracle::journal(Rules::V1, std::slice::from_ref(&fern));
    let whole = oracle::journal(Rules::V1, &[fern, Change::put(2, "moss", None)]);
    fs::write(path, &whole[..whole.len() - 3]).unwrap();
    let server = Running::start(&["--data", path], Some(TOKEN));
    assert_eq!(
        listed(server.addr),
        serde_json::json!([{"id": 1, "name": "fern"}])
    );
    let log = server.log().join("\n");
    let torn = whole.len() - 3 - kept.len();
    assert!(
        log.contains(&format!("cut off a torn final record ({torn} bytes)")),
        "{log}"
    );
    assert!(log.contains("(1 record)"), "{log}");
    assert_eq!(&fs::read(path).unwrap()[..8], b"PLANTSJ5");
}
