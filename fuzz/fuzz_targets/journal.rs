//! Journal recovery fed arbitrary files, checked against a decoder written
//! here from the documented formats:
//!
//! - version 3: `PLANTSJ3`, an 8-byte salt and a CRC-64/XZ of those 16
//!   bytes as a u64; then `len:u32 lcheck:u32 check:u64 payload` records,
//!   lcheck a CRC-32C over the salt and `len`, the check a CRC-64/XZ over
//!   the salt, `len` and the payload;
//! - version 2: the same with `PLANTSJ2` and no lcheck; read, then
//!   converted to version 3;
//! - version 1: `PLANTSJ1`, then `len:u32 crc:u32 payload` records,
//!   CRC-32C over `len` and the payload; read, then converted to version 3.
//!
//! (A length over the format's maximum, 16 MiB and 17 bytes, is not a
//! record either; no input here is that long, so the reference leaves it
//! out.)
//!
//! Two modes, chosen by the first byte:
//!
//! - Arbitrary bytes as the file. `scan` must agree with the reference
//!   decoder in everything: the version, the whole records at the start
//!   and the map they replay to, where a torn tail starts (it holds no
//!   whole record at any offset), or the refusal (a damaged header, or a
//!   bad record with a whole one somewhere after it). An accepted version-1
//!   or -2 file, converted by the server, must be exactly the reference's
//!   version-3 image of the same records, and read back the same.
//! - A journal written here, of either version, from a list of changes,
//!   then cut short or with one byte changed. In a version-2 or -3 journal
//!   the last put's name may hold planted records, whole and valid UTF-8,
//!   by the version-1 rules and by the version-2 and -3 rules under a wrong
//!   salt: what a client can send. The server's own writer must produce the same
//!   bytes as the reference. Recovery must yield exactly the changes
//!   written whole before the damage (never a record that was not written
//!   whole, never a planted one), and refuse only when the damage has real
//!   records after it or hits the header.

#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use plantstore::store::{self, Damage, Scan, Version};

const MAGIC_V1: &[u8] = b"PLANTSJ1";
const MAGIC_V2: &[u8] = b"PLANTSJ2";
const MAGIC_V3: &[u8] = b"PLANTSJ3";
/// Magic, salt and the header's own check.
const HEADER_V2: usize = 24;
const NO_TAG: u32 = u32::MAX;
/// The salt the server converts version-1 input under, here.
const CONVERSION_SALT: [u8; 8] = *b"convert!";

type Plants = BTreeMap<i64, (String, Option<String>)>;

#[derive(Debug, Clone, PartialEq)]
enum Change {
    Put(i64, String, Option<String>),
    Delete(i64),
}

/// The rules a file's records follow.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rules {
    V1,
    V2([u8; 8]),
    V3([u8; 8]),
}

/// What recovery of a file must come to.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Read: the version (`None` for a file shorter than a whole header),
    /// the whole records, where they end.
    Read(Option<Rules>, Vec<Change>, usize),
    NotAJournal,
    Header,
    Damaged {
        record: u64,
        offset: usize,
    },
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        arbitrary_file(rest);
    } else {
        damaged_journal(rest);
    }
});

fn arbitrary_file(file: &[u8]) {
    let expected = reference(file);
    let (found, plants) = recover(file);
    assert_eq!(found, expected, "the server and the reference disagree");
    if let Outcome::Read(_, changes, _) = &found {
        assert_eq!(plants, replay(changes));
    }
    converted(file, &found);
}

/// If `file` read as a version-1 or -2 journal: the server's conversion
/// of what was read is the reference's version-3 image of the same
/// records, and reads back the same.
fn converted(file: &[u8], found: &Outcome) {
    let Outcome::Read(Some(Rules::V1 | Rules::V2(_)), changes, end) = found else {
        return;
    };
    let image = store::convert(&file[..*end], &CONVERSION_SALT);
    let mut expected = header(MAGIC_V3, CONVERSION_SALT);
    for change in changes {
        v3_record(&mut expected, change, CONVERSION_SALT);
    }
    assert_eq!(
        image, expected,
        "the conversion is not the documented image"
    );
    let (read, _) = recover(&image);
    let whole = Outcome::Read(
        Some(Rules::V3(CONVERSION_SALT)),
        changes.clone(),
        image.len(),
    );
    assert_eq!(read, whole);
}

