//! A plant as the map keeps it: version, name and tag packed into 24 bytes.
//!
//! A million plants must fit in well under 100 MiB, and `Plant` (two
//! `String`s, 48 bytes, plus one or two heap blocks) does not. A `Packed` is
//! one byte string `version header name tag`, where the version and the
//! header are LEB128 varints, the header of `name_len << 1 | has_tag`. Up
//! to 22 bytes of it live inline (no heap block at all: "plant 123456"
//! with a short tag and a version below 2^28 fits); longer ones take
//! exactly one boxed slice. The version is a varint, not a fixed field,
//! so that it costs a plant nothing: the versions of a store are counted
//! from 1, and below 2^21 (two million changes) take 3 bytes, below 2^28
//! four, where a fixed 6 bytes would move "plant 123456" tagged "bench"
//! out of line (docs/storage.md has the bytes a plant takes).

use crate::model::Plant;

/// Bytes stored inline.
const INLINE: usize = 22;

/// A plant's name and tag, compactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed(Repr);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Repr {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl Packed {
    /// Packs a name, an optional tag and the plant's version.
    pub fn new(name: &str, tag: Option<&str>, version: u64) -> Packed {
        let (mut stamp, mut header) = ([0u8; 10], [0u8; 10]);
        let stamp_len = varint(version, &mut stamp);
        let header_value = ((name.len() as u64) << 1) | u64::from(tag.is_some());
        let header_len = varint(header_value, &mut header);
        let (stamp, header) = (&stamp[..stamp_len], &header[..header_len]);
        let tag = tag.unwrap_or("");
        let total = stamp.len() + header.len() + name.len() + tag.len();
        let parts = [stamp, header, name.as_bytes(), tag.as_bytes()];
        if total <= INLINE {
            let mut bytes = [0u8; INLINE];
            let mut at = 0;
            for part in parts {
                bytes[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
            Packed(Repr::Inline {
                len: total as u8,
                bytes,
            })
        } else {
            Packed(Repr::Heap(parts.concat().into_boxed_slice()))
        }
    }

    fn bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Heap(bytes) => bytes,
        }
    }

    /// Where the name ends, and whether a tag follows it.
    fn split(&self) -> (&[u8], &[u8], bool) {
        let (_, rest) = read_varint(self.bytes());
        let (value, rest) = read_varint(rest);
        let name_len = ((value >> 1) as usize).min(rest.len());
        let (name, tag) = rest.split_at(name_len);
        (name, tag, value & 1 == 1)
    }

    /// The plant's version: the number of the change that made it so (see
    /// `Core::change`).
    pub fn version(&self) -> u64 {
        read_varint(self.bytes()).0
    }

    /// The name.
    pub fn name(&self) -> &str {
        // Both parts were copied whole from `&str`s, so they are UTF-8.
        std::str::from_utf8(self.split().0).unwrap_or_default()
    }

    /// The tag, if any.
    pub fn tag(&self) -> Option<&str> {
        let (_, tag, has_tag) = self.split();
        has_tag.then(|| std::str::from_utf8(tag).unwrap_or_default())
    }

    /// The bytes of the name and of the tag, if any, not checked as text:
    /// what a search reads of every plant.
    pub fn raw_parts(&self) -> (&[u8], Option<&[u8]>) {
        let (name, tag, has_tag) = self.split();
        (name, has_tag.then_some(tag))
    }

    /// An owned `Plant` with the same name and tag.
    pub fn to_plant(&self) -> Plant {
        Plant {
            name: self.name().to_owned(),
            tag: self.tag().map(str::to_owned),
        }
    }
}

/// Writes `value` as a LEB128 varint at the start of `out`; the bytes it
/// took (at most 10).
fn varint(mut value: u64, out: &mut [u8; 10]) -> usize {
    let mut used = 0;
    loop {
        let byte = (value & 0x7F) as u8;
        value >>= 7;
        out[used] = if value == 0 { byte } else { byte | 0x80 };
        used += 1;
        if value == 0 {
            return used;
        }
    }
}

/// The LEB128 varint at the start of `bytes`, and the bytes after it.
fn read_varint(bytes: &[u8]) -> (u64, &[u8]) {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            return (value, &bytes[i + 1..]);
        }
    }
    (value, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_24_bytes() {
        assert_eq!(std::mem::size_of::<Packed>(), 24);
    }

    #[test]
    fn round_trips_inline_and_on_the_heap() {
        let long = "x".repeat(300);
        for (name, tag) in [
            ("", None),
            ("", Some("")),
            ("plant 123456", None),
            ("plant 123456", Some("bench")),
            ("ünïcödé 🌱", Some("🌵")),
            ("exactly twenty-one b", None),
            ("exactly twenty-one b", Some("")),
            (long.as_str(), Some("tag")),
            ("n", Some(long.as_str())),
        ] {
            for (version, stamp) in [(0, 1), (127, 1), (128, 2), (1 << 40, 6), (u64::MAX, 10)] {
                let packed = Packed::new(name, tag, version);
                let what = format!("{name:?} {tag:?} {version}");
                assert_eq!((packed.name(), packed.tag()), (name, tag), "{what}");
                assert_eq!(packed.version(), version, "{what}");
                let raw = (name.as_bytes(), tag.map(str::as_bytes));
                assert_eq!(packed.raw_parts(), raw, "{what}");
                let header = if name.len() < 64 { 1 } else { 2 };
                let total = stamp + header + name.len() + tag.map_or(0, str::len);
                let inline = matches!(packed.0, Repr::Inline { .. });
                assert_eq!(inline, total <= INLINE, "{what}");
            }
        }
    }

    #[test]
    fn the_benchmarks_plants_stay_inline_up_to_the_version_2_to_the_28() {
        // What a million plants cost is the map's 24 bytes a plant only
        // while they need no heap block: the footprint's plants ("plant
        // N", no tag) and the pinned POST's (tagged "bench"), the longest
        // of each, up to 268 million changes.
        for version in [1, 999_999, (1 << 21) - 1, 1 << 21, (1 << 28) - 1] {
            for tag in [None, Some("bench")] {
                let packed = Packed::new("plant 999999", tag, version);
                assert!(matches!(packed.0, Repr::Inline { .. }), "{tag:?} {version}");
            }
        }
        let past = Packed::new("plant 999999", Some("bench"), 1 << 28);
        assert!(matches!(past.0, Repr::Heap(_)));
    }
}
