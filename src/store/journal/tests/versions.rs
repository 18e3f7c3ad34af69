//! Versions and the lineage through the journal: every version and the
//! nonce survive a restart and a compaction (the header's mark keeping the
//! highest version when no live plant holds it), a reset starts a new
//! lineage, and a version-4 file written before versions existed is
//! numbered and upgraded at start.

use std::fs;

use super::oracle::{self, Change, Rules, numbered};
use crate::os::temp::TempFile;
use crate::store::test_support::{Journalled, Waited, new, plant};
use crate::store::*;

/// The version of plant `id`.
fn version(store: &Store, id: i64) -> u64 {
    store.get_versioned(id).expect("the plant is there").version
}

/// Creates plant `id` and answers its version.
fn created(store: &Store, id: i64) -> u64 {
    store.create(new(id, "plant")).unwrap();
    version(store, id)
}

#[test]
fn versions_and_the_nonce_survive_a_restart() {
    let path = TempFile::new("versions-restart");
    let (store, _) = path.open().unwrap();
    let first = created(&store, 1);
    store.replace(1, plant("fern", Some("green"))).unwrap();
    let second = created(&store, 2);
    let replaced = version(&store, 1);
    assert!(
        first < replaced && replaced < second,
        "{first} {replaced} {second}"
    );
    let nonce = store.nonce();
    drop(store);
    let (store, _) = path.open().unwrap();
    assert_eq!((version(&store, 1), version(&store, 2)), (replaced, second));
    assert_eq!(store.nonce(), nonce, "the lineage goes on");
    assert!(created(&store, 3) > second);
}

/// The trap: a compaction writes one put per live plant, so the highest
/// version, held by a plant since deleted, would be lost, and a plant
/// created after a restart would get it again.
#[test]
fn a_compaction_keeps_the_mark_when_the_highest_version_was_deleted() {
    let path = TempFile::new("versions-compact");
    let (store, _) = path.open().unwrap();
    for id in 0..50 {
        created(&store, id);
    }
    let highest = created(&store, 99);
    store.delete(99).unwrap();
    let nonce = store.nonce();
    assert!(store.compact());
    drop(store);
    let (store, recovery) = path.open().unwrap();
    assert_eq!((store.len(), recovery.records), (50, 50), "compacted");
    assert_eq!(store.nonce(), nonce, "a compaction keeps the lineage");
    assert!(created(&store, 99) > highest);
}

/// A plant made and deleted while a compaction reads the store: its
/// records are collected after the snapshot, so its version is kept too.
#[test]
fn a_compaction_keeps_the_versions_of_changes_made_while_it_runs() {
    let path = TempFile::new("versions-compact-during");
    let (store, _) = path.open().unwrap();
    for id in 0..50 {
        created(&store, id);
    }
    let mut during = 0;
    let compacted = store.shared.compact_between_steps(|step| {
        if step == 1 {
            during = created(&store, 98);
            store.delete(98).unwrap();
        }
    });
    assert!(compacted.unwrap());
    drop(store);
    let (store, _) = path.open().unwrap();
    assert_eq!(store.len(), 50);
    assert!(created(&store, 98) > during);
}

#[test]
fn a_reset_starts_a_new_lineage_its_plants_numbered_past_every_version() {
    let path = TempFile::new("versions-reset");
    let (store, _) = path.open().unwrap();
    let before = (created(&store, 1), created(&store, 2));
    let nonce = store.nonce();
    store.reset(&[(7, plant("seed", None))]).unwrap();
    let seeded = version(&store, 7);
    assert!(seeded > before.1);
    let reset = store.nonce();
    assert_ne!(reset, nonce, "a reset is a new lineage");
    // A compaction after it keeps the reset's lineage.
    store.create(new(8, "after")).unwrap();
    assert!(store.compact());
    drop(store);
    let (store, _) = path.open().unwrap();
    assert_eq!((store.nonce(), version(&store, 7)), (reset, seeded));
    assert!(created(&store, 1) > seeded);
}

#[test]
fn each_new_journal_is_a_lineage_of_its_own() {
    let (one, two) = (TempFile::new("nonce-1"), TempFile::new("nonce-2"));
    let nonces = [one, two].map(|path| path.open().unwrap().0.nonce());
    assert_ne!(nonces[0], nonces[1]);
}

/// A version-4 journal as the server wrote it before versions existed
/// (POST 1 "fern" green, POST 2 "cactus", POST 3 "ivy" climber, PUT 1
/// "fern" shade, DELETE 3, POST -7 "ünïcödé 🌱", with `--sync never`).
const VERSION_4: &[u8] = include_bytes!("../../../../tests/data/journal-v4");

#[test]
fn a_version_4_journal_written_before_versions_is_numbered_and_upgraded_at_start() {
    let written = [
        Change::put(1, "fern", Some("green")),
        Change::put(2, "cactus", None),
        Change::put(3, "ivy", Some("climber")),
        Change::put(1, "fern", Some("shade")),
        Change::Delete(3),
        Change::put(-7, "ünïcödé 🌱", None),
    ];
    let Ok(Some(rules @ Rules::V4(_))) = oracle::rules(VERSION_4) else {
        panic!("the fixture is a version-4 journal");
    };
    assert_eq!(
        oracle::reference(VERSION_4),
        oracle::Outcome::Read(Some(rules), numbered(&written), VERSION_4.len())
    );
    let path = TempFile::new("versions-v4");
    fs::write(&path.0, VERSION_4).unwrap();
    let (store, recovery) = path.open().unwrap();
    assert_eq!(recovery.records, 6);
    // Each put numbered in file order: the plants keep the last.
    let versions = [-7, 1, 2].map(|id| version(&store, id));
    assert_eq!(versions, [5, 4, 2]);
    let nonce = store.nonce();
    // Upgraded before the first append: the same records, numbered,
    // under a header of a new lineage whose mark is the last number.
    let bytes = fs::read(&path.0).unwrap();
    let Ok(Some(upgraded @ Rules::V5(_, header_nonce, 5))) = oracle::rules(&bytes) else {
        panic!(
            "not upgraded to version 5 with the mark 5: {:?}",
            &bytes[..8]
        );
    };
    assert_eq!(header_nonce, nonce);
    assert_eq!(bytes, oracle::journal(upgraded, &numbered(&written)));
    assert_eq!(created(&store, 3), 6);
    drop(store);
    let (store, _) = path.open().unwrap();
    assert_eq!(store.nonce(), nonce);
    assert_eq!([-7, 1, 2, 3].map(|id| version(&store, id)), [5, 4, 2, 6]);
}
