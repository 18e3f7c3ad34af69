//! The files the binary serves, compiled in compressed (LZ77, hence the
//! name): `build.rs` compresses the
//! OpenAPI document and the page's files, and they are decompressed for each
//! answer, so nothing is kept in memory. That costs CPU on these rare
//! requests only: `GET /openapi.json` (23 KB) answers about 38,000 a
//! second on two cores against 41,000-75,000 for a copy kept at start-up,
//! `GET /ui.js` 60,000 against 77,000-85,000; a page revalidated by its
//! `ETag` (a 304) decompresses nothing.
//!
//! Compressed, they take 15 KB of the binary instead of 39 KB. The format is a
//! byte-oriented LZ77, the simplest that gets most of what deflate would
//! (10 KB) without an inflater in the binary:
//!
//! - four bytes, little-endian: the decompressed length;
//! - then items, each opened by one byte `b`:
//!   - `b` below `0x80`: a literal run, the `b + 1` bytes that follow;
//!   - else a copy of `(b & 0x7f) + 3` bytes, starting the number of bytes
//!     back in the output that the next two bytes give (little-endian, at
//!     least 1); a copy may overlap what it makes, byte by byte.

/// `compressed`, decompressed. A malformed stream (`build.rs` makes none; a unit
/// test decompresses each file) ends the output where it goes wrong.
pub fn decompress(compressed: &[u8]) -> Vec<u8> {
    let Some((len, mut rest)) = compressed.split_first_chunk::<4>() else {
        return Vec::new();
    };
    // Room for the length it declares, but never more than the stream
    // could make (an item of 3 bytes makes at most 130).
    let most = rest.len().saturating_mul(44);
    let mut out = Vec::with_capacity((u32::from_le_bytes(*len) as usize).min(most));
    while let Some((&op, tail)) = rest.split_first() {
        if op < 0x80 {
            let Some((run, tail)) = tail.split_at_checked(usize::from(op) + 1) else {
                break;
            };
            out.extend_from_slice(run);
            rest = tail;
        } else {
            let Some((back, tail)) = tail.split_first_chunk::<2>() else {
                break;
            };
            let back = usize::from(u16::from_le_bytes(*back));
            let Some(from) = out.len().checked_sub(back).filter(|_| back > 0) else {
                break;
            };
            let len = usize::from(op & 0x7f) + 3;
            if back >= len {
                // Within what is already out: one copy.
                out.extend_from_within(from..from + len);
            } else {
                for i in from..from + len {
                    out.push(out[i]);
                }
            }
            rest = tail;
        }
    }
    out
}

/// A file `build.rs` compressed into the build's output folder.
macro_rules! compressed {
    ($name:literal) => {
        include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".lz"))
    };
}
pub(super) use compressed;

/// The compressor `build.rs` runs, for the tests.
#[cfg(test)]
#[path = "lzpack.rs"]
mod lzpack;

#[cfg(test)]
mod tests {
    use super::lzpack::compress;
    use super::*;

    #[test]
    fn each_file_decompresses_to_itself_and_compresses_small() {
        let files: [(&[u8], &[u8]); 4] = [
            (compressed!("index.html"), include_bytes!("ui/index.html")),
            (compressed!("ui.css"), include_bytes!("ui/ui.css")),
            (compressed!("ui.js"), include_bytes!("ui/ui.js")),
            (compressed!("ui.svg"), include_bytes!("ui/ui.svg")),
        ];
        let (mut compressed_total, mut total) = (0, 0);
        for (compressed, file) in files {
            assert_eq!(decompress(compressed), file);
            (compressed_total, total) = (compressed_total + compressed.len(), total + file.len());
        }
        let document = decompress(compressed!("openapi.json"));
        let file: serde_json::Value = serde_json::from_str(include_str!("openapi.json")).unwrap();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&document).unwrap(),
            file
        );
        (compressed_total, total) = (
            compressed_total + compressed!("openapi.json").len(),
            total + document.len(),
        );
        assert!(
            compressed_total * 2 < total,
            "{compressed_total} of {total} bytes"
        );
    }

    #[test]
    fn copies_may_overlap_and_a_broken_stream_ends_early() {
        // "ab", then 7 bytes copied from 2 back: "ababababa".
        let compressed = [9, 0, 0, 0, 1, b'a', b'b', 0x84, 2, 0];
        assert_eq!(decompress(&compressed), b"ababababa");
        assert_eq!(decompress(&compressed[..8]), b"ab", "a copy cut short");
        assert_eq!(decompress(&compressed[..6]), b"", "a run cut short");
        assert_eq!(
            decompress(&[1, 0, 0, 0, 0x80, 1, 0]),
            b"",
            "a copy from before the start"
        );
        assert_eq!(
            decompress(&[1, 0, 0, 0, 0, b'x', 0x80, 0, 0]),
            b"x",
            "a copy from 0 back"
        );
        assert_eq!(decompress(&[]), b"");
        // A length that lies reserves no more than the items could make.
        assert_eq!(decompress(&[0xff, 0xff, 0xff, 0xff, 0, b'y']), b"y");
    }

    #[test]
    fn anything_compressed_decompresses_to_itself() {
        // Runs longer than one item, copies longer than one item, far and
        // overlapping copies, bytes that look like items.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut random = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for round in 0..40 {
            let mut data = Vec::new();
            while data.len() < 1 + round * 500 {
                match random(4) {
                    0 => data.extend((0..random(300)).map(|_| random(256) as u8)),
                    1 if !data.is_empty() => {
                        let from = random(data.len() as u64) as usize;
                        let len = random(400) as usize;
                        for i in 0..len {
                            data.push(data[from + i]);
                        }
                    }
                    2 => data.extend(std::iter::repeat_n(
                        random(3) as u8 + 0x7f,
                        random(500) as usize,
                    )),
                    _ => data.push(random(256) as u8),
                }
            }
            assert_eq!(decompress(&compress(&data)), data, "round {round}");
        }
    }
}
