//! The plant store: every plant, in memory, in 16 shards each behind its own
//! `RwLock`, and with `--data` a journal that makes each change durable
//! before it is acknowledged.
//!
//! Owns the map from id to plant and keeps its limits ([`Capacity`]:
//! plants, and bytes of names and tags), and numbers the changes: each
//! takes one more than the last (`Usage::admit`), and a plant's version
//! is the number of the change that made it; a nonce names the store's
//! lineage (kept by the journal across restarts and compactions, new for
//! a new store and after a reset), so that a nonce and a version name one
//! state of one plant (docs/storage.md, "Versions"). Its caller is the
//! door (`crate::plants`, which also loads the seed through it); it knows
//! neither the door nor HTTP, and answers with values, [`Durable`]s and
//! replies, in the model's words ([`Refusal`], `Page`, `Reply`).
//!
//! The shards and what a change costs are in `shards.rs`; each shard's
//! ids in name order in `order.rs`; listing (every order, tag and search
//! filters, counts) in `listing.rs`, a step of it in one shard in
//! `walk.rs`; the thread that acknowledges journalled changes in
//! `committer.rs`; the change hook in `hook.rs`; compaction in
//! `compaction.rs`; a reset (every plant replaced at once) in `reset.rs`;
//! the file in `journal/`; a plant packed into 24 bytes
//! in `packed.rs`. Sharding is for writers: with one lock, a writer
//! preempted while holding it (its allocation page-faulting, its time
//! slice ending) stalled every other writer, which set the tail latency
//! under load.
//!
//! No reader holds a lock for long. A listing page (in any order, with or
//! without a search), a count and a compaction read the shards in short
//! steps, one shard's read lock at a time (see `listing.rs` and
//! `Core::compact`), so a writer waits for at most one step, whatever the
//! size of the store.
//!
//! Invariants: a change that returns `Ok` has been applied, and its
//! [`Durable`] says when it is durable: now, or once its journal record is
//! written, which [`Store::wait`] waits for and [`Committer::answer`]
//! reports from the committer thread (or with `--sync never` from the
//! event loop's `flush`); one that returns `Err` other than
//! [`Refusal::Storage`] has changed nothing. Critical sections are
//! short: requests are parsed before a shard lock is taken, the journal
//! record is encoded under it (so the journal order of each id's changes is
//! their apply order; changes to different ids commute), and the wait for
//! the disk happens after it is released.
//!
//! A change is visible to readers as soon as it is applied, a moment
//! before its write is acknowledged. If that write fails, the change stays
//! in memory, its caller gets `Refusal::Storage` (the change may or may
//! not be on disk), and the store refuses every later change until
//! restarted; reads keep working. The file format is specified in
//! docs/storage.md; how the journal writes, compacts and resets, in
//! `journal/mod.rs`.

mod committer;
mod compaction;
mod hook;
pub mod journal;
mod listing;
mod order;
mod packed;
mod reset;
mod shards;
mod walk;

// What `Store::open` and `Store::open_with` speak; the file's own words
// (records, scans, checksums) are the journal's: `store::journal::`.
pub use journal::{Disk, JournalFile, JournalStats, OpenError, Recovery};
pub use listing::AllPlants;
pub use packed::Packed;

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::thread;

use crate::lock::{read, write};
use crate::metrics::{Exposition, Kind};
use crate::model::{
    Capacity, ChangeHook, ChangeKind, Durability, Edit, NotDone, Plant, Refusal, Reply,
    VersionedPlant,
};
use committer::{Queue, commit_on_request};
use compaction::compact_on_request;
use hook::Sequencer;
use journal::{Change, Journal};
use shards::{Cost, Delta, Over, SHARDS, Shard, Usage, shard_of};

/// The plants, keyed and ordered by id.
pub struct Store {
    shared: Arc<Core>,
    /// With a journal: the changes waiting for their records, which the
    /// committer thread (or a loop's flush) writes and answers.
    queue: Option<Arc<Queue>>,
    /// The compaction and committer threads, joined when the store is
    /// dropped: until they end they may hold the journal (and its lock).
    threads: Vec<thread::JoinHandle<()>>,
}

/// When a change applied in memory is durable, and so may be answered.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durable {
    /// Now: there is no journal to write.
    Now,
    /// Once the journal's record with this sequence number is written (and
    /// synced, with `--sync always`).
    After(u64),
}

/// Answers a change's reply once it is durable, from the committer thread
/// (see [`Store::committer`]).
#[derive(Clone)]
pub struct Committer {
    queue: Option<Arc<Queue>>,
    shared: Weak<Core>,
}

