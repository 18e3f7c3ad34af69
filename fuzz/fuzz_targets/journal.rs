//! Journal recovery fed arbitrary files, checked against a decoder written
//! here from the documented format (`PLANTSJ1`, then `len:u32 crc:u32
//! payload` records, CRC-32C over len and payload).
//!
//! Two modes, chosen by the first byte:
//!
//! - Arbitrary bytes as the file. Whatever `scan` returns must agree with
//!   the reference decoder: the records it read are exactly the whole
//!   records at the start of the file and the map is their replay; a torn
//!   tail holds no whole record at any offset; a refusal points at a bad
//!   record with a whole record somewhere after it.
//! - A journal written here from a list of changes, then cut short or with
//!   one byte changed. Recovery must yield exactly the changes written
//!   whole before the damage (never a record that was not written whole),
//!   or refuse when the damage has whole records after it.

#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use plantstore::store::{self, Damage, Scan};

const MAGIC: &[u8] = b"PLANTSJ1";
const NO_TAG: u32 = u32::MAX;

type Plants = BTreeMap<i64, (String, Option<String>)>;

#[derive(Debug, Clone)]
enum Change {
    Put(i64, String, Option<String>),
    Delete(i64),
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
    match scan(file) {
        Ok((found, plants)) => {
            if file.len() < MAGIC.len() {
                assert!(MAGIC.starts_with(file));
                assert_eq!(found.records, 0);
                return;
            }
            assert_eq!(&file[..MAGIC.len()], MAGIC);
            let (changes, end) = whole_records(file, MAGIC.len());
            assert_eq!(
                found.valid_len, end,
                "scan stopped elsewhere than the reference"
            );
            assert_eq!(found.records, changes.len() as u64);
            assert_eq!(plants, replay(&changes));
            for from in end + 1..file.len() {
                assert!(
                    record_at(file, from).is_none(),
                    "a whole record after a torn tail"
                );
            }
        }
        Err(Damage::NotAJournal) => assert!(!file.starts_with(MAGIC) && !MAGIC.starts_with(file)),
        Err(Damage::Record { record, offset }) => {
            let (changes, end) = whole_records(file, MAGIC.len());
            assert_eq!(offset as usize, end);
            assert_eq!(record, changes.len() as u64 + 1);
            assert!((end + 1..file.len()).any(|from| record_at(file, from).is_some()));
        }
    }
}

fn damaged_journal(input: &[u8]) {
    let Some((damage, ops)) = input.split_first_chunk::<3>() else {
        return;
    };
    let changes = changes(ops);
    let mut file = MAGIC.to_vec();
    let mut ends = Vec::new();
    for change in &changes {
        encode(&mut file, change);
        ends.push(file.len());
    }
    let at = usize::from(u16::from_le_bytes([damage[1], damage[2]])) % (file.len() + 1);
    // How many records lie wholly before the damage.
    let before = ends.iter().filter(|&&end| end <= at).count();
    if damage[0] & 1 == 0 {
        file.truncate(at);
        let (found, plants) = scan(&file).expect("a cut journal is recovered");
        assert_eq!(found.records, before as u64);
        assert_eq!(plants, replay(&changes[..before]));
        return;
    }
    if at == file.len() {
        return;
    }
    file[at] ^= damage[0] | 1;
    if at < MAGIC.len() {
        assert_eq!(scan(&file).err(), Some(Damage::NotAJournal));
        return;
    }
    match scan(&file) {
        // Damage in the last record reads as a torn tail.
        Ok((found, plants)) => {
            assert_eq!(
                before + 1,
                changes.len(),
                "damage before the last record accepted"
            );
            assert_eq!(found.records, before as u64);
            assert_eq!(plants, replay(&changes[..before]));
        }
        Err(Damage::Record { record, offset }) => {
            assert_eq!(record, before as u64 + 1);
            let start = if before == 0 {
                MAGIC.len()
            } else {
                ends[before - 1]
            };
            assert_eq!(offset as usize, start);
        }
        Err(Damage::NotAJournal) => panic!("the magic was intact"),
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

fn encode(file: &mut Vec<u8>, change: &Change) {
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
    let len = (payload.len() as u32).to_le_bytes();
    let mut covered = len.to_vec();
    covered.extend_from_slice(&payload);
    file.extend_from_slice(&len);
    file.extend_from_slice(&crc32c(&covered).to_le_bytes());
    file.extend_from_slice(&payload);
}

/// The whole records from `at` on, and where the first non-record starts.
fn whole_records(file: &[u8], mut at: usize) -> (Vec<Change>, usize) {
    let mut changes = Vec::new();
    while let Some((change, size)) = record_at(file, at) {
        changes.push(change);
        at += size;
    }
    (changes, at)
}

/// The reference decoder: a record at `at` that is whole, checks out and
/// decodes, with its size.
fn record_at(file: &[u8], at: usize) -> Option<(Change, usize)> {
    let bytes = file.get(at..)?;
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(bytes.get(4..8)?.try_into().ok()?);
    let payload = bytes.get(8..8usize.checked_add(len)?)?;
    if crc32c(
        &bytes[..4]
            .iter()
            .chain(payload)
            .copied()
            .collect::<Vec<_>>(),
    ) != crc
    {
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
    Some((change, 8 + len))
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

/// The server's recovery, replaying into a map.
fn scan(file: &[u8]) -> Result<(Scan, Plants), Damage> {
    let mut plants = Plants::new();
    let found = store::scan(file, |change| match change {
        store::Change::Put { id, name, tag } => {
            plants.insert(id, (name.to_owned(), tag.map(str::to_owned)));
        }
        store::Change::Delete(id) => {
            plants.remove(&id);
        }
    })?;
    Ok((found, plants))
}

/// Bitwise CRC-32C, independent of the server's table-driven one.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
