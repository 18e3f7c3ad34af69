//! Journal recovery fed arbitrary files, checked against the reference
//! decoder of `tests/shared/journal_oracle.rs`, written from the
//! documented formats (its header sums them up).
//!
//! Two modes, chosen by the first byte:
//!
//! - Arbitrary bytes as the file. `scan` must agree with the reference
//!   decoder in everything: the version, the whole records at the start
//!   and the map they replay to (versions included: an older file's puts
//!   numbered), the high-water mark, where a torn tail starts (it holds
//!   no whole record at any offset), or the refusal (a damaged header, or
//!   a bad record with a whole one that counts somewhere after it). An
//!   accepted version-1 to -4 file, converted by the server, must be
//!   exactly the reference's version-5 image of the same records, and read
//!   back the same.
//! - A journal written by the oracle, of any version, from a list of
//!   changes, then cut short or with one byte changed. In a version-2 to
//!   -5 journal the last put's name may hold planted records, whole and
//!   valid UTF-8, by the version-1 rules and by the version-2 to -5 rules
//!   under a wrong salt: what a client can send. The server's own writer
//!   must produce the same bytes as the oracle. Recovery must yield exactly
//!   the changes written whole before the damage (never a record that was
//!   not written whole, never a planted one), and refuse only when the
//!   damage has real records after it or hits the header. A version-4 or
//!   -5 journal's last changes may be one write (`seal`, as a commit with
//!   `--sync always` writes them): damage in it reads as that write torn.
//! - A version-5 journal whose last changes are one batch, with zeros
//!   written ahead after it, then a crash: any run of its bytes from the
//!   batch on zeroed (pages never written back). Recovery must agree with
//!   the reference, never refuse, keep every change before the batch and
//!   of the batch only changes in order from its start.

#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use plantstore::store::journal::{self, Damage, Scan, Version};

#[path = "../../tests/shared/journal_oracle.rs"]
mod oracle;

use oracle::{
    Change, MAGIC_V1, Outcome, Rules, batched, header_len, high_water, journal, numbered,
    planted_within, record, reference,
};

/// The salt and the nonce the server converts version-1 input under, here.
const CONVERSION_SALT: [u8; 8] = *b"convert!";
const CONVERSION_NONCE: u64 = 0x6E6F_6E63_6521;

type Plants = BTreeMap<i64, (String, Option<String>, u64)>;

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
    if file.first() == Some(&0xFF) {
        return torn_batch(&file[1..]);
    }
    let expected = reference(file);
    let (found, plants) = recover(file);
    assert_eq!(found, expected, "the server and the reference disagree");
    if let Outcome::Read(_, changes, _) = &found {
        assert_eq!(plants, replay(changes));
    }
    converted(file, &found);
}

/// A batch torn by a crash, as the module header says.
fn torn_batch(input: &[u8]) {
    let Some((&[batch, from, zeros, ahead], ops)) = input.split_first_chunk::<4>() else {
        return;
    };
    let salt = *b"torn bat";
    let changes = changes(ops);
    let rules = Rules::V5(salt, u64::from(batch), u64::from(from));
    let last = usize::from(batch) % (changes.len() + 1);
    let mut file = batched(rules, &changes, last);
    let ends = ends(rules, &changes);
    let start = if last == 0 {
        header_len(rules)
    } else {
        ends[last - 1]
    };
    assert_eq!(
        server_batched(rules, &changes, last),
        file,
        "the server's writer of a batch"
    );
    file.resize(file.len() + usize::from(ahead) * 64, 0);
    let at = start + usize::from(from) * 16 % (file.len() - start + 1);
    let end = (at + usize::from(zeros) * 8 + 1).min(file.len());
    file[at..end].fill(0);
    let (found, plants) = recover(&file);
    assert_eq!(
        found,
        reference(&file),
        "the server and the reference disagree"
    );
    let Outcome::Read(_, read, _) = &found else {
        panic!("a torn batch refused: {found:?}");
    };
    assert!(read.len() >= last, "a change before the batch lost");
    assert_eq!(read[..], changes[..read.len()], "not the changes in order");
    assert_eq!(plants, replay(read));
}