impl Committer {
    /// Gives `reply` its answer once the change is `durable`: at once for
    /// one that is, else from the committer thread once its record is
    /// written (or from the loop's `flush` with `--sync never`). Never
    /// waits for the disk; a store already dropped refuses.
    pub fn answer(&self, durable: Durable, reply: Box<dyn Reply<()>>) {
        match (durable, &self.queue) {
            (Durable::Now, _) => reply.answer(Ok(())),
            (Durable::After(seq), Some(queue)) => queue.push(seq, reply),
            (Durable::After(seq), None) => reply.answer(match self.shared.upgrade() {
                Some(shared) => shared.commit(seq, true).map_err(NotDone::from),
                None => Err(Refusal::Storage("the store is closed".into()).into()),
            }),
        }
    }
}

struct Core {
    /// The plants, spread over shards by a hash of the id, each behind its
    /// own lock: writers of different ids rarely wait for each other, and a
    /// writer preempted while holding a lock stalls only its shard.
    shards: Box<[RwLock<Shard>]>,
    /// The totals over all shards; a change is admitted here (within
    /// `capacity`) before it is made, so the limits hold without a global
    /// lock.
    usage: Usage,
    capacity: Capacity,
    journal: Option<Journal>,
    /// The change hook, once one is set.
    hook: OnceLock<Sequencer>,
    /// Resets so far: an export that sees it change stops.
    generation: AtomicU64,
    /// The nonce of the store's lineage: changed by a reset, under every
    /// shard lock.
    nonce: AtomicU64,
    /// Held to read a listing page (its steps), taken whole by a reset:
    /// a page is never part before a reset and part after.
    reset_gate: RwLock<()>,
}

impl Store {
    /// An empty in-memory store, of a lineage of its own.
    pub fn new(capacity: Capacity) -> Store {
        Store::build(
            capacity,
            empty_shards(),
            Usage::default(),
            None,
            fresh_nonce(),
        )
    }

    /// A store kept in the journal `durability.path`, replayed from it.
    pub fn open(
        capacity: Capacity,
        durability: &Durability,
    ) -> Result<(Store, Recovery), OpenError> {
        Store::open_with(capacity, durability, |file| Box::new(file))
    }

    /// As [`open`](Self::open), with `wrap` choosing how records reach the
    /// file: the seam for injecting write and sync failures.
    pub fn open_with(
        capacity: Capacity,
        durability: &Durability,
        wrap: impl FnOnce(JournalFile) -> Box<dyn Disk>,
    ) -> Result<(Store, Recovery), OpenError> {
        let mut shards = empty_shards();
        let usage = Usage::default();
        let apply = |change: Change<'_>| usage.add(shards[shard_of(change.id())].apply(&change));
        let (journal, recovery) = Journal::open(durability, wrap, apply, fresh_nonce())?;
        let lineage = journal.lineage();
        usage.numbered_up_to(lineage.mark);
        let signal = Arc::clone(&journal.compaction);
        let by_loops = !journal.waits_for_disk();
        let mut store = Store::build(capacity, shards, usage, Some(journal), lineage.nonce);
        let weak = Arc::downgrade(&store.shared);
        let compactor = thread::Builder::new()
            .name("compactor".into())
            .spawn(move || compact_on_request(&signal, &weak))
            .map_err(|e| OpenError::Io(durability.path.clone(), e))?;
        store.threads.push(compactor);
        let queue = Arc::new(Queue::new(by_loops));
        let (taken, weak) = (Arc::clone(&queue), Arc::downgrade(&store.shared));
        // Set before spawning: a failed spawn drops the store, which must
        // close the compactor for its join to end.
        store.queue = Some(queue);
        let committer = thread::Builder::new()
            .name("committer".into())
            .spawn(move || commit_on_request(&taken, &weak))
            .map_err(|e| OpenError::Io(durability.path.clone(), e))?;
        store.threads.push(committer);
        Ok((store, recovery))
    }

    fn build(
        capacity: Capacity,
        shards: Vec<Shard>,
        usage: Usage,
        journal: Option<Journal>,
        nonce: u64,
    ) -> Store {
        Store {
            queue: None,
            threads: Vec::new(),
            shared: Arc::new(Core {
                shards: shards.into_iter().map(RwLock::new).collect(),
                usage,
                capacity,
                journal,
                hook: OnceLock::new(),
                generation: AtomicU64::new(0),
                nonce: AtomicU64::new(nonce),
                reset_gate: RwLock::new(()),
            }),
        }
    }

