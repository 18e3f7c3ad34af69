//! Tests of the store with a journal: recovery, damage, failures, group
//! commit, compaction and the lock.

use std::fs;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

use crate::model::SyncMode;
use crate::os::temp::TempFile;
use crate::store::journal::compact_path;
use crate::store::journal::*;
use crate::store::test_support::{Journalled, Waited, contents, new, plant};
use crate::store::*;

#[test]
fn crcs_match_the_standard_check_values() {
    assert_eq!(crc32c(0, b"123456789"), 0xE306_9283);
    assert_eq!(crc32c(crc32c(0, b"1234"), b"56789"), 0xE306_9283);
    assert_eq!(crc64(0, b"123456789"), 0x995D_C9BB_DF19_39FA);
    assert_eq!(crc64(crc64(0, b"1234"), b"56789"), 0x995D_C9BB_DF19_39FA);
}

#[test]
fn changes_survive_a_reopen() {
    let path = TempFile::new("reopen");
    {
        let (store, recovery) = path.open().unwrap();
        assert_eq!(recovery.records, 0);
        store.create(new(1, "fern")).unwrap();
        store.create(new(2, "moss")).unwrap();
        store.create(new(-3, "ivy")).unwrap();
        store.replace(2, plant("moss", Some("green é"))).unwrap();
        store.delete(1).unwrap();
        assert_eq!(store.create(new(2, "dup")), Err(Refusal::Exists(2)));
    }
    let (store, recovery) = path.open().unwrap();
    assert_eq!((recovery.records, recovery.torn_bytes), (5, 0));
    assert_eq!(
        contents(&store),
        vec![
            (-3, plant("ivy", None)),
            (2, plant("moss", Some("green é")))
        ]
    );
}

/// A journal image with three records; returns it and where the last
/// record starts.
fn three_records() -> (Vec<u8>, usize) {
    let salt = [7; 8];
    let mut bytes = header(&salt, Lineage::default()).to_vec();
    let put = |id, name, tag| Change::Put {
        id,
        version: id as u64,
        name,
        tag,
    };
    encode(&mut bytes, &put(1, "a", None));
    encode(&mut bytes, &put(2, "b", Some("t")));
    let last = bytes.len();
    encode(&mut bytes, &put(3, "c", Some("tag")));
    seal_each(&mut bytes[HEADER..], &salt, HEADER as u64);
    (bytes, last)
}

#[test]
fn a_cut_anywhere_in_the_last_record_keeps_exactly_the_complete_ones() {
    let (bytes, last) = three_records();
    let whole = scan(&bytes, |_| {}).unwrap();
    assert_eq!(whole.records, 3);
    for cut in last..bytes.len() {
        let mut ids = Vec::new();
        let scan = scan(&bytes[..cut], |change| ids.push(change.id()))
            .unwrap_or_else(|e| panic!("cut at {cut}: {e:?}"));
        assert_eq!(scan.records, 2, "cut at {cut}");
        assert_eq!(scan.valid_len, last as u64, "cut at {cut}");
        assert_eq!(ids, vec![1, 2]);
    }
}

#[test]
fn a_torn_file_is_cut_and_later_writes_follow_the_good_records() {
    let (bytes, last) = three_records();
    for cut in [last + 1, last + 8, bytes.len() - 1] {
        let path = TempFile::new("torn");
        fs::write(&path.0, &bytes[..cut]).unwrap();
        {
            let (store, recovery) = path.open().unwrap();
            assert_eq!(recovery.torn_bytes, (cut - last) as u64);
            assert_eq!(fs::metadata(&path.0).unwrap().len(), last as u64);
            store.create(new(9, "after")).unwrap();
        }
        let (store, recovery) = path.open().unwrap();
        assert_eq!((recovery.records, recovery.torn_bytes), (3, 0));
        let ids: Vec<i64> = contents(&store).iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, vec![1, 2, 9]);
    }
}

#[test]
fn a_flipped_bit_is_torn_at_the_end_and_refused_in_the_middle() {
    let (bytes, last) = three_records();
    let mut end = bytes.clone();
    *end.last_mut().unwrap() ^= 1;
    assert_eq!(scan(&end, |_| {}).unwrap().valid_len, last as u64);
    let mut middle = bytes.clone();
    middle[HEADER + 14] ^= 1; // inside the first record
    assert_eq!(
        scan(&middle, |_| {}).unwrap_err(),
        Damage::Record {
            record: 1,
            offset: HEADER as u64
        }
    );
}