/// If `file` read as a version-1 to -4 journal: the server's conversion
/// of what was read is the reference's version-5 image of the same
/// records (as read: numbered), its mark the last number, and reads back
/// the same.
fn converted(file: &[u8], found: &Outcome) {
    let Outcome::Read(Some(Rules::V1 | Rules::V2(_) | Rules::V3(_) | Rules::V4(_)), changes, end) =
        found
    else {
        return;
    };
    let image = journal::convert(&file[..*end], &CONVERSION_SALT, CONVERSION_NONCE);
    let rules = Rules::V5(CONVERSION_SALT, CONVERSION_NONCE, high_water(0, changes));
    let expected = journal(rules, changes);
    assert_eq!(
        image, expected,
        "the conversion is not the documented image"
    );
    let (read, _) = recover(&image);
    let whole = Outcome::Read(Some(rules), changes.clone(), image.len());
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
    let rules = match flags & 13 {
        1 | 5 | 9 | 13 => Rules::V1,
        4 => Rules::V2(*salt),
        8 => Rules::V3(*salt),
        12 => Rules::V4(*salt),
        _ => Rules::V5(*salt, u64::from_le_bytes(*guess), u64::from(damage[1])),
    };
    let mut changes = changes(ops);
    if let (Rules::V2(salt) | Rules::V3(salt) | Rules::V4(salt) | Rules::V5(salt, ..), true) =
        (rules, flags & 2 == 2)
    {
        plant(&mut changes, salt, *guess);
    }
    // Versions 4 and 5 with flag 16: the changes from `last` on are one
    // batch (damage in it, with its later records, reads as the batch torn).
    let last = match rules {
        Rules::V4(_) | Rules::V5(..) if flags & 16 == 16 => {
            usize::from(damage[0] >> 1) % (changes.len() + 1)
        }
        _ => changes.len(),
    };
    let mut file = batched(rules, &changes, last);
    let ends = ends(rules, &changes);
    if let Rules::V5(..) = rules {
        assert_eq!(
            server_batched(rules, &changes, last),
            file,
            "the server's writer"
        );
    }
    // What a reader gives back: an older file's puts numbered.
    let changes = match rules {
        Rules::V5(..) => changes,
        _ => numbered(&changes),
    };
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
        // Damage in the last record, or in the last batch, reads as a
        // torn tail.
        Outcome::Read(_, read, _) => {
            assert!(
                before + 1 == changes.len() || before >= last,
                "damage before the last record and batch accepted"
            );
            assert_eq!(read, changes[..before]);
            assert_eq!(plants, replay(&changes[..before]));
        }
        Outcome::Damaged { record, offset } => {
            assert_eq!(record, before as u64 + 1);
            assert_eq!(offset, if before == 0 { start } else { ends[before - 1] });
            assert!(before + 1 < changes.len(), "a torn last record refused");
            assert!(before < last, "a torn last batch refused");
        }
        other => panic!("the header was intact: {other:?}"),
    }
}

/// Changes from fuzz bytes: small ids so that puts replace and deletes
/// hit, versions as a version-5 file may hold them (in any order).
fn changes(mut ops: &[u8]) -> Vec<Change> {
    let mut out = Vec::new();
    while let Some((&op, rest)) = ops.split_first() {
        let id = i64::from(op >> 4) - 4;
        let len = usize::from(op & 7).min(rest.len());
        let (text, rest) = rest.split_at(len);
        ops = rest;
        let version = u64::from(op).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (op & 63);
        let text = String::from_utf8_lossy(text).into_owned();
        out.push(match op & 0b1000 {
            0 if op & 1 == 0 => Change::Delete(id),
            0 => Change::Put(id, text, None, version),
            _ => Change::Put(
                id,
                text.clone(),
                Some(text.chars().rev().collect()),
                version,
            ),
        });
    }
    out
}

