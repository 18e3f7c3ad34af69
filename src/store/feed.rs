//! The store's change hook: each change reported once it is durable, in
//! commit order, numbered (see `plant::ChangeHook`).
//!
//! Order. With a journal the number is the journal record's sequence
//! number, which the journal hands out one by one under its own lock, so
//! it is the order of the records in the file (and, per id, the order the
//! changes were applied: a record is logged under its shard's lock).
//! Without one, the number is taken here, under the shard's lock too. A
//! change is recorded as soon as it has its number and delivered once it
//! is durable and every change before it has been delivered: numbers are
//! never skipped, never repeated, and a change is never reported before one
//! with a smaller number.
//!
//! Durable means: without a journal, applied; with `--sync never`, written
//! to the file; with `--sync always`, written and synced. A change whose
//! write failed is never reported (the journal refuses every later change,
//! so nothing after it is reported either).
//!
//! Costs nothing when no hook is set: the store checks one `OnceLock`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::lock::lock;
use crate::plant::{ChangeHook, ChangeKind, Plant, PlantChange};

/// The hook and the changes waiting to be reported.
pub(super) struct Feed {
    hook: ChangeHook,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The last number handed out here (stores without a journal).
    numbered: u64,
    /// Every change up to this number is durable.
    durable: u64,
    /// The last number reported.
    reported: u64,
    /// Recorded, not yet reported.
    waiting: BTreeMap<u64, PlantChange>,
}

impl Feed {
    pub(super) fn new(hook: ChangeHook) -> Feed {
        Feed {
            hook,
            state: Mutex::default(),
        }
    }

    /// Records a change made under its shard's lock: with its journal
    /// record's number `seq`, or (no journal) numbered here and durable at
    /// once. Reports what it can.
    pub(super) fn record(&self, seq: Option<u64>, id: i64, kind: ChangeKind, plant: Option<Plant>) {
        let mut state = lock(&self.state);
        let seq = seq.unwrap_or_else(|| {
            state.numbered += 1;
            state.durable = state.numbered;
            state.numbered
        });
        let change = PlantChange {
            seq,
            id,
            kind,
            plant,
        };
        state.waiting.insert(seq, change);
        self.report(&mut state);
    }

    /// Every change up to `seq` is durable: reports what it can.
    pub(super) fn durable(&self, seq: u64) {
        let mut state = lock(&self.state);
        if seq > state.durable {
            state.durable = seq;
            self.report(&mut state);
        }
    }

    /// Reports the waiting changes that are durable and come next, in order.
    fn report(&self, state: &mut State) {
        while state.reported < state.durable {
            let Some(change) = state.waiting.remove(&(state.reported + 1)) else {
                // Numbered but not yet recorded: its writer reports it.
                return;
            };
            state.reported = change.seq;
            (self.hook)(&change);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn collecting() -> (Feed, Arc<Mutex<Vec<u64>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&seen);
        let feed = Feed::new(Box::new(move |c: &PlantChange| lock(&into).push(c.seq)));
        (feed, seen)
    }

    #[test]
    fn changes_are_reported_only_when_durable_and_in_number_order() {
        let (feed, seen) = collecting();
        // Journal numbers recorded out of order (two shards), then made
        // durable in two batches.
        feed.record(Some(2), 20, ChangeKind::Created, None);
        feed.record(Some(1), 10, ChangeKind::Created, None);
        feed.record(Some(3), 30, ChangeKind::Deleted, None);
        assert!(lock(&seen).is_empty(), "nothing is durable yet");
        feed.durable(2);
        assert_eq!(*lock(&seen), [1, 2]);
        // Durable up to 4, but 4 is not recorded yet: 3 goes, 4 waits.
        feed.durable(4);
        assert_eq!(*lock(&seen), [1, 2, 3]);
        feed.record(Some(4), 40, ChangeKind::Replaced, None);
        assert_eq!(*lock(&seen), [1, 2, 3, 4]);
        // A late, smaller durable mark changes nothing.
        feed.durable(1);
        assert_eq!(*lock(&seen), [1, 2, 3, 4]);
    }

    #[test]
    fn without_a_journal_changes_are_numbered_here_and_reported_at_once() {
        let (feed, seen) = collecting();
        for id in 0..5 {
            feed.record(None, id, ChangeKind::Created, None);
        }
        assert_eq!(*lock(&seen), [1, 2, 3, 4, 5]);
    }
}
