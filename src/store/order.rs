//! The name order of one shard: its ids sorted by (name bytes, id), kept
//! beside the map and changed with it by `Shard::apply`.
//!
//! It is an order over ids, not a second copy of the names. An entry is 24
//! bytes: the id and a 16-byte key, the name's first 15 bytes (zero-padded)
//! and then its length capped at 16. Keys compare as the names do, except
//! where two keys are equal and both names are longer than 15 bytes: only
//! then are the whole names read from the shard's map. (Equal keys of
//! shorter names are equal names; a zero pad cannot pass for a NUL, since
//! the length byte tells them apart.) Short names such as "plant 123456"
//! are thus ordered without touching the map at all.
//!
//! Entries sit in sorted chunks of at most [`CAP`], each allocated once at
//! that capacity: an insert or removal moves the entries of at most two
//! chunks (3 KiB each), and when it splits or merges a chunk, the chunk
//! list and the list of each chunk's last entry, which a search reads to
//! find its chunk (48 bytes a chunk together: about a fiftieth of the
//! entries' bytes). A full chunk first hands an
//! entry to a neighbour with room and splits only when both are full, so
//! names arriving in order fill chunks; a removal merges a chunk into a
//! neighbour whenever the two fit in one. Every two neighbouring chunks
//! therefore hold more than [`CAP`] entries, so chunks are more than half
//! full on average: at most about 48 bytes a plant whatever the history,
//! and in practice far less. Measured by `bytes_per_plant_for_a_million_
//! short_names` (in `order/tests.rs`: the chunks' and the chunk lists'
//! allocations, counted from their capacities, over 16 shards): 1,000,000
//! plants named "plant 0" to "plant 999999" take 25.2 bytes a plant
//! (24.0 MiB) created in id order, 29.6 (28.3 MiB) created in a scattered
//! order.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::Packed;

/// Entries a chunk holds at most.
const CAP: usize = 128;

/// Bytes of a name its key holds.
const PREFIX: usize = 15;

/// One plant in the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// `key(name)`, as two big-endian words so that they compare as bytes.
    key: [u64; 2],
    id: i64,
}

/// The first `PREFIX` bytes of `name`, zero-padded, and its length capped
/// at `PREFIX + 1`.
fn key(name: &[u8]) -> [u64; 2] {
    let mut bytes = [0u8; 16];
    let n = name.len().min(PREFIX);
    bytes[..n].copy_from_slice(&name[..n]);
    bytes[PREFIX] = name.len().min(PREFIX + 1) as u8;
    let (high, low) = bytes.split_at(8);
    let word = |half: &[u8]| u64::from_be_bytes(half.try_into().unwrap_or_default());
    [word(high), word(low)]
}

/// What is being looked for: a name and an id, and the name's key.
struct Target<'a> {
    name: &'a [u8],
    id: i64,
    key: [u64; 2],
    /// Whether the entry with this id, where there is one, is the one
    /// sought (a removal: the map may already hold the plant's new name,
    /// or none). Otherwise (an insert, where a walk resumes) an entry is
    /// placed by its name as the map holds it now: a cursor's plant
    /// renamed since (within the same key) is where its new name puts it,
    /// and the target where the cursor's name does.
    own: bool,
}

