//! The packer, the build-time half of `assets`: `build.rs` runs it on the
//! files the binary serves, and `assets`' unit tests run it to check the
//! unpacker against it; never part of the server. The form it writes is in
//! `src/assets/format.rs`, which both halves take their constants from.

use std::collections::HashMap;

use super::format::{COPY, HEADER, MAX_COPY, MAX_RUN, MIN_COPY, WINDOW};

/// Earlier places tried for each copy (the most recent first).
const TRIES: usize = 256;
/// A copy this long that goes on from the place before is taken as the
/// longest: looking further for one cost the packer most of its time on
/// repetitive input, and the files a few bytes.
const GOOD_ENOUGH: usize = 16;

/// `data` in the packed form: its length, then literal runs and copies.
/// The items are the fewest bytes that say `data` (a shortest path over
/// its places, each run and each copy an edge of its bytes), given the
/// longest copy found at each place: a copy of any length up to that one
/// starts there too. Greedy choosing with a byte of lookahead packed the
/// files 1.6% larger.
pub fn pack(data: &[u8]) -> Vec<u8> {
    let longest = longest_copies(data);
    // The fewest bytes that say `data[..at]`, and the last item they end
    // with: a run (`back` 0) or a copy, of `len` bytes.
    let mut fewest = vec![usize::MAX; data.len() + 1];
    let mut last = vec![Item { len: 0, back: 0 }; data.len() + 1];
    fewest[0] = 0;
    for at in 0..data.len() {
        let here = fewest[at];
        for len in 1..=MAX_RUN.min(data.len() - at) {
            if here + 1 + len < fewest[at + len] {
                fewest[at + len] = here + 1 + len;
                last[at + len] = Item { len, back: 0 };
            }
        }
        let copy = longest[at];
        for len in MIN_COPY..=copy.len {
            if here + 3 < fewest[at + len] {
                fewest[at + len] = here + 3;
                last[at + len] = Item {
                    len,
                    back: copy.back,
                };
            }
        }
    }
    let mut items = Vec::new();
    let mut at = data.len();
    while at > 0 {
        items.push(last[at]);
        at -= last[at].len;
    }
    let length: [u8; HEADER] = u32::try_from(data.len())
        .expect("under 4 GiB")
        .to_le_bytes();
    let mut out = length.to_vec();
    for item in items.into_iter().rev() {
        if item.back == 0 {
            out.push(item.len as u8 - 1);
            out.extend_from_slice(&data[at..at + item.len]);
        } else {
            out.push(COPY | (item.len - MIN_COPY) as u8);
            out.extend_from_slice(&(item.back as u16).to_le_bytes());
        }
        at += item.len;
    }
    out
}

/// An item of the packed form: a run of `len` bytes (`back` 0), or a copy
/// of `len` bytes from `back` bytes back.
#[derive(Clone, Copy)]
struct Item {
    len: usize,
    back: usize,
}

/// The longest copy that could start at each place of `data` (`len` 0
/// where none of `MIN_COPY` bytes or more can), from the `TRIES` nearest
/// earlier places with the same first `MIN_COPY` bytes within `WINDOW`.
fn longest_copies(data: &[u8]) -> Vec<Item> {
    let mut places: HashMap<&[u8], Vec<usize>> = HashMap::new();
    let mut longest = vec![Item { len: 0, back: 0 }; data.len()];
    for at in 0..data.len().saturating_sub(MIN_COPY - 1) {
        let key = &data[at..at + MIN_COPY];
        let earlier = places.entry(key).or_default();
        // The copy found a place before goes on here a byte shorter; when
        // that is long enough, no other is looked for.
        let before = at.checked_sub(1).map(|at| longest[at]);
        if let Some(Item { len, back }) = before.filter(|copy| copy.len > GOOD_ENOUGH) {
            longest[at] = Item { len: len - 1, back };
            earlier.push(at);
            continue;
        }
        for &from in earlier.iter().rev().take(TRIES) {
            if at - from > WINDOW {
                break;
            }
            let len = (0..MAX_COPY.min(data.len() - at))
                .take_while(|&i| data[from + i] == data[at + i])
                .count();
            if len > longest[at].len {
                longest[at] = Item {
                    len,
                    back: at - from,
                };
            }
            if len == MAX_COPY {
                break;
            }
        }
        earlier.push(at);
    }
    longest
}
