//! The bytes of the journal: the file header, records (encoding, sealing,
//! decoding) and the checksums. The layout, and why the checks cover what
//! they cover, is in docs/storage.md ("The journal format"). Versions 1
//! to 4 share all of this except their header, framing, checks and a
//! put's version; they are read, never written.

use std::io::{self, Read};

use crate::model::MAX_TEXT_BYTES;

/// The first eight bytes of a journal in the current format, version 5.
pub const MAGIC: &[u8; 8] = b"PLANTSJ5";
/// The first eight bytes of a version-4 journal (read, then converted).
pub const MAGIC_V4: &[u8; 8] = b"PLANTSJ4";
/// The first eight bytes of a version-3 journal (read, then converted).
pub const MAGIC_V3: &[u8; 8] = b"PLANTSJ3";
/// The first eight bytes of a version-2 journal (read, then converted).
pub const MAGIC_V2: &[u8; 8] = b"PLANTSJ2";
/// The first eight bytes of a version-1 journal (read, then converted).
pub const MAGIC_V1: &[u8; 8] = b"PLANTSJ1";
/// A version-5 header: the magic, the file's salt, its [`Lineage`]
/// (nonce and mark), the header's check.
pub const HEADER: usize = CHECKED + 8;
/// The bytes of a version-5 header that its check covers.
const CHECKED: usize = SALTED + 16;
/// A version-2, -3 or -4 header: the magic, the file's salt, the
/// header's check.
pub const HEADER_V4: usize = SALTED + 8;
/// The magic and the salt, which every salted header starts with.
const SALTED: usize = MAGIC.len() + 8;
/// Length, length check, check and batch in front of every version-4
/// and -5 payload.
const FRAMING: usize = 4 + 4 + 8 + 8;
/// Length, length check and check in front of every version-3 payload.
const FRAMING_V3: usize = 4 + 4 + 8;
/// The longest payload of any version: a version-5 put whose name and tag
/// take every byte a plant may ([`MAX_TEXT_BYTES`]). A record that claims
/// more is damage, whatever the flags of the run that wrote it.
pub const MAX_PAYLOAD: usize = 1 + 8 + 8 + 4 + 4 + MAX_TEXT_BYTES;
const PUT: u8 = 1;
const DELETE: u8 = 2;
const NO_TAG: u32 = u32::MAX;

/// The random bytes from the OS that every check in one version-2 to -5
/// file starts from. Written once, in the header; never shown anywhere
/// else.
pub type Salt = [u8; 8];

/// What a version-5 header says of the store beyond its own file: the
/// nonce that names the store's lineage (kept by a compaction, new after
/// a reset), and the mark, the highest version the store had given when
/// the file was written. A store's high-water mark is the highest of its
/// file's mark and of the versions its records carry, so a compacted file
/// keeps it when no live plant holds it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lineage {
    /// Names the store's lineage.
    pub nonce: u64,
    /// The highest version given when the file was written.
    pub mark: u64,
}

/// The rules a file's records follow, read from its header.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `PLANTSJ1`: a CRC-32C over the length and the payload.
    V1,
    /// `PLANTSJ2` with this salt: a CRC-64 over the salt, the length and
    /// the payload.
    V2(Salt),
    /// `PLANTSJ3` with this salt: as version 2, and a CRC-32C of the salt
    /// and the length on its own, checked before the length is believed.
    V3(Salt),
    /// `PLANTSJ4` with this salt: as version 3, and the offset of the
    /// record's batch (under the check), which tells a batch torn by a
    /// crash from damage before a later batch; the file may end in zeros
    /// written ahead.
    V4(Salt),
    /// `PLANTSJ5` with this salt: as version 4, the header carrying the
    /// file's [`Lineage`] and each put the plant's version.
    V5(Salt),
}

impl Version {
    /// Where the first record starts.
    pub fn header_len(self) -> usize {
        match self {
            Version::V1 => MAGIC_V1.len(),
            Version::V2(_) | Version::V3(_) | Version::V4(_) => HEADER_V4,
            Version::V5(_) => HEADER,
        }
    }