impl<'a> Target<'a> {
    fn new(name: &'a [u8], id: i64) -> Target<'a> {
        Target {
            name,
            id,
            key: key(name),
            own: false,
        }
    }

    /// How `entry` compares with the target, reading the entry's whole
    /// name from `plants` only when the keys cannot tell.
    fn compare(&self, entry: &Entry, plants: &BTreeMap<i64, Packed>) -> Ordering {
        let [high, low] = entry.key;
        if high != self.key[0] {
            return high.cmp(&self.key[0]);
        }
        if low != self.key[1] {
            return low.cmp(&self.key[1]);
        }
        // Equal keys: equal names, unless both are longer than the prefix.
        let long = low & 0xFF > PREFIX as u64;
        if long && !(self.own && entry.id == self.id) {
            let names = tail(name_of(plants, entry.id)).cmp(tail(self.name));
            if names.is_ne() {
                return names;
            }
        }
        entry.id.cmp(&self.id)
    }
}

fn tail(name: &[u8]) -> &[u8] {
    &name[PREFIX.min(name.len())..]
}

/// The name of plant `id`; empty if the map lacks it, which `Shard::apply`
/// never lets happen.
fn name_of(plants: &BTreeMap<i64, Packed>, id: i64) -> &[u8] {
    plants.get(&id).map_or(&[], |plant| plant.name().as_bytes())
}

/// A shard's ids in (name, id) order.
#[derive(Debug, Default)]
pub(super) struct NameOrder {
    /// Sorted, each non-empty, each of capacity `CAP`.
    chunks: Vec<Vec<Entry>>,
    /// Each chunk's last entry, in a list of their own (24 bytes a chunk):
    /// looking for a chunk reads this one list, not a line of every chunk
    /// it probes, each in an allocation of its own and seldom in the cache
    /// (an insert paid those misses on every `POST`).
    lasts: Vec<Entry>,
}

impl NameOrder {
    /// Adds plant `id` named `name`, which the order does not hold.
    /// `plants` holds the names of the plants in the order (whatever it
    /// holds for `id`).
    pub fn insert(&mut self, name: &[u8], id: i64, plants: &BTreeMap<i64, Packed>) {
        let target = Target::new(name, id);
        let entry = Entry {
            key: target.key,
            id,
        };
        if self.chunks.is_empty() {
            self.chunks.push(chunk_of(&[entry]));
            self.lasts.push(entry);
            return;
        }
        let (at, pos) = self.seek(|e| target.compare(e, plants).is_lt());
        // Past every entry: at the end of the last chunk.
        let (at, pos) = match self.chunks.get(at) {
            Some(_) => (at, pos),
            None => (at - 1, self.chunks[at - 1].len()),
        };
        self.put(at, pos, entry);
        self.refresh(at);
    }

    /// Removes plant `id`, which was named `name` when it was put in;
    /// `plants` holds the names of the other plants in the order (whatever
    /// it holds for `id`). Whether it was there.
    pub fn remove(&mut self, name: &[u8], id: i64, plants: &BTreeMap<i64, Packed>) -> bool {
        let target = Target {
            own: true,
            ..Target::new(name, id)
        };
        let (at, pos) = self.seek(|e| target.compare(e, plants).is_lt());
        let Some(chunk) = self.chunks.get_mut(at) else {
            return false;
        };
        if chunk.get(pos).map(|e| e.id) != Some(id) {
            return false;
        }
        chunk.remove(pos);
        self.rebalance(at);
        self.refresh(at);
        true
    }

