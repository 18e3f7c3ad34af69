//! The changes waiting for group commit (`batch.rs` runs them): in one
//! queue, taken a batch at a time, every change waiting up to
//! [`BATCH_CHANGES`] and [`BATCH_BYTES`], while at most [`BATCHES`]
//! batches run.
//!
//! Order is kept per id: a batch holds at most one change per id, and a
//! change whose id is in a batch still running waits for it (and stops the
//! batch being taken there, so nothing behind it overtakes it). Two
//! creates of one id thus commit one after the other: the first is
//! applied, the second finds the id taken (409), in arrival order, as do a
//! create and a delete. Ids of different batches never meet, and within
//! one statement each id appears once, so set-based statements cannot
//! reorder one id's changes. Other instances meet ours at the primary key
//! and the row locks, as before.

use std::collections::{HashSet, VecDeque};
use std::time::Instant;

use super::{JobFailure, MAX_WAIT};
use crate::model::{Edit, Reply};

/// Most changes in one batch.
pub const BATCH_CHANGES: usize = 512;
/// Most bytes of names and tags in one batch (a larger single change goes
/// alone).
pub const BATCH_BYTES: usize = 1 << 20;
/// Most batches running at once, over all workers: while it runs, the
/// next changes gather. One, as the journal has one committer: measured
/// at 64 connections on 2 cores with PostgreSQL beside it, 1 batch in
/// flight stored 51,000 plants/s (28 changes a batch), 2 38,000, 3
/// 34,000, 4 30,000: more batches in flight are smaller ones, and each
/// costs a round trip and a commit.
pub const BATCHES: usize = 1;

/// Bytes of the names and tags a change writes.
fn size(edit: &Edit) -> usize {
    edit.plant().map_or(0, |plant| {
        plant.name.len() + plant.tag.as_ref().map_or(0, String::len)
    })
}

/// A change's reply: answered whether it was applied (`false`: a create
/// found the id taken, a replace or delete found no such plant), or why it
/// was not run or did not commit.
pub(super) type ChangeReply = Box<dyn Reply<bool, JobFailure>>;

/// A change waiting for its batch.
pub(super) struct Queued {
    pub(super) queued: Instant,
    pub(super) id: i64,
    pub(super) edit: Edit,
    pub(super) reply: ChangeReply,
}

impl Queued {
    pub(super) fn new(id: i64, edit: Edit, reply: ChangeReply) -> Queued {
        Queued {
            queued: Instant::now(),
            id,
            edit,
            reply,
        }
    }

    pub(super) fn refuse(self, why: JobFailure) {
        self.reply.answer(Err(why));
    }
}

/// The changes waiting, and the ids of those in batches still running.
#[derive(Default)]
pub(super) struct Waiting {
    queue: VecDeque<Queued>,
    running: HashSet<i64>,
    batches: usize,
}

impl Waiting {
    pub(super) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Queues `change`; `true` when a batch may start now (else the
    /// worker of a running batch takes it when that one is answered, and
    /// no worker is woken for nothing).
    pub(super) fn push(&mut self, change: Queued) -> bool {
        self.queue.push_back(change);
        self.batches < BATCHES
    }

    /// Every change waiting, taken out.
    pub(super) fn drain(&mut self) -> Vec<Queued> {
        self.queue.drain(..).collect()
    }

    /// The changes at the front that waited more than `MAX_WAIT`.
    pub(super) fn expired(&mut self) -> Vec<Queued> {
        let old = self
            .queue
            .iter()
            .take_while(|change| change.queued.elapsed() > MAX_WAIT)
            .count();
        self.queue.drain(..old).collect()
    }

    /// The next batch, if one may run now: the changes in arrival order,
    /// passing over each whose id may not go (in a batch whose statement
    /// has not ended, or in this one already) and every later change to
    /// that id, up to the count bound or the first change past the byte
    /// bound. Its ids count as running until [`release`](Self::release).
    pub(super) fn take(&mut self) -> Option<Vec<Queued>> {
        if self.batches >= BATCHES {
            return None;
        }
        let mut in_batch = HashSet::new();
        let mut passed = HashSet::new();
        let mut chosen = Vec::new();
        let mut bytes = 0;
        for (at, change) in self.queue.iter().enumerate() {
            if chosen.len() == BATCH_CHANGES {
                break;
            }
            let id = change.id;
            if self.running.contains(&id) || in_batch.contains(&id) || passed.contains(&id) {
                passed.insert(id);
                continue;
            }
            let size = size(&change.edit);
            if !chosen.is_empty() && bytes + size > BATCH_BYTES {
                break;
            }
            bytes += size;
            in_batch.insert(id);
            chosen.push(at);
        }
        let last = *chosen.last()?;
        self.batches += 1;
        self.running.extend(in_batch);
        if last + 1 == chosen.len() {
            // The front of the queue, as nearly always.
            return Some(self.queue.drain(..chosen.len()).collect());
        }
        let mut batch = Vec::with_capacity(chosen.len());
        let mut rest = VecDeque::with_capacity(self.queue.len() - chosen.len());
        let mut next = chosen.into_iter().peekable();
        for (at, change) in self.queue.drain(..).enumerate() {
            if next.next_if_eq(&at).is_some() {
                batch.push(change);
            } else {
                rest.push_back(change);
            }
        }
        self.queue = rest;
        Some(batch)
    }

    /// A batch taken by [`take`](Self::take) no longer counts as running
    /// (it ended, or was given up on): another may start.
    pub(super) fn free_slot(&mut self) {
        self.batches -= 1;
    }

    /// The ids of a batch whose statement has ended: later changes to them
    /// may run.
    pub(super) fn release(&mut self, ids: &[i64]) {
        for id in ids {
            self.running.remove(id);
        }
    }

    #[cfg(test)]
    fn finish(&mut self, ids: &[i64]) {
        self.free_slot();
        self.release(ids);
    }
}

/// The changes of a batch as the statement takes them.
pub(super) type Changes = Vec<(i64, Edit)>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Plant;