/// Puts records a client could send into the last change's name (a put
/// is added if the last change is not one): one by the version-1 rules
/// and one each by the version-2 to -5 rules under `guess`, made wrong if
/// it happens to be `salt`.
fn plant(changes: &mut Vec<Change>, salt: [u8; 8], mut guess: [u8; 8]) {
    if guess == salt {
        guess[0] ^= 1;
    }
    let v1 = planted_within(Rules::V1, 4096);
    let v2 = planted_within(Rules::V2(guess), 4096);
    let v3 = planted_within(Rules::V3(guess), 4096);
    let v4 = planted_within(Rules::V4(guess), 4096);
    let v5 = planted_within(Rules::V5(guess, 0, 0), 4096);
    let (Some(v1), Some(v2), Some(v3), Some(v4), Some(v5)) = (v1, v2, v3, v4, v5) else {
        return;
    };
    if !matches!(changes.last(), Some(Change::Put(..))) {
        changes.push(Change::Put(-4, String::new(), None, 1));
    }
    if let Some(Change::Put(_, name, ..)) = changes.last_mut() {
        *name = format!("{name}{v1}|{v2}|{v3}|{v4}|{v5}.");
    }
}

/// Where each record of `changes` ends in a journal under `rules`.
fn ends(rules: Rules, changes: &[Change]) -> Vec<usize> {
    let mut end = header_len(rules);
    changes
        .iter()
        .map(|change| {
            end += record(rules, change).len();
            end
        })
        .collect()
}

/// The same version-5 journal as the server writes it with the changes
/// from index `last` on as one batch (`seal` of one write), those before
/// each a batch of its own.
fn server_batched(rules: Rules, changes: &[Change], last: usize) -> Vec<u8> {
    let Rules::V5(salt, nonce, mark) = rules else {
        panic!("the server writes version 5 alone");
    };
    let lineage = journal::Lineage { nonce, mark };
    let mut image = server_image(salt, lineage, &changes[..last]);
    let start = image.len();
    for change in &changes[last..] {
        journal::encode(&mut image, &server_change(change));
    }
    journal::seal(&mut image[start..], &salt, start as u64);
    image
}

fn server_change(change: &Change) -> journal::Change<'_> {
    match change {
        Change::Put(id, name, tag, version) => journal::Change::Put {
            id: *id,
            version: *version,
            name,
            tag: tag.as_deref(),
        },
        Change::Delete(id) => journal::Change::Delete(*id),
    }
}

/// The same journal as the server writes it when each record is a batch
/// of its own (a compaction's or a conversion's file).
fn server_image(salt: [u8; 8], lineage: journal::Lineage, changes: &[Change]) -> Vec<u8> {
    let mut image = journal::header(&salt, lineage).to_vec();
    for change in changes {
        journal::encode(&mut image, &server_change(change));
    }
    journal::seal_each(&mut image[journal::HEADER..], &salt, journal::HEADER as u64);
    image
}

fn replay(changes: &[Change]) -> Plants {
    let mut plants = Plants::new();
    for change in changes {
        match change {
            Change::Put(id, name, tag, version) => {
                plants.insert(*id, (name.clone(), tag.clone(), *version));
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
    let found = journal::scan(file, |change| match change {
        journal::Change::Put {
            id,
            version,
            name,
            tag,
        } => {
            let (name, tag) = (name.to_owned(), tag.map(str::to_owned));
            plants.insert(id, (name.clone(), tag.clone(), version));
            changes.push(Change::Put(id, name, tag, version));
        }
        journal::Change::Delete(id) => {
            plants.remove(&id);
            changes.push(Change::Delete(id));
        }
    });
    let outcome = match found {
        Ok(Scan {
            version,
            records,
            valid_len,
            zeroed,
            lineage,
            high,
            ..
        }) => {
            assert_eq!(records, changes.len() as u64);
            // A clean end in zeros (kept at open) is of versions 4 and 5
            // alone, and only where every byte after the records is zero.
            let zeros = file[valid_len as usize..].iter().all(|&b| b == 0);
            let batched = matches!(version, Some(Version::V4(_) | Version::V5(_)));
            assert_eq!(zeroed, batched && zeros, "zeros after the records");
            assert_eq!(
                high,
                high_water(lineage.mark, &changes),
                "the high-water mark"
            );
            let rules = version.map(|version| match version {
                Version::V1 => Rules::V1,
                Version::V2(salt) => Rules::V2(salt),
                Version::V3(salt) => Rules::V3(salt),
                Version::V4(salt) => Rules::V4(salt),
                Version::V5(salt) => Rules::V5(salt, lineage.nonce, lineage.mark),
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
