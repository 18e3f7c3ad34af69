//! The crash loop: the real binary with `--data` under concurrent creates,
//! replaces and deletes is killed with SIGKILL at random moments and
//! restarted, over and over. After each restart every acknowledged change
//! must be there, and a change whose request was cut off must be either
//! wholly there or wholly absent. A tiny `--compact-min` makes compactions
//! frequent, so some kills land in the middle of one.
//!
//! The loop runs twice: from an empty file, and from a version-1 journal
//! (some plants, a torn last record) that the first start converts; those
//! plants must then outlive every kill and compaction.
//!
//! `PLANTSTORE_CRASH_CYCLES` sets the number of cycles (default 20) and
//! `PLANTSTORE_CRASH_SEED` replays a run; both are printed on failure.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::process::binary::Running;
use crate::storage::oracle::{Change, Rules, journal};
use crate::support::TempFile;

const TOKEN: &str = "crash-token";
const WORKERS: i64 = 4;

/// What a plant may be after a restart: each allowed state, `None` for
/// absent. One entry once known, two while a request's fate is unknown.
type Allowed = Vec<Option<String>>;

/// xorshift64*: small, seedable, good enough to pick moments and actions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One request on its own connection; the status, or `None` if the server
/// died before answering.
fn try_request(addr: SocketAddr, method: &str, path: &str, body: &str) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: crash\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).ok()?;
    let head = std::str::from_utf8(reply.get(..12)?).ok()?;
    head.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// Every plant the server lists, by id.
fn list_all(addr: SocketAddr) -> BTreeMap<i64, String> {
    let mut plants = BTreeMap::new();
    let mut after = None;
    loop {
        let path = match after {
            Some(after) => format!("/plants?limit=1000&after={after}"),
            None => "/plants?limit=1000".to_string(),
        };
        let mut client = crate::support::Client::connect(addr);
        client.send(&crate::support::request(
            "GET",
            &path,
            &[("Authorization", &format!("Bearer {TOKEN}"))],
            "",
        ));
        let reply = client.reply();
        assert_eq!(reply.status, 200);
        let page = reply.json();
        let page = page.as_array().unwrap();
        for plant in page {
            let id = plant["id"].as_i64().unwrap();
            plants.insert(id, plant["name"].as_str().unwrap().to_string());
        }
        match page.last() {
            Some(last) if reply.header("link").is_some() => after = last["id"].as_i64(),
            _ => return plants,
        }
    }
}