    fn queued(id: i64, edit: Edit) -> Queued {
        Queued::new(id, edit, Box::new(|_| {}))
    }

    fn plant(name: &str) -> Plant {
        Plant {
            name: name.into(),
            tag: None,
        }
    }

    fn ids(batch: &[Queued]) -> Vec<i64> {
        batch.iter().map(|c| c.id).collect()
    }

    #[test]
    fn a_second_change_to_one_id_waits_for_the_next_batch_and_other_ids_go_on() {
        let mut waiting = Waiting::default();
        for (id, change) in [
            (1, Edit::Create(plant("a"))),
            (2, Edit::Create(plant("b"))),
            (1, Edit::Create(plant("again"))),
            (3, Edit::Delete),
            (1, Edit::Delete),
        ] {
            waiting.push(queued(id, change));
        }
        let first = waiting.take().expect("a batch");
        assert_eq!(ids(&first), [1, 2, 3]);
        assert!(matches!(&first[0].edit, Edit::Create(p) if p.name == "a"));
        // The first batch still runs: nothing else does.
        assert!(waiting.take().is_none());
        waiting.finish(&ids(&first));
        // Id 1's other changes, in their order, one a batch.
        let second = waiting.take().expect("a batch");
        assert!(
            matches!(&second[..], [c] if matches!(&c.edit, Edit::Create(p) if p.name == "again"))
        );
        waiting.finish(&ids(&second));
        let third = waiting.take().expect("a batch");
        assert!(matches!(&third[..], [c] if c.id == 1 && matches!(c.edit, Edit::Delete)));
        waiting.finish(&ids(&third));
        assert!(waiting.take().is_none());
        assert_eq!(waiting.len(), 0);
    }

    #[test]
    fn ids_of_a_batch_given_up_on_hold_back_only_their_own_changes() {
        let mut waiting = Waiting::default();
        waiting.push(queued(7, Edit::Delete));
        let given_up = waiting.take().unwrap();
        // Its turn is freed, its statement not ended: id 7 stays taken.
        waiting.free_slot();
        waiting.push(queued(7, Edit::Create(plant("retry"))));
        waiting.push(queued(8, Edit::Delete));
        waiting.push(queued(7, Edit::Delete));
        waiting.push(queued(9, Edit::Delete));
        let batch = waiting.take().expect("the other ids go on");
        assert_eq!(ids(&batch), [8, 9]);
        waiting.finish(&ids(&batch));
        assert!(waiting.take().is_none(), "id 7 waits for its statement");
        waiting.release(&ids(&given_up));
        let next = waiting.take().unwrap();
        assert!(matches!(&next[..], [c] if c.id == 7 && matches!(c.edit, Edit::Create(_))));
    }

    #[test]
    fn batches_are_bounded_by_count_and_how_many_run() {
        let mut waiting = Waiting::default();
        for id in 0..(BATCH_CHANGES * (BATCHES + 1)) as i64 {
            assert!(waiting.push(queued(id, Edit::Delete)), "a batch may start");
        }
        let running: Vec<_> = (0..BATCHES).map(|_| waiting.take().unwrap()).collect();
        assert!(running.iter().all(|b| b.len() == BATCH_CHANGES));
        // As many run as may: no worker is woken, and none takes more.
        assert!(!waiting.push(queued(-1, Edit::Delete)));
        assert!(waiting.take().is_none(), "{BATCHES} batches run already");
        waiting.finish(&ids(&running[0]));
        assert_eq!(waiting.take().map(|b| b.len()), Some(BATCH_CHANGES));
    }

    #[test]
    fn a_batch_stops_before_the_byte_bound_and_a_larger_change_goes_alone() {
        let mut waiting = Waiting::default();
        let big = "x".repeat(BATCH_BYTES + 1);
        let half = "y".repeat(BATCH_BYTES / 2 + 1);
        waiting.push(queued(1, Edit::Delete));
        waiting.push(queued(2, Edit::Replace(plant(&big))));
        waiting.push(queued(3, Edit::Create(plant(&half))));
        waiting.push(queued(4, Edit::Create(plant(&half))));
        waiting.push(queued(5, Edit::Delete));
        for expected in [&[1][..], &[2], &[3], &[4, 5]] {
            let batch = waiting.take().unwrap();
            assert_eq!(ids(&batch), expected);
            waiting.finish(&ids(&batch));
        }
        assert!(waiting.take().is_none());
    }
}
