//! The files the binary serves, compiled in packed: the OpenAPI document
//! (`src/api/openapi.json` without the whitespace between its tokens, and
//! in the plain build without its `/ca.pem` path) and
//! the built-in page's four files (`src/api/ui/`). `build.rs` packs them
//! with `build/pack.rs` into the build's output folder; `unpack` unpacks one
//! for each answer, so nothing is kept in memory. The form is in
//! `format.rs`. A leaf: it knows nothing of HTTP or of what the files say.
//!
//! Why it exists: the plain build's size ratchet (640 KiB stripped, x86_64,
//! as published). Packed, the files take 19 KB of the binary instead of
//! 51 KB: with the files compiled in as they are and no unpacker, the plain
//! build measured 24 KiB larger (November 2026; the linker lays sections
//! out in 4 KiB pages). Drop it, and serve the files from
//! `include_bytes!`, once the plain build has that much room under its
//! ratchet to spare, or once the page and the document shrink until packing
//! saves less than a page.
//!
//! What it costs: CPU on these rare requests only. `GET /openapi.json`
//! (23 KB when measured) answers about 38,000 a second on two cores against
//! 41,000-75,000 for a copy kept at start-up, `GET /ui.js` 60,000 against
//! 77,000-85,000; a page revalidated by its `ETag` (a 304) unpacks nothing.

mod format;

use format::{COPY, HEADER, MAX_COPY, MIN_COPY};

/// A file `build.rs` packed into the build's output folder.
macro_rules! packed {
    ($name:literal) => {
        include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".lz"))
    };
}

/// The OpenAPI document, compact; the plain build's without `/ca.pem`.
pub const OPENAPI_JSON: &[u8] = packed!("openapi.json");
/// The page's files.
pub const INDEX_HTML: &[u8] = packed!("index.html");
pub const UI_CSS: &[u8] = packed!("ui.css");
pub const UI_JS: &[u8] = packed!("ui.js");
pub const UI_SVG: &[u8] = packed!("ui.svg");

/// `packed`, unpacked. A malformed stream (`build.rs` makes none; a unit
/// test unpacks each file) ends the output where it goes wrong.
pub fn unpack(packed: &[u8]) -> Vec<u8> {
    let Some((len, mut rest)) = packed.split_first_chunk::<HEADER>() else {
        return Vec::new();
    };
    // Room for the length it declares, but never more than the stream
    // could make (a copy's item of 3 bytes makes at most `MAX_COPY`).
    let most = rest.len().saturating_mul(MAX_COPY.div_ceil(3));
    let mut out = Vec::with_capacity((u32::from_le_bytes(*len) as usize).min(most));
    while let Some((&op, tail)) = rest.split_first() {
        if op & COPY == 0 {
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
            let len = usize::from(op & !COPY) + MIN_COPY;
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

/// The packer `build.rs` runs, for the tests.
#[cfg(test)]
#[path = "../../build/pack.rs"]
mod pack;

#[cfg(test)]
mod tests {
    use super::pack::pack;
    use super::*;

    #[test]
    fn each_file_unpacks_to_itself_and_packs_small() {
        let files: [(&[u8], &[u8]); 4] = [
            (INDEX_HTML, include_bytes!("../api/ui/index.html")),
            (UI_CSS, include_bytes!("../api/ui/ui.css")),
            (UI_JS, include_bytes!("../api/ui/ui.js")),
            (UI_SVG, include_bytes!("../api/ui/ui.svg")),
        ];
        let (mut packed_total, mut total) = (0, 0);
        for (packed, file) in files {
            assert_eq!(unpack(packed), file);
            (packed_total, total) = (packed_total + packed.len(), total + file.len());
        }
        // The document as the build has it: `api::service`'s tests compare
        // it with the file.
        let document = unpack(OPENAPI_JSON);
        assert!(serde_json::from_slice::<serde_json::Value>(&document).is_ok());
        (packed_total, total) = (packed_total + OPENAPI_JSON.len(), total + document.len());
        assert!(packed_total * 2 < total, "{packed_total} of {total} bytes");
    }

    #[test]
    fn the_packer_chooses_the_fewest_bytes() {
        // "ab", 4 bytes copied from 2 back, then "bab" copied from 5 back:
        // 9 bytes of items, where taking "bab" as a run (1 + 3 bytes) or
        // the longest copy first and the rest as runs takes more.
        let packed = [9, 0, 0, 0, 1, b'a', b'b', 0x81, 2, 0, 0x80, 5, 0];
        assert_eq!(unpack(&packed), b"abababbab");
        let chosen = pack(b"abababbab");
        assert_eq!(unpack(&chosen), b"abababbab");
        assert_eq!(chosen.len(), packed.len(), "{chosen:?}");
    }

    #[test]
    fn copies_may_overlap_and_a_broken_stream_ends_early() {
        // "ab", then 7 bytes copied from 2 back: "ababababa".
        let packed = [9, 0, 0, 0, 1, b'a', b'b', 0x84, 2, 0];
        assert_eq!(unpack(&packed), b"ababababa");
        assert_eq!(unpack(&packed[..8]), b"ab", "a copy cut short");
        assert_eq!(unpack(&packed[..6]), b"", "a run cut short");
        assert_eq!(
            unpack(&[1, 0, 0, 0, 0x80, 1, 0]),
            b"",
            "a copy from before the start"
        );
        assert_eq!(
            unpack(&[1, 0, 0, 0, 0, b'x', 0x80, 0, 0]),
            b"x",
            "a copy from 0 back"
        );
        assert_eq!(unpack(&[]), b"");
        // A length that lies reserves no more than the items could make.
        assert_eq!(unpack(&[0xff, 0xff, 0xff, 0xff, 0, b'y']), b"y");
    }

    #[test]
    fn anything_packed_unpacks_to_itself() {
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
            assert_eq!(unpack(&pack(&data)), data, "round {round}");
        }
    }
}