    /// Reports every change made from now on to `hook` once it is
    /// durable, in commit order, numbered from 1 (see `hook.rs`): changes
    /// made before (a seed) are not reported. One hook per store: `false`,
    /// and `hook` unused, if one is already set.
    pub fn set_change_hook(&self, hook: ChangeHook) -> bool {
        let before = self.shared.journal.as_ref().map_or(0, Journal::appended);
        self.shared.hook.set(Sequencer::new(hook, before)).is_ok()
    }

    /// Why changes are refused, once the journal has failed.
    pub fn failure(&self) -> Option<Arc<str>> {
        self.shared.journal.as_ref()?.failure()
    }

    /// Applies `edit` to the plant `id`: a create refuses an existing id
    /// (the stored plant is unchanged), a replace or delete a missing one,
    /// and a change past the capacity is refused. Never waits for the
    /// journal: what it answers says when the change is durable. Its
    /// record is left queued, in either `--sync` mode, until a
    /// [`wait`](Self::wait), a [`Committer::answer`] and a
    /// [`flush`](Self::flush) writes everything queued in one go (so a bulk
    /// load at start-up writes a batch, not a record per plant).
    pub fn change(&self, id: i64, edit: Edit) -> Result<Durable, Refusal> {
        let change = match edit.plant() {
            Some(plant) => Change::Put {
                id,
                // Numbered under the shard's lock, once admitted.
                version: 0,
                name: &plant.name,
                tag: plant.tag.as_deref(),
            },
            None => Change::Delete(id),
        };
        self.shared.change(change, edit.kind())
    }

