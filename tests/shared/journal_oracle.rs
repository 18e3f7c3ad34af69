//! The journal's format as an outsider writes and reads it: CRC-32C and
//! CRC-64/XZ, encoders of version-1 to -5 files and a reference
//! decoder, sharing no code with the server's, so a test fails if the
//! two drift apart.
//!
//! The one oracle of the unit tests (`src/store/journal/tests/`), the
//! integration tests (`tests/integration/storage/`) and the fuzz target
//! (`fuzz/fuzz_targets/journal.rs`), each including this file with
//! `#[path]`: plain `std` code builds in all three as it is, where a crate
//! of its own would need a place in both workspaces (the fuzz crate is a
//! workspace of its own, on nightly) and in the server's manifest.
//!
//! Written from the format as docs/storage.md ("The journal format")
//! specifies it, the one place it is written down. (A length over the
//! format's maximum, 16 MiB and 25 bytes, is not a record either; no test
//! writes one that long, so the decoder leaves it out.)

// Each includer uses a part of it.
#![allow(dead_code)]

use std::sync::OnceLock;

pub const MAGIC_V1: &[u8] = b"PLANTSJ1";
pub const MAGIC_V2: &[u8] = b"PLANTSJ2";
pub const MAGIC_V3: &[u8] = b"PLANTSJ3";
pub const MAGIC_V4: &[u8] = b"PLANTSJ4";
pub const MAGIC_V5: &[u8] = b"PLANTSJ5";
/// Magic, salt and the header's own check (versions 2 to 4).
pub const SALTED_HEADER: usize = 24;
/// Magic, salt, nonce, mark and the header's own check (version 5).
pub const HEADER_V5: usize = 40;
const NO_TAG: u32 = u32::MAX;

/// A change as a record holds it: a put's id, name, tag and version (a
/// version-1 to -4 record holds none: the reader numbers its puts 1, 2,
/// ... in file order, and the writer of those versions leaves it out).
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Put(i64, String, Option<String>, u64),
    Delete(i64),
}

impl Change {
    /// A put of version 0 (for a file of version 1 to 4, before it is
    /// read: see [`numbered`]).
    pub fn put(id: i64, name: &str, tag: Option<&str>) -> Change {
        Change::versioned(id, name, tag, 0)
    }

    pub fn versioned(id: i64, name: &str, tag: Option<&str>, version: u64) -> Change {
        Change::Put(id, name.to_string(), tag.map(str::to_string), version)
    }
}

/// `changes` as a reader of a version-1 to -4 file gives them: each put
/// numbered with the count of puts up to it.
pub fn numbered(changes: &[Change]) -> Vec<Change> {
    let mut puts = 0;
    changes
        .iter()
        .map(|change| match change {
            Change::Put(id, name, tag, _) => {
                puts += 1;
                Change::Put(*id, name.clone(), tag.clone(), puts)
            }
            Change::Delete(id) => Change::Delete(*id),
        })
        .collect()
}

/// The store's high-water mark after reading `changes` from a file
/// whose header's mark is `mark`: the highest of it and of the puts'
/// versions.
pub fn high_water(mark: u64, changes: &[Change]) -> u64 {
    changes.iter().fold(mark, |high, change| match change {
        Change::Put(_, _, _, version) => high.max(*version),
        Change::Delete(_) => high,
    })
}

/// The rules a file's records follow: its version and its salt; in
/// version 5 also the header's nonce and mark.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rules {
    V1,
    V2([u8; 8]),
    V3([u8; 8]),
    V4([u8; 8]),
    V5([u8; 8], u64, u64),
}

/// What reading a whole file must come to.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// Read: the rules (`None` for a file shorter than a whole header, or
    /// a salted header alone that fails its check), the whole records,
    /// where they end.
    Read(Option<Rules>, Vec<Change>, usize),
    NotAJournal,
    /// A salted header that fails its check, with bytes after it.
    Header,
    Damaged {
        record: u64,
        offset: usize,
    },
}

/// CRC-32C: reflected, polynomial `0x82F6_3B78`, all-ones start and final
/// inversion.
pub fn crc32c(bytes: &[u8]) -> u32 {
    static TABLE: OnceLock<[u64; 256]> = OnceLock::new();
    let table = TABLE.get_or_init(|| table(0x82F6_3B78));
    crc(table, u32::MAX.into(), bytes) as u32
}

/// CRC-64/XZ: reflected, polynomial `0xC96C_5795_D787_0F42`, all-ones
/// start and final inversion.
pub fn crc64(bytes: &[u8]) -> u64 {
    static TABLE: OnceLock<[u64; 256]> = OnceLock::new();
    let table = TABLE.get_or_init(|| table(0xC96C_5795_D787_0F42));
    crc(table, u64::MAX, bytes)
}

/// A reflected CRC of width `mask`, all-ones start and final inversion,
/// by a table from `table` (bit by bit is too slow for the fuzzer).
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