    /// Bytes of length and checks in front of each payload.
    pub fn framing(self) -> usize {
        match self {
            Version::V1 => 4 + 4,
            Version::V2(_) => 4 + 8,
            Version::V3(_) => FRAMING_V3,
            Version::V4(_) | Version::V5(_) => FRAMING,
        }
    }

    /// Whether a record of this version carries the versions of its
    /// puts (reading an older one numbers them: see `recovery.rs`).
    pub fn versioned(self) -> bool {
        matches!(self, Version::V5(_))
    }

    /// Whether a record of this version says where its batch began.
    pub fn batched(self) -> bool {
        matches!(self, Version::V4(_) | Version::V5(_))
    }
}

/// Leaves the salt out, so that no log line or error can carry it.
impl std::fmt::Debug for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Version::V1 => f.write_str("V1"),
            Version::V2(_) => f.write_str("V2(salt)"),
            Version::V3(_) => f.write_str("V3(salt)"),
            Version::V4(_) => f.write_str("V4(salt)"),
            Version::V5(_) => f.write_str("V5(salt)"),
        }
    }
}

/// The header of a version-5 file salted with `salt`, of `lineage`.
pub fn header(salt: &Salt, lineage: Lineage) -> [u8; HEADER] {
    let mut header = [0; HEADER];
    header[..MAGIC.len()].copy_from_slice(MAGIC);
    header[MAGIC.len()..SALTED].copy_from_slice(salt);
    header[SALTED..SALTED + 8].copy_from_slice(&lineage.nonce.to_le_bytes());
    header[SALTED + 8..CHECKED].copy_from_slice(&lineage.mark.to_le_bytes());
    let check = crc64(0, &header[..CHECKED]);
    header[CHECKED..].copy_from_slice(&check.to_le_bytes());
    header
}

/// The salt and lineage of a version-5 header, if the header checks out.
pub fn read_header(bytes: &[u8; HEADER]) -> Option<(Salt, Lineage)> {
    let field = |at: usize| bytes[at..at + 8].try_into().expect("eight bytes");
    let salt = field(MAGIC.len());
    let lineage = Lineage {
        nonce: u64::from_le_bytes(field(SALTED)),
        mark: u64::from_le_bytes(field(SALTED + 8)),
    };
    (bytes == &header(&salt, lineage)).then_some((salt, lineage))
}

/// The header of a version-2 to -4 file of the version `magic` names,
/// salted with `salt`.
fn salted_header(magic: &[u8; 8], salt: &Salt) -> [u8; HEADER_V4] {
    let mut header = [0; HEADER_V4];
    header[..MAGIC.len()].copy_from_slice(magic);
    header[MAGIC.len()..SALTED].copy_from_slice(salt);
    let check = crc64(0, &header[..SALTED]);
    header[SALTED..].copy_from_slice(&check.to_le_bytes());
    header
}

/// The salt of a version-2, -3 or -4 header, if the header checks out.
pub fn salt_of(header: &[u8; HEADER_V4]) -> Option<Salt> {
    let magic = header.first_chunk::<8>().expect("eight bytes");
    let salt = header[MAGIC.len()..SALTED].try_into().expect("eight bytes");
    (header == &salted_header(magic, &salt)).then_some(salt)
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
        /// Its version: the number the store gave this change.
        version: u64,
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
            Change::Put { name, tag, .. } => {
                1 + 8 + 8 + 4 + name.len() + 4 + tag.map_or(0, str::len)
            }
            Change::Delete(_) => 1 + 8,
        };
        (FRAMING + payload) as u64
    }
}

