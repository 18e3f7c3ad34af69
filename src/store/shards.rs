//! The map from id to plant, split into shards, and what the plants cost.
//!
//! A shard is the plants whose ids hash to it, in id order (a `BTreeMap`,
//! so that a listing is a range walk from its cursor), and a tag index: for
//! each tag, the ids carrying it, so that a page of a rare tag reads only
//! those ids. [`Shard::apply`] is the one place a change is made, for
//! replay and live writes alike; it keeps the index in step with the map
//! and returns the change's [`Delta`], which [`Usage`] adds up.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use super::Packed;
use super::journal::Change;

/// Shards of the map: a power of two, so that a shard is a few bits of a
/// hash of the id.
pub(super) const SHARDS: usize = 16;

/// The shard of an id: the top bits of a multiplicative hash, so that
/// consecutive ids spread over every shard.
pub(super) fn shard_of(id: i64) -> usize {
    ((id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SHARDS.trailing_zeros())) as usize
}

/// The plants of one shard.
#[derive(Debug, Default)]
pub(super) struct Shard {
    pub plants: BTreeMap<i64, Packed>,
    /// For each tag, the ids in this shard that carry it.
    pub tagged: HashMap<Box<str>, BTreeSet<i64>>,
}

impl Shard {
    /// Makes the change; its effect on the totals.
    pub fn apply(&mut self, change: &Change<'_>) -> Delta {
        let (old, new) = match *change {
            Change::Put { id, name, tag } => {
                let plant = Packed::new(name, tag);
                let new = Cost::new(name, tag);
                if let Some(tag) = tag {
                    self.index(id, tag);
                }
                let old = self.plants.insert(id, plant);
                if let Some(old) = &old
                    && old.tag() != tag
                {
                    self.unindex(id, old);
                }
                (old, Some(new))
            }
            Change::Delete(id) => {
                let old = self.plants.remove(&id);
                if let Some(old) = &old {
                    self.unindex(id, old);
                }
                (old, None)
            }
        };
        Delta::between(old.as_ref().map(Cost::of), new)
    }

    fn index(&mut self, id: i64, tag: &str) {
        match self.tagged.get_mut(tag) {
            Some(ids) => {
                ids.insert(id);
            }
            None => {
                self.tagged.insert(tag.into(), BTreeSet::from([id]));
            }
        }
    }

    fn unindex(&mut self, id: i64, old: &Packed) {
        let Some(tag) = old.tag() else {
            return;
        };
        if let Some(ids) = self.tagged.get_mut(tag) {
            ids.remove(&id);
            if ids.is_empty() {
                self.tagged.remove(tag);
            }
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
            record: Change::Put { id: 0, name, tag }.size(),
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

    fn plants(&self) -> (u64, u64) {
        (u64::from(self.new.is_some()), u64::from(self.old.is_some()))
    }

    fn cost(&self, part: impl Fn(Cost) -> u64) -> (u64, u64) {
        (self.new.map_or(0, &part), self.old.map_or(0, &part))
    }
}

/// The totals over every shard: plants, bytes of data, and bytes of live
/// journal records (which decide when to compact).
#[derive(Debug, Default)]
pub(super) struct Usage {
    plants: AtomicU64,
    data: AtomicU64,
    records: AtomicU64,
}

/// What the store may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// Most plants (`--max-plants`).
    pub plants: usize,
    /// Most bytes of names and tags (`--max-data`).
    pub data: u64,
}

impl Capacity {
    /// At most `plants` plants, with no limit on their bytes.
    pub fn plants(plants: usize) -> Capacity {
        Capacity {
            plants,
            data: u64::MAX,
        }
    }
}

/// Which limit a change would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Over {
    Plants,
    Data,
}

impl Usage {
    /// Adds a change that was made (replay).
    pub fn add(&self, delta: Delta) {
        move_by(&self.plants, delta.plants());
        move_by(&self.data, delta.cost(|c| c.data));
        move_by(&self.records, delta.cost(|c| c.record));
    }

    /// Adds a change about to be made, unless it would take the totals
    /// past `capacity`; a change that shrinks a total always fits. Exact
    /// under concurrency: the growth is added first and taken back if it
    /// does not fit.
    pub fn admit(&self, delta: Delta, capacity: Capacity) -> Result<(), Over> {
        if !grow_within(&self.plants, delta.plants(), capacity.plants as u64) {
            return Err(Over::Plants);
        }
        if !grow_within(&self.data, delta.cost(|c| c.data), capacity.data) {
            move_by(&self.plants, swap(delta.plants()));
            return Err(Over::Data);
        }
        move_by(&self.records, delta.cost(|c| c.record));
        Ok(())
    }

    /// Takes back a change admitted but then not made.
    pub fn retract(&self, delta: Delta) {
        move_by(&self.plants, swap(delta.plants()));
        move_by(&self.data, swap(delta.cost(|c| c.data)));
        move_by(&self.records, swap(delta.cost(|c| c.record)));
    }

    pub fn plants(&self) -> usize {
        self.plants.load(Ordering::Relaxed) as usize
    }

    pub fn data(&self) -> u64 {
        self.data.load(Ordering::Relaxed)
    }

    pub fn records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }
}

fn swap((added, removed): (u64, u64)) -> (u64, u64) {
    (removed, added)
}

/// Adds `added - removed` (two's complement: a net decrease wraps to a
/// subtraction).
fn move_by(total: &AtomicU64, (added, removed): (u64, u64)) {
    total.fetch_add(added.wrapping_sub(removed), Ordering::Relaxed);
}

/// Moves `total` by `added - removed` if it stays within `max` (or does
/// not grow); whether it did.
fn grow_within(total: &AtomicU64, (added, removed): (u64, u64), max: u64) -> bool {
    let delta = added.wrapping_sub(removed);
    let before = total.fetch_add(delta, Ordering::Relaxed);
    if added > removed && before.wrapping_add(delta) > max {
        total.fetch_sub(delta, Ordering::Relaxed);
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put<'a>(id: i64, name: &'a str, tag: Option<&'a str>) -> Change<'a> {
        Change::Put { id, name, tag }
    }

    #[test]
    fn apply_keeps_the_tag_index_in_step_with_the_map() {
        let mut shard = Shard::default();
        let usage = Usage::default();
        usage.add(shard.apply(&put(1, "a", Some("x"))));
        usage.add(shard.apply(&put(2, "b", Some("x"))));
        usage.add(shard.apply(&put(1, "a", Some("y"))));
        usage.add(shard.apply(&put(2, "bb", None)));
        assert_eq!(shard.tagged.len(), 1, "{:?}", shard.tagged);
        assert_eq!(shard.tagged["y"], BTreeSet::from([1]));
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
        assert_eq!(usage.admit(create(6), capacity), Ok(()));
        assert_eq!(usage.admit(create(5), capacity), Err(Over::Data));
        assert_eq!((usage.plants(), usage.data()), (1, 6));
        assert_eq!(usage.admit(create(4), capacity), Ok(()));
        assert_eq!(usage.admit(create(0), capacity), Err(Over::Plants));
        // Shrinking always fits, even at the limit.
        let smaller = Delta::between(Some(cost(6)), Some(cost(1)));
        assert_eq!(usage.admit(smaller, capacity), Ok(()));
        assert_eq!((usage.plants(), usage.data(), usage.records()), (2, 5, 40));
        usage.retract(smaller);
        assert_eq!((usage.plants(), usage.data(), usage.records()), (2, 10, 40));
    }
}
