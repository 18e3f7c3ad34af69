//! The journal's format as an outsider writes it: records planted in a
//! plant's name by a client, and journals in the version-1 to -4 formats,
//! written by the oracle (`tests/shared/journal_oracle.rs`), which follows
//! the documented layout and shares no code with the server's, so a test
//! fails if the two drift apart.

use std::fs;

use super::oracle::{self, Rules, numbered, planted, record};
use crate::os::temp::TempFile;
use crate::store::journal::*;
use crate::store::test_support::{Journalled, Waited, contents, new, plant};
use crate::store::*;

/// The rules of a version-5 file as its header says them (salt, nonce
/// and mark), the header checked.
fn rules_of(file: &[u8]) -> Rules {
    match oracle::rules(file) {
        Ok(Some(rules @ Rules::V5(..))) => rules,
        other => panic!("not a whole version-5 header: {other:?}"),
    }
}

/// The salt in a version-5 file's header.
fn salt_of(file: &[u8]) -> [u8; 8] {
    match rules_of(file) {
        Rules::V5(salt, ..) => salt,
        _ => unreachable!("rules_of answers version 5"),
    }
}

/// The header's mark of a version-5 file.
fn mark_of(file: &[u8]) -> u64 {
    match rules_of(file) {
        Rules::V5(_, _, mark) => mark,
        _ => unreachable!("rules_of answers version 5"),
    }
}

/// The journal at `path` without the zeros written ahead of its records
/// (checked to be zeros).
fn records_of(path: &std::path::Path) -> Vec<u8> {
    let mut bytes = fs::read(path).unwrap();
    let end = scan(&bytes, |_| {}).unwrap().valid_len as usize;
    assert!(
        bytes[end..].iter().all(|&b| b == 0),
        "zeros after the records"
    );
    bytes.truncate(end);
    bytes
}

fn put(id: i64, name: &str, tag: Option<&str>) -> oracle::Change {
    oracle::Change::put(id, name, tag)
}

#[test]
fn the_outsiders_crcs_match_the_standard_check_values() {
    assert_eq!(oracle::crc32c(b"123456789"), 0xE306_9283);
    assert_eq!(oracle::crc64(b"123456789"), 0x995D_C9BB_DF19_39FA);
}

/// The bug: a name holding a whole, valid record, torn in the middle by a
/// crash or a full disk, made recovery find that record after the tear,
/// call the tail damage in the middle and refuse to start (for good: every
/// restart found the same). Planted with the version-1 rules, and with the
/// version-2 and -3 rules under a guessed salt (zero), it must read as
/// what it is: a torn tail.
#[test]
fn a_record_planted_in_a_name_cannot_make_a_torn_tail_refuse_start_up() {
    const BEFORE: &str = "<";
    const AFTER: &str = "> and some more of the name";
    for rules in [
        "version 1",
        "version 2 under a guessed salt",
        "version 3 under a guessed salt",
        "version 4 under a guessed salt",
        "version 5 under a guessed salt",
    ] {
        let path = TempFile::new("planted");
        let (store, _) = path.open().unwrap();
        store.create(new(1, "fern")).unwrap();
        store.create(new(2, "moss")).unwrap();
        let start = records_of(&path.0).len();
        let record = match rules {
            "version 1" => planted(Rules::V1),
            "version 2 under a guessed salt" => planted(Rules::V2([0; 8])),
            "version 3 under a guessed salt" => planted(Rules::V3([0; 8])),
            "version 4 under a guessed salt" => planted(Rules::V4([0; 8])),
            _ => planted(Rules::V5([0; 8], 0, 0)),
        };
        let name = format!("{BEFORE}{record}{AFTER}");
        store.create(new(3, &name)).unwrap();
        drop(store);
        let bytes = records_of(&path.0);
        let planted_end = start
            + bytes[start..]
                .windows(record.len())
                .position(|w| w == record.as_bytes())
                .expect("the record is in the file as sent")
            + record.len();
        for cut in planted_end..bytes.len() {
            fs::write(&path.0, &bytes[..cut]).unwrap();
            let (store, recovery) = path
                .open()
                .unwrap_or_else(|e| panic!("{rules}, cut at {cut} of {}: {e}", bytes.len()));
            assert_eq!(
                (recovery.records, recovery.torn_bytes),
                (2, (cut - start) as u64),
                "{rules}, cut at {cut}"
            );
            assert_eq!(
                contents(&store),
                vec![(1, plant("fern", None)), (2, plant("moss", None))],
                "{rules}, cut at {cut}"
            );
            assert_eq!(fs::metadata(&path.0).unwrap().len(), start as u64);
        }
    }
}

