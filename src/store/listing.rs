//! Listing: one page of plants in ascending id order, read in short steps.
//!
//! Each step holds one shard's read lock while it copies at most a few
//! hundred entries past the cursor (with a tag, it walks that tag's ids in
//! the shard's index, so a rare or absent tag costs almost nothing). The
//! steps of all shards are merged: everything up to the smallest "last id
//! read" among shards that may hold more is in id order and final; the
//! rest is read again from there in the next round. A writer therefore
//! waits for at most one step, however large the store.
//!
//! A page is not one frozen state of the whole store: a plant changed while
//! the page is read may appear as it was or as it became. Ids are strictly
//! ascending, none is listed twice, and a plant that exists for the whole
//! read and matches is listed.
//!
//! An [`AllPlants`] reads every plant the same way, a piece at a time as its
//! caller asks (`GET /export` streams them out): it holds no copy of the
//! store and no lock between pieces, and promises across the whole read
//! what a page promises.

use std::ops::Bound;
use std::sync::Arc;

use super::{Core, Packed, SHARDS, Shard, Store};
use crate::model::{Order, Page, Plant, Position, Query};

/// Entries one step copies from one shard, at most.
const STEP: usize = 256;

impl Store {
    /// One page of plants in ascending id order: ids greater than `after`,
    /// with this `tag` if given, at most `limit`. `more` says whether a
    /// further matching plant exists. Paging deep into a large store stays
    /// cheap: each shard's walk starts at the cursor.
    pub fn page(&self, after: Option<i64>, limit: usize, tag: Option<&str>) -> Page {
        self.page_within(after, limit, tag, usize::MAX)
    }

    /// As [`page`](Self::page), stopping early (with `more` set) once the
    /// plants copied hold `bytes` bytes of names and tags: for a caller
    /// whose output is bounded in bytes, so that it never copies plants it
    /// could not send. At least one plant is always copied.
    pub fn page_within(
        &self,
        after: Option<i64>,
        limit: usize,
        tag: Option<&str>,
        bytes: usize,
    ) -> Page {
        self.page_between_steps(after, limit, tag, bytes, || {})
    }

    /// As `page_within`, calling `between` before each step takes its
    /// shard's lock: the seam through which tests change the store while a
    /// page is read.
    pub(super) fn page_between_steps(
        &self,
        after: Option<i64>,
        limit: usize,
        tag: Option<&str>,
        bytes: usize,
        between: impl FnMut(),
    ) -> Page {
        self.shared.page(after, limit, tag, bytes, between)
    }

    /// One page of a listing `query`, stopping early (with `more` set)
    /// once the plants copied hold `bytes` bytes of names and tags.
    // TODO(query): every order, search and count; only ascending ids now.
    pub fn query(&self, query: &Query, bytes: usize) -> Page {
        let after = match &query.after {
            Some(Position::Id(id)) => Some(*id),
            _ => None,
        };
        let _ = Order::Id;
        let mut page = self.page_within(after, query.limit, query.tag.as_deref(), bytes);
        if query.count {
            page.total = Some(self.len() as u64);
        }
        page
    }

    /// Every plant, in ascending id order, read as the caller asks.
    pub fn all_plants(&self) -> AllPlants {
        AllPlants {
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
}

impl AllPlants {
    /// Whether every plant was read.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The next plants: at most `limit`, fewer once they hold `bytes`
    /// bytes of names and tags (at least one). Empty once all were read.
    pub fn next_piece(&mut self, limit: usize, bytes: usize) -> Vec<(i64, Plant)> {
        if self.done {
            return Vec::new();
        }
        let page = self.shared.page(self.after, limit, None, bytes, || {});
        self.done = !page.more;
        if let Some((last, _)) = page.items.last() {
            self.after = Some(*last);
        }
        page.items
    }
}

impl Core {
    /// A page, as `Store::page_within`, calling `between` before each step.
    fn page(
        &self,
        after: Option<i64>,
        limit: usize,
        tag: Option<&str>,
        bytes: usize,
        mut between: impl FnMut(),
    ) -> Page {
        let mut held = 0usize;
        let mut cursor = match after {
            Some(i64::MAX) => return Page::default(),
            Some(after) => Bound::Excluded(after),
            None => Bound::Unbounded,
        };
        let mut items: Vec<(i64, Plant)> = Vec::with_capacity(limit.min(1024) + 1);
        let mut step: Vec<(i64, Packed)> = Vec::new();
        // One more than the page, to learn whether more follow.
        let mut want = limit.saturating_add(1);
        while items.len() < want {
            let need = want - items.len();
            // Ids are spread evenly over shards, so each is asked for a
            // share of what is needed, with some slack.
            let take = (need.div_ceil(SHARDS) + need / (4 * SHARDS) + 4).min(STEP);
            step.clear();
            // The smallest last id read from a shard that may hold more.
            let mut frontier: Option<i64> = None;
            for shard in 0..SHARDS {
                between();
                let plants = self.read(shard);
                let read = walk(&plants, cursor, tag, take, &mut step);
                if let Some(last) = read {
                    frontier = Some(frontier.map_or(last, |f| f.min(last)));
                }
            }
            step.sort_unstable_by_key(|(id, _)| *id);
            let final_up_to = |id: i64| frontier.is_none_or(|f| id <= f);
            for (id, plant) in step.drain(..).take_while(|(id, _)| final_up_to(*id)) {
                if items.len() == want {
                    break;
                }
                if held >= bytes && !items.is_empty() {
                    // The byte budget is spent: this one only shows that
                    // more follow.
                    want = items.len() + 1;
                }
                held = held.saturating_add(plant.name().len() + plant.tag().map_or(0, str::len));
                items.push((id, plant.to_plant()));
            }
            match frontier {
                None => break, // every shard was read to its end
                Some(f) if f == i64::MAX => break,
                Some(f) => cursor = Bound::Excluded(f),
            }
        }
        let more = items.len() == want;
        items.truncate(want - 1);
        Page {
            items,
            more: more && limit > 0,
            total: None,
        }
    }
}

/// Copies up to `take` plants with ids past `cursor` (with `tag`, if
/// given) from one shard into `out`: `Some(last id)` if it stopped at
/// `take` (the shard may hold more), `None` if it read to the end.
fn walk(
    shard: &Shard,
    cursor: Bound<i64>,
    tag: Option<&str>,
    take: usize,
    out: &mut Vec<(i64, Packed)>,
) -> Option<i64> {
    let range = (cursor, Bound::Unbounded);
    let mut copied = 0;
    let mut last = None;
    // `false` once `take` are copied: the shard holds at least one more.
    let mut copy = |id: i64, plant: &Packed| {
        if copied == take {
            return false;
        }
        out.push((id, plant.clone()));
        copied += 1;
        last = Some(id);
        true
    };
    let stopped = match tag {
        None => !shard.plants.range(range).all(|(&id, p)| copy(id, p)),
        Some(tag) => !shard.tagged(tag, range).all(|(id, p)| copy(id, p)),
    };
    if stopped { last } else { None }
}