    /// How many plants are stored.
    pub fn len(&self) -> usize {
        self.shared.usage.plants()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of names and tags stored (what `--max-data` bounds).
    pub fn data_bytes(&self) -> u64 {
        self.shared.usage.data()
    }

    /// The journal's length and compactions; `None` without a journal.
    pub fn journal_stats(&self) -> Option<JournalStats> {
        self.shared.journal.as_ref().map(Journal::stats)
    }

    /// Writes the store's lines of `/metrics`: the plants, and the
    /// journal's size and compactions when there is one.
    pub fn render(&self, out: &mut Exposition) {
        out.single(
            "plantstore_plants",
            Kind::Gauge,
            "Plants stored.",
            self.len(),
        );
        if let Some(journal) = self.journal_stats() {
            out.single(
                "plantstore_journal_bytes",
                Kind::Gauge,
                "Bytes of the journal's records, those queued included (not the zeros written ahead of them).",
                journal.bytes,
            );
            out.single(
                "plantstore_journal_compactions_total",
                Kind::Counter,
                "Journal compactions completed since start-up.",
                journal.compactions,
            );
        }
    }

    /// A copy of the plant with this id.
    pub fn get(&self, id: i64) -> Option<Plant> {
        self.get_versioned(id).map(|found| found.plant)
    }

    /// A copy of the plant with this id, and its version.
    pub fn get_versioned(&self, id: i64) -> Option<VersionedPlant> {
        let shard = self.shared.read(shard_of(id));
        let stored = shard.plants.get(&id)?;
        Some(VersionedPlant {
            plant: stored.to_plant(),
            version: stored.version(),
        })
    }

    /// The nonce that names the store's lineage: the same across restarts
    /// and compactions of its journal, another after a reset and for
    /// every new store. A version is never given twice under one nonce.
    pub fn nonce(&self) -> u64 {
        self.shared.nonce.load(Ordering::Acquire)
    }

    /// Waits until a change is durable.
    pub fn wait(&self, durable: Durable) -> Result<(), Refusal> {
        match durable {
            Durable::Now => Ok(()),
            Durable::After(seq) => self.shared.commit(seq, true),
        }
    }

    /// Starts writing the journal records of every change whose reply
    /// [`Committer::answer`] queued so far: call it when a batch of requests is done (the
    /// event loops do, after each turn), so that one write and one sync
    /// cover them all. With `--sync always` the committer thread writes
    /// and syncs them; with `--sync never` they are written here, on the
    /// calling thread (to the page cache: no wait for the disk), and
    /// acknowledged before it returns (see `committer.rs`).
    pub fn flush(&self) {
        if let Some(queue) = &self.queue {
            queue.flush(&self.shared);
        }
    }

    /// A handle that answers a change's reply once it is durable
    /// ([`Committer::answer`]), later, from anywhere, without keeping the
    /// store open: a reply that held the store could be the last owner and
    /// drop it on the committer thread, which would then wait for itself.
    pub fn committer(&self) -> Committer {
        Committer {
            queue: self.queue.clone(),
            shared: Arc::downgrade(&self.shared),
        }
    }

    /// Makes every change written so far durable (`fdatasync`); for
    /// shutdown, where `--sync never` would otherwise leave it to the OS.
    pub fn sync(&self) -> std::io::Result<()> {
        match &self.shared.journal {
            Some(journal) => journal.sync(),
            None => Ok(()),
        }
    }

    /// Rewrites the journal now (normally the background thread does this
    /// when the journal has grown); a no-op without a journal. Whether it
    /// was rewritten.
    pub fn compact(&self) -> bool {
        self.shared.compact().is_ok_and(|done| done)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Some(journal) = &self.shared.journal {
            journal.compaction.close();
        }
        if let Some(queue) = &self.queue {
            queue.close();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// A nonce for a new lineage (a new store, a new journal, a reset): one
/// no other lineage has, with overwhelming odds. `RandomState` is keyed
/// from the OS's random source, each one differently, and cannot fail
/// where reading that source can.
fn fresh_nonce() -> u64 {
    RandomState::new().hash_one(u64::MAX)
}

fn empty_shards() -> Vec<Shard> {
    let hasher = std::hash::RandomState::new();
    (0..SHARDS).map(|_| Shard::new(hasher.clone())).collect()
}

impl Core {
    /// Makes a change under its shard's lock: refused if the plant it
    /// would replace is missing (or, for a create, present); then admitted
    /// within the capacity, logged (its record left queued), and applied.
    /// A put is given its version here, the number its admission took.
    fn change(&self, mut change: Change<'_>, kind: ChangeKind) -> Result<Durable, Refusal> {
        let id = change.id();
        let mut shard = self.write(shard_of(id));
        let old = shard.plants.get(&id);
        match (kind, old) {
            (ChangeKind::Created, Some(_)) => return Err(Refusal::Exists(id)),
            (ChangeKind::Created, None) | (_, Some(_)) => {}
            (_, None) => return Err(Refusal::NotFound(id)),
        }
        let new = match change {
            Change::Put { name, tag, .. } => Some(Cost::new(name, tag)),
            Change::Delete(_) => None,
        };
        let delta = Delta::between(old.map(Cost::of), new);
        let number = self
            .usage
            .admit(delta, self.capacity)
            .map_err(|over| match over {
                Over::Plants => Refusal::Full(self.capacity.plants),
                Over::Data => Refusal::DataFull(self.capacity.data),
            })?;
        if let Change::Put { version, .. } = &mut change {
            *version = number;
        }
        let durable = match &self.journal {
            Some(journal) => match journal.log(&change) {
                Ok(seq) => Durable::After(seq),
                Err(reason) => {
                    self.usage.retract(delta);
                    return Err(Refusal::Storage(reason));
                }
            },
            None => Durable::Now,
        };
        shard.apply(&change);
        self.usage.settle(delta);
        if let Some(sequencer) = self.hook.get() {
            let text = match change {
                Change::Put { name, tag, .. } => Some((name, tag)),
                Change::Delete(_) => None,
            };
            sequencer.record(durable, id, kind, text);
        }
        Ok(durable)
    }

    /// A shard locked for a change. A panic while holding a lock cannot
    /// leave a shard half-changed (a change is one `apply`, after its
    /// journal record is encoded), so a poisoned lock is safe to keep
    /// using.
    fn write(&self, shard: usize) -> RwLockWriteGuard<'_, Shard> {
        write(&self.shards[shard])
    }

    /// A shard locked for reading.
    fn read(&self, shard: usize) -> RwLockReadGuard<'_, Shard> {
        read(&self.shards[shard])
    }

    /// Waits for the appended record `seq` (and all before it) to be
    /// written. `gather`: see `Journal::commit`.
    fn commit(&self, seq: u64, gather: bool) -> Result<(), Refusal> {
        let Some(journal) = &self.journal else {
            return Ok(());
        };
        journal
            .commit(seq, self.usage.records(), gather)
            .map_err(Refusal::Storage)?;
        if let Some(sequencer) = self.hook.get() {
            sequencer.durable(seq);
        }
        Ok(())
    }
}

#[cfg(test)]
mod query_change_tests;
#[cfg(test)]
mod query_tests;
#[cfg(test)]
mod reset_tests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod version_tests;
