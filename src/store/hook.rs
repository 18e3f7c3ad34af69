//! The store's change hook: each change reported once it is durable, in
//! commit order, numbered (see `model::ChangeHook`), by a [`Sequencer`].
//! It is not the change feed (`crate::changes`, `GET /plants/changes`):
//! that is one of the hook's callers, through the door.
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
//!
//! Memory. A change's name and tag are copied into strings the sequencer
//! keeps for reuse ([`SPARE_STRINGS`] of at most [`SPARE_BYTES`] bytes
//! each): with `--data` a change is recorded on an event loop and reported
//! on the committer thread, and strings allocated on the one and freed on
//! the other, a batch at a time, sent both threads' allocations down the
//! allocator's slow paths (`bench/run.sh durable`).

use std::collections::VecDeque;
use std::sync::Mutex;

use super::Durable;
use crate::lock::lock;
use crate::model::{ChangeHook, ChangeKind, Plant, PlantChange};

/// The most strings kept for reuse.
const SPARE_STRINGS: usize = 256;
/// The largest string (by capacity) kept for reuse: together at most
/// 64 KiB.
const SPARE_BYTES: usize = 256;

/// A change's plant as the store has it: its name and tag.
pub(super) type Text<'a> = (&'a str, Option<&'a str>);

/// The hook and the changes waiting to be reported.
pub(super) struct Sequencer {
    hook: ChangeHook,
    /// The journal's number of the last change before the hook was set:
    /// the hook numbers from 1 after it.
    base: u64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Numbers below are the journal's (or handed out here, for stores
    /// without one).
    ///
    /// The last number handed out here (stores without a journal).
    numbered: u64,
    /// Every change up to this number is durable.
    durable: u64,
    /// The last number reported.
    reported: u64,
    /// The changes after `reported`, by number (`reported + 1` first):
    /// `None` for a number handed out but not yet recorded.
    waiting: VecDeque<Option<PlantChange>>,
    /// Strings of reported changes, for the next ones' names and tags.
    spare: Vec<String>,
}

impl State {
    /// `text` in a string of the spares, or a new one.
    fn copy(&mut self, text: &str) -> String {
        let mut string = self.spare.pop().unwrap_or_default();
        string.push_str(text);
        string
    }

    /// Keeps `string` for reuse, if there is room and it is small.
    fn keep(&mut self, mut string: String) {
        if self.spare.len() < SPARE_STRINGS && string.capacity() <= SPARE_BYTES {
            string.clear();
            self.spare.push(string);
        }
    }
}

impl Sequencer {
    /// A sequencer for the changes after the journal's record `base` (0
    /// without a journal).
    pub(super) fn new(hook: ChangeHook, base: u64) -> Sequencer {
        Sequencer {
            hook,
            base,
            state: Mutex::new(State {
                numbered: base,
                durable: base,
                reported: base,
                waiting: VecDeque::new(),
                spare: Vec::new(),
            }),
        }
    }

