//! The journal's format as an outsider writes it: records planted in a
//! plant's name by a client, and journals in the version-1 and -2 formats. The
//! encoders here follow the documented layout and share no code with the
//! server's, so a test fails if the two drift apart.

use std::fs;

use super::durability_tests::{TempPath, contents, new, plant};
use super::*;

/// A bitwise reflected CRC with all-ones start and final inversion:
/// CRC-32C for `(0x82F6_3B78, 32)`, CRC-64/XZ for
/// `(0xC96C_5795_D787_0F42, 64)`.
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

fn crc32c(bytes: &[u8]) -> u32 {
    crc(0x82F6_3B78, 32, bytes) as u32
}

fn crc64(bytes: &[u8]) -> u64 {
    crc(0xC96C_5795_D787_0F42, 64, bytes)
}

/// The payload of a change, the same in both versions.
fn payload(change: &Change<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    let text = |out: &mut Vec<u8>, text: Option<&str>| match text {
        Some(text) => {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
        None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
    };
    match *change {
        Change::Put { id, name, tag } => {
            out.push(1);
            out.extend_from_slice(&id.to_le_bytes());
            text(&mut out, Some(name));
            text(&mut out, tag);
        }
        Change::Delete(id) => {
            out.push(2);
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    out
}

/// A version-1 record: `len:u32 crc:u32 payload`, the CRC-32C over `len`
/// and the payload.
fn v1_record(change: &Change<'_>) -> Vec<u8> {
    let payload = payload(change);
    let len = (payload.len() as u32).to_le_bytes();
    let crc = crc32c(&[&len[..], &payload].concat());
    [&len[..], &crc.to_le_bytes(), &payload].concat()
}

/// A version-2 record of a file salted with `salt`: `len:u32 check:u64
/// payload`, the CRC-64/XZ over the salt, `len` and the payload.
fn v2_record(change: &Change<'_>, salt: [u8; 8]) -> Vec<u8> {
    let payload = payload(change);
    let len = (payload.len() as u32).to_le_bytes();
    let check = crc64(&[&salt[..], &len, &payload].concat());
    [&len[..], &check.to_le_bytes(), &payload].concat()
}

/// A version-3 record of a file salted with `salt`: `len:u32
/// len_check:u32 check:u64 payload`, the CRC-32C over the salt and `len`,
/// the CRC-64/XZ over the salt, `len` and the payload.
fn v3_record(change: &Change<'_>, salt: [u8; 8]) -> Vec<u8> {
    let payload = payload(change);
    let len = (payload.len() as u32).to_le_bytes();
    let len_check = crc32c(&[&salt[..], &len].concat());
    let check = crc64(&[&salt[..], &len, &payload].concat());
    [
        &len[..],
        &len_check.to_le_bytes(),
        &check.to_le_bytes(),
        &payload,
    ]
    .concat()
}

fn v1_journal(changes: &[Change<'_>]) -> Vec<u8> {
    let mut file = b"PLANTSJ1".to_vec();
    for change in changes {
        file.extend(v1_record(change));
    }
    file
}

/// `magic`, the salt and the CRC-64/XZ of those 16 bytes.
fn salted_header(magic: &[u8], salt: [u8; 8]) -> Vec<u8> {
    let mut header = [magic, &salt].concat();
    let check = crc64(&header);
    header.extend_from_slice(&check.to_le_bytes());
    header
}

fn v2_header(salt: [u8; 8]) -> Vec<u8> {
    salted_header(b"PLANTSJ2", salt)
}

fn v2_journal(salt: [u8; 8], changes: &[Change<'_>]) -> Vec<u8> {
    let mut file = v2_header(salt);
    for change in changes {
        file.extend(v2_record(change, salt));
    }
    file
}

fn v3_journal(salt: [u8; 8], changes: &[Change<'_>]) -> Vec<u8> {
    let mut file = salted_header(b"PLANTSJ3", salt);
    for change in changes {
        file.extend(v3_record(change, salt));
    }
    file
}

/// The salt in a version-3 file's header.
fn salt_of(file: &[u8]) -> [u8; 8] {
    assert_eq!(&file[..8], b"PLANTSJ3", "a version-3 journal");
    let salt = file[8..16].try_into().unwrap();
    assert_eq!(
        &file[..24],
        salted_header(b"PLANTSJ3", salt),
        "the header's check"
    );
    salt
}

/// A record made by `make`, of a put whose name is chosen so that every
/// byte of the record is valid UTF-8: what a client can send inside a name.
fn planted(make: impl Fn(&Change<'_>) -> Vec<u8>) -> String {
    (0..)
        .find_map(|n| {
            let name = format!("planted {n}");
            let record = make(&Change::Put {
                id: 1,
                name: &name,
                tag: Some(""),
            });
            String::from_utf8(record).ok()
        })
        .expect("some name gives a record that is valid UTF-8")
}

fn put<'a>(id: i64, name: &'a str, tag: Option<&'a str>) -> Change<'a> {
    Change::Put { id, name, tag }
}

#[test]
fn the_outsiders_crcs_match_the_standard_check_values() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    assert_eq!(crc64(b"123456789"), 0x995D_C9BB_DF19_39FA);
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
    ] {
        let path = TempPath::new("planted");
        let (store, _) = path.open().unwrap();
        store.create(new(1, "fern")).unwrap();
        store.create(new(2, "moss")).unwrap();
        let start = fs::metadata(&path.0).unwrap().len() as usize;
        let record = match rules {
            "version 1" => planted(v1_record),
            "version 2 under a guessed salt" => planted(|change| v2_record(change, [0; 8])),
            _ => planted(|change| v3_record(change, [0; 8])),
        };
        let name = format!("{BEFORE}{record}{AFTER}");
        store.create(new(3, &name)).unwrap();
        drop(store);
        let bytes = fs::read(&path.0).unwrap();
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
    let v1 = [&b"PLANTSJ1"[..], &v1_record(&change)].concat();
    let v2 = [v2_header([9; 8]), v2_record(&change, [9; 8])].concat();
    let v3 = v3_journal([9; 8], &[change]);
    for file in [v1, v2, v3] {
        let mut seen = Vec::new();
        let scan = scan(&file, |change| seen.push(change.id())).unwrap();
        assert_eq!(
            (scan.records, scan.valid_len, seen),
            (1, file.len() as u64, vec![7])
        );
    }
}

fn history() -> Vec<Change<'static>> {
    vec![
        put(1, "fern", None),
        put(2, "moss", Some("green")),
        put(3, "ivy", None),
        put(2, "moss", Some("wet é")),
        Change::Delete(1),
    ]
}

#[test]
fn a_version_1_journal_is_replayed_then_converted_to_version_3() {
    let path = TempPath::new("v1");
    let history = history();
    fs::write(&path.0, v1_journal(&history)).unwrap();
    let expected = vec![(2, plant("moss", Some("wet é"))), (3, plant("ivy", None))];
    {
        let (store, recovery) = path.open().unwrap();
        assert_eq!((recovery.records, recovery.torn_bytes), (5, 0));
        assert_eq!(contents(&store), expected);
        // Converted before the first append: every record as it was, in
        // the same order, under the new file's salt.
        let bytes = fs::read(&path.0).unwrap();
        assert_eq!(bytes, v3_journal(salt_of(&bytes), &history));
        store.create(new(4, "after")).unwrap();
    }
    let (store, recovery) = path.open().unwrap();
    assert_eq!((recovery.records, recovery.torn_bytes), (6, 0));
    let mut expected = expected;
    expected.push((4, plant("after", None)));
    assert_eq!(contents(&store), expected);
}

/// Version 2 is read by its own rules, a torn tail cut, then converted
/// before the first append, as version 1 is.
#[test]
fn a_version_2_journal_is_replayed_then_converted_to_version_3() {
    let history = history();
    let whole = v2_journal([5; 8], &history);
    let last = v2_journal([5; 8], &history[..4]).len();
    for cut in [whole.len(), last + 1, whole.len() - 1] {
        let path = TempPath::new("v2");
        fs::write(&path.0, &whole[..cut]).unwrap();
        let (records, torn) = if cut == whole.len() {
            (5, 0)
        } else {
            (4, (cut - last) as u64)
        };
        {
            let (store, recovery) = path.open().unwrap();
            assert_eq!((recovery.records, recovery.torn_bytes), (records, torn));
            let bytes = fs::read(&path.0).unwrap();
            let salt = salt_of(&bytes);
            assert_ne!(salt, [5; 8], "a fresh salt");
            assert_eq!(bytes, v3_journal(salt, &history[..records as usize]));
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
    let whole = v1_journal(&history);
    let last = v1_journal(&history[..4]).len();
    for cut in [last + 1, last + 8, whole.len() - 1] {
        let path = TempPath::new("v1-torn");
        fs::write(&path.0, &whole[..cut]).unwrap();
        let (store, recovery) = path.open().unwrap();
        assert_eq!(
            (recovery.records, recovery.torn_bytes),
            (4, (cut - last) as u64)
        );
        assert_eq!(store.get(1), Some(plant("fern", None)), "cut at {cut}");
        let bytes = fs::read(&path.0).unwrap();
        assert_eq!(bytes, v3_journal(salt_of(&bytes), &history[..4]));
    }
}

#[test]
fn an_empty_version_1_journal_becomes_an_empty_version_3_one() {
    let path = TempPath::new("v1-empty");
    fs::write(&path.0, b"PLANTSJ1").unwrap();
    let (store, recovery) = path.open().unwrap();
    assert_eq!(
        (recovery.records, recovery.torn_bytes, store.len()),
        (0, 0, 0)
    );
    let bytes = fs::read(&path.0).unwrap();
    assert_eq!(bytes, v3_journal(salt_of(&bytes), &[]));
}

#[test]
fn a_version_1_journal_damaged_in_the_middle_is_refused_and_left_unconverted() {
    let mut bytes = v1_journal(&history());
    bytes[8 + 12] ^= 1; // inside the first record's payload
    let path = TempPath::new("v1-damaged");
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
    let path = TempPath::new("v1-again");
    let history = history();
    fs::write(&path.0, v1_journal(&history)).unwrap();
    // What a crash while writing the converted file leaves next to it.
    let half = v3_journal([3; 8], &history);
    fs::write(journal::compact_path(&path.0), &half[..half.len() / 2]).unwrap();
    let (store, recovery) = path.open().unwrap();
    assert_eq!(recovery.records, 5);
    assert_eq!(store.len(), 2);
    assert!(!journal::compact_path(&path.0).exists());
    let bytes = fs::read(&path.0).unwrap();
    assert_eq!(bytes, v3_journal(salt_of(&bytes), &history));
}

#[test]
fn each_new_file_gets_its_own_salt() {
    let (one, two) = (TempPath::new("salt-1"), TempPath::new("salt-2"));
    drop(one.open().unwrap());
    drop(two.open().unwrap());
    let salts = [one, two].map(|path| salt_of(&fs::read(&path.0).unwrap()));
    assert_ne!(salts[0], salts[1]);
}

#[test]
fn a_compaction_writes_its_file_under_a_fresh_salt() {
    let path = TempPath::new("salt-compact");
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
    let path = TempPath::new("salt-damaged");
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
    let path = TempPath::new("header-torn");
    let mut header = [&b"PLANTSJ2"[..], &[0; 16]].concat();
    fs::write(&path.0, &header).unwrap();
    let (store, recovery) = path.open().unwrap();
    assert_eq!((recovery.records, store.len()), (0, 0));
    store.create(new(1, "fern")).unwrap();
    drop(store);
    header = fs::read(&path.0).unwrap();
    assert_ne!(&header[8..24], &[0; 16]);
    let (store, _) = path.open().unwrap();
    assert_eq!(store.len(), 1);
}