#[test]
fn the_planting_encoders_write_records_the_server_reads() {
    let change = put(7, "fern", Some("green"));
    let files = [
        Rules::V1,
        Rules::V2([9; 8]),
        Rules::V3([9; 8]),
        Rules::V4([9; 8]),
        Rules::V5([9; 8], 1, 2),
    ]
    .map(|rules| [oracle::header(rules), record(rules, &change)].concat());
    for file in files {
        let mut seen = Vec::new();
        let scan = scan(&file, |change| seen.push(change.id())).unwrap();
        assert_eq!(
            (scan.records, scan.valid_len, seen),
            (1, file.len() as u64, vec![7])
        );
    }
}

/// The other way round: the oracle's decoder reads the server's file as
/// the changes made, in order, every record whole, under the file's salt.
#[test]
fn the_oracle_reads_the_records_the_server_writes() {
    let path = TempFile::new("read-back");
    let (store, _) = path.open().unwrap();
    store.create(new(1, "fern")).unwrap();
    store.replace(1, plant("fern", Some("green é"))).unwrap();
    store.create(new(2, "moss")).unwrap();
    store.delete(2).unwrap();
    drop(store);
    let bytes = records_of(&path.0);
    // Each change took the next number, the delete too.
    let written = vec![
        oracle::Change::versioned(1, "fern", None, 1),
        oracle::Change::versioned(1, "fern", Some("green é"), 2),
        oracle::Change::versioned(2, "moss", None, 3),
        oracle::Change::Delete(2),
    ];
    assert_eq!(mark_of(&bytes), 0, "a new file's mark");
    assert_eq!(
        oracle::reference(&bytes),
        oracle::Outcome::Read(Some(rules_of(&bytes)), written, bytes.len())
    );
}

fn history() -> Vec<oracle::Change> {
    vec![
        put(1, "fern", None),
        put(2, "moss", Some("green")),
        put(3, "ivy", None),
        put(2, "moss", Some("wet é")),
        oracle::Change::Delete(1),
    ]
}

#[test]
fn a_version_1_journal_is_replayed_then_converted_to_version_5() {
    let path = TempFile::new("v1");
    let history = history();
    fs::write(&path.0, oracle::journal(Rules::V1, &history)).unwrap();
    let expected = vec![(2, plant("moss", Some("wet é"))), (3, plant("ivy", None))];
    {
        let (store, recovery) = path.open().unwrap();
        assert_eq!((recovery.records, recovery.torn_bytes), (5, 0));
        assert_eq!(contents(&store), expected);
        // Converted before the first append: every record as it was, in
        // the same order, each put numbered, under the new file's salt,
        // its mark the last put's number.
        let bytes = records_of(&path.0);
        let history = numbered(&history);
        assert_eq!(bytes, oracle::journal(rules_of(&bytes), &history));
        assert_eq!(mark_of(&bytes), 4);
        store.create(new(4, "after")).unwrap();
    }
    let (store, recovery) = path.open().unwrap();
    assert_eq!((recovery.records, recovery.torn_bytes), (6, 0));
    let mut expected = expected;
    expected.push((4, plant("after", None)));
    assert_eq!(contents(&store), expected);
}

/// Versions 2 and 3 are read by their own rules, a torn tail cut, then
/// converted before the first append, as version 1 is.
#[test]
fn version_2_and_3_journals_are_replayed_then_converted_to_version_5() {
    let history = history();
    for old in [Rules::V2([5; 8]), Rules::V3([5; 8])] {
        version_2_or_3_converted(old, &history);
    }
}

fn version_2_or_3_converted(old: Rules, history: &[oracle::Change]) {
    let whole = oracle::journal(old, history);
    let last = oracle::journal(old, &history[..4]).len();
    for cut in [whole.len(), last + 1, whole.len() - 1] {
        let path = TempFile::new("v2");
        fs::write(&path.0, &whole[..cut]).unwrap();
        let (records, torn) = if cut == whole.len() {
            (5, 0)
        } else {
            (4, (cut - last) as u64)
        };
        {
            let (store, recovery) = path.open().unwrap();
            assert_eq!(
                (recovery.records, recovery.torn_bytes),
                (records, torn),
                "{old:?}"
            );
            let bytes = records_of(&path.0);
            let salt = salt_of(&bytes);
            assert_ne!(salt, [5; 8], "a fresh salt");
            let history = numbered(&history[..records as usize]);
            assert_eq!(bytes, oracle::journal(rules_of(&bytes), &history));
            store.create(new(4, "after")).unwrap();
        }
        let (store, recovery) = path.open().unwrap();
        assert_eq!((recovery.records, recovery.torn_bytes), (records + 1, 0));
        assert_eq!(store.get(4), Some(plant("after", None)));
    }
}

#[test]
fn a_torn_version_1_tail_is_cut_by_the_conversion() {
    let history = history();
    let whole = oracle::journal(Rules::V1, &history);
    let last = oracle::journal(Rules::V1, &history[..4]).len();
    for cut in [last + 1, last + 8, whole.len() - 1] {
        let path = TempFile::new("v1-torn");
        fs::write(&path.0, &whole[..cut]).unwrap();
        let (store, recovery) = path.open().unwrap();
        assert_eq!(
            (recovery.records, recovery.torn_bytes),
            (4, (cut - last) as u64)
        );
        assert_eq!(store.get(1), Some(plant("fern", None)), "cut at {cut}");
        let bytes = records_of(&path.0);
        let history = numbered(&history[..4]);
        assert_eq!(bytes, oracle::journal(rules_of(&bytes), &history));
    }
}