    /// Records a change made under its shard's lock: durable once its
    /// journal record is written (numbered by it), or (no journal)
    /// numbered here and durable at once. Reports what it can.
    pub(super) fn record(&self, durable: Durable, id: i64, kind: ChangeKind, text: Option<Text>) {
        let mut state = lock(&self.state);
        let seq = match durable {
            Durable::After(seq) => seq,
            Durable::Now => {
                state.numbered += 1;
                state.durable = state.numbered;
                state.numbered
            }
        };
        // Numbers are handed out under the shard locks and recorded right
        // after: `seq` is past `reported`, and at most a few past the end.
        // A change logged before the hook was set is not reported.
        let Some(at) = seq
            .checked_sub(state.reported + 1)
            .and_then(|at| usize::try_from(at).ok())
        else {
            return;
        };
        let plant = text.map(|(name, tag)| Plant {
            name: state.copy(name),
            tag: tag.map(|tag| state.copy(tag)),
        });
        let change = PlantChange {
            seq: seq - self.base,
            id,
            kind,
            plant,
        };
        if state.waiting.len() <= at {
            state.waiting.resize(at + 1, None);
        }
        state.waiting[at] = Some(change);
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
            let Some(Some(change)) = state.waiting.front() else {
                // Numbered but not yet recorded: its writer reports it.
                return;
            };
            (self.hook)(change);
            state.reported = change.seq + self.base;
            if let Some(Some(PlantChange {
                plant: Some(plant), ..
            })) = state.waiting.pop_front()
            {
                state.keep(plant.name);
                if let Some(tag) = plant.tag {
                    state.keep(tag);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Edit;
    use crate::os::temp::TempFile;
    use crate::store::Store;
    use crate::store::test_support::{Journalled, Waited, new, plant};
    use std::sync::Arc;
    use std::thread;

    fn collecting() -> (Sequencer, Arc<Mutex<Vec<u64>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&seen);
        let sequencer = Sequencer::new(Box::new(move |c: &PlantChange| lock(&into).push(c.seq)), 0);
        (sequencer, seen)
    }

    #[test]
    fn changes_are_reported_only_when_durable_and_in_number_order() {
        let (sequencer, seen) = collecting();
        // Journal numbers recorded out of order (two shards), then made
        // durable in two batches.
        sequencer.record(Durable::After(2), 20, ChangeKind::Created, None);
        sequencer.record(Durable::After(1), 10, ChangeKind::Created, None);
        sequencer.record(Durable::After(3), 30, ChangeKind::Deleted, None);
        assert!(lock(&seen).is_empty(), "nothing is durable yet");
        sequencer.durable(2);
        assert_eq!(*lock(&seen), [1, 2]);
        // Durable up to 4, but 4 is not recorded yet: 3 goes, 4 waits.
        sequencer.durable(4);
        assert_eq!(*lock(&seen), [1, 2, 3]);
        sequencer.record(Durable::After(4), 40, ChangeKind::Replaced, None);
        assert_eq!(*lock(&seen), [1, 2, 3, 4]);
        // A late, smaller durable mark changes nothing.
        sequencer.durable(1);
        assert_eq!(*lock(&seen), [1, 2, 3, 4]);
    }

    #[test]
    fn without_a_journal_changes_are_numbered_here_and_reported_at_once() {
        let (sequencer, seen) = collecting();
        for id in 0..5 {
            sequencer.record(Durable::Now, id, ChangeKind::Created, None);
        }
        assert_eq!(*lock(&seen), [1, 2, 3, 4, 5]);
    }

    #[test]
    fn names_and_tags_are_copied_into_reused_strings_and_reported_exactly() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&seen);
        let sequencer = Sequencer::new(
            Box::new(move |c: &PlantChange| lock(&into).push(c.clone())),
            0,
        );
        let long = "x".repeat(SPARE_BYTES + 1);
        sequencer.record(
            Durable::After(1),
            1,
            ChangeKind::Created,
            Some(("a longer name", Some("blue"))),
        );
        sequencer.record(
            Durable::After(2),
            2,
            ChangeKind::Created,
            Some((&long, None)),
        );
        sequencer.record(Durable::After(3), 2, ChangeKind::Deleted, None);
        sequencer.durable(3);
        // The first change's two strings are kept; the long name is not.
        assert_eq!(lock(&sequencer.state).spare.len(), 2);
        sequencer.record(
            Durable::After(4),
            3,
            ChangeKind::Replaced,
            Some(("fern", Some("red"))),
        );
        assert!(lock(&sequencer.state).spare.is_empty(), "both reused");
        sequencer.durable(4);
        let plants: Vec<Option<Plant>> = lock(&seen).iter().map(|c| c.plant.clone()).collect();
        assert_eq!(
            plants,
            [
                Some(Plant {
                    name: "a longer name".into(),
                    tag: Some("blue".into())
                }),
                Some(Plant {
                    name: long,
                    tag: None
                }),
                None,
                Some(Plant {
                    name: "fern".into(),
                    tag: Some("red".into())
                }),
            ]
        );
        // At most SPARE_STRINGS are kept.
        for seq in 5..5 + SPARE_STRINGS as u64 {
            sequencer.record(
                Durable::After(seq),
                9,
                ChangeKind::Created,
                Some(("n", Some("t"))),
            );
        }
        sequencer.durable(4 + SPARE_STRINGS as u64);
        assert_eq!(lock(&sequencer.state).spare.len(), SPARE_STRINGS);
    }

