//! The bytes of a journal record: encoding, decoding and the checksum.
//! The layout is described in the journal's module header.

/// The first eight bytes of every journal.
pub const MAGIC: &[u8; 8] = b"PLANTSJ1";

/// Length and checksum in front of every payload.
pub(super) const HEADER: usize = 8;
const PUT: u8 = 1;
const DELETE: u8 = 2;
const NO_TAG: u32 = u32::MAX;

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
        (HEADER + payload) as u64
    }
}

/// Appends the record of `change` to `buf`.
pub fn encode(buf: &mut Vec<u8>, change: &Change<'_>) {
    let start = buf.len();
    buf.extend_from_slice(&[0; HEADER]);
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
    let len = (buf.len() - start - HEADER) as u32;
    buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
    let crc = crc32c(crc32c(0, &len.to_le_bytes()), &buf[start + HEADER..]);
    buf[start + 4..start + HEADER].copy_from_slice(&crc.to_le_bytes());
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

/// Decodes the record at the start of `bytes`: the change and the record's
/// size, or `None` if it is incomplete, fails its checksum or does not
/// decode.
pub fn decode(bytes: &[u8]) -> Option<(Change<'_>, usize)> {
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    let crc = u32::from_le_bytes(bytes.get(4..HEADER)?.try_into().ok()?);
    let end = HEADER.checked_add(len as usize)?;
    let payload = bytes.get(HEADER..end)?;
    if crc32c(crc32c(0, &len.to_le_bytes()), payload) != crc {
        return None;
    }
    let (&op, rest) = payload.split_first()?;
    let id = i64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
    let rest = &rest[8..];
    let change = match op {
        DELETE if rest.is_empty() => Change::Delete(id),
        PUT => {
            let (name, rest) = take_text(rest)?;
            let (tag, rest) = take_text(rest)?;
            if !rest.is_empty() {
                return None;
            }
            Change::Put {
                id,
                name: name?,
                tag,
            }
        }
        _ => return None,
    };
    Some((change, end))
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
    let mut crc = !crc;
    for &b in bytes {
        crc = CRC_TABLE[((crc ^ b as u32) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};
