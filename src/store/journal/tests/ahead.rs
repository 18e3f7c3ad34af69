//! Zeros written ahead of the records (`--sync always`, `ahead.rs`): a
//! clean restart keeps them without calling them torn, `--sync never`
//! cuts them, and a power cut during a write over them (any of its pages
//! on the disk and any not, the file cut anywhere past the records) loses
//! no acknowledged change and keeps of the torn write only changes in
//! order from its start.

use std::fs;

use crate::model::{Capacity, Durability, SyncMode};
use crate::os::temp::TempFile;
use crate::store::journal::ahead::STEP;
use crate::store::journal::*;
use crate::store::test_support::{Journalled, Waited, new, plant};
use crate::store::*;

/// Where the records of the image `bytes` end.
fn records_end(bytes: &[u8]) -> usize {
    scan(bytes, |_| {}).unwrap().valid_len as usize
}

#[test]
fn a_clean_restart_keeps_the_zeros_ahead_and_writes_over_them() {
    let path = TempFile::new("ahead-clean");
    {
        let (store, _) = path.open().unwrap();
        for id in 0..20 {
            store.create(new(id, "fern")).unwrap();
        }
    }
    let bytes = fs::read(&path.0).unwrap();
    assert_eq!(bytes.len() as u64, STEP, "zeros to the next step");
    let end = records_end(&bytes);
    assert!(bytes[end..].iter().all(|&b| b == 0));
    // Read back: no checksum over the zeros, nothing torn, nothing cut.
    let scan = scan(&bytes, |_| {}).unwrap();
    assert!(scan.zeroed);
    assert!(
        scan.checked <= end as u64,
        "{} bytes checksummed",
        scan.checked
    );
    let (store, recovery) = path.open().unwrap();
    assert_eq!((recovery.records, recovery.torn_bytes), (20, 0));
    assert_eq!(fs::metadata(&path.0).unwrap().len(), STEP, "not cut");
    store.create(new(20, "moss")).unwrap();
    drop(store);
    let bytes = fs::read(&path.0).unwrap();
    assert_eq!(bytes.len() as u64, STEP, "written over the zeros");
    assert!(records_end(&bytes) > end);
    let (store, recovery) = path.open().unwrap();
    assert_eq!(
        (recovery.records, recovery.torn_bytes, store.len()),
        (21, 0, 21)
    );
}

#[test]
fn with_sync_never_the_zeros_of_an_earlier_run_are_cut_and_records_end_the_file() {
    let path = TempFile::new("ahead-never");
    drop(path.open().unwrap().0.create(new(1, "fern")));
    assert_eq!(fs::metadata(&path.0).unwrap().len(), STEP);
    let never = Durability {
        sync: SyncMode::Never,
        ..path.durability()
    };
    let (store, recovery) = Store::open(Capacity::plants(10), &never).unwrap();
    assert_eq!((recovery.records, recovery.torn_bytes), (1, 0));
    store.create(new(2, "moss")).unwrap();
    store.sync().unwrap();
    drop(store);
    let bytes = fs::read(&path.0).unwrap();
    assert_eq!(
        records_end(&bytes),
        bytes.len(),
        "nothing after the records"
    );
    let (store, _) = path.open().unwrap();
    assert_eq!(store.len(), 2);
}

/// The journal after `acknowledged` creates, each synced, then one write
/// of `torn` more (ids from 1000, long names, so it spans pages) that a
/// crash interrupts: the image as the write left it, where its records
/// start and where they end.
fn torn_write(acknowledged: i64, torn: i64) -> (Vec<u8>, usize, usize) {
    let path = TempFile::new("ahead-torn");
    let (store, _) = path.open().unwrap();
    for id in 0..acknowledged {
        store.create(new(id, "acknowledged")).unwrap();
    }
    let start = records_end(&fs::read(&path.0).unwrap());
    let name = "a name long enough to spread the write over pages".repeat(3);
    let mut last = Durable::Now;
    for id in 1000..1000 + torn {
        last = store.change(id, Edit::Create(plant(&name, None))).unwrap();
    }
    // One write: nothing else commits while these are pending.
    store.wait(last).unwrap();
    drop(store);
    let bytes = fs::read(&path.0).unwrap();
    let end = records_end(&bytes);
    (bytes, start, end)
}

/// Opens `image` as a journal: every acknowledged change must be there,
/// and of the torn write only ids 1000.. in order from its first.
fn recovers(image: &[u8], acknowledged: i64, what: &str) {
    let path = TempFile::new("ahead-cut");
    fs::write(&path.0, image).unwrap();
    let (store, _) = path
        .open()
        .unwrap_or_else(|e| panic!("{what}: refused: {e}"));
    for id in 0..acknowledged {
        assert!(store.get(id).is_some(), "{what}: acknowledged {id} lost");
    }
    let kept = (1000..).take_while(|&id| store.get(id).is_some()).count() as i64;
    assert_eq!(
        store.len() as i64,
        acknowledged + kept,
        "{what}: a change of the torn write kept after one that is not"
    );
}

#[test]
fn a_journal_cut_anywhere_past_its_acknowledged_records_recovers_every_one() {
    let (bytes, start, end) = torn_write(30, 200);
    assert!(end - start > 3 * 4096, "the write spans pages");
    // Every 331 bytes through the torn write and the page after it; past
    // that the zeros are all alike, so a cut at each 64 KiB and at the
    // file's end (each open writes and syncs the zeros back: a cut every
    // 331 bytes of the whole step took a minute).
    let zeros = end.div_ceil(4096) * 4096 + 4096;
    for cut in (start..zeros)
        .step_by(331)
        .chain((zeros..bytes.len()).step_by(64 * 1024))
        .chain([start, end, end + 1, bytes.len() - 1, bytes.len()])
    {
        recovers(&bytes[..cut], 30, &format!("cut at {cut}"));
    }
}

#[test]
fn a_power_cut_that_leaves_any_page_of_a_write_unwritten_loses_no_acknowledged_change() {
    let (bytes, start, end) = torn_write(30, 200);
    // The pages the write touched, as the page cache writes them back.
    let pages: Vec<usize> = (start / 4096..end.div_ceil(4096)).collect();
    assert!(pages.len() >= 4, "{} pages", pages.len());
    let zeroed = |page: usize, image: &mut Vec<u8>| {
        let from = (page * 4096).max(start);
        let to = ((page + 1) * 4096).min(end);
        image[from..to].fill(0);
    };
    for &page in &pages {
        // That page not written back, every other one written.
        let mut one_lost = bytes.clone();
        zeroed(page, &mut one_lost);
        recovers(&one_lost, 30, &format!("page {page} lost"));
        // Only that page written back: a later page whole, earlier zeros.
        let mut one_kept = bytes.clone();
        for &other in pages.iter().filter(|&&p| p != page) {
            zeroed(other, &mut one_kept);
        }
        recovers(&one_kept, 30, &format!("only page {page} kept"));
    }
}