/// Drives changes on ids `base..` until the server dies; returns the
/// worker's updated model and how many changes were acknowledged.
fn work(
    addr: SocketAddr,
    base: i64,
    seed: u64,
    mut model: BTreeMap<i64, Allowed>,
    cycle: u32,
) -> (BTreeMap<i64, Allowed>, usize) {
    let mut rng = Rng(seed | 1);
    let mut next_id = base + model.keys().filter(|id| **id >= base).count() as i64;
    let mut acknowledged = 0;
    for n in 0.. {
        let present: Vec<i64> = model
            .iter()
            .filter(|(_, allowed)| matches!(allowed.as_slice(), [Some(_)]))
            .map(|(id, _)| *id)
            .collect();
        let action = if present.is_empty() { 0 } else { rng.below(3) };
        let name = format!("c{cycle}-n{n}");
        let (id, method, path, body, after) = match action {
            0 => {
                next_id += 1;
                let id = next_id;
                let body = format!(r#"{{"id":{id},"name":"{name}"}}"#);
                (id, "POST", "/plants".to_string(), body, Some(name))
            }
            1 => {
                let id = present[rng.below(present.len() as u64) as usize];
                let body = format!(r#"{{"name":"{name}"}}"#);
                (id, "PUT", format!("/plants/{id}"), body, Some(name))
            }
            _ => {
                let id = present[rng.below(present.len() as u64) as usize];
                (id, "DELETE", format!("/plants/{id}"), String::new(), None)
            }
        };
        let before = model.get(&id).and_then(|a| a[0].clone());
        match try_request(addr, method, &path, &body) {
            Some(200 | 204) => {
                model.insert(id, vec![after]);
                acknowledged += 1;
            }
            None | Some(500) => {
                // Cut off by the kill: either outcome is allowed.
                model.insert(id, vec![before, after]);
                return (model, acknowledged);
            }
            Some(status) => panic!("{method} {path}: unexpected {status}"),
        }
    }
    (model, acknowledged)
}

#[test]
fn killed_at_random_moments_the_journal_keeps_every_acknowledged_change() {
    crash_loop(&TempFile::new("crash.journal"), &BTreeMap::new(), "always");
}

/// `--sync never` survives a process crash: its records are written (to
/// the page cache) before the changes are acknowledged, a turn's at once.
#[test]
fn killed_at_random_moments_with_sync_never_the_journal_keeps_every_acknowledged_change() {
    crash_loop(
        &TempFile::new("crash-never.journal"),
        &BTreeMap::new(),
        "never",
    );
}

#[test]
fn killed_at_random_moments_a_converted_version_1_journal_keeps_its_plants_too() {
    let file = TempFile::new("crash-v1.journal");
    // A history with replaced and deleted plants, so that compactions
    // have dead records to drop; ids below zero, apart from the workers'.
    let names: Vec<String> = (1..=60).map(|id| format!("v1 plant {id}")).collect();
    let mut records: Vec<Change> = (1..=60)
        .map(|id| Change::put(-id, &names[id as usize - 1], None))
        .collect();
    records.extend((1..=20).map(|id| Change::put(-id, "v1 replaced", Some("v1"))));
    records.extend((41..=60).map(|id| Change::Delete(-id)));
    let mut image = journal(Rules::V1, &records);
    let torn = journal(Rules::V1, &[Change::put(-999, "torn", None)]);
    image.extend_from_slice(&torn[8..torn.len() - 2]);
    std::fs::write(&file.0, image).unwrap();
    let seeded: BTreeMap<i64, String> = (1..=40)
        .map(|id| match id {
            ..=20 => (-id, "v1 replaced".to_string()),
            _ => (-id, names[id as usize - 1].clone()),
        })
        .collect();
    crash_loop(&file, &seeded, "always");
}

/// The loop on `file` with `--sync SYNC`, whose plants at the start are
/// `seeded` (never changed by the workers, so they must be found after
/// every restart).
fn crash_loop(file: &TempFile, seeded: &BTreeMap<i64, String>, sync: &str) {
    let cycles: u32 = std::env::var("PLANTSTORE_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let seed: u64 = std::env::var("PLANTSTORE_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let context = format!("PLANTSTORE_CRASH_SEED={seed} PLANTSTORE_CRASH_CYCLES={cycles}");
    let mut rng = Rng(seed | 1);
    let path = file.0.to_str().unwrap().to_string();
    let args = ["--data", &path, "--sync", sync, "--compact-min", "4096"];
    let mut models: Vec<BTreeMap<i64, Allowed>> = vec![BTreeMap::new(); WORKERS as usize];
    let (mut acknowledged, mut compactions) = (0usize, 0usize);
    let started = Instant::now();
    for cycle in 0..cycles {
        let mut server = Running::start(&args, Some(TOKEN));
        // Check the recovered state against every model, then settle the
        // uncertain entries on what was found.
        let found = list_all(server.addr);
        if cycle == 0 && !seeded.is_empty() {
            let log = server.log().join("\n");
            assert!(log.contains("from format version 1 to 5"), "{log}");
            assert!(log.contains("cut off a torn final record"), "{log}");
        }
        assert_eq!(&std::fs::read(&file.0).unwrap()[..8], b"PLANTSJ5");
        for (id, name) in seeded {
            assert_eq!(
                found.get(id),
                Some(name),
                "cycle {cycle}, seeded id {id} ({context})"
            );
        }
        for model in &mut models {
            for (id, allowed) in model.iter_mut() {
                let state = found.get(id).cloned();
                assert!(
                    allowed.contains(&state),
                    "cycle {cycle}, id {id}: found {state:?}, allowed {allowed:?} ({context})"
                );
                *allowed = vec![state];
            }
        }
        let known: usize = models.iter().map(|m| m.len()).sum();
        let unknown: Vec<_> = found
            .keys()
            .filter(|id| !seeded.contains_key(id) && models.iter().all(|m| !m.contains_key(id)))
            .collect();
        assert!(
            unknown.is_empty(),
            "never-written ids {unknown:?} exist ({context})"
        );
        assert!(found.len() <= known + seeded.len());

        let addr = server.addr;
        let workers: Vec<_> = models
            .drain(..)
            .enumerate()
            .map(|(w, model)| {
                let worker_seed = rng.next();
                thread::spawn(move || work(addr, (w as i64) << 40, worker_seed, model, cycle))
            })
            .collect();
        thread::sleep(Duration::from_millis(20 + rng.below(180)));
        server.kill();
        for worker in workers {
            let (model, acked) = worker.join().expect("worker");
            acknowledged += acked;
            models.push(model);
        }
        compactions += server
            .log()
            .iter()
            .filter(|l| l.contains("journal compacted"))
            .count();
    }
    // A last start checks the final cycle's changes.
    let server = Running::start(&args, Some(TOKEN));
    let found = list_all(server.addr);
    for (id, name) in seeded {
        assert_eq!(
            found.get(id),
            Some(name),
            "final, seeded id {id} ({context})"
        );
    }
    for model in &models {
        for (id, allowed) in model {
            let state = found.get(id).cloned();
            assert!(
                allowed.contains(&state),
                "final, id {id}: found {state:?}, allowed {allowed:?} ({context})"
            );
        }
    }
    eprintln!(
        "crash loop{}: {cycles} kills in {:?}, {} ids tracked, {acknowledged} changes \
         acknowledged, {compactions} compactions ({context})",
        if seeded.is_empty() {
            ""
        } else {
            " from a version-1 journal"
        },
        started.elapsed(),
        models.iter().map(|m| m.len()).sum::<usize>()
    );
    assert!(
        compactions > 0,
        "no compaction ran, so none was interrupted ({context})"
    );
}