/// Appends the version-5 record of `change` to `buf`, its checks and batch
/// not yet filled in: [`seal`] does that once the file it goes to, and
/// where, is known.
pub fn encode(buf: &mut Vec<u8>, change: &Change<'_>) {
    let start = buf.len();
    buf.extend_from_slice(&[0; FRAMING]);
    match *change {
        Change::Put {
            id,
            version,
            name,
            tag,
        } => {
            buf.push(PUT);
            buf.extend_from_slice(&id.to_le_bytes());
            buf.extend_from_slice(&version.to_le_bytes());
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

/// Fills in the checks of every record in `records`, a run of whole
/// records from [`encode`], for the file salted with `salt`, as one batch
/// written at byte offset `batch` of that file: each record's batch field
/// says where its batch starts.
pub fn seal(records: &mut [u8], salt: &Salt, batch: u64) {
    let batch = batch.to_le_bytes();
    let mut at = 0;
    while let Some(len) = records.get(at..at + 4) {
        let len = u32::from_le_bytes(len.try_into().expect("four bytes")) as usize;
        let end = at + FRAMING + len;
        // Never short for `encode`'s output; stop rather than panic.
        let Some(record) = records.get_mut(at..end) else {
            return;
        };
        let len_check = len_check(salt, &record[..4]);
        let check = batch_check(salt, &record[..4], &batch, &record[FRAMING..]);
        record[4..8].copy_from_slice(&len_check.to_le_bytes());
        record[8..16].copy_from_slice(&check.to_le_bytes());
        record[16..FRAMING].copy_from_slice(&batch);
        at = end;
    }
}

/// The version-2 and -3 check of a record with length bytes `len` and
/// `payload` in the file salted with `salt`.
fn check(salt: &Salt, len: &[u8], payload: &[u8]) -> u64 {
    crc64(crc64(crc64(0, salt), len), payload)
}

/// As [`seal`], but each record a batch of its own (its batch field its
/// own offset): for a file that is synced whole before it is used (a
/// compaction's, a reset's, a conversion's), where no batch can be torn
/// by a crash, so that damage anywhere before its last record, with
/// records after it, is found and refuses the file.
pub fn seal_each(records: &mut [u8], salt: &Salt, at: u64) {
    let mut start = 0;
    while let Some(len) = records.get(start..start + 4) {
        let len = u32::from_le_bytes(len.try_into().expect("four bytes")) as usize;
        let end = (start + FRAMING + len).min(records.len());
        seal(&mut records[start..end], salt, at + start as u64);
        start = end;
    }
}

/// The version-4 and -5 check of a record: as version 3's, with the batch's
/// offset bytes `batch` between the length and the payload.
fn batch_check(salt: &Salt, len: &[u8], batch: &[u8], payload: &[u8]) -> u64 {
    crc64(crc64(crc64(crc64(0, salt), len), batch), payload)
}

/// Where the batch of the version-4 or -5 record whose framing `head` holds
/// starts, as written (believe it only of a record that checks out).
pub fn batch_of(head: &[u8]) -> u64 {
    head.get(16..FRAMING)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// The version-3 to -5 check of a record's length bytes on their own.
fn len_check(salt: &Salt, len: &[u8]) -> u32 {
    crc32c(crc32c(0, salt), len)
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

/// What the bytes at one offset hold, by one version's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole, valid record: its change and its size.
    Record(Change<'a>, usize),
    /// Not a record, whatever bytes follow.
    Bad,
    /// Could be a record if this many bytes (in all, from the offset) were
    /// there: never more than the framing and [`MAX_PAYLOAD`].
    Short(usize),
}

/// Decodes the record at the start of `bytes` by the rules of `version`,
/// adding to `checked` the bytes it ran a checksum over.
///
/// The cheap tests come first, so that bytes that are not a record cost
/// little: the length against [`MAX_PAYLOAD`], in versions 3 to 5 the
/// length's own check, then the payload's shape (the kind, and text lengths that
/// add up); only then the checksum over the payload, then UTF-8.
pub fn decode_at<'a>(bytes: &'a [u8], version: Version, checked: &mut u64) -> Decoded<'a> {
    let framing = version.framing();
    let Some(head) = bytes.get(..framing) else {
        return Decoded::Short(framing);
    };
    let len = head.first_chunk::<4>().expect("four bytes");
    if let Version::V3(_) | Version::V4(_) | Version::V5(_) = version {
        *checked += 4;
    }
    let Some(end) = claimed_size(head, version) else {
        return Decoded::Bad;
    };
    let payload_len = end - framing;
    let Some(payload) = bytes.get(framing..end) else {
        return Decoded::Short(end);
    };
    if !shaped(payload, version.versioned()) {
        return Decoded::Bad;
    }
    *checked += (4 + payload_len) as u64;
    let valid = match version {
        Version::V1 => crc32c(crc32c(0, len), payload).to_le_bytes() == head[4..],
        Version::V2(salt) => check(&salt, len, payload).to_le_bytes() == head[4..],
        Version::V3(salt) => check(&salt, len, payload).to_le_bytes() == head[8..],
        Version::V4(salt) | Version::V5(salt) => {
            batch_check(&salt, len, &head[16..], payload).to_le_bytes() == head[8..16]
        }
    };
    match parse(payload, version.versioned()) {
        Some(change) if valid => Decoded::Record(change, end),
        _ => Decoded::Bad,
    }
}

/// The size of the record whose framing `head` holds, if its length is
/// believable: within [`MAX_PAYLOAD`], and in versions 3 to 5 passing its
/// own check. `head` must hold the whole framing.
pub fn claimed_size(head: &[u8], version: Version) -> Option<usize> {
    let len = head.first_chunk::<4>()?;
    let payload_len = u32::from_le_bytes(*len) as usize;
    if payload_len > MAX_PAYLOAD || head.len() < version.framing() {
        return None;
    }
    if let Version::V3(salt) | Version::V4(salt) | Version::V5(salt) = version
        && len_check(&salt, len).to_le_bytes() != head[4..8]
    {
        return None;
    }
    Some(version.framing() + payload_len)
}

/// Decodes the record at byte `at` of `file` by the rules of `version`:
/// the change and the record's size, or `None` if it is incomplete, fails
/// its checks or does not decode.
pub fn decode(file: &[u8], at: usize, version: Version) -> Option<(Change<'_>, usize)> {
    match decode_at(file.get(at..)?, version, &mut 0) {
        Decoded::Record(change, size) => Some((change, size)),
        Decoded::Bad | Decoded::Short(_) => None,
    }
}

/// Whether a payload has the shape of a change (a known kind, and text
/// lengths that fill it exactly), without looking at the texts; a
/// `versioned` put has its version after the id.
fn shaped(payload: &[u8], versioned: bool) -> bool {
    let name_at = if versioned { 17 } else { 9 };
    let text_len = |at: usize| {
        let len = u32::from_le_bytes(*payload.get(at..)?.first_chunk::<4>()?);
        Some(if len == NO_TAG { 0 } else { len as usize })
    };
    match payload.first() {
        Some(&DELETE) => payload.len() == 1 + 8,
        Some(&PUT) => {
            let Some(name) = text_len(name_at) else {
                return false;
            };
            // A name cannot be missing: `parse` refuses NO_TAG there.
            let Some(tag_at) = name.checked_add(name_at + 4) else {
                return false;
            };
            let tag = text_len(tag_at).and_then(|tag| tag.checked_add(tag_at + 4));
            tag == Some(payload.len())
        }
        _ => false,
    }
}

/// The change a payload holds, if it is one; a put's version is read
/// when `versioned`, else left 0 (for the reader to number).
fn parse(payload: &[u8], versioned: bool) -> Option<Change<'_>> {
    let (&op, rest) = payload.split_first()?;
    let id = i64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
    let rest = &rest[8..];
    match op {
        DELETE if rest.is_empty() => Some(Change::Delete(id)),
        PUT => {
            let (version, rest) = if versioned {
                (u64::from_le_bytes(*rest.first_chunk::<8>()?), &rest[8..])
            } else {
                (0, rest)
            };
            let (name, rest) = take_text(rest)?;
            let (tag, rest) = take_text(rest)?;
            if !rest.is_empty() {
                return None;
            }
            Some(Change::Put {
                id,
                version,
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
mod tests;