#[test]
fn garbage_in_the_middle_refuses_start_up_and_leaves_the_file_untouched() {
    let (bytes, _) = three_records();
    // Inserted before the second record: the records after it are shifted
    // but check out where they lie, and the third's batch starts after
    // the damage.
    let second = HEADER
        + Change::Put {
            id: 1,
            version: 1,
            name: "a",
            tag: None,
        }
        .size() as usize;
    let mut damaged = bytes[..second].to_vec();
    damaged.extend_from_slice(b"garbage!garbage!");
    damaged.extend_from_slice(&bytes[second..]);
    let path = TempFile::new("garbage");
    fs::write(&path.0, &damaged).unwrap();
    let err = path.open().err().expect("start-up refused");
    let text = err.to_string();
    assert!(
        matches!(err, OpenError::Damaged { record: 2, offset, .. } if offset == second as u64),
        "{text}"
    );
    assert!(text.contains(&path.0.display().to_string()), "{text}");
    assert!(text.contains("record 2"), "{text}");
    assert_eq!(fs::read(&path.0).unwrap(), damaged);
}

#[test]
fn a_file_that_is_not_a_journal_is_refused() {
    let path = TempFile::new("foreign");
    fs::write(&path.0, b"id,name\n1,fern\n").unwrap();
    assert!(matches!(path.open(), Err(OpenError::NotAJournal(_))));
    assert_eq!(fs::read(&path.0).unwrap(), b"id,name\n1,fern\n");
}

#[test]
fn a_second_store_on_the_same_file_is_refused() {
    let path = TempFile::new("lock");
    let (first, _) = path.open().unwrap();
    assert!(matches!(path.open(), Err(OpenError::Locked(_))));
    drop(first);
    path.open().expect("free again once the first is dropped");
}

/// A disk that fails every write and sync once `fail` is set, and counts
/// syncs.
struct Faulty {
    file: JournalFile,
    fail: Arc<AtomicBool>,
    syncs: Arc<AtomicUsize>,
}

impl Disk for Faulty {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.append(bytes)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        if self.fail.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected sync failure"));
        }
        self.file.sync()
    }
}

#[test]
fn a_failed_sync_fails_the_change_and_refuses_every_later_one() {
    let path = TempFile::new("faulty");
    let fail = Arc::new(AtomicBool::new(false));
    let syncs = Arc::new(AtomicUsize::new(0));
    let (store, _) = Store::open_with(Capacity::plants(100), &path.durability(), |file| {
        Box::new(Faulty {
            file,
            fail: Arc::clone(&fail),
            syncs: Arc::clone(&syncs),
        })
    })
    .unwrap();
    store.create(new(1, "kept")).unwrap();
    fail.store(true, Ordering::SeqCst);
    assert!(matches!(
        store.create(new(2, "lost")),
        Err(Refusal::Storage(_))
    ));
    let tried = syncs.load(Ordering::SeqCst);
    fail.store(false, Ordering::SeqCst);
    // Never retried, even though the disk works again.
    assert!(matches!(
        store.create(new(3, "x")),
        Err(Refusal::Storage(_))
    ));
    assert!(matches!(store.delete(1), Err(Refusal::Storage(_))));
    assert!(matches!(
        store.replace(1, plant("y", None)),
        Err(Refusal::Storage(_))
    ));
    assert_eq!(
        syncs.load(Ordering::SeqCst),
        tried,
        "no sync after poisoning"
    );
    assert!(store.failure().unwrap().contains("injected sync failure"));
    assert_eq!(store.get(1), Some(plant("kept", None)), "reads still work");
    assert!(store.get(3).is_none(), "a refused change is not applied");
}

/// A disk whose first sync waits until the test opens the gate.
struct Gated {
    file: JournalFile,
    gate: Arc<(Mutex<bool>, Condvar)>,
    syncs: Arc<AtomicUsize>,
}

impl Disk for Gated {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.append(bytes)
    }

    fn sync(&mut self) -> io::Result<()> {
        let (open, changed) = &*self.gate;
        let mut open = open.lock().unwrap();
        while !*open {
            open = changed.wait(open).unwrap();
        }
        self.syncs.fetch_add(1, Ordering::SeqCst);
        self.file.sync()
    }
}

