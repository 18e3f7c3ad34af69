//! Backup and restore as docs/seeding-and-export.md tells it: `GET
//! /export` of a running server to a file, and that file as `--seed` of a
//! new server. Taken while 8 writers create, replace and delete: every
//! plant acknowledged before the backup began and untouched while it ran
//! is restored as acknowledged (or absent, as deleted), and every plant
//! restored is one that was acknowledged at some point, as it was then.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::process::binary::Running;
use crate::support::{AUTH, Client, JSON, Kind, TOKEN, TempFile, request};

/// Writers, and the ids each owns (`writer + WRITERS * k`): one writer
/// per id, so each id's acknowledged history is one writer's, in order.
const WRITERS: i64 = 8;
const IDS_EACH: i64 = 400;

/// What a plant is after an acknowledged change: its name, or `None`
/// once deleted.
type State = Option<String>;

/// One acknowledged change to an id: when it was sent and answered, and
/// the state it left.
struct Change {
    sent: Instant,
    acked: Instant,
    after: State,
}

/// Creates, replaces and deletes its own ids until `stop`, each change
/// answered before the next; returns every change, by id.
fn write(
    addr: SocketAddr,
    writer: i64,
    stop: &AtomicBool,
    started: &Barrier,
) -> Vec<(i64, Change)> {
    let mut client = Client::connect(addr);
    let mut now: HashMap<i64, bool> = HashMap::new();
    let mut changes = Vec::new();
    // A small generator of its own: the test needs spread, not quality.
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64 ^ writer as u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    started.wait();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let id = writer + WRITERS * (next() % IDS_EACH as u64) as i64;
        let exists = *now.get(&id).unwrap_or(&false);
        let name = format!("plant {id} version {n}");
        let body = format!(r#"{{"id":{id},"name":"{name}"}}"#);
        let (method, path, body, after, want) = if !exists {
            ("POST", "/plants".to_string(), body, Some(name), 200)
        } else if next() % 2 == 0 {
            ("PUT", format!("/plants/{id}"), body, Some(name), 200)
        } else {
            ("DELETE", format!("/plants/{id}"), String::new(), None, 204)
        };
        let sent = Instant::now();
        client.send(&request(method, &path, &[AUTH, JSON], &body));
        let status = client.reply().status;
        let acked = Instant::now();
        assert_eq!(status, want, "{method} {path}");
        now.insert(id, after.is_some());
        changes.push((id, Change { sent, acked, after }));
    }
    changes
}

/// The plants of an export body: id -> name.
fn plants(body: &[u8]) -> BTreeMap<i64, String> {
    body.split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| {
            let plant: Value = serde_json::from_slice(line).expect("a JSON line");
            let id = plant["id"].as_i64().expect("an id");
            (id, plant["name"].as_str().expect("a name").to_string())
        })
        .collect()
}

fn export(addr: SocketAddr) -> Vec<u8> {
    let mut client = Client::connect(addr);
    client.send(&request("GET", "/export", &[AUTH], ""));
    let reply = client.reply();
    assert_eq!(reply.status, 200);
    reply.body
}

fn a_backup_taken_while_8_writers_run_restores_every_acknowledged_plant(kind: Kind) {
    let journal = TempFile::new("backup-source.journal");
    let mut args = vec![];
    if kind == Kind::Memory {
        args = vec!["--data", journal.0.to_str().unwrap()];
    }
    let source = Running::on(kind, &args, Some(TOKEN));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Barrier::new(WRITERS as usize + 1));
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let (stop, started) = (Arc::clone(&stop), Arc::clone(&started));
            let addr = source.addr;
            thread::spawn(move || write(addr, writer, &stop, &started))
        })
        .collect();
    started.wait();
    thread::sleep(Duration::from_millis(800));
    // The backup, as docs/seeding-and-export.md takes it.
    let began = Instant::now();
    let backup = TempFile::new("backup.ndjson");
    std::fs::write(&backup.0, export(source.addr)).unwrap();
    let ended = Instant::now();
    thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let mut history: HashMap<i64, Vec<Change>> = HashMap::new();
    for writer in writers {
        for (id, change) in writer.join().unwrap() {
            history.entry(id).or_default().push(change);
        }
    }
    drop(source);

    // The restore: the backup as the seed of a new server.
    let target = Running::on(kind, &["--seed", backup.0.to_str().unwrap()], Some(TOKEN));
    let restored = plants(&export(target.addr));
    assert_eq!(
        restored,
        plants(&std::fs::read(&backup.0).unwrap()),
        "the new server holds the backup"
    );

    let (mut checked, mut during) = (0, 0);
    for id in (0..WRITERS * IDS_EACH).chain([-1, WRITERS * IDS_EACH]) {
        let changes = history.get(&id).map(Vec::as_slice).unwrap_or_default();
        let touched = changes.iter().any(|c| c.sent <= ended && c.acked >= began);
        during += usize::from(touched);
        let got = restored.get(&id);
        if !touched {
            // Untouched while the backup ran: as last acknowledged before.
            let before = changes.iter().rev().find(|c| c.acked < began);
            let want = before.and_then(|c| c.after.as_ref());
            assert_eq!(got, want, "plant {id}, untouched during the backup");
            checked += 1;
        }
        if let Some(name) = got {
            assert!(
                changes.iter().any(|c| c.after.as_ref() == Some(name)),
                "plant {id} restored as {name:?}, never acknowledged so"
            );
        }
    }
    assert!(
        restored.keys().all(|id| history.contains_key(id)),
        "nothing restored that no writer made"
    );
    assert!(during > 0, "no change ran while the backup was taken");
    assert!(checked > 100, "only {checked} plants were untouched");
}

crate::on_each_store!(a_backup_taken_while_8_writers_run_restores_every_acknowledged_plant);