#[test]
fn an_empty_version_1_journal_becomes_an_empty_version_5_one() {
    let path = TempFile::new("v1-empty");
    fs::write(&path.0, b"PLANTSJ1").unwrap();
    let (store, recovery) = path.open().unwrap();
    assert_eq!(
        (recovery.records, recovery.torn_bytes, store.len()),
        (0, 0, 0)
    );
    let bytes = records_of(&path.0);
    assert_eq!(bytes, oracle::journal(rules_of(&bytes), &[]));
}

#[test]
fn a_version_1_journal_damaged_in_the_middle_is_refused_and_left_unconverted() {
    let mut bytes = oracle::journal(Rules::V1, &history());
    bytes[8 + 12] ^= 1; // inside the first record's payload
    let path = TempFile::new("v1-damaged");
    fs::write(&path.0, &bytes).unwrap();
    assert!(matches!(
        path.open(),
        Err(OpenError::Damaged {
            record: 1,
            offset: 8,
            ..
        })
    ));
    assert_eq!(fs::read(&path.0).unwrap(), bytes);
}

#[test]
fn a_conversion_interrupted_before_its_rename_is_done_again() {
    let path = TempFile::new("v1-again");
    let history = history();
    fs::write(&path.0, oracle::journal(Rules::V1, &history)).unwrap();
    // What a crash while writing the converted file leaves next to it.
    let half = oracle::journal(Rules::V3([3; 8]), &history);
    fs::write(journal::compact_path(&path.0), &half[..half.len() / 2]).unwrap();
    let (store, recovery) = path.open().unwrap();
    assert_eq!(recovery.records, 5);
    assert_eq!(store.len(), 2);
    assert!(!journal::compact_path(&path.0).exists());
    let bytes = records_of(&path.0);
    let history = numbered(&history);
    assert_eq!(bytes, oracle::journal(rules_of(&bytes), &history));
}

#[test]
fn each_new_file_gets_its_own_salt() {
    let (one, two) = (TempFile::new("salt-1"), TempFile::new("salt-2"));
    drop(one.open().unwrap());
    drop(two.open().unwrap());
    let salts = [one, two].map(|path| salt_of(&fs::read(&path.0).unwrap()));
    assert_ne!(salts[0], salts[1]);
}

#[test]
fn a_compaction_writes_its_file_under_a_fresh_salt() {
    let path = TempFile::new("salt-compact");
    let (store, _) = path.open().unwrap();
    for id in 0..50 {
        store.create(new(id, "plant")).unwrap();
    }
    let before = salt_of(&fs::read(&path.0).unwrap());
    assert!(store.shared.compact().unwrap());
    store.create(new(50, "after")).unwrap();
    let bytes = fs::read(&path.0).unwrap();
    assert_ne!(salt_of(&bytes), before);
    drop(store);
    let (store, _) = path.open().unwrap();
    assert_eq!(store.len(), 51);
}

/// A changed salt fails every record's check: without a check of its own
/// the header would read as whole and every record as a torn tail, and
/// start-up would cut the whole journal.
#[test]
fn a_damaged_salt_refuses_start_up_and_leaves_the_file_untouched() {
    let path = TempFile::new("salt-damaged");
    {
        let (store, _) = path.open().unwrap();
        store.create(new(1, "fern")).unwrap();
    }
    let mut bytes = fs::read(&path.0).unwrap();
    bytes[12] ^= 0x40; // a byte of the salt
    fs::write(&path.0, &bytes).unwrap();
    let err = path.open().err().expect("start-up refused");
    assert!(
        matches!(err, OpenError::DamagedHeader(_)),
        "{err}: expected a damaged header"
    );
    let text = err.to_string();
    assert!(text.contains(&path.0.display().to_string()), "{text}");
    assert!(text.contains("header"), "{text}");
    assert_eq!(fs::read(&path.0).unwrap(), bytes);
}

/// A header that fails its check with nothing after it can only be a new
/// file torn while its header was written: no record was ever behind it.
#[test]
fn a_header_alone_that_fails_its_check_starts_a_fresh_journal() {
    let path = TempFile::new("header-torn");
    let mut header = [&b"PLANTSJ2"[..], &[0; 16]].concat();
    fs::write(&path.0, &header).unwrap();
    let (store, recovery) = path.open().unwrap();
    assert_eq!((recovery.records, store.len()), (0, 0));
    store.create(new(1, "fern")).unwrap();
    drop(store);
    header = fs::read(&path.0).unwrap();
    assert_ne!(salt_of(&header), [0; 8], "a fresh, whole header");
    let (store, _) = path.open().unwrap();
    assert_eq!(store.len(), 1);
}