#[test]
fn writers_that_arrive_during_a_sync_share_the_next_one() {
    const WRITERS: i64 = 10;
    let path = TempFile::new("group");
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let syncs = Arc::new(AtomicUsize::new(0));
    let (store, _) = Store::open_with(Capacity::plants(100), &path.durability(), |file| {
        Box::new(Gated {
            file,
            gate: Arc::clone(&gate),
            syncs: Arc::clone(&syncs),
        })
    })
    .unwrap();
    let store = Arc::new(store);
    let spawn = |id: i64| {
        let store = Arc::clone(&store);
        thread::spawn(move || store.create(new(id, "p")))
    };
    // The first writer leads and blocks in its sync...
    let first = spawn(0);
    while store.is_empty() {
        thread::yield_now();
    }
    // ...while the others append (a create is visible once appended) and
    // queue behind it.
    let rest: Vec<_> = (1..=WRITERS).map(spawn).collect();
    while store.len() < 1 + WRITERS as usize {
        thread::yield_now();
    }
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    first.join().unwrap().unwrap();
    for writer in rest {
        writer.join().unwrap().unwrap();
    }
    assert_eq!(
        syncs.load(Ordering::SeqCst),
        2,
        "one sync for the whole queue"
    );
    drop(store);
    let (store, _) = path.open().unwrap();
    assert_eq!(store.len(), 1 + WRITERS as usize);
}

#[test]
fn compaction_keeps_every_plant_including_changes_made_while_it_runs() {
    let path = TempFile::new("compact");
    let expected = {
        let (store, _) = path.open().unwrap();
        for id in 0..200 {
            store.create(new(id, "first")).unwrap();
        }
        for id in 0..150 {
            store.delete(id).unwrap();
        }
        let before = fs::metadata(&path.0).unwrap().len();
        // Changes while the snapshot is read, each into a shard already
        // read, being read later, or both (1000..1004 spread over shards).
        let mut during = |step| {
            if step == 3 {
                for id in [1000, 1002, 1003, 1004] {
                    store.create(new(id, "during")).unwrap();
                }
                store.delete(1002).unwrap();
                store.delete(160).unwrap();
                store.replace(170, plant("changed", Some("t"))).unwrap();
                assert!(!store.compact(), "one compaction at a time");
            }
        };
        assert!(store.shared.compact_between_steps(&mut during).unwrap());
        let len = fs::metadata(&path.0).unwrap().len();
        assert!(len < before / 2, "compacted {before} bytes to {len}");
        assert!(!compact_path(&path.0).exists());
        // And after it, into the new file.
        store.create(new(1001, "after")).unwrap();
        contents(&store)
    };
    assert_eq!(expected.len(), 50 - 1 + 3 + 1);
    let (store, recovery) = path.open().unwrap();
    assert_eq!(contents(&store), expected);
    // The snapshot holds 49 to 53 plants, depending on which shards were
    // read before the changes; then the 7 changes made during it and the
    // one after.
    assert!(
        (49 + 7 + 1..=53 + 7 + 1).contains(&(recovery.records as usize)),
        "{} records: snapshot, during, after",
        recovery.records
    );
}

#[test]
fn the_background_thread_compacts_a_journal_that_outgrew_its_data() {
    let path = TempFile::new("auto");
    let durability = Durability {
        compact_min: 4096,
        ..path.durability()
    };
    let (store, _) = Store::open(Capacity::plants(100), &durability).unwrap();
    for round in 0..200 {
        store.create(new(round, "short-lived plant")).unwrap();
        store.delete(round).unwrap();
    }
    store.create(new(7, "survivor")).unwrap();
    // 401 records of ~40 bytes are 16 KB without compaction. The thread
    // runs when it gets the CPU, and is asked again only by a change made
    // while none runs: keep changing (two records a round) until it has
    // caught up (a peak measured during the loop depended on the load).
    let len = || fs::metadata(&path.0).unwrap().len();
    // Milliseconds when idle; the bound is for a loaded machine.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while len() > 4096 && std::time::Instant::now() < deadline {
        store.create(new(1000, "short-lived plant")).unwrap();
        store.delete(1000).unwrap();
        thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(len() <= 4096, "journal still {} bytes", len());
    drop(store);
    let (store, _) = Store::open(Capacity::plants(100), &durability).unwrap();
    assert_eq!(contents(&store), vec![(7, plant("survivor", None))]);
}

