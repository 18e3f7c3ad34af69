//! The bytes of the journal: the file header, records (encoding, sealing,
//! decoding) and the checksums. The layout, and why the check covers what
//! it covers, is in the journal's module header. Version 1 shares all of
//! this except its framing and checksum.

use std::io::{self, Read};

/// The first eight bytes of a journal in the current format, version 2.
pub const MAGIC: &[u8; 8] = b"PLANTSJ2";
/// The first eight bytes of a version-1 journal (read, then converted).
pub const MAGIC_V1: &[u8; 8] = b"PLANTSJ1";
/// A version-2 header: the magic, the file's salt, the header's check.
pub const HEADER: usize = CHECKED + 8;
/// The bytes of a version-2 header that its check covers: magic and salt.
const CHECKED: usize = MAGIC.len() + 8;
/// Length and check in front of every version-2 payload.
const FRAMING: usize = 4 + 8;
const PUT: u8 = 1;
const DELETE: u8 = 2;
const NO_TAG: u32 = u32::MAX;

/// The random bytes from the OS that every check in one version-2 file
/// starts from. Written once, in the header; never shown anywhere else.
pub type Salt = [u8; 8];

/// The rules a file's records follow, read from its header.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `PLANTSJ1`: a CRC-32C over the length and the payload.
    V1,
    /// `PLANTSJ2` with this salt: a CRC-64 over the salt, the length and
    /// the payload.
    V2(Salt),
}

impl Version {
    /// Where the first record starts.
    pub fn header_len(self) -> usize {
        match self {
            Version::V1 => MAGIC_V1.len(),
            Version::V2(_) => HEADER,
        }
    }

    /// Bytes of length and check in front of each payload.
    fn framing(self) -> usize {
        match self {
            Version::V1 => 4 + 4,
            Version::V2(_) => FRAMING,
        }
    }
}

/// Leaves the salt out, so that no log line or error can carry it.
impl std::fmt::Debug for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Version::V1 => f.write_str("V1"),
            Version::V2(_) => f.write_str("V2(salt)"),
        }
    }
}

/// The header of a version-2 file salted with `salt`.
pub fn header(salt: &Salt) -> [u8; HEADER] {
    let mut header = [0; HEADER];
    header[..MAGIC.len()].copy_from_slice(MAGIC);
    header[MAGIC.len()..CHECKED].copy_from_slice(salt);
    let check = crc64(0, &header[..CHECKED]);
    header[CHECKED..].copy_from_slice(&check.to_le_bytes());
    header
}

/// The salt of a version-2 header, if the header checks out.
pub fn salt_of(header: &[u8; HEADER]) -> Option<Salt> {
    let salt = header[MAGIC.len()..CHECKED]
        .try_into()
        .expect("eight bytes");
    (header == &self::header(&salt)).then_some(salt)
}

/// A salt for a new file, from the OS's random source.
pub fn fresh_salt() -> io::Result<Salt> {
    let mut salt = Salt::default();
    std::fs::File::open("/dev/urandom")?.read_exact(&mut salt)?;
    Ok(salt)
}

/// One change, as a record holds it; texts borrow from the record's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change<'a> {
    /// The plant with this id is now this one (a create or a replace).
    Put {
        /// The plant's id.
        id: i64,
        /// Its name.
        name: &'a str,
        /// Its tag, if any.
        tag: Option<&'a str>,
    },
    /// The plant with this id is gone.
    Delete(i64),
}

impl Change<'_> {
    /// The id the change is about.
    pub fn id(&self) -> i64 {
        match *self {
            Change::Put { id, .. } | Change::Delete(id) => id,
        }
    }

    /// The bytes its record takes in the file.
    pub fn size(&self) -> u64 {
        let payload = match self {
            Change::Put { name, tag, .. } => 1 + 8 + 4 + name.len() + 4 + tag.map_or(0, str::len),
            Change::Delete(_) => 1 + 8,
        };
        (FRAMING + payload) as u64
    }
}

