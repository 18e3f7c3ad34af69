//! The packer, the build-time half of `assets`: `build.rs` runs it on the
//! files the binary serves, and `assets`' unit tests run it to check the
//! unpacker against it; never part of the server. The form it writes is in
//! `src/assets/format.rs`, which both halves take their constants from.

use std::collections::HashMap;

use super::format::{COPY, HEADER, MAX_COPY, MAX_RUN, MIN_COPY, WINDOW};

/// Earlier places tried for each copy (the most recent first).
const TRIES: usize = 256;

/// `data` in the packed form: its length, then literal runs and copies,
/// chosen greedily with one step of lookahead (a copy is put off by a
/// byte when the next place starts a longer one).
pub fn pack(data: &[u8]) -> Vec<u8> {
    let length: [u8; HEADER] = u32::try_from(data.len())
        .expect("under 4 GiB")
        .to_le_bytes();
    let mut out = length.to_vec();
    // Every earlier place, by the `MIN_COPY` bytes that start there.
    let mut places: HashMap<&[u8], Vec<usize>> = HashMap::new();
    let longest = |places: &HashMap<&[u8], Vec<usize>>, at: usize| -> (usize, usize) {
        let Some(earlier) = data.get(at..at + MIN_COPY).and_then(|key| places.get(key)) else {
            return (0, 0);
        };
        let mut best = (0, 0);
        for &from in earlier.iter().rev().take(TRIES) {
            if at - from > WINDOW {
                break;
            }
            let len = (0..MAX_COPY.min(data.len() - at))
                .take_while(|&i| data[from + i] == data[at + i])
                .count();
            if len > best.0 {
                best = (len, at - from);
            }
        }
        best
    };
    // The runs from `from` to `to`, at most `MAX_RUN` bytes each.
    let literals = |out: &mut Vec<u8>, from: usize, to: usize| {
        for run in data[from..to].chunks(MAX_RUN) {
            out.push(run.len() as u8 - 1);
            out.extend_from_slice(run);
        }
    };
    let (mut at, mut unsent) = (0, 0);
    while at < data.len() {
        let (len, back) = longest(&places, at);
        let later = longest(&places, at + 1).0;
        let step = if len <= MIN_COPY || later > len + 1 {
            1
        } else {
            literals(&mut out, unsent, at);
            out.push(COPY | (len - MIN_COPY) as u8);
            out.extend_from_slice(&(back as u16).to_le_bytes());
            unsent = at + len;
            len
        };
        for place in at..at + step {
            let key = &data[place..(place + MIN_COPY).min(data.len())];
            places.entry(key).or_default().push(place);
        }
        at += step;
    }
    literals(&mut out, unsent, data.len());
    out
}