fn damaged_journal(input: &[u8]) {
    let Some((&[flags], rest)) = input.split_first_chunk::<1>() else {
        return;
    };
    let Some((salt, rest)) = rest.split_first_chunk::<8>() else {
        return;
    };
    let Some((guess, rest)) = rest.split_first_chunk::<8>() else {
        return;
    };
    let Some((damage, ops)) = rest.split_first_chunk::<3>() else {
        return;
    };
    let rules = match flags & 5 {
        1 | 5 => Rules::V1,
        4 => Rules::V2(*salt),
        _ => Rules::V3(*salt),
    };
    let mut changes = changes(ops);
    if let (Rules::V2(salt) | Rules::V3(salt), true) = (rules, flags & 2 == 2) {
        plant(&mut changes, salt, *guess);
    }
    let (mut file, ends) = journal(rules, &changes);
    if let Rules::V3(salt) = rules {
        assert_eq!(server_image(salt, &changes), file, "the server's writer");
    }
    let start = header_len(rules);
    let at = usize::from(u16::from_le_bytes([damage[1], damage[2]])) % (file.len() + 1);
    // How many records lie wholly before the damage.
    let before = ends.iter().filter(|&&end| end <= at).count();
    if damage[0] & 1 == 0 {
        file.truncate(at);
        let (found, plants) = recover(&file);
        assert_eq!(
            found,
            reference(&file),
            "the server and the reference disagree"
        );
        assert!(
            matches!(&found, Outcome::Read(_, read, _) if read[..] == changes[..before]),
            "a cut journal read as {found:?}"
        );
        assert_eq!(plants, replay(&changes[..before]));
        converted(&file, &found);
        return;
    }
    if at == file.len() {
        return;
    }
    file[at] ^= damage[0] | 1;
    let (found, plants) = recover(&file);
    assert_eq!(
        found,
        reference(&file),
        "the server and the reference disagree"
    );
    if at < MAGIC_V1.len() {
        return; // the magic changed: another version, or no journal
    }
    if at < start {
        // The salt or the header's check: no record can be checked.
        if file.len() == start {
            assert_eq!(found, Outcome::Read(None, Vec::new(), 0));
        } else {
            assert_eq!(found, Outcome::Header);
        }
        return;
    }
    match found {
        // Damage in the last record reads as a torn tail.
        Outcome::Read(_, read, _) => {
            assert_eq!(
                before + 1,
                changes.len(),
                "damage before the last record accepted"
            );
            assert_eq!(read, changes[..before]);
            assert_eq!(plants, replay(&changes[..before]));
        }
        Outcome::Damaged { record, offset } => {
            assert_eq!(record, before as u64 + 1);
            assert_eq!(offset, if before == 0 { start } else { ends[before - 1] });
            assert!(before + 1 < changes.len(), "a torn last record refused");
        }
        other => panic!("the header was intact: {other:?}"),
    }
}

/// Changes from fuzz bytes: small ids so that puts replace and deletes hit.
fn changes(mut ops: &[u8]) -> Vec<Change> {
    let mut out = Vec::new();
    while let Some((&op, rest)) = ops.split_first() {
        let id = i64::from(op >> 4) - 4;
        let len = usize::from(op & 7).min(rest.len());
        let (text, rest) = rest.split_at(len);
        ops = rest;
        let text = String::from_utf8_lossy(text).into_owned();
        out.push(match op & 0b1000 {
            0 if op & 1 == 0 => Change::Delete(id),
            0 => Change::Put(id, text, None),
            _ => Change::Put(id, text.clone(), Some(text.chars().rev().collect())),
        });
    }
    out
}

