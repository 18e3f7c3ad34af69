//! Listing: one page of plants in a query's order (by id or by name,
//! either way), filtered by tag and search text, read in short steps; and
//! counting what a query matches.
//!
//! Each step holds one shard's read lock while it examines at most
//! `walk::SCAN` (1,024) entries past the cursor, in the shard's order for the query
//! (`walk.rs`: the map by id, the tag index, or the name order of
//! `order.rs`), and copies those that match. The steps of all shards are
//! merged: everything up to the least advanced place where a shard that
//! may hold more stopped is in order and final; the rest is read again
//! from there in the next round. A writer therefore waits for at most one
//! step, however large the store, and a search that matches one plant in
//! a million reads the store a step at a time as a page without filters
//! does.
//!
//! A page is bounded in bytes as well as in plants (a [`Budget`]: its
//! JSON, with the fields shown), and the bound is applied as plants are
//! taken, not after: each step copies a share of the room the page has
//! left, in bytes as in plants (at least one plant), only the fields the
//! page shows (and in name order the name, which places a plant), and
//! the page ends before the plant that would take it past its budget.
//! So what a page copies follows what it holds, whatever its `limit` and
//! however long the names. Not exactly what it holds: what a round's
//! steps copy past its frontier is copied again in the next, so a page
//! of 2 KiB names copies about four times its bytes; and where one plant
//! is more than a shard's share of the room, each round copies one plant
//! a shard (16) to settle at least one, so a 256 KiB page of four 64 KiB
//! names copies about 80, as a page with `limit=4` always did.
//!
//! A page is not one frozen state of the whole store: a plant changed while
//! the page is read may appear as it was or as it became. Plants come
//! strictly in the query's order, none twice, and a plant that exists for
//! the whole read, matches, and keeps its place in the order (its name, in
//! name order) is listed. A plant renamed while a page is read may move
//! across the page's cursor, but it is never listed twice on one page.
//!
//! A count with a tag or search text reads every shard in steps the same
//! way; without either it is the number of plants, which is kept.
//!
//! An [`AllPlants`] reads every plant the same way, a piece at a time as its
//! caller asks (`GET /export` streams them out): it holds no copy of the
//! store and no lock between pieces, and promises across the whole read
//! what a page promises. A reset (`reset.rs`) is the exception to both: a
//! page is read wholly before or after one, and an export it overtakes
//! stops (`AllPlants::was_reset`).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::walk::{self, Mark, Taken, Want, compare};
use super::{Core, Packed, SHARDS, Store, shard_of};
use crate::model::{Budget, Page, Plant, Position, Query};

/// Entries one step copies from one shard, at most.
const STEP: usize = 256;

impl Store {
    /// One page of plants in ascending id order: ids greater than `after`,
    /// with this `tag` if given, at most `limit`. `more` says whether a
    /// further matching plant exists. Paging deep into a large store stays
    /// cheap: each shard's walk starts at the cursor.
    pub fn page(&self, after: Option<i64>, limit: usize, tag: Option<&str>) -> Page {
        self.page_within(after, limit, tag, Budget::UNBOUNDED)
    }

    /// As [`page`](Self::page), ending early (with `more` set) before the
    /// plant that would take the page past `budget`: for a caller whose
    /// output is bounded in bytes, so that it never copies plants it could
    /// not send. At least one plant is always taken.
    pub fn page_within(
        &self,
        after: Option<i64>,
        limit: usize,
        tag: Option<&str>,
        budget: Budget,
    ) -> Page {
        let query = Query {
            after: after.map(Position::Id),
            tag: tag.map(str::to_owned),
            limit,
            ..Query::default()
        };
        self.query(&query, budget)
    }

    /// One page of a listing `query`, ending early (with `more` set)
    /// before the plant that would take the page past `budget` (at least
    /// one plant is taken); with `query.count`, the number of plants it
    /// matches. A position of another kind than the order's (which the
    /// API refuses) lists nothing.
    pub fn query(&self, query: &Query, budget: Budget) -> Page {
        self.query_between_steps(query, budget, || {})
    }

    /// As `query`, calling `between` before each step takes its shard's
    /// lock: the seam through which tests change the store while a page
    /// is read.
    pub(super) fn query_between_steps(
        &self,
        query: &Query,
        budget: Budget,
        mut between: impl FnMut(),
    ) -> Page {
        // Never half before a reset and half after (see `reset.rs`).
        let _whole = crate::lock::read(&self.shared.reset_gate);
        let mut page = match self.shared.start(query) {
            Some(from) if query.limit > 0 => self.shared.page(query, from, budget, &mut between),
            _ => Page::default(),
        };
        if query.count {
            page.total = Some(self.shared.count(query, &mut between));
        }
        page
    }

    /// Every plant, in ascending id order, read as the caller asks.
    pub fn all_plants(&self) -> AllPlants {
        AllPlants {
            generation: self.shared.generation.load(Ordering::Acquire),
            shared: Arc::clone(&self.shared),
            after: None,
            done: false,
        }
    }
}

/// Every plant in ascending id order, read a piece at a time; see the
/// module header for what it promises while the store changes.
pub struct AllPlants {
    shared: Arc<Core>,
    /// The last id read.
    after: Option<i64>,
    done: bool,
    /// The store's resets when it began: a reset since ends it.
    generation: u64,
}

impl AllPlants {
    /// Whether every plant was read.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Whether the store was reset since it began: it ends, unfinished,
    /// rather than go on with other plants.
    pub fn was_reset(&self) -> bool {
        self.shared.generation.load(Ordering::Acquire) != self.generation
    }