#[test]
fn a_leftover_compaction_file_is_removed_and_the_journal_kept() {
    let path = TempFile::new("leftover");
    {
        let (store, _) = path.open().unwrap();
        store.create(new(1, "kept")).unwrap();
    }
    // A crash after writing part of a compaction, before the rename.
    fs::write(compact_path(&path.0), b"PLANTSJ2 half a snapshot").unwrap();
    let (store, _) = path.open().unwrap();
    assert_eq!(contents(&store), vec![(1, plant("kept", None))]);
    assert!(!compact_path(&path.0).exists());
}

#[test]
fn compactions_started_together_run_one_at_a_time() {
    // A second compaction used to start once the first had taken the
    // records collected during its snapshot, before its rename: it then
    // replaced the first one's `FILE.compact`, which the first renamed
    // over the journal (poisoning it: "replaced"), or had its collection
    // cleared by the first one's failure.
    let path = TempFile::new("two-compactions");
    let durability = Durability {
        sync: SyncMode::Never,
        ..path.durability()
    };
    let (store, _) = Store::open(Capacity::plants(100_000), &durability).unwrap();
    for id in 0..20_000 {
        store.create(new(id, "base")).unwrap();
    }
    let store = Arc::new(store);
    let done = Arc::new(AtomicBool::new(false));
    let compactors: Vec<_> = (0..2)
        .map(|_| {
            let (store, done) = (Arc::clone(&store), Arc::clone(&done));
            thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    store.compact();
                }
            })
        })
        .collect();
    let started = std::time::Instant::now();
    let mut id = 0;
    while started.elapsed() < std::time::Duration::from_secs(2) && store.failure().is_none() {
        store.replace(id, plant("changed", None)).ok();
        id = (id + 1) % 20_000;
    }
    done.store(true, Ordering::Relaxed);
    for compactor in compactors {
        compactor.join().unwrap();
    }
    assert_eq!(store.failure(), None);
    let expected = contents(&store);
    drop(store);
    let (store, _) = Store::open(Capacity::plants(100_000), &durability).unwrap();
    assert!(contents(&store) == expected, "the reopened journal differs");
}

#[test]
fn a_new_journal_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let path = TempFile::new("mode");
    let (_store, _) = path.open().unwrap();
    let mode = fs::metadata(&path.0).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn queued_creates_are_written_at_the_next_wait_in_either_sync_mode() {
    for sync in [SyncMode::Never, SyncMode::Always] {
        let path = TempFile::new("queued");
        let durability = Durability {
            sync,
            ..path.durability()
        };
        {
            let (store, _) = Store::open(Capacity::plants(100), &durability).unwrap();
            let empty = fs::metadata(&path.0).unwrap().len();
            let mut last = Durable::Now;
            for id in 0..10 {
                last = store
                    .change(id, Edit::Create(plant("queued", None)))
                    .unwrap();
            }
            assert_eq!(store.len(), 10, "{sync:?}: applied at once");
            assert_eq!(
                fs::metadata(&path.0).unwrap().len(),
                empty,
                "{sync:?}: nothing written before the wait"
            );
            assert_eq!(
                store
                    .change(3, Edit::Create(plant("again", None)))
                    .unwrap_err(),
                Refusal::Exists(3)
            );
            store.wait(last).unwrap();
            assert!(fs::metadata(&path.0).unwrap().len() > empty);
        }
        let (store, recovery) = Store::open(Capacity::plants(100), &durability).unwrap();
        assert_eq!((store.len(), recovery.records), (10, 10), "{sync:?}");
        assert_eq!(store.get(3).unwrap().name, "queued");
    }
}

#[test]
fn journal_stats_follow_the_file_and_count_compactions() {
    let path = TempFile::new("stats");
    let (store, _) = path.open().unwrap();
    let stats = |store: &Store| store.journal_stats().expect("a journal");
    assert_eq!(stats(&store).compactions, 0);
    store.create(new(1, "a")).unwrap();
    store.create(new(2, "b")).unwrap();
    store.delete(2).unwrap();
    // The records' bytes: the file also holds the zeros written ahead.
    let records = |path: &TempFile| {
        let bytes = fs::read(&path.0).unwrap();
        scan(&bytes, |_| {}).unwrap().valid_len
    };
    let before = stats(&store);
    assert_eq!(before.bytes, records(&path));
    assert!(store.compact());
    let after = stats(&store);
    assert_eq!(after.compactions, 1);
    assert!(after.bytes < before.bytes, "{before:?} -> {after:?}");
    assert_eq!(after.bytes, records(&path));
    assert_eq!(Store::new(Capacity::plants(1)).journal_stats(), None);
}