/// Puts records a client could send into the last change's name (a put
/// is added if the last change is not one): one by the version-1 rules
/// and one each by the version-2 and -3 rules under `guess`, made wrong if
/// it happens to be `salt`.
fn plant(changes: &mut Vec<Change>, salt: [u8; 8], mut guess: [u8; 8]) {
    if guess == salt {
        guess[0] ^= 1;
    }
    let v1 = utf8_record(|change, out| v1_record(out, change));
    let v2 = utf8_record(|change, out| v2_record(out, change, guess));
    let v3 = utf8_record(|change, out| v3_record(out, change, guess));
    let (Some(v1), Some(v2), Some(v3)) = (v1, v2, v3) else {
        return;
    };
    if !matches!(changes.last(), Some(Change::Put(..))) {
        changes.push(Change::Put(-4, String::new(), None));
    }
    if let Some(Change::Put(_, name, _)) = changes.last_mut() {
        *name = format!("{name}{v1}|{v2}|{v3}.");
    }
}

/// A record `make` writes, of a put whose name is chosen so that the
/// record is valid UTF-8.
fn utf8_record(make: impl Fn(&Change, &mut Vec<u8>)) -> Option<String> {
    (0..4096).find_map(|n| {
        let mut out = Vec::new();
        make(
            &Change::Put(3, format!("p{n}"), Some(String::new())),
            &mut out,
        );
        String::from_utf8(out).ok()
    })
}

/// A journal of `changes` under `rules`, and where each record ends.
fn journal(rules: Rules, changes: &[Change]) -> (Vec<u8>, Vec<usize>) {
    let mut file = match rules {
        Rules::V1 => MAGIC_V1.to_vec(),
        Rules::V2(salt) => header(MAGIC_V2, salt),
        Rules::V3(salt) => header(MAGIC_V3, salt),
    };
    let mut ends = Vec::new();
    for change in changes {
        match rules {
            Rules::V1 => v1_record(&mut file, change),
            Rules::V2(salt) => v2_record(&mut file, change, salt),
            Rules::V3(salt) => v3_record(&mut file, change, salt),
        }
        ends.push(file.len());
    }
    (file, ends)
}

/// The same journal as the server writes it.
fn server_image(salt: [u8; 8], changes: &[Change]) -> Vec<u8> {
    let mut image = store::header(&salt).to_vec();
    for change in changes {
        let change = match change {
            Change::Put(id, name, tag) => store::Change::Put {
                id: *id,
                name,
                tag: tag.as_deref(),
            },
            Change::Delete(id) => store::Change::Delete(*id),
        };
        store::encode(&mut image, &change);
    }
    store::seal(&mut image[store::HEADER..], &salt);
    image
}

fn header(magic: &[u8], salt: [u8; 8]) -> Vec<u8> {
    let mut header = [magic, &salt].concat();
    let check = crc64(&header);
    header.extend_from_slice(&check.to_le_bytes());
    header
}

fn header_len(rules: Rules) -> usize {
    match rules {
        Rules::V1 => MAGIC_V1.len(),
        Rules::V2(_) | Rules::V3(_) => HEADER_V2,
    }
}

fn payload(change: &Change) -> Vec<u8> {
    let mut payload = Vec::new();
    match change {
        Change::Put(id, name, tag) => {
            payload.push(1);
            payload.extend_from_slice(&id.to_le_bytes());
            payload.extend_from_slice(&(name.len() as u32).to_le_bytes());
            payload.extend_from_slice(name.as_bytes());
            match tag {
                Some(tag) => {
                    payload.extend_from_slice(&(tag.len() as u32).to_le_bytes());
                    payload.extend_from_slice(tag.as_bytes());
                }
                None => payload.extend_from_slice(&NO_TAG.to_le_bytes()),
            }
        }
        Change::Delete(id) => {
            payload.push(2);
            payload.extend_from_slice(&id.to_le_bytes());
        }
    }
    payload
}