/// The payload of a change: in version 5 (`versioned`) a put's version
/// follows its id, the rest the same in every version.
pub fn payload(change: &Change, versioned: bool) -> Vec<u8> {
    let text = |out: &mut Vec<u8>, text: Option<&str>| match text {
        Some(text) => {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
        None => out.extend_from_slice(&NO_TAG.to_le_bytes()),
    };
    let mut out = Vec::new();
    match change {
        Change::Put(id, name, tag, version) => {
            out.push(1);
            out.extend_from_slice(&id.to_le_bytes());
            if versioned {
                out.extend_from_slice(&version.to_le_bytes());
            }
            text(&mut out, Some(name));
            text(&mut out, tag.as_deref());
        }
        Change::Delete(id) => {
            out.push(2);
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    out
}

/// One record of `change` under `rules` (in versions 4 and 5, of a batch
/// at offset 0: see [`record_in`]).
pub fn record(rules: Rules, change: &Change) -> Vec<u8> {
    record_in(rules, change, 0)
}

/// One record of `change` under `rules`, in versions 4 and 5 of the batch
/// that starts at byte `batch` of the file.
pub fn record_in(rules: Rules, change: &Change, batch: usize) -> Vec<u8> {
    let payload = payload(change, matches!(rules, Rules::V5(..)));
    let len = (payload.len() as u32).to_le_bytes();
    match rules {
        Rules::V1 => {
            let crc = crc32c(&[&len[..], &payload].concat());
            [&len[..], &crc.to_le_bytes(), &payload].concat()
        }
        Rules::V2(salt) => {
            let check = crc64(&[&salt[..], &len, &payload].concat());
            [&len[..], &check.to_le_bytes(), &payload].concat()
        }
        Rules::V3(salt) => {
            let lcheck = crc32c(&[&salt[..], &len].concat());
            let check = crc64(&[&salt[..], &len, &payload].concat());
            [
                &len[..],
                &lcheck.to_le_bytes(),
                &check.to_le_bytes(),
                &payload,
            ]
            .concat()
        }
        Rules::V4(salt) | Rules::V5(salt, ..) => {
            let batch = (batch as u64).to_le_bytes();
            let lcheck = crc32c(&[&salt[..], &len].concat());
            let check = crc64(&[&salt[..], &len, &batch, &payload].concat());
            [
                &len[..],
                &lcheck.to_le_bytes(),
                &check.to_le_bytes(),
                &batch,
                &payload,
            ]
            .concat()
        }
    }
}

/// `magic`, the salt and the CRC-64/XZ of those 16 bytes.
pub fn salted_header(magic: &[u8], salt: [u8; 8]) -> Vec<u8> {
    let mut header = [magic, &salt].concat();
    let check = crc64(&header);
    header.extend_from_slice(&check.to_le_bytes());
    header
}

/// The header of a file under `rules`.
pub fn header(rules: Rules) -> Vec<u8> {
    match rules {
        Rules::V1 => MAGIC_V1.to_vec(),
        Rules::V2(salt) => salted_header(MAGIC_V2, salt),
        Rules::V3(salt) => salted_header(MAGIC_V3, salt),
        Rules::V4(salt) => salted_header(MAGIC_V4, salt),
        Rules::V5(salt, nonce, mark) => {
            let mut header = [MAGIC_V5, &salt, &nonce.to_le_bytes(), &mark.to_le_bytes()].concat();
            let check = crc64(&header);
            header.extend_from_slice(&check.to_le_bytes());
            header
        }
    }
}

pub fn header_len(rules: Rules) -> usize {
    match rules {
        Rules::V1 => MAGIC_V1.len(),
        Rules::V2(_) | Rules::V3(_) | Rules::V4(_) => SALTED_HEADER,
        Rules::V5(..) => HEADER_V5,
    }
}

/// A whole file of `changes` under `rules`, in versions 4 and 5 each
/// record a batch of its own (as a conversion or a compaction writes
/// them).
pub fn journal(rules: Rules, changes: &[Change]) -> Vec<u8> {
    batched(rules, changes, changes.len())
}

/// As [`journal`], with the changes from index `last` on written as one
/// batch (in versions 4 and 5, each of their records says the batch
/// starts at the first of them).
pub fn batched(rules: Rules, changes: &[Change], last: usize) -> Vec<u8> {
    let mut file = header(rules);
    let mut batch = file.len();
    for (n, change) in changes.iter().enumerate() {
        if n <= last {
            batch = file.len();
        }
        file.extend(record_in(rules, change, batch));
    }
    file
}

/// A record by `rules` of a put whose name is chosen so that the whole
/// record is valid UTF-8: what a client can send inside a name.
pub fn planted(rules: Rules) -> String {
    planted_within(rules, 1 << 24).expect("some name gives a record that is valid UTF-8")
}

/// [`planted`], or `None` if none of the first `tries` names gives one
/// (about one in 2^14 does under the version-3 rules).
pub fn planted_within(rules: Rules, tries: u32) -> Option<String> {
    (0..tries).find_map(|n| {
        let change = Change::put(1, &format!("planted {n}"), Some(""));
        String::from_utf8(record(rules, &change)).ok()
    })
}

/// The reference's reading of a whole file (a version-1 to -4 file's
/// puts [`numbered`]).
pub fn reference(file: &[u8]) -> Outcome {
    let rules = match rules(file) {
        Ok(Some(rules)) => rules,
        Ok(None) => return Outcome::Read(None, Vec::new(), 0),
        Err(outcome) => return outcome,
    };
    let (mut changes, end) = whole_records(file, header_len(rules), rules);
    if !matches!(rules, Rules::V5(..)) {
        changes = numbered(&changes);
    }
    let counts = |from: usize| match rules {
        Rules::V4(_) | Rules::V5(..) => batch_at(file, from) > end as u64,
        _ => true,
    };
    if (end + 1..file.len()).any(|from| record_at(file, from, rules).is_some() && counts(from)) {
        return Outcome::Damaged {
            record: changes.len() as u64 + 1,
            offset: end,
        };
    }
    Outcome::Read(Some(rules), changes, end)
}

/// The batch field of the version-4 or -5 record at `at`.
fn batch_at(file: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(file[at + 16..at + 24].try_into().unwrap())
}

/// The rules from the header: `None` while no whole header is there (or
/// a version-2 to -5 header fails its check with nothing after it).
pub fn rules(file: &[u8]) -> Result<Option<Rules>, Outcome> {
    if file.starts_with(MAGIC_V1) {
        return Ok(Some(Rules::V1));
    }
    if file.starts_with(MAGIC_V5) {
        let Some(head) = file.get(..HEADER_V5) else {
            return Ok(None);
        };
        let field = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().unwrap());
        let salt: [u8; 8] = head[8..16].try_into().unwrap();
        let rules = Rules::V5(salt, field(16), field(24));
        if header(rules) == head {
            return Ok(Some(rules));
        }
        return if file.len() == HEADER_V5 {
            Ok(None)
        } else {
            Err(Outcome::Header)
        };
    }
    if let Some(magic) = [MAGIC_V2, MAGIC_V3, MAGIC_V4]
        .into_iter()
        .find(|m| file.starts_with(m))
    {
        let Some(head) = file.get(..SALTED_HEADER) else {
            return Ok(None);
        };
        let salt: [u8; 8] = head[8..16].try_into().unwrap();
        if salted_header(magic, salt) == head {
            return Ok(Some(match magic {
                MAGIC_V2 => Rules::V2(salt),
                MAGIC_V3 => Rules::V3(salt),
                _ => Rules::V4(salt),
            }));
        }
        return if file.len() == SALTED_HEADER {
            Ok(None)
        } else {
            Err(Outcome::Header)
        };
    }
    if [MAGIC_V1, MAGIC_V2, MAGIC_V3, MAGIC_V4, MAGIC_V5]
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

/// A record at `at` that is whole, checks out under `rules` and decodes,
/// with its size.
pub fn record_at(file: &[u8], at: usize, rules: Rules) -> Option<(Change, usize)> {
    let bytes = file.get(at..)?;
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let framing: usize = match rules {
        Rules::V1 => 8,
        Rules::V2(_) => 12,
        Rules::V3(_) => 16,
        Rules::V4(_) | Rules::V5(..) => 24,
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
        Rules::V4(salt) | Rules::V5(salt, ..) => {
            let batched = [&bytes[..4], &bytes[16..24], payload].concat();
            crc32c(&[&salt[..], &bytes[..4]].concat()).to_le_bytes() == bytes[4..8]
                && crc64(&[&salt[..], &batched].concat()).to_le_bytes() == bytes[8..16]
        }
    };
    if !valid {
        return None;
    }
    let versioned = matches!(rules, Rules::V5(..));
    Some((decode(payload, versioned)?, framing + len))
}

/// The change a payload holds, if it is one; a put's version 0 unless
/// `versioned`.
fn decode(payload: &[u8], versioned: bool) -> Option<Change> {
    let id = i64::from_le_bytes(payload.get(1..9)?.try_into().ok()?);
    match payload[0] {
        2 if payload.len() == 9 => Some(Change::Delete(id)),
        1 => {
            let (version, rest) = match versioned {
                true => (
                    u64::from_le_bytes(payload.get(9..17)?.try_into().ok()?),
                    &payload[17..],
                ),
                false => (0, &payload[9..]),
            };
            let (name, rest) = text(rest)?;
            let (tag, rest) = text(rest)?;
            if !rest.is_empty() {
                return None;
            }
            Some(Change::Put(id, name?, tag, version))
        }
        _ => None,
    }
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
