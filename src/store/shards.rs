//! The map from id to plant, split into shards, and what the plants cost.
//!
//! A shard is the plants whose ids hash to it, in id order (a `BTreeMap`,
//! so that a listing is a range walk from its cursor), and a tag index: a
//! set of (hash of the tag, id) pairs, so that a page of a rare tag reads
//! only the ids whose tag hashes alike (and keeps those whose stored tag is
//! the one asked for). The index costs the same per tagged plant, about 16
//! bytes and a share of a B-tree node, however many distinct tags there
//! are; it keeps no copy of any tag. Beside them, the shard's ids in name
//! order (`order.rs`). [`Shard::apply`] is the one place a change is made,
//! for replay and live writes alike; it keeps the index and the name order
//! in step with the map (a replace that keeps the name leaves the order
//! alone) and returns the change's [`Delta`], which [`Usage`] adds up.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;

use std::ops::Bound;

use super::Packed;
use super::journal::Change;
use super::order::NameOrder;
use crate::lock::lock;
use crate::model::Capacity;

/// Shards of the map: a power of two, so that a shard is a few bits of a
/// hash of the id.
pub(super) const SHARDS: usize = 16;

/// The shard of an id: the top bits of a multiplicative hash, so that
/// consecutive ids spread over every shard.
pub(super) fn shard_of(id: i64) -> usize {
    ((id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SHARDS.trailing_zeros())) as usize
}

/// The plants of one shard.
#[derive(Debug)]
pub(super) struct Shard {
    pub plants: BTreeMap<i64, Packed>,
    /// The ids in name order.
    pub names: NameOrder,
    /// (hash of the tag, id) for every plant with a tag.
    tagged: BTreeSet<(u64, i64)>,
    /// The tag hash: keyed at random per process, so that which tags
    /// collide cannot be chosen (a collision only costs a lookup).
    hasher: RandomState,
}

impl Shard {
    /// Makes the change; its effect on the totals.
    pub fn apply(&mut self, change: &Change<'_>) -> Delta {
        let id = change.id();
        let (old, new) = match *change {
            Change::Put {
                name, tag, version, ..
            } => {
                if let Some(tag) = tag {
                    self.index(id, tag);
                }
                let old = self.plants.insert(id, Packed::new(name, tag, version));
                if let Some(old) = &old
                    && old.tag() != tag
                {
                    self.unindex(id, old);
                }
                (old, Some((name, Cost::new(name, tag))))
            }
            Change::Delete(id) => {
                let old = self.plants.remove(&id);
                if let Some(old) = &old {
                    self.unindex(id, old);
                }
                (old, None)
            }
        };
        // The name order moves a plant only when its name changes.
        let old_name = old.as_ref().map(Packed::name);
        let new_name = new.map(|(name, _)| name);
        if old_name != new_name {
            if let Some(name) = old_name {
                self.names.remove(name.as_bytes(), id, &self.plants);
            }
            if let Some(name) = new_name {
                self.names.insert(name.as_bytes(), id, &self.plants);
            }
        }
        Delta::between(old.as_ref().map(Cost::of), new.map(|(_, cost)| cost))
    }

    /// A shard whose tag hashes use `hasher` (the same for every shard).
    pub fn new(hasher: RandomState) -> Shard {
        Shard {
            plants: BTreeMap::new(),
            names: NameOrder::default(),
            tagged: BTreeSet::new(),
            hasher,
        }
    }

    /// The ids of plants with this tag, ascending (or, reversed,
    /// descending), within `range`.
    pub fn tagged<'a>(
        &'a self,
        tag: &'a str,
        range: (Bound<i64>, Bound<i64>),
    ) -> impl DoubleEndedIterator<Item = (i64, &'a Packed)> + 'a {
        let hash = self.hasher.hash_one(tag);
        let at = |bound, unbounded| match bound {
            Bound::Included(id) => Bound::Included((hash, id)),
            Bound::Excluded(id) => Bound::Excluded((hash, id)),
            Bound::Unbounded => Bound::Included((hash, unbounded)),
        };
        self.tagged
            .range((at(range.0, i64::MIN), at(range.1, i64::MAX)))
            .filter_map(|&(_, id)| self.plants.get(&id).map(|plant| (id, plant)))
            .filter(move |(_, plant)| plant.tag() == Some(tag))
    }

    fn index(&mut self, id: i64, tag: &str) {
        self.tagged.insert((self.hasher.hash_one(tag), id));
    }

    fn unindex(&mut self, id: i64, old: &Packed) {
        if let Some(tag) = old.tag() {
            self.tagged.remove(&(self.hasher.hash_one(tag), id));
        }
    }
}

/// What one plant costs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Cost {
    /// Bytes of name and tag (what `--max-data` bounds).
    pub data: u64,
    /// Bytes its journal record takes.
    pub record: u64,
}

