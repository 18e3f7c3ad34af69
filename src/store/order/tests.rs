//! The name order against a brute-force sort, and what it costs a plant.

use super::super::{SHARDS, shard_of};
use super::*;

/// A shard's map and order, changed as `Shard::apply` changes them.
#[derive(Default)]
struct Both {
    plants: BTreeMap<i64, Packed>,
    order: NameOrder,
}

impl Both {
    /// As `Shard::apply` does: the map first, then the order, which
    /// finds the plant by the name it had.
    fn put(&mut self, id: i64, name: &str) {
        let old = self.plants.insert(id, Packed::new(name, None, 1));
        match old {
            Some(old) if old.name() == name => {}
            Some(old) => {
                assert!(self.order.remove(old.name().as_bytes(), id, &self.plants));
                self.order.insert(name.as_bytes(), id, &self.plants);
            }
            None => self.order.insert(name.as_bytes(), id, &self.plants),
        }
    }

    fn delete(&mut self, id: i64) {
        if let Some(old) = self.plants.remove(&id) {
            assert!(self.order.remove(old.name().as_bytes(), id, &self.plants));
        }
    }

    /// Every (name, id), sorted by brute force.
    fn sorted(&self) -> Vec<(Vec<u8>, i64)> {
        let mut all: Vec<(Vec<u8>, i64)> = (self.plants.iter())
            .map(|(&id, p)| (p.name().as_bytes().to_vec(), id))
            .collect();
        all.sort();
        all
    }

    /// The chunks are sorted, within their bounds, no two neighbours
    /// would fit in one, and the list of their last entries is theirs.
    fn check(&self) {
        let chunks = &self.order.chunks;
        let lasts: Vec<Entry> = chunks.iter().filter_map(|c| c.last().copied()).collect();
        assert_eq!(
            self.order.lasts, lasts,
            "each chunk's last entry, listed apart"
        );
        for (i, chunk) in chunks.iter().enumerate() {
            assert!(!chunk.is_empty() && chunk.len() <= CAP && chunk.capacity() == CAP);
            if let Some(next) = chunks.get(i + 1) {
                assert!(chunk.len() + next.len() > CAP, "chunk {i} could merge");
            }
        }
        let ids: Vec<i64> = self.order.walk(&self.plants, None, false).collect();
        let want: Vec<i64> = self.sorted().into_iter().map(|(_, id)| id).collect();
        assert_eq!(ids, want);
        let mut down: Vec<i64> = self.order.walk(&self.plants, None, true).collect();
        down.reverse();
        assert_eq!(down, want);
    }
}

/// xorshift64*: small and seedable (the store's other tests use it too).
pub(in crate::store) struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// Names that tie in their keys, differ only past 15 bytes, differ in
/// length around 15 and 16, hold NULs, or are not ASCII.
const NAMES: [&str; 14] = [
    "",
    "a",
    "a\0",
    "a\0\0",
    "fern",
    "Fern",
    "ab cd ef gh ij ",
    "ab cd ef gh ij k",
    "ab cd ef gh ij kl",
    "ab cd ef gh ij km",
    "ab cd ef gh ij k\0",
    "ab cd ef gh ij kl\u{e9}",
    "\u{1F331} pot",
    "\u{ffff}",
];