/// Appends the version-2 record of `change` to `buf`, its check not yet
/// filled in: [`seal`] does that once the file it goes to is known.
pub fn encode(buf: &mut Vec<u8>, change: &Change<'_>) {
    let start = buf.len();
    buf.extend_from_slice(&[0; FRAMING]);
    match *change {
        Change::Put { id, name, tag } => {
            buf.push(PUT);
            buf.extend_from_slice(&id.to_le_bytes());
            push_text(buf, Some(name));
            push_text(buf, tag);
        }
        Change::Delete(id) => {
            buf.push(DELETE);
            buf.extend_from_slice(&id.to_le_bytes());
        }
    }
    let len = (buf.len() - start - FRAMING) as u32;
    buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

/// Fills in the check of every record in `records`, a run of whole
/// records from [`encode`], for the file salted with `salt`.
pub fn seal(records: &mut [u8], salt: &Salt) {
    let mut at = 0;
    while let Some(len) = records.get(at..at + 4) {
        let len = u32::from_le_bytes(len.try_into().expect("four bytes")) as usize;
        let end = at + FRAMING + len;
        // Never short for `encode`'s output; stop rather than panic.
        let Some(record) = records.get_mut(at..end) else {
            return;
        };
        let check = check(salt, &record[..4], &record[FRAMING..]);
        record[4..FRAMING].copy_from_slice(&check.to_le_bytes());
        at = end;
    }
}

/// The version-2 check of a record with length bytes `len` and `payload`
/// in the file salted with `salt`.
fn check(salt: &Salt, len: &[u8], payload: &[u8]) -> u64 {
    crc64(crc64(crc64(0, salt), len), payload)
}

fn push_text(buf: &mut Vec<u8>, text: Option<&str>) {
    match text {
        // A text longer than u32 cannot arrive: bodies are capped far below.
        Some(text) => {
            buf.extend_from_slice(&(text.len() as u32).to_le_bytes());
            buf.extend_from_slice(text.as_bytes());
        }
        None => buf.extend_from_slice(&NO_TAG.to_le_bytes()),
    }
}

/// Decodes the record at byte `at` of `file` by the rules of `version`:
/// the change and the record's size, or `None` if it is incomplete, fails
/// its check or does not decode.
pub fn decode(file: &[u8], at: usize, version: Version) -> Option<(Change<'_>, usize)> {
    let bytes = file.get(at..)?;
    let len: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
    let framing = version.framing();
    let end = framing.checked_add(u32::from_le_bytes(len) as usize)?;
    let payload = bytes.get(framing..end)?;
    let stored = &bytes[4..framing];
    let valid = match version {
        Version::V1 => crc32c(crc32c(0, &len), payload).to_le_bytes() == stored,
        Version::V2(salt) => check(&salt, &len, payload).to_le_bytes() == stored,
    };
    if !valid {
        return None;
    }
    Some((parse(payload)?, end))
}

/// The change a payload holds, if it is one.
fn parse(payload: &[u8]) -> Option<Change<'_>> {
    let (&op, rest) = payload.split_first()?;
    let id = i64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
    let rest = &rest[8..];
    match op {
        DELETE if rest.is_empty() => Some(Change::Delete(id)),
        PUT => {
            let (name, rest) = take_text(rest)?;
            let (tag, rest) = take_text(rest)?;
            if !rest.is_empty() {
                return None;
            }
            Some(Change::Put {
                id,
                name: name?,
                tag,
            })
        }
        _ => None,
    }
}

/// A length-prefixed text: `Some(None)` for the no-tag marker.
fn take_text(bytes: &[u8]) -> Option<(Option<&str>, &[u8])> {
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    let rest = &bytes[4..];
    if len == NO_TAG {
        return Some((None, rest));
    }
    let text = rest.get(..len as usize)?;
    let text = std::str::from_utf8(text).ok()?;
    Some((Some(text), &rest[len as usize..]))
}

/// CRC-32C (Castagnoli), table-driven; `crc32c(crc32c(0, a), b)` is the
/// checksum of `a` followed by `b`.
pub fn crc32c(crc: u32, bytes: &[u8]) -> u32 {
    reflected(&CRC32C, u32::MAX.into(), crc.into(), bytes) as u32
}

/// CRC-64/XZ (the ECMA-182 polynomial, reflected), table-driven;
/// `crc64(crc64(0, a), b)` is the checksum of `a` followed by `b`.
pub fn crc64(crc: u64, bytes: &[u8]) -> u64 {
    reflected(&CRC64, u64::MAX, crc, bytes)
}

/// A reflected CRC of width `mask` that starts from all ones and inverts
/// its result, continuing from `crc`.
fn reflected(table: &[u64; 256], mask: u64, crc: u64, bytes: &[u8]) -> u64 {
    let mut crc = !crc & mask;
    for &b in bytes {
        crc = table[((crc ^ u64::from(b)) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc & mask
}

const CRC32C: [u64; 256] = table(0x82F6_3B78);
const CRC64: [u64; 256] = table(0xC96C_5795_D787_0F42);

const fn table(poly: u64) -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ poly
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    const SALT: Salt = [1, 2, 3, 4, 5, 6, 7, 8];

    fn sealed(change: &Change<'_>, salt: &Salt) -> Vec<u8> {
        let mut record = Vec::new();
        encode(&mut record, change);
        seal(&mut record, salt);
        record
    }

    #[test]
    fn a_sealed_record_decodes_to_its_change_and_size() {
        let changes = [
            Change::Put {
                id: -5,
                name: "fern é",
                tag: Some("green"),
            },
            Change::Put {
                id: i64::MAX,
                name: "",
                tag: None,
            },
            Change::Delete(7),
        ];
        for change in changes {
            let record = sealed(&change, &SALT);
            assert_eq!(record.len() as u64, change.size());
            let file = [&header(&SALT)[..], &record].concat();
            assert_eq!(
                decode(&file, HEADER, Version::V2(SALT)),
                Some((change, record.len()))
            );
        }
    }

    #[test]
    fn a_record_checks_out_only_under_its_own_files_salt() {
        let record = sealed(&Change::Delete(7), &SALT);
        let mut other = SALT;
        for byte in 0..SALT.len() {
            other[byte] ^= 0x10;
            assert_eq!(decode(&record, 0, Version::V2(other)), None);
            other = SALT;
        }
        assert_eq!(decode(&record, 0, Version::V1), None);
    }

    #[test]
    fn sealing_bytes_that_are_not_whole_records_stops_without_panicking() {
        let mut bytes = sealed(&Change::Delete(7), &SALT);
        bytes.extend_from_slice(&[200, 0, 0, 0, 1, 2]);
        let whole = bytes[..bytes.len() - 6].to_vec();
        seal(&mut bytes, &SALT);
        assert_eq!(&bytes[..whole.len()], &whole[..]);
        seal(&mut [0xFF; 3], &SALT);
    }

    #[test]
    fn the_salt_stays_out_of_debug_output() {
        assert_eq!(format!("{:?}", Version::V2(*b"SECRET!!")), "V2(salt)");
    }
}
