//! One step of a listing in one shard, in any order: what a listing or a
//! count does under one shard's read lock.
//!
//! A step reads the shard's plants from where the walk resumes, in the
//! walk's order: by id from the map (with a tag, from the tag index), by
//! name from the name order (`order.rs`). It stops once it has copied what
//! it was asked for or examined [`SCAN`] plants, whichever is first, so a
//! search that matches little holds the lock no longer than one that
//! matches much; it says where it stopped, so that the next step resumes
//! there.

use std::cmp::Ordering;
use std::ops::Bound;

use super::{Packed, Shard};
use crate::model::{Order, Query};

/// Plants one step examines at most: about 50 us of a search on short
/// names (more in name order, where each is a lookup in the map).
pub(super) const SCAN: usize = 1024;

/// A place in a walk's order: where a step stopped, or where a walk
/// resumes, past it or, `inclusive`, at it. In id orders the name is
/// empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mark {
    pub name: Vec<u8>,
    pub id: i64,
    pub inclusive: bool,
}

impl Mark {
    /// The place of plant `id`, named `name`, in `order`.
    pub fn of(order: Order, id: i64, plant: &Packed) -> Mark {
        let name = match order.by_name() {
            true => plant.name().as_bytes().to_vec(),
            false => Vec::new(),
        };
        Mark {
            name,
            id,
            inclusive: false,
        }
    }
}

/// How two plants, as (name, id), compare in the walk's order: `Less` if
/// `a` comes first.
pub(super) fn compare(order: Order, a: (&[u8], i64), b: (&[u8], i64)) -> Ordering {
    match order {
        Order::Id => a.1.cmp(&b.1),
        Order::IdDesc => b.1.cmp(&a.1),
        Order::Name => a.cmp(&b),
        Order::NameDesc => b.cmp(&a),
    }
}

/// Copies into `out` up to `take` plants matching `query`, in its order,
/// from `from` on (from the start without it). The place of the last
/// plant examined if it stopped before the shard's end.
pub(super) fn step(
    shard: &Shard,
    query: &Query,
    from: Option<&Mark>,
    take: usize,
    out: &mut Vec<(i64, Packed)>,
) -> Option<Mark> {
    let mut copied = 0;
    let walk = plants(shard, query.order, query.tag.as_deref(), from);
    let last = examine(walk, query, |id, plant| {
        out.push((id, plant.clone()));
        copied += 1;
        copied < take
    });
    last.map(|(id, plant)| Mark::of(query.order, id, plant))
}

/// Counts the plants matching `query` with ids past `from`: the count,
/// and the last id examined if it stopped before the shard's end.
pub(super) fn count(shard: &Shard, query: &Query, from: Option<i64>) -> (u64, Option<i64>) {
    let mut found = 0;
    let from = from.map(|id| Mark {
        name: Vec::new(),
        id,
        inclusive: false,
    });
    let walk = plants(shard, Order::Id, query.tag.as_deref(), from.as_ref());
    let last = examine(walk, query, |_, _| {
        found += 1;
        true
    });
    (found, last.map(|(id, _)| id))
}

/// Hands `found` each plant of `plants` that matches `query` while it
/// answers that it wants more, examining at most `SCAN`. The last plant
/// examined if it stopped before the end.
fn examine<'a>(
    plants: impl Iterator<Item = (i64, &'a Packed)>,
    query: &Query,
    mut found: impl FnMut(i64, &'a Packed) -> bool,
) -> Option<(i64, &'a Packed)> {
    let (mut last, mut examined, mut full) = (None, 0, false);
    for (id, plant) in plants {
        if full || examined == SCAN {
            return last;
        }
        examined += 1;
        last = Some((id, plant));
        let (name, tag) = plant.parts();
        if query.matches(name, tag) {
            full = !found(id, plant);
        }
    }
    None
}

type Plants<'a> = Box<dyn Iterator<Item = (i64, &'a Packed)> + 'a>;

/// The shard's plants in `order` from `from` on: with a `tag` (in id
/// order), only those the tag index holds.
fn plants<'a>(
    shard: &'a Shard,
    order: Order,
    tag: Option<&'a str>,
    from: Option<&Mark>,
) -> Plants<'a> {
    let descending = order.descending();
    if order.by_name() {
        let from = from.map(|m| (m.name.as_slice(), m.id, m.inclusive));
        let ids = shard.names.walk(&shard.plants, from, descending);
        let plants = &shard.plants;
        return Box::new(ids.filter_map(move |id| plants.get(&id).map(|p| (id, p))));
    }
    let bound = match from {
        None => Bound::Unbounded,
        Some(mark) if mark.inclusive => Bound::Included(mark.id),
        Some(mark) => Bound::Excluded(mark.id),
    };
    let range = match descending {
        true => (Bound::Unbounded, bound),
        false => (bound, Bound::Unbounded),
    };
    match (tag, descending) {
        (None, false) => Box::new(shard.plants.range(range).map(|(&id, p)| (id, p))),
        (None, true) => Box::new(shard.plants.range(range).rev().map(|(&id, p)| (id, p))),
        (Some(tag), false) => Box::new(shard.tagged(tag, range)),
        (Some(tag), true) => Box::new(shard.tagged(tag, range).rev()),
    }
}
