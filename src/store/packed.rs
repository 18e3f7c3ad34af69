//! A plant as the map keeps it: name and tag packed into 24 bytes.
//!
//! A million plants must fit in well under 100 MiB, and `Plant` (two
//! `String`s, 48 bytes, plus one or two heap blocks) does not. A `Packed` is
//! one byte string `header name tag`, where the header is a LEB128 varint of
//! `name_len << 1 | has_tag`. Up to 22 bytes of it live inline (no heap
//! block at all: "plant 123456" with a short tag fits); longer ones take
//! exactly one boxed slice.

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
    /// Packs a name and an optional tag.
    pub fn new(name: &str, tag: Option<&str>) -> Packed {
        let mut header = [0u8; 10];
        let mut value = ((name.len() as u64) << 1) | u64::from(tag.is_some());
        let mut used = 0;
        loop {
            let byte = (value & 0x7F) as u8;
            value >>= 7;
            header[used] = if value == 0 { byte } else { byte | 0x80 };
            used += 1;
            if value == 0 {
                break;
            }
        }
        let tag = tag.unwrap_or("");
        let total = used + name.len() + tag.len();
        let parts = [&header[..used], name.as_bytes(), tag.as_bytes()];
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
        let bytes = self.bytes();
        let mut value = 0u64;
        let mut used = 0;
        for (i, &b) in bytes.iter().enumerate() {
            value |= u64::from(b & 0x7F) << (7 * i);
            used = i + 1;
            if b & 0x80 == 0 {
                break;
            }
        }
        let rest = &bytes[used..];
        let name_len = ((value >> 1) as usize).min(rest.len());
        let (name, tag) = rest.split_at(name_len);
        (name, tag, value & 1 == 1)
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

    /// The name and the tag, if any, read in one pass (a search reads
    /// both of every plant).
    pub fn parts(&self) -> (&str, Option<&str>) {
        let (name, tag, has_tag) = self.split();
        let name_len = name.len();
        // Both parts are UTF-8, so their concatenation is, and the name
        // ends on a char boundary of it.
        let both = self.bytes();
        let both =
            std::str::from_utf8(&both[both.len() - name_len - tag.len()..]).unwrap_or_default();
        match both.split_at_checked(name_len) {
            Some((name, tag)) => (name, has_tag.then_some(tag)),
            None => ("", None),
        }
    }

    /// An owned `Plant` with the same name and tag.
    pub fn to_plant(&self) -> Plant {
        Plant {
            name: self.name().to_owned(),
            tag: self.tag().map(str::to_owned),
        }
    }
}

impl From<&Plant> for Packed {
    fn from(plant: &Plant) -> Packed {
        Packed::new(&plant.name, plant.tag.as_deref())
    }
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
            let packed = Packed::new(name, tag);
            assert_eq!((packed.name(), packed.tag()), (name, tag));
            assert_eq!(packed.parts(), (name, tag));
            let header = if name.len() < 64 { 1 } else { 2 };
            let total = header + name.len() + tag.map_or(0, str::len);
            assert_eq!(matches!(packed.0, Repr::Inline { .. }), total <= INLINE);
        }
    }
}