fn v1_record(file: &mut Vec<u8>, change: &Change) {
    let payload = payload(change);
    let len = (payload.len() as u32).to_le_bytes();
    file.extend_from_slice(&len);
    file.extend_from_slice(&crc32c(&[&len[..], &payload].concat()).to_le_bytes());
    file.extend_from_slice(&payload);
}

fn v2_record(file: &mut Vec<u8>, change: &Change, salt: [u8; 8]) {
    let payload = payload(change);
    let len = (payload.len() as u32).to_le_bytes();
    file.extend_from_slice(&len);
    file.extend_from_slice(&crc64(&[&salt[..], &len, &payload].concat()).to_le_bytes());
    file.extend_from_slice(&payload);
}

fn v3_record(file: &mut Vec<u8>, change: &Change, salt: [u8; 8]) {
    let payload = payload(change);
    let len = (payload.len() as u32).to_le_bytes();
    file.extend_from_slice(&len);
    file.extend_from_slice(&crc32c(&[&salt[..], &len].concat()).to_le_bytes());
    file.extend_from_slice(&crc64(&[&salt[..], &len, &payload].concat()).to_le_bytes());
    file.extend_from_slice(&payload);
}

/// The reference's reading of a whole file.
fn reference(file: &[u8]) -> Outcome {
    let rules = match rules(file) {
        Ok(Some(rules)) => rules,
        Ok(None) => return Outcome::Read(None, Vec::new(), 0),
        Err(outcome) => return outcome,
    };
    let (changes, end) = whole_records(file, header_len(rules), rules);
    if (end + 1..file.len()).any(|from| record_at(file, from, rules).is_some()) {
        return Outcome::Damaged {
            record: changes.len() as u64 + 1,
            offset: end,
        };
    }
    Outcome::Read(Some(rules), changes, end)
}

/// The rules from the header: `None` while no whole header is there (or
/// a version-2 or -3 header fails its check with nothing after it).
fn rules(file: &[u8]) -> Result<Option<Rules>, Outcome> {
    if file.starts_with(MAGIC_V1) {
        return Ok(Some(Rules::V1));
    }
    if let Some(magic) = [MAGIC_V2, MAGIC_V3]
        .into_iter()
        .find(|m| file.starts_with(m))
    {
        let Some(head) = file.get(..HEADER_V2) else {
            return Ok(None);
        };
        let salt: [u8; 8] = head[8..16].try_into().unwrap();
        if header(magic, salt) == head {
            return Ok(Some(if magic == MAGIC_V2 {
                Rules::V2(salt)
            } else {
                Rules::V3(salt)
            }));
        }
        return if file.len() == HEADER_V2 {
            Ok(None)
        } else {
            Err(Outcome::Header)
        };
    }
    if [MAGIC_V1, MAGIC_V2, MAGIC_V3]
        .iter()
        .any(|magic| magic.starts_with(file))
    {
        return Ok(None);
    }
    Err(Outcome::NotAJournal)
}

/// The whole records from `at` on, and where the first non-record starts.
fn whole_records(file: &[u8], mut at: usize, rules: Rules) -> (Vec<Change>, usize) {
    let mut changes = Vec::new();
    while let Some((change, size)) = record_at(file, at, rules) {
        changes.push(change);
        at += size;
    }
    (changes, at)
}

/// The reference decoder: a record at `at` that is whole, checks out
/// under `rules` and decodes, with its size.
fn record_at(file: &[u8], at: usize, rules: Rules) -> Option<(Change, usize)> {
    let bytes = file.get(at..)?;
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let framing: usize = match rules {
        Rules::V1 => 8,
        Rules::V2(_) => 12,
        Rules::V3(_) => 16,
    };
    let payload = bytes.get(framing..framing.checked_add(len)?)?;
    let covered = [&bytes[..4], payload].concat();
    let valid = match rules {
        Rules::V1 => crc32c(&covered).to_le_bytes() == bytes[4..8],
        Rules::V2(salt) => crc64(&[&salt[..], &covered].concat()).to_le_bytes() == bytes[4..12],
        Rules::V3(salt) => {
            crc32c(&[&salt[..], &bytes[..4]].concat()).to_le_bytes() == bytes[4..8]
                && crc64(&[&salt[..], &covered].concat()).to_le_bytes() == bytes[8..16]
        }
    };
    if !valid {
        return None;
    }
    let id = i64::from_le_bytes(payload.get(1..9)?.try_into().ok()?);
    let change = match payload[0] {
        2 if payload.len() == 9 => Change::Delete(id),
        1 => {
            let (name, rest) = text(&payload[9..])?;
            let (tag, rest) = text(rest)?;
            if !rest.is_empty() {
                return None;
            }
            Change::Put(id, name?, tag)
        }
        _ => return None,
    };
    Some((change, framing + len))
}

