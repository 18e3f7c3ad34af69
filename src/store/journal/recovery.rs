//! Reading a journal back: every complete record in order, handed to the
//! caller, up to a torn tail; damage in the middle refuses the file. The
//! rules are in the journal's module header.

use super::format::{Change, MAGIC, decode};

/// The result of reading a whole journal.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Scan {
    /// Complete records read.
    pub records: u64,
    /// Length of the valid prefix; anything after it is a torn tail.
    pub valid_len: usize,
}

/// Why a journal is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// The file does not start with the magic.
    NotAJournal,
    /// A damaged record (1-based number, byte offset) with valid ones after.
    Record {
        /// 1-based number of the damaged record.
        record: u64,
        /// Its byte offset.
        offset: u64,
    },
}

/// Reads a journal image, handing every complete record's change to
/// `apply` in file order. Never panics, whatever the bytes. On damage in
/// the middle, `apply` has seen the records before it; the caller throws
/// what it built away.
pub fn scan(bytes: &[u8], mut apply: impl FnMut(Change<'_>)) -> Result<Scan, Damage> {
    let mut scan = Scan::default();
    if bytes.len() < MAGIC.len() {
        return if MAGIC.starts_with(bytes) {
            Ok(scan)
        } else {
            Err(Damage::NotAJournal)
        };
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        return Err(Damage::NotAJournal);
    }
    let mut at = MAGIC.len();
    while at < bytes.len() {
        let Some((change, size)) = decode(&bytes[at..]) else {
            if (at + 1..bytes.len()).any(|from| decode(&bytes[from..]).is_some()) {
                return Err(Damage::Record {
                    record: scan.records + 1,
                    offset: at as u64,
                });
            }
            break;
        };
        apply(change);
        scan.records += 1;
        at += size;
    }
    scan.valid_len = at;
    Ok(scan)
}
