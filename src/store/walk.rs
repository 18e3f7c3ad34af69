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
use crate::model::{Budget, Order, Query, contains_folded_bytes};

/// Plants one step examines at most: a search on short names reads
/// 1,000,000 plants in about 1,000 steps and 77 ms of CPU time, so a step
/// holds its lock about 75 us (`examples/query_bench`, on two shared
/// cores); in name order, where each plant is a lookup in the map, about
/// twice that.
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

#[cfg(test)]
thread_local! {
    /// Bytes of names and tags the steps of this thread copied: how a test
    /// tells what a page cost.
    pub(super) static COPIED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// What one step copies at most: `plants`, and plants costing `bytes`
/// (past the one that reaches them), as `budget` counts them.
pub(super) struct Want {
    pub plants: usize,
    pub bytes: usize,
    pub budget: Budget,
}

/// A plant one step copied: only what the page shows of it (and in name
/// order its name, which places it), and what it costs the page.
pub(super) struct Taken {
    pub id: i64,
    pub plant: Packed,
    /// Its record's length in the page's JSON, or its name's and tag's
    /// bytes if more (shown or not): the page is bounded by both, as it
    /// was by the names and tags alone before it was by its JSON.
    pub cost: usize,
}

/// Copies into `out` the plants matching `query`, in its order, from
/// `from` on (from the start without it), until it has what `want`
/// asks. The place of the last plant examined if it stopped before the
/// shard's end.
pub(super) fn step(
    shard: &Shard,
    query: &Query,
    from: Option<&Mark>,
    want: &Want,
    out: &mut Vec<Taken>,
) -> Option<Mark> {
    let (mut copied, mut bytes) = (0, 0usize);
    let last = visit(shard, query, query.order, from, &mut |id, plant| {
        let taken = take(id, plant, query.order, &want.budget);
        #[cfg(test)]
        COPIED.with(|c| {
            c.set(c.get() + taken.plant.name().len() + taken.plant.tag().map_or(0, str::len))
        });
        bytes = bytes.saturating_add(taken.cost);
        out.push(taken);
        copied += 1;
        copied < want.plants && bytes < want.bytes
    });
    last.map(|(id, plant)| Mark::of(query.order, id, plant))
}

/// A copy of plant `id` that holds what the page shows of it, and the
/// name in a name order; what it costs the page.
fn take(id: i64, plant: &Packed, order: Order, budget: &Budget) -> Taken {
    let (name, tag) = (plant.name(), plant.tag());
    let shown = Budget {
        name: budget.name || order.by_name(),
        ..*budget
    };
    let plant = match (shown.name, shown.tag || tag.is_none()) {
        (true, true) => plant.clone(),
        _ => Packed::new(
            if shown.name { name } else { "" },
            tag.filter(|_| shown.tag),
            plant.version(),
        ),
    };
    // A name or tag not shown costs its bytes all the same: the database
    // reads them, and both stores answer alike.
    let stored = name.len() + tag.map_or(0, str::len);
    let cost = budget.record_len(id, name, tag).max(stored);
    Taken { id, plant, cost }
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
    let last = visit(shard, query, Order::Id, from.as_ref(), &mut |_, _| {
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
    found: &mut dyn FnMut(i64, &'a Packed) -> bool,
) -> Option<(i64, &'a Packed)> {
    let (mut last, mut examined, mut full) = (None, 0, false);
    for (id, plant) in plants {
        if full || examined == SCAN {
            return last;
        }
        examined += 1;
        last = Some((id, plant));
        if passes(query, plant) {
            full = !found(id, plant);
        }
    }
    None
}

/// Whether `plant` passes the query's filters: `Query::matches`, told
/// from the packed bytes where they are ASCII, so that a search reads most
/// plants without checking them as UTF-8 or folding them.
fn passes(query: &Query, plant: &Packed) -> bool {
    let (name, tag) = plant.raw_parts();
    if let Some(want) = &query.tag
        && tag != Some(want.as_bytes())
    {
        return false;
    }
    let Some(search) = &query.search else {
        return true;
    };
    let quick = |text: &[u8]| contains_folded_bytes(text, search);
    match (quick(name), tag.map(quick)) {
        (Some(true), _) | (_, Some(Some(true))) => true,
        (Some(false), None | Some(Some(false))) => false,
        _ => query.matches(plant.name(), plant.tag()),
    }
}

/// Hands `found` the shard's plants matching `query`, in `order` from
/// `from` on, as `examine` does: with a tag (in id order), only those the
/// tag index holds. Each way of walking is its own loop, with nothing
/// between a plant and its test.
fn visit<'a>(
    shard: &'a Shard,
    query: &'a Query,
    order: Order,
    from: Option<&Mark>,
    found: &mut dyn FnMut(i64, &'a Packed) -> bool,
) -> Option<(i64, &'a Packed)> {
    let descending = order.descending();
    let plants = &shard.plants;
    if order.by_name() {
        let from = from.map(|m| (m.name.as_slice(), m.id, m.inclusive));
        let ids = shard.names.walk(plants, from, descending);
        let named = ids.filter_map(|id| plants.get(&id).map(|p| (id, p)));
        return examine(named, query, found);
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
    let pair = |(&id, plant)| (id, plant);
    match (query.tag.as_deref(), descending) {
        (None, false) => examine(plants.range(range).map(pair), query, found),
        (None, true) => examine(plants.range(range).rev().map(pair), query, found),
        (Some(tag), false) => examine(shard.tagged(tag, range), query, found),
        (Some(tag), true) => examine(shard.tagged(tag, range).rev(), query, found),
    }
}
