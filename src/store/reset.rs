//! A reset: every plant replaced by a given set (the `--seed` file's) at
//! once. The new shards are built first, outside any lock; then, with a
//! journal, its new file is written and synced (`journal/reset.rs`); then
//! every shard's write lock is taken, in order, the file renamed into
//! place and its directory synced, the shards swapped and the reset
//! numbered for the change hook. The reset's plants take the next
//! versions, and the store a new nonce: a new lineage, which the new
//! file's header names. A change is either made before (it is in
//! the old shards and the old file, and gone) or after (in the new ones):
//! none can be made while the locks are held, and none made after is
//! acknowledged before the rename is durable, since it cannot be made
//! before. The locks are held for a rename and a directory sync: readers
//! and writers wait that long, once per reset.
//!
//! Reads in steps: a listing page holds `Core::reset_gate` (shared) while
//! it reads its steps, and a reset takes it whole, so a page is read
//! wholly before a reset or after it; an export, read in pieces over many
//! requests, notes `Core::generation` when it begins and ends, unfinished,
//! at the first piece after a reset (`AllPlants::was_reset`).

use std::sync::atomic::Ordering;

use super::journal::{self, Change, Fault, Lineage};
use super::shards::{SHARDS, Shard, Usage, shard_of};
use super::{Core, Durable, Store, empty_shards, fresh_nonce};
use crate::lock::write;
use crate::model::{ChangeKind, NotDone, Plant, Unavailable};

impl Store {
    /// Replaces every plant with `plants` (ids unique, as a checked seed's
    /// are), durably with a journal; blocks for the file's write and sync,
    /// so call it off the event loops. A refusal changes nothing, except
    /// one after the rename, which poisons the journal (see
    /// `journal/reset.rs`).
    pub fn reset(&self, plants: &[(i64, Plant)]) -> Result<(), NotDone> {
        self.shared.reset(plants, &mut |_| Ok(()))
    }
}

impl Core {
    /// As `Store::reset`, calling `fault` at each step of the journal's
    /// part: the seam through which tests stop it, or copy the files as a
    /// crash there would leave them.
    pub(super) fn reset(&self, plants: &[(i64, Plant)], fault: Fault<'_>) -> Result<(), NotDone> {
        let refused = |why| NotDone::Unavailable(Unavailable::Reset(why));
        let first = self.usage.number(plants.len() as u64);
        let (shards, usage, records) = built(plants, first, self.journal.is_some());
        let lineage = Lineage {
            nonce: fresh_nonce(),
            mark: first + plants.len() as u64 - 1,
        };
        let new = match &self.journal {
            Some(journal) => Some(
                journal
                    .prepare_reset(records, lineage, fault)
                    .map_err(refused)?,
            ),
            None => None,
        };
        // The writer role first (it waits for the batch being written),
        // then the gate, which listing pages in progress hold: a page
        // waits for the rename and the directory's sync, never for a
        // batch's. Pages never take the writer role, so the order cannot
        // deadlock.
        let prepared = match (&self.journal, new) {
            (Some(journal), Some(new)) => {
                journal.hold_writer().map_err(refused)?;
                Some((journal, new))
            }
            _ => None,
        };
        let gate = write(&self.reset_gate);
        let mut locked: Vec<_> = (0..SHARDS).map(|shard| self.write(shard)).collect();
        let durable = match prepared {
            Some((journal, new)) => {
                Durable::After(journal.swap_reset(new, fault).map_err(refused)?)
            }
            None => Durable::Now,
        };
        let old: Vec<_> = locked
            .iter_mut()
            .zip(shards)
            .map(|(held, new)| std::mem::replace(&mut **held, new))
            .collect();
        self.usage.replace(usage);
        self.nonce.store(lineage.nonce, Ordering::Release);
        self.generation.fetch_add(1, Ordering::Release);
        if let Some(sequencer) = self.hook.get() {
            sequencer.record(durable, 0, ChangeKind::Reset, None);
        }
        drop(locked);
        drop(gate);
        drop(old);
        if let (Some(sequencer), Durable::After(seq)) = (self.hook.get(), durable) {
            sequencer.durable(seq);
        }
        Ok(())
    }
}

/// The shards and totals holding `plants`, numbered from `first` in
/// order, and (`records`) their journal records, built with no lock held.
fn built(plants: &[(i64, Plant)], first: u64, records: bool) -> (Vec<Shard>, Usage, Vec<u8>) {
    let (mut shards, usage, mut encoded) = (empty_shards(), Usage::default(), Vec::new());
    for ((id, plant), version) in plants.iter().zip(first..) {
        let (name, tag) = (plant.name.as_str(), plant.tag.as_deref());
        let change = Change::Put {
            id: *id,
            version,
            name,
            tag,
        };
        usage.add(shards[shard_of(*id)].apply(&change));
        if records {
            journal::encode(&mut encoded, &change);
        }
    }
    (shards, usage, encoded)
}