impl Cost {
    /// The cost of a stored plant.
    pub fn of(plant: &Packed) -> Cost {
        Cost::new(plant.name(), plant.tag())
    }

    /// The cost of a plant with this name and tag.
    pub fn new(name: &str, tag: Option<&str>) -> Cost {
        Cost {
            data: (name.len() + tag.map_or(0, str::len)) as u64,
            record: Change::Put {
                id: 0,
                version: 0,
                name,
                tag,
            }
            .size(),
        }
    }
}

/// A change's effect on the totals: a plant replaced by another (or by
/// none, or none by one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Delta {
    pub old: Option<Cost>,
    pub new: Option<Cost>,
}

impl Delta {
    pub fn between(old: Option<Cost>, new: Option<Cost>) -> Delta {
        Delta { old, new }
    }
}

/// The totals over every shard: plants, bytes of data, and bytes of live
/// journal records (which decide when to compact); and the number of the
/// last change admitted, the store's high-water mark of versions. Behind
/// one small mutex, so that the limits hold exactly under concurrency: a
/// change first reserves what it adds (`admit`), and gives back what it
/// removes only once it is made (`settle`), so neither a change that
/// cannot fit nor one that is later refused can let another past a limit
/// or keep it out. A change is numbered by the same lock that admits it,
/// so that numbering costs it no other shared write.
#[derive(Debug, Default)]
pub(super) struct Usage(Mutex<Totals>);

#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    plants: u64,
    data: u64,
    records: u64,
    /// The last number given to a change (0: none yet).
    versions: u64,
}

/// Which limit a change would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Over {
    Plants,
    Data,
}

impl Delta {
    /// What the change adds to (plants, data) and what it takes away.
    fn growth(&self) -> (u64, u64) {
        let (new, old) = (self.new.unwrap_or_default(), self.old.unwrap_or_default());
        let plants = u64::from(self.new.is_some() && self.old.is_none());
        (plants, new.data.saturating_sub(old.data))
    }

    fn shrink(&self) -> (u64, u64) {
        let (new, old) = (self.new.unwrap_or_default(), self.old.unwrap_or_default());
        let plants = u64::from(self.old.is_some() && self.new.is_none());
        (plants, old.data.saturating_sub(new.data))
    }

    /// The change in live record bytes (two's complement).
    fn records(&self) -> u64 {
        let record = |c: Option<Cost>| c.map_or(0, |c| c.record);
        record(self.new).wrapping_sub(record(self.old))
    }
}

impl Usage {
    /// Adds a change that was made (replay).
    pub fn add(&self, delta: Delta) {
        let mut totals = lock(&self.0);
        let ((grow_plants, grow_data), (shrink_plants, shrink_data)) =
            (delta.growth(), delta.shrink());
        totals.plants = totals.plants + grow_plants - shrink_plants;
        totals.data = totals.data + grow_data - shrink_data;
        totals.records = totals.records.wrapping_add(delta.records());
    }

    /// Reserves what a change about to be made adds, unless that would
    /// take a total past `capacity`; a change that adds nothing always
    /// fits. Follow with `settle` once it is made, or `retract` if not.
    /// Its number: one more than any given before (one not made leaves
    /// its number unused).
    pub fn admit(&self, delta: Delta, capacity: Capacity) -> Result<u64, Over> {
        let (plants, data) = delta.growth();
        let mut totals = lock(&self.0);
        if plants > 0 && totals.plants + plants > capacity.plants as u64 {
            return Err(Over::Plants);
        }
        if data > 0 && totals.data.saturating_add(data) > capacity.data {
            return Err(Over::Data);
        }
        totals.plants += plants;
        totals.data += data;
        totals.versions += 1;
        Ok(totals.versions)
    }

    /// The first of `count` numbers, one more than any given before, for
    /// changes made together (a reset's plants).
    pub fn number(&self, count: u64) -> u64 {
        let mut totals = lock(&self.0);
        totals.versions += count;
        totals.versions - count + 1
    }

    /// Gives no number at or below `mark` from now on (a journal's
    /// high-water mark, at start-up).
    pub fn numbered_up_to(&self, mark: u64) {
        let mut totals = lock(&self.0);
        totals.versions = totals.versions.max(mark);
    }

    /// Completes an admitted change that was made: gives back what it
    /// removed.
    pub fn settle(&self, delta: Delta) {
        let (plants, data) = delta.shrink();
        let mut totals = lock(&self.0);
        totals.plants -= plants;
        totals.data -= data;
        totals.records = totals.records.wrapping_add(delta.records());
    }

    /// Takes back an admitted change that was not made.
    pub fn retract(&self, delta: Delta) {
        let (plants, data) = delta.growth();
        let mut totals = lock(&self.0);
        totals.plants -= plants;
        totals.data -= data;
    }