    /// The ids from a place in the order onwards, in the walk's direction:
    /// from the start without `from`, else past `(name, id)` (or at it,
    /// `inclusive`), upwards or, `descending`, downwards.
    pub fn walk<'a>(
        &'a self,
        plants: &BTreeMap<i64, Packed>,
        from: Option<(&[u8], i64, bool)>,
        descending: bool,
    ) -> Box<dyn Iterator<Item = i64> + 'a> {
        let (at, pos) = match from {
            None if descending => (self.chunks.len(), 0),
            None => (0, 0),
            Some((name, id, inclusive)) => {
                let target = Target::new(name, id);
                // The entries before the split: below the target, and the
                // target itself when it is passed (up, exclusive) or
                // included (down, inclusive).
                let upto = inclusive == descending;
                self.seek(|e| match target.compare(e, plants) {
                    Ordering::Less => true,
                    Ordering::Equal => upto,
                    Ordering::Greater => false,
                })
            }
        };
        let (head, tail) = match self.chunks.get(at) {
            Some(chunk) => chunk.split_at(pos),
            None => (&[][..], &[][..]),
        };
        let ids = |e: &Entry| e.id;
        if descending {
            let before = self.chunks[..at].iter().rev().flat_map(|c| c.iter().rev());
            Box::new(head.iter().rev().chain(before).map(ids))
        } else {
            let after = self.chunks.get(at + 1..).unwrap_or_default().iter();
            Box::new(tail.iter().chain(after.flatten()).map(ids))
        }
    }

    /// Bytes the order has allocated.
    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        let chunks = self.chunks.capacity() * size_of::<Vec<Entry>>();
        let entries: usize = self.chunks.iter().map(Vec::capacity).sum();
        chunks + (entries + self.lasts.capacity()) * size_of::<Entry>()
    }

    /// Where the entries for which `before` holds (a prefix of the order)
    /// end: a chunk and a position in it; the chunk count when they are
    /// all of them.
    fn seek(&self, before: impl Fn(&Entry) -> bool) -> (usize, usize) {
        let at = self.lasts.partition_point(&before);
        let pos = self
            .chunks
            .get(at)
            .map_or(0, |c| c.partition_point(&before));
        (at, pos)
    }

    /// Brings the last entries of chunk `at` and its neighbours, which a
    /// change there may have moved, up to date with their chunks.
    fn refresh(&mut self, at: usize) {
        for i in at.saturating_sub(1)..=at + 1 {
            if let (Some(chunk), Some(last)) = (self.chunks.get(i), self.lasts.get_mut(i))
                && let Some(entry) = chunk.last()
            {
                *last = *entry;
            }
        }
    }

    /// Puts `entry` at `pos` in chunk `at`, making room if it is full
    /// (`refresh(at)` then brings the last entries up to date).
    fn put(&mut self, at: usize, pos: usize, entry: Entry) {
        let chunks = &mut self.chunks;
        if chunks[at].len() < CAP {
            chunks[at].insert(pos, entry);
            return;
        }
        if at > 0 && chunks[at - 1].len() < CAP {
            // Hand the first entry (or the new one, if it goes first) to
            // the previous chunk.
            if pos == 0 {
                chunks[at - 1].push(entry);
            } else {
                let first = chunks[at].remove(0);
                chunks[at - 1].push(first);
                chunks[at].insert(pos - 1, entry);
            }
            return;
        }
        if at + 1 < chunks.len() && chunks[at + 1].len() < CAP {
            if pos == CAP {
                chunks[at + 1].insert(0, entry);
            } else if let Some(last) = chunks[at].pop() {
                chunks[at + 1].insert(0, last);
                chunks[at].insert(pos, entry);
            }
            return;
        }
        let mut upper = chunk_of(&chunks[at][CAP / 2..]);
        chunks[at].truncate(CAP / 2);
        if pos <= CAP / 2 {
            chunks[at].insert(pos, entry);
        } else {
            upper.insert(pos - CAP / 2, entry);
        }
        chunks.insert(at + 1, upper);
        self.lasts.insert(at + 1, entry);
    }

    /// After a removal from chunk `at`: drops it if empty, else merges it
    /// with a neighbour the two fit in (`refresh(at)` then brings the last
    /// entries up to date).
    fn rebalance(&mut self, at: usize) {
        let chunks = &mut self.chunks;
        let len = chunks[at].len();
        if len == 0 {
            chunks.remove(at);
            self.lasts.remove(at);
        } else if at > 0 && chunks[at - 1].len() + len <= CAP {
            let merged = chunks.remove(at);
            self.lasts.remove(at);
            chunks[at - 1].extend_from_slice(&merged);
        } else if at + 1 < chunks.len() && chunks[at + 1].len() + len <= CAP {
            let merged = chunks.remove(at + 1);
            self.lasts.remove(at + 1);
            chunks[at].extend_from_slice(&merged);
        }
    }
}

/// A chunk holding `entries`, allocated at its full capacity.
fn chunk_of(entries: &[Entry]) -> Vec<Entry> {
    let mut chunk = Vec::with_capacity(CAP);
    chunk.extend_from_slice(entries);
    chunk
}

#[cfg(test)]
pub(super) mod tests;