fn text(bytes: &[u8]) -> Option<(Option<String>, &[u8])> {
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    if len == NO_TAG {
        return Some((None, &bytes[4..]));
    }
    let text = bytes.get(4..4 + len as usize)?;
    Some((
        Some(String::from_utf8(text.to_vec()).ok()?),
        &bytes[4 + len as usize..],
    ))
}

fn replay(changes: &[Change]) -> Plants {
    let mut plants = Plants::new();
    for change in changes {
        match change {
            Change::Put(id, name, tag) => {
                plants.insert(*id, (name.clone(), tag.clone()));
            }
            Change::Delete(id) => {
                plants.remove(id);
            }
        }
    }
    plants
}

/// The server's recovery, as an `Outcome`, and the map it replayed.
fn recover(file: &[u8]) -> (Outcome, Plants) {
    let mut plants = Plants::new();
    let mut changes = Vec::new();
    let found = store::scan(file, |change| match change {
        store::Change::Put { id, name, tag } => {
            plants.insert(id, (name.to_owned(), tag.map(str::to_owned)));
            changes.push(Change::Put(id, name.to_owned(), tag.map(str::to_owned)));
        }
        store::Change::Delete(id) => {
            plants.remove(&id);
            changes.push(Change::Delete(id));
        }
    });
    let outcome = match found {
        Ok(Scan {
            version,
            records,
            valid_len,
            ..
        }) => {
            assert_eq!(records, changes.len() as u64);
            let rules = version.map(|version| match version {
                Version::V1 => Rules::V1,
                Version::V2(salt) => Rules::V2(salt),
                Version::V3(salt) => Rules::V3(salt),
            });
            Outcome::Read(rules, changes, valid_len as usize)
        }
        Err(Damage::NotAJournal) => Outcome::NotAJournal,
        Err(Damage::Header) => Outcome::Header,
        Err(Damage::Record { record, offset }) => Outcome::Damaged {
            record,
            offset: offset as usize,
        },
    };
    (outcome, plants)
}

/// CRC-32C, independent of the server's (see `crc`).
fn crc32c(bytes: &[u8]) -> u32 {
    static TABLE: OnceLock<[u64; 256]> = OnceLock::new();
    let table = TABLE.get_or_init(|| table(0x82F6_3B78));
    crc(table, u32::MAX.into(), bytes) as u32
}

/// CRC-64/XZ, independent of the server's (see `crc`).
fn crc64(bytes: &[u8]) -> u64 {
    static TABLE: OnceLock<[u64; 256]> = OnceLock::new();
    let table = TABLE.get_or_init(|| table(0xC96C_5795_D787_0F42));
    crc(table, u64::MAX, bytes)
}

/// A reflected CRC of width `mask`, all-ones start and final inversion,
/// by a table from `table`.
fn crc(table: &[u64; 256], mask: u64, bytes: &[u8]) -> u64 {
    let mut crc = mask;
    for &b in bytes {
        crc = table[((crc ^ u64::from(b)) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc & mask
}

/// The CRC of each byte value for the reflected polynomial `poly`, worked
/// out bit by bit.
fn table(poly: u64) -> [u64; 256] {
    let mut table = [0; 256];
    for (byte, entry) in table.iter_mut().enumerate() {
        let mut crc = byte as u64;
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ poly
            } else {
                crc >> 1
            };
        }
        *entry = crc;
    }
    table
}
