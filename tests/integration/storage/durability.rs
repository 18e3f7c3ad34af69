//! `--data`: restarts keep every change, a failed sync is a 500 that stops
//! all changes (reads go on, `/healthz` says why), and the journal file
//! refuses a second server and damage in its middle.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use plantstore::model::Capacity;
use plantstore::store::{Disk, JournalFile, Store};

use crate::support::{AUTH, JSON, TempFile, TestServer, durable_config};

#[test]
fn a_restart_keeps_every_acknowledged_change() {
    let file = TempFile::new("restart.journal");
    let mut server = TestServer::with(durable_config(&file.0));
    for id in 1..=5 {
        let body = format!(r#"{{"id":{id},"name":"plant {id}","tag":"t{id}"}}"#);
        assert_eq!(server.create(&body).status, 200);
    }
    let put = server.send("PUT", "/plants/2", &[AUTH, JSON], r#"{"name":"renamed"}"#);
    assert_eq!(put.status, 200);
    assert_eq!(server.send("DELETE", "/plants/4", &[AUTH], "").status, 204);

    server.restart();
    let list = server.send("GET", "/plants", &[AUTH], "");
    assert_eq!(list.status, 200);
    assert_eq!(
        list.json(),
        serde_json::json!([
            {"id": 1, "name": "plant 1", "tag": "t1"},
            {"id": 2, "name": "renamed"},
            {"id": 3, "name": "plant 3", "tag": "t3"},
            {"id": 5, "name": "plant 5", "tag": "t5"},
        ])
    );
    // The restarted server appends after what it recovered.
    assert_eq!(server.create(r#"{"id":6,"name":"new"}"#).status, 200);
    assert_eq!(server.create(r#"{"id":1,"name":"dup"}"#).status, 409);
    server.restart();
    assert_eq!(server.send("GET", "/plants/6", &[AUTH], "").status, 200);
    assert_eq!(server.send("GET", "/plants/4", &[AUTH], "").status, 404);
}

/// The real file, with every sync failing once `fail` is set.
struct FailingSync {
    file: JournalFile,
    fail: Arc<AtomicBool>,
}

impl Disk for FailingSync {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.append(bytes)
    }

    fn sync(&mut self) -> io::Result<()> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected: no space left on device"));
        }
        self.file.sync()
    }
}

#[test]
fn a_failed_sync_is_a_500_then_changes_are_refused_and_reads_served() {
    let file = TempFile::new("faulty.journal");
    let config = durable_config(&file.0);
    let fail = Arc::new(AtomicBool::new(false));
    let (store, _) = Store::open_with(
        Capacity::plants(100),
        config.data.as_ref().unwrap(),
        |file| {
            Box::new(FailingSync {
                file,
                fail: Arc::clone(&fail),
            })
        },
    )
    .unwrap();
    let server = TestServer::with_store(config, store);
    assert_eq!(server.create(r#"{"id":1,"name":"kept"}"#).status, 200);
    assert_eq!(server.send("GET", "/healthz", &[], "").status, 200);

    fail.store(true, Ordering::SeqCst);
    server
        .create(r#"{"id":2,"name":"unsure"}"#)
        .assert_error(500, "cannot write changes to disk");
    fail.store(false, Ordering::SeqCst);
    // Never retried: the disk works again, but changes stay refused.
    server
        .create(r#"{"id":3,"name":"x"}"#)
        .assert_error(500, "cannot write changes to disk");
    server
        .send("PUT", "/plants/1", &[AUTH, JSON], r#"{"name":"y"}"#)
        .assert_error(500, "cannot write changes to disk");
    server
        .send("DELETE", "/plants/1", &[AUTH], "")
        .assert_error(500, "cannot write changes to disk");

    let get = server.send("GET", "/plants/1", &[AUTH], "");
    assert_eq!(get.status, 200);
    assert_eq!(get.json()["name"], "kept");
    assert_eq!(server.send("GET", "/plants/3", &[AUTH], "").status, 404);
    let health = server.send("GET", "/healthz", &[], "");
    assert_eq!(health.status, 503);
    assert_eq!(health.json()["status"], "failing");
    let reason = health.json()["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("no space left on device"), "{reason}");
    assert!(!reason.contains("faulty.journal"), "no path on /healthz");
}

#[test]
fn a_second_server_on_the_same_file_refuses_to_start() {
    let file = TempFile::new("locked.journal");
    let path = file.0.to_str().unwrap();
    let _first = crate::process::binary::Running::start(&["--data", path], Some("t"));
    let second = crate::process::binary::command()
        .args(["--addr", "127.0.0.1:0", "--data", path])
        .env("PLANTSTORE_TOKEN", "t")
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("locked by another process"), "{stderr}");
}

#[test]
fn damage_in_the_middle_refuses_start_up_naming_file_and_record() {
    let file = TempFile::new("damaged.journal");
    {
        let server = TestServer::with(durable_config(&file.0));
        for id in 1..=3 {
            let body = format!(r#"{{"id":{id},"name":"p"}}"#);
            assert_eq!(server.create(&body).status, 200);
        }
    }
    let mut bytes = std::fs::read(&file.0).unwrap();
    // Three records of one size after the header, then the zeros written
    // ahead of them.
    let end = plantstore::store::journal::scan(&bytes, |_| {})
        .unwrap()
        .valid_len as usize;
    let header = plantstore::store::journal::HEADER;
    let second_record = header + (end - header) / 3;
    bytes[second_record + 14] ^= 0xFF; // inside record 2's payload
    std::fs::write(&file.0, &bytes).unwrap();

    let out = crate::process::binary::command()
        .args(["--addr", "127.0.0.1:0", "--data", file.0.to_str().unwrap()])
        .env("PLANTSTORE_TOKEN", "t")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(file.0.to_str().unwrap()), "{stderr}");
    assert!(
        stderr.contains(&format!("record 2 at byte offset {second_record}")),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&file.0).unwrap(), bytes, "file untouched");
}

#[test]
fn start_up_reports_what_it_recovered_and_how_long_it_took() {
    let file = TempFile::new("report.journal");
    let path = file.0.to_str().unwrap();
    {
        let server = TestServer::with(durable_config(&file.0));
        assert_eq!(server.create(r#"{"id":1,"name":"p"}"#).status, 200);
        assert_eq!(server.create(r#"{"id":2,"name":"q"}"#).status, 200);
        assert_eq!(server.send("DELETE", "/plants/1", &[AUTH], "").status, 204);
    }
    let running = crate::process::binary::Running::start(&["--data", path], Some("t"));
    let log = running.log().join("\n");
    assert!(
        log.contains("recovered 1 plant from 3 journal records in "),
        "{log}"
    );
    assert!(
        log.contains(&format!("storage: journal {path} (sync always), 1 plant")),
        "{log}"
    );
}