    /// Takes `other`'s totals (a reset, under every shard lock: no change
    /// is admitted and unsettled), its numbers going on from this one's.
    pub fn replace(&self, other: Usage) {
        let mut totals = lock(&self.0);
        let versions = totals.versions;
        *totals = *lock(&other.0);
        totals.versions = versions;
    }

    pub fn plants(&self) -> usize {
        lock(&self.0).plants as usize
    }

    pub fn data(&self) -> u64 {
        lock(&self.0).data
    }

    pub fn records(&self) -> u64 {
        lock(&self.0).records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put<'a>(id: i64, name: &'a str, tag: Option<&'a str>) -> Change<'a> {
        Change::Put {
            id,
            version: 1,
            name,
            tag,
        }
    }

    #[test]
    fn apply_keeps_the_tag_index_in_step_with_the_map() {
        let mut shard = Shard::new(RandomState::new());
        let usage = Usage::default();
        usage.add(shard.apply(&put(1, "a", Some("x"))));
        usage.add(shard.apply(&put(2, "b", Some("x"))));
        usage.add(shard.apply(&put(1, "a", Some("y"))));
        usage.add(shard.apply(&put(2, "bb", None)));
        let ids = |shard: &Shard, tag| {
            let all = (Bound::Unbounded, Bound::Unbounded);
            shard.tagged(tag, all).map(|(id, _)| id).collect::<Vec<_>>()
        };
        assert_eq!(shard.tagged.len(), 1, "{:?}", shard.tagged);
        assert_eq!((ids(&shard, "y"), ids(&shard, "x")), (vec![1], vec![]));
        assert_eq!((usage.plants(), usage.data()), (2, 2 + 2));
        usage.add(shard.apply(&Change::Delete(1)));
        usage.add(shard.apply(&Change::Delete(9)));
        assert!(shard.tagged.is_empty());
        assert_eq!((usage.plants(), usage.data()), (1, 2));
        let record = put(2, "bb", None).size();
        assert_eq!(usage.records(), record);
    }

    #[test]
    fn admit_refuses_growth_past_either_limit_and_changes_nothing() {
        let usage = Usage::default();
        let capacity = Capacity {
            plants: 2,
            data: 10,
        };
        let cost = |data| Cost { data, record: 20 };
        let create = |data| Delta::between(None, Some(cost(data)));
        let made = |delta| {
            usage.admit(delta, capacity)?;
            usage.settle(delta);
            Ok::<(), Over>(())
        };
        assert_eq!(made(create(6)), Ok(()));
        assert_eq!(usage.admit(create(5), capacity), Err(Over::Data));
        assert_eq!((usage.plants(), usage.data()), (1, 6));
        assert_eq!(made(create(4)), Ok(()));
        assert_eq!(usage.admit(create(0), capacity), Err(Over::Plants));
        // Shrinking always fits, even at the limit, and gives back its
        // room only once made.
        let smaller = Delta::between(Some(cost(6)), Some(cost(1)));
        assert_eq!(usage.admit(smaller, capacity), Ok(3), "the third admitted");
        assert_eq!(usage.data(), 10);
        usage.settle(smaller);
        assert_eq!((usage.plants(), usage.data(), usage.records()), (2, 5, 40));
        // A change refused after admission (by the journal) gives back
        // exactly what it reserved.
        let bigger = Delta::between(Some(cost(1)), Some(cost(6)));
        assert_eq!(usage.admit(bigger, capacity), Ok(4));
        assert_eq!(usage.data(), 10);
        usage.retract(bigger);
        assert_eq!((usage.plants(), usage.data(), usage.records()), (2, 5, 40));
    }

    #[test]
    fn a_delete_refused_after_admission_never_lets_the_store_past_its_cap() {
        // The delete's room is given back only once it is made, so a
        // create admitted meanwhile does not fit.
        let usage = Usage::default();
        let capacity = Capacity::plants(2);
        let cost = Cost {
            data: 1,
            record: 10,
        };
        let create = Delta::between(None, Some(cost));
        for _ in 0..2 {
            usage.admit(create, capacity).unwrap();
            usage.settle(create);
        }
        let delete = Delta::between(Some(cost), None);
        usage.admit(delete, capacity).unwrap();
        assert_eq!(usage.admit(create, capacity), Err(Over::Plants));
        usage.retract(delete);
        assert_eq!(usage.plants(), 2);
    }

    #[test]
    fn numbers_rise_through_a_reset_and_never_fall_below_a_mark() {
        let usage = Usage::default();
        let create = Delta::between(None, Some(Cost::default()));
        usage.numbered_up_to(41);
        assert_eq!(usage.admit(create, Capacity::plants(9)), Ok(42));
        usage.numbered_up_to(7);
        assert_eq!(usage.number(3), 43, "a reset's three plants: 43 to 45");
        let seeded = Usage::default();
        seeded.add(create);
        usage.replace(seeded);
        assert_eq!(usage.plants(), 1);
        assert_eq!(usage.admit(create, Capacity::plants(9)), Ok(46));
    }
}