#[test]
fn the_order_matches_a_brute_force_sort_after_random_changes() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut both = Both::default();
    for round in 0..6000 {
        let id = rng.below(700) as i64 - 350;
        match rng.below(10) {
            0..=2 => both.delete(id),
            _ => {
                let name = NAMES[rng.below(NAMES.len() as u64) as usize];
                let name = format!("{name}{}", rng.below(3));
                both.put(
                    id,
                    if rng.below(4) == 0 {
                        &name[..name.len() - 1]
                    } else {
                        &name
                    },
                );
            }
        }
        if round % 500 == 0 {
            both.check();
        }
    }
    both.check();
    assert!(
        both.order.chunks.len() > 2,
        "{} chunks",
        both.order.chunks.len()
    );
    // From every place, either way, past it or at it.
    let sorted = both.sorted();
    for _ in 0..300 {
        let name = NAMES[rng.below(NAMES.len() as u64) as usize].as_bytes();
        let id = rng.below(700) as i64 - 350;
        let (inclusive, descending) = (rng.below(2) == 0, rng.below(2) == 0);
        let got: Vec<i64> = (both.order)
            .walk(&both.plants, Some((name, id, inclusive)), descending)
            .collect();
        let at = (name.to_vec(), id);
        let mut want: Vec<i64> = (sorted.iter())
            .filter(|k| match (descending, inclusive) {
                (false, false) => **k > at,
                (false, true) => **k >= at,
                (true, false) => **k < at,
                (true, true) => **k <= at,
            })
            .map(|(_, id)| *id)
            .collect();
        if descending {
            want.reverse();
        }
        assert_eq!(got, want, "{name:?} {id} {inclusive} {descending}");
    }
    for id in -350..350 {
        both.delete(id);
    }
    assert!(both.order.chunks.is_empty());
}

#[test]
fn removing_what_is_not_there_changes_nothing() {
    let mut both = Both::default();
    both.put(1, "fern");
    assert!(!both.order.remove(b"fern", 2, &both.plants));
    assert!(!both.order.remove(b"moss", 1, &both.plants));
    both.check();
}

#[test]
fn bytes_per_plant_for_a_million_short_names() {
    // Each shard's order holds the ids hashing to it, as a store filled
    // with "plant 0" .. "plant 999999" has them: created in id order,
    // then in a scattered order.
    let plants = 1_000_000;
    for (scatter, budget) in [(1, 27.0), (999_983, 34.0)] {
        let mut shards: Vec<Both> = (0..SHARDS).map(|_| Both::default()).collect();
        for n in 0..plants {
            let id = n * scatter % plants;
            let shard = &mut shards[shard_of(id)];
            let name = format!("plant {id}");
            shard.order.insert(name.as_bytes(), id, &shard.plants);
        }
        let bytes: usize = shards.iter().map(|s| s.order.heap_bytes()).sum();
        let per_plant = bytes as f64 / plants as f64;
        println!("name order, scattered by {scatter}: {bytes} bytes, {per_plant:.1} a plant");
        assert!(per_plant <= budget, "{per_plant} bytes a plant");
    }
}

/// Regression: a walk resumed past a plant that was renamed within the
/// same 15-byte key since compared that plant by id alone, wherever its
/// new name had moved it, and so skipped plants that never changed.
#[test]
fn a_walk_resumes_past_a_name_whatever_its_plant_is_called_now() {
    let mut both = Both::default();
    let stem = "Monstera delici"; // 15 bytes: every name shares the key
    for id in 0..40 {
        both.put(id, &format!("{stem}{:02}", id));
    }
    for (renamed, to) in [(7, 33), (30, 2), (0, 39), (39, 0)] {
        let old = format!("{stem}{renamed:02}");
        both.put(renamed, &format!("{stem}{to:02}x"));
        both.check();
        for descending in [false, true] {
            let from = Some((old.as_bytes(), renamed, false));
            let got: Vec<i64> = both.order.walk(&both.plants, from, descending).collect();
            let mut want: Vec<(Vec<u8>, i64)> = both.sorted();
            want.retain(|(name, id)| {
                let place = (name.as_slice(), *id).cmp(&(old.as_bytes(), renamed));
                if descending {
                    place.is_lt()
                } else {
                    place.is_gt()
                }
            });
            if descending {
                want.reverse();
            }
            let want: Vec<i64> = want.into_iter().map(|(_, id)| id).collect();
            assert_eq!(
                got, want,
                "past {old:?}, {renamed} renamed, descending {descending}"
            );
        }
        both.put(renamed, &old);
    }
}
