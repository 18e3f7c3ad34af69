//! The journal file seen from outside the server: a record a client plants
//! in a plant's name cannot stop a restart after a torn write, and a
//! version-1 journal is served and converted to version 3, and a restart
//! after a torn tail of a megabyte, whatever it holds, is quick. The encoders
//! here are the documented formats written again, not the server's.

use std::fs;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;

use crate::process::binary::Running;
use crate::support::{AUTH, Client, JSON, Reply, TOKEN, TempFile, request};

/// A change as a record holds it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Record<'a> {
    Put(i64, &'a str, Option<&'a str>),
    Delete(i64),
}

/// Bitwise reflected CRC, all-ones start and final inversion: CRC-32C for
/// `(0x82F6_3B78, 32)`, CRC-64/XZ for `(0xC96C_5795_D787_0F42, 64)`.
fn crc(poly: u64, width: u32, bytes: &[u8]) -> u64 {
    let mask = u64::MAX >> (64 - width);
    let mut crc = mask;
    for &b in bytes {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ poly
            } else {
                crc >> 1
            };
        }
    }
    !crc & mask
}

fn payload(record: Record<'_>) -> Vec<u8> {
    let text = |out: &mut Vec<u8>, text: Option<&str>| match text {
        Some(text) => {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
        None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
    };
    let mut out = Vec::new();
    match record {
        Record::Put(id, name, tag) => {
            out.push(1);
            out.extend_from_slice(&id.to_le_bytes());
            text(&mut out, Some(name));
            text(&mut out, tag);
        }
        Record::Delete(id) => {
            out.push(2);
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    out
}

/// `len:u32 crc:u32 payload`, CRC-32C over `len` and the payload.
fn v1_record(record: Record<'_>) -> Vec<u8> {
    let payload = payload(record);
    let len = (payload.len() as u32).to_le_bytes();
    let crc = crc(0x82F6_3B78, 32, &[&len[..], &payload].concat()) as u32;
    [&len[..], &crc.to_le_bytes(), &payload].concat()
}

/// `len:u32 check:u64 payload`, CRC-64/XZ over the file's salt, `len` and
/// the payload.
fn v2_record(record: Record<'_>, salt: [u8; 8]) -> Vec<u8> {
    let payload = payload(record);
    let len = (payload.len() as u32).to_le_bytes();
    let covered = [&salt[..], &len, &payload].concat();
    let check = crc(0xC96C_5795_D787_0F42, 64, &covered);
    [&len[..], &check.to_le_bytes(), &payload].concat()
}

/// `len:u32 lcheck:u32 check:u64 payload`: version 2's record with the
/// CRC-32C of the salt and `len` after `len`.
fn v3_record(record: Record<'_>, salt: [u8; 8]) -> Vec<u8> {
    let v2 = v2_record(record, salt);
    let lcheck = crc(0x82F6_3B78, 32, &[&salt[..], &v2[..4]].concat()) as u32;
    [&v2[..4], &lcheck.to_le_bytes(), &v2[4..]].concat()
}

/// A whole version-1 journal holding `records`.
pub(crate) fn v1_journal(records: &[Record<'_>]) -> Vec<u8> {
    let mut file = b"PLANTSJ1".to_vec();
    for &record in records {
        file.extend(v1_record(record));
    }
    file
}

/// A record made by `make`, of a put whose name is chosen so that the
/// whole record is valid UTF-8: what a client can send inside a name.
fn planted(make: impl Fn(Record<'_>) -> Vec<u8>) -> String {
    (0..)
        .find_map(|n| {
            String::from_utf8(make(Record::Put(1, &format!("planted {n}"), Some("")))).ok()
        })
        .expect("some name gives a record that is valid UTF-8")
}

fn send(addr: SocketAddr, method: &str, path: &str, body: &str) -> Reply {
    let mut client = Client::connect(addr);
    client.send(&request(method, path, &[AUTH, JSON], body));
    client.reply()
}

fn create(addr: SocketAddr, id: i64, name: &str) {
    let body = serde_json::json!({"id": id, "name": name}).to_string();
    assert_eq!(send(addr, "POST", "/plants", &body).status, 200, "{name:?}");
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
    ] {
        let file = TempFile::new("planted.journal");
        let path = file.0.to_str().unwrap();
        let server = Running::start(&["--data", path], Some(TOKEN));
        create(server.addr, 1, "fern");
        create(server.addr, 2, "moss");
        let start = fs::metadata(path).unwrap().len();
        let record = match rules {
            "version 1" => planted(v1_record),
            "version 2 under a guessed salt" => planted(|change| v2_record(change, [0; 8])),
            _ => planted(|change| v3_record(change, [0; 8])),
        };
        create(server.addr, 3, &format!("{BEFORE}{record} in it"));
        drop(server); // SIGKILL

        let bytes = fs::read(path).unwrap();
        let end = bytes
            .windows(record.len())
            .position(|w| w == record.as_bytes())
            .expect("the record is in the file as sent")
            + record.len();
        let cut = (end + bytes.len()) / 2;
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
    let planted = planted(|change| v3_record(change, [0; 8])).repeat(MIB / 40);
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
            v3_record(Record::Put(5, "x", None), [1; 8]).repeat(MIB / 30),
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
        let good = fs::metadata(path).unwrap().len();
        if tail.is_none() {
            create(server.addr, 3, &planted);
        }
        drop(server); // SIGKILL
        let mut bytes = fs::read(path).unwrap();
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
        Record::Put(1, "fern", Some("green")),
        Record::Put(2, "moss", None),
        Record::Put(3, "ivy", None),
        Record::Put(2, "moss é", Some("wet")),
        Record::Delete(3),
    ];
    fs::write(path, v1_journal(&records)).unwrap();
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
            log.contains("converted from format version 1 to 3 (5 records)"),
            "{log}"
        );
        assert_eq!(&fs::read(path).unwrap()[..8], b"PLANTSJ3");
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
    let kept = v1_journal(&[Record::Put(1, "fern", None)]);
    let whole = v1_journal(&[Record::Put(1, "fern", None), Record::Put(2, "moss", None)]);
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
    assert_eq!(&fs::read(path).unwrap()[..8], b"PLANTSJ3");
}