    /// The change hook's record, by number.
    fn hooked(store: &Store) -> Arc<Mutex<Vec<crate::model::PlantChange>>> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&seen);
        assert!(store.set_change_hook(Box::new(move |c| into.lock().unwrap().push(c.clone()))));
        seen
    }

    #[test]
    fn the_change_hook_reports_a_journalled_change_only_once_its_record_is_written() {
        let temp = TempFile::new("hook-durable");
        let (store, _) = temp.open().unwrap();
        let seen = hooked(&store);
        assert!(
            !store.set_change_hook(Box::new(|_| {})),
            "one hook per store"
        );
        // `--sync always`: nothing writes the record until someone waits for it.
        let durable = store.change(7, Edit::Create(plant("fern", None))).unwrap();
        assert_ne!(durable, Durable::Now);
        assert!(seen.lock().unwrap().is_empty(), "reported before written");
        store.wait(durable).unwrap();
        let change = seen.lock().unwrap()[0].clone();
        assert_eq!((change.seq, change.id), (1, 7));
        assert_eq!(change.kind, crate::model::ChangeKind::Created);
        assert_eq!(change.plant, Some(plant("fern", None)));
        // Through the committer thread, as the event loops acknowledge.
        let durable = store.change(7, Edit::Delete).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reply = Box::new(move |result| tx.send(result).unwrap());
        store.committer().answer(durable, reply);
        store.flush();
        rx.recv_timeout(std::time::Duration::from_secs(5))
            .unwrap()
            .unwrap();
        let change = seen.lock().unwrap()[1].clone();
        assert_eq!((change.seq, change.id, change.plant), (2, 7, None));
    }

    #[test]
    fn changes_before_the_hook_is_set_are_not_reported_and_the_hook_numbers_from_1() {
        let temp = TempFile::new("hook-after-seed");
        let (store, _) = temp.open().unwrap();
        // As a seed does, before the server sets its hook.
        store.create(new(1, "seeded")).unwrap();
        store.create(new(2, "seeded")).unwrap();
        let seen = hooked(&store);
        store.create(new(3, "fern")).unwrap();
        store.delete(1).unwrap();
        let changes = seen.lock().unwrap().clone();
        let reported: Vec<(u64, i64)> = changes.iter().map(|c| (c.seq, c.id)).collect();
        assert_eq!(reported, [(1, 3), (2, 1)]);
    }

    #[test]
    fn the_change_hook_numbers_concurrent_changes_in_commit_order_and_replays_to_the_store() {
        let temp = TempFile::new("hook-order");
        let (store, _) = temp.open().unwrap();
        let seen = hooked(&store);
        let store = Arc::new(store);
        let writers: Vec<_> = (0..4)
            .map(|writer| {
                let store = Arc::clone(&store);
                thread::spawn(move || {
                    for round in 0..50 {
                        // Ids shared between writers: changes to one id race.
                        let id = round % 10;
                        let name = format!("w{writer} r{round}");
                        if store.create(new(id, &name)).is_err() {
                            match round % 3 {
                                0 => drop(store.delete(id)),
                                _ => drop(store.replace(id, plant(&name, Some("t")))),
                            }
                        }
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let changes = seen.lock().unwrap().clone();
        let numbers: Vec<u64> = changes.iter().map(|c| c.seq).collect();
        assert_eq!(numbers, (1..=changes.len() as u64).collect::<Vec<_>>());
        let mut replayed = std::collections::BTreeMap::new();
        for change in &changes {
            match &change.plant {
                Some(plant) => replayed.insert(change.id, plant.clone()),
                None => replayed.remove(&change.id),
            };
        }
        for id in 0..10 {
            assert_eq!(replayed.get(&id), store.get(id).as_ref(), "plant {id}");
        }
    }
}