    /// The next plants: at most `limit`, fewer where their records
    /// (`PlantRecord`'s JSON, a comma between them) would pass `bytes`
    /// (at least one). Empty once all were read.
    pub fn next_piece(&mut self, limit: usize, bytes: usize) -> Vec<(i64, Plant)> {
        if self.done || limit == 0 {
            return Vec::new();
        }
        let query = Query {
            limit,
            ..Query::default()
        };
        let from = self.after.map(|id| Mark {
            name: Vec::new(),
            id,
            inclusive: false,
        });
        let page = self
            .shared
            .page(&query, from, Budget::of(bytes), &mut || {});
        if self.was_reset() {
            self.done = true;
            return Vec::new();
        }
        self.done = !page.more;
        if let Some((last, _)) = page.items.last() {
            self.after = Some(*last);
        }
        page.items
    }
}

impl Core {
    /// Where a query's walk starts: `Some(None)` at the beginning; `None`
    /// if its position is of another kind than its order. A cut name is
    /// resolved with the whole name its plant has now.
    fn start(&self, query: &Query) -> Option<Option<Mark>> {
        let descending = query.order.descending();
        match (&query.after, query.order.by_name()) {
            (None, _) => Some(None),
            (Some(Position::Id(id)), false) => Some(Some(Mark {
                name: Vec::new(),
                id: *id,
                inclusive: false,
            })),
            (Some(at @ Position::Name { id, cut, .. }), true) => {
                let current = match cut {
                    Some(_) => self
                        .read(shard_of(*id))
                        .plants
                        .get(id)
                        .map(|p| p.name().to_owned()),
                    None => None,
                };
                let bound = at.resume(current.as_deref(), descending)?;
                Some(Some(Mark {
                    name: bound.name,
                    id: bound.id,
                    inclusive: bound.inclusive,
                }))
            }
            _ => None,
        }
    }

    /// A page of `query` from `from` on, as `Store::query`, calling
    /// `between` before each step.
    fn page(
        &self,
        query: &Query,
        mut from: Option<Mark>,
        budget: Budget,
        between: &mut impl FnMut(),
    ) -> Page {
        let (order, limit) = (query.order, query.limit);
        let mut items: Vec<(i64, Plant)> = Vec::with_capacity(limit.min(1024));
        // The length of the page's JSON so far.
        let mut array = Budget::EMPTY;
        // In name order, the ids listed: a plant renamed past the
        // frontier of one round would be read again in the next.
        let mut listed: HashSet<i64> = HashSet::new();
        let mut step: Vec<Taken> = Vec::new();
        let mut more = false;
        while !more {
            // One more than the page has room for, to learn whether more
            // follow. Plants are spread evenly over shards, so each is
            // asked for a share of what is needed, with some slack, in
            // plants and in bytes.
            let need = (limit - items.len()).saturating_add(1);
            let room = budget.bytes.saturating_sub(array);
            let want = Want {
                plants: (need.div_ceil(SHARDS) + need / (4 * SHARDS) + 4).min(STEP),
                bytes: room.div_ceil(SHARDS).saturating_add(room / (4 * SHARDS)),
                budget,
            };
            let frontier = self.round(query, from.as_ref(), &want, &mut step, between);
            for taken in step.drain(..) {
                if order.by_name() && listed.contains(&taken.id) {
                    continue;
                }
                let grown = match items.len() < limit {
                    true => budget.add(array, items.len(), taken.cost),
                    false => None,
                };
                let Some(grown) = grown else {
                    // The page is full, and this plant follows it.
                    more = true;
                    break;
                };
                let place = place(taken.id, &taken.plant);
                if frontier
                    .as_ref()
                    .is_some_and(|f| compare(order, place, (&f.name, f.id)).is_gt())
                {
                    break; // read again from the frontier in the next round
                }
                array = grown;
                if order.by_name() {
                    listed.insert(taken.id);
                }
                items.push((taken.id, taken.plant.to_plant()));
            }
            match frontier {
                None => break, // every shard was read to its end
                Some(f) => from = Some(f),
            }
        }
        Page {
            items,
            more,
            total: None,
        }
    }

    /// One round of a page: a step of every shard, what they copied put
    /// in `step` in the query's order, and the frontier: the least
    /// advanced place where a shard that may hold more stopped.
    fn round(
        &self,
        query: &Query,
        from: Option<&Mark>,
        want: &Want,
        step: &mut Vec<Taken>,
        between: &mut impl FnMut(),
    ) -> Option<Mark> {
        let order = query.order;
        let mut frontier: Option<Mark> = None;
        for shard in 0..SHARDS {
            between();
            let stopped = walk::step(&self.read(shard), query, from, want, step);
            if let Some(mark) = stopped {
                let behind = |f: &Mark| compare(order, (&mark.name, mark.id), (&f.name, f.id));
                if frontier.as_ref().is_none_or(|f| behind(f).is_lt()) {
                    frontier = Some(mark);
                }
            }
        }
        step.sort_unstable_by(|a, b| compare(order, place(a.id, &a.plant), place(b.id, &b.plant)));
        frontier
    }

    /// How many plants match `query`'s tag and search text: kept without
    /// either, else counted shard by shard a step at a time.
    fn count(&self, query: &Query, between: &mut impl FnMut()) -> u64 {
        if query.tag.is_none() && query.search.is_none() {
            return self.usage.plants() as u64;
        }
        let mut total = 0;
        for shard in 0..SHARDS {
            let mut from = None;
            loop {
                between();
                let (found, stopped) = walk::count(&self.read(shard), query, from);
                total += found;
                match stopped {
                    Some(id) => from = Some(id),
                    None => break,
                }
            }
        }
        total
    }
}

/// A copied plant's place, as `compare` takes it.
fn place(id: i64, plant: &Packed) -> (&[u8], i64) {
    (plant.name().as_bytes(), id)
}
