//! Reading a journal back: every complete record in order, handed to the
//! caller, up to a torn tail; damage in the middle refuses the file. The
//! rules are in the journal's module header.

use super::format::{Change, HEADER, MAGIC, MAGIC_V1, Version, decode, salt_of};

/// The result of reading a whole journal.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Scan {
    /// The file's version, from its header; `None` if the file is too
    /// short to hold a whole header (new, or torn while it was written).
    pub version: Option<Version>,
    /// Complete records read.
    pub records: u64,
    /// Length of the valid prefix; anything after it is a torn tail.
    pub valid_len: usize,
}

/// Why a journal is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// The file does not start with a magic.
    NotAJournal,
    /// A version-2 header that fails its check, with records after it.
    Header,
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
///
/// Whether a later record exists is asked with the same rule that reads
/// records, salt included: in a version-2 file, bytes a client chose (a
/// record inside a name) do not pass it.
pub fn scan(bytes: &[u8], mut apply: impl FnMut(Change<'_>)) -> Result<Scan, Damage> {
    let mut scan = Scan::default();
    let Some(version) = version(bytes)? else {
        return Ok(scan);
    };
    scan.version = Some(version);
    let mut at = version.header_len();
    while at < bytes.len() {
        let Some((change, size)) = decode(bytes, at, version) else {
            if (at + 1..bytes.len()).any(|from| decode(bytes, from, version).is_some()) {
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

/// The file's version from its header; `None` while the header is not
/// whole but could still become one, or fails its check with nothing
/// after it (a new file torn while its header was written: the header is
/// synced before any record goes behind it).
fn version(bytes: &[u8]) -> Result<Option<Version>, Damage> {
    if bytes.starts_with(MAGIC_V1) {
        return Ok(Some(Version::V1));
    }
    if bytes.starts_with(MAGIC) {
        let Some(header) = bytes.first_chunk::<HEADER>() else {
            return Ok(None);
        };
        return match salt_of(header) {
            Some(salt) => Ok(Some(Version::V2(salt))),
            None if bytes.len() == HEADER => Ok(None),
            None => Err(Damage::Header),
        };
    }
    if MAGIC.starts_with(bytes) || MAGIC_V1.starts_with(bytes) {
        return Ok(None);
    }
    Err(Damage::NotAJournal)
}
