//! The plant store: every plant, in memory, in 16 shards each behind its own
//! `RwLock`, and with `--data` a journal that makes each change durable
//! before it is acknowledged.
//!
//! Owns the map from id to plant and its limits ([`Capacity`]: plants, and
//! bytes of names and tags). Knows nothing of HTTP. The shards and what a
//! change costs are in `shards.rs`; listing in `listing.rs`; the thread
//! that acknowledges journalled changes in `committer.rs`; the file in
//! `journal/`. Sharding is for writers: with one lock, a writer preempted
//! while holding it (its allocation page-faulting, its time slice ending)
//! stalled every other writer, which set the tail latency under load.
//!
//! No reader holds a lock for long. A listing page and a compaction read
//! the shards in short steps, one shard's read lock at a time (see
//! `listing.rs` and `Shared::compact`), so a writer waits for at most one
//! step, whatever the size of the store.
//!
//! Invariants: a call that returns `Ok` has applied its change (and, with a
//! journal, written it as `--sync` asks; a `*_nowait` call's `Ack` says
//! what is still to be written, and `when_acked` reports it from the
//! committer thread); a call that returns `Err` other than
//! [`StoreError::Storage`] has changed nothing. Critical sections are
//! short: requests are parsed before a shard lock is taken, the journal
//! record is encoded under it (so the journal order of each id's changes is
//! their apply order; changes to different ids commute), and the wait for
//! the disk happens after it is released.
//!
//! A change is visible to readers as soon as it is applied, a moment
//! before its write is acknowledged. If that write fails, the change stays
//! in memory, its request gets a 500 (the change may or may not be on
//! disk), and the store refuses every later change until restarted; reads
//! keep working. See `journal/mod.rs` for the file format and compaction.

mod committer;
mod journal;
mod listing;
mod packed;

mod shards;

pub use journal::{
    Change, Damage, Disk, Durability, HEADER, JournalStats, MAGIC, MAGIC_V1, OpenError, Recovery,
    Salt, Scan, SyncMode, Version, convert, crc32c, crc64, decode, encode, header, scan, seal,
};
pub use listing::{AllPlants, Page};
pub use packed::Packed;

pub use shards::Capacity;

use std::fmt;
use std::fs::File;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crate::lock::{read, write};
use crate::metrics::{Exposition, Kind};
use crate::plant::{NewPlant, Plant};
use committer::{Committer, commit_on_request};
use journal::{Journal, Signal};
use shards::{Cost, Delta, Over, SHARDS, Shard, Usage, shard_of};

/// Why a store operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// A plant with this id already exists (create).
    Exists(i64),
    /// No plant has this id.
    NotFound(i64),
    /// The store already holds the maximum number of plants.
    Full(usize),
    /// The change would take the names and tags stored past `--max-data`
    /// bytes (the limit).
    DataFull(u64),
    /// The journal failed; no change is accepted any more (the reason).
    Storage(Arc<str>),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Exists(id) => write!(f, "a plant with id {id} already exists"),
            StoreError::NotFound(id) => write!(f, "no plant with id {id}"),
            StoreError::Full(max) => write!(f, "the store is full ({max} plants)"),
            StoreError::DataFull(max) => write!(
                f,
                "the store is full ({max} bytes of names and tags); delete or shorten plants first"
            ),
            StoreError::Storage(_) => {
                f.write_str("the store cannot write changes to disk; changes are refused")
            }
        }
    }
}

impl std::error::Error for StoreError {}

/// The plants, keyed and ordered by id.
pub struct Store {
    shared: Arc<Shared>,
    /// With a journal: the thread that writes records and acknowledges
    /// the changes waiting for them.
    committer: Option<Arc<Committer>>,
    /// The compaction and committer threads, joined when the store is
    /// dropped: until they end they may hold the journal (and its lock).
    threads: Vec<thread::JoinHandle<()>>,
}

/// What a change applied in memory still needs before it may be
/// acknowledged: nothing (`Ack::is_done`), or its journal record (this
/// sequence number) written.
#[must_use]
#[derive(Debug)]
pub struct Ack(Option<u64>);

impl Ack {
    /// Whether the change may be acknowledged now.
    pub fn is_done(&self) -> bool {
        self.0.is_none()
    }
}

struct Shared {
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
}

/// A compaction that fails is tried again after this long at first,
/// doubling up to `RETRY_MAX`.
const RETRY_MIN: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(300);
/// Records a compaction step encodes under one shard's read lock.
const COMPACT_STEP: usize = 512;

impl Store {
    /// An empty in-memory store.
    pub fn new(capacity: Capacity) -> Store {
        Store::build(capacity, empty_shards(), Usage::default(), None)
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
        wrap: impl FnOnce(File) -> Box<dyn Disk>,
    ) -> Result<(Store, Recovery), OpenError> {
        let mut shards = empty_shards();
        let usage = Usage::default();
        let (journal, recovery) = Journal::open(durability, wrap, |change| {
            usage.add(shards[shard_of(change.id())].apply(&change));
        })?;
        let signal = Arc::clone(&journal.compaction);
        let mut store = Store::build(capacity, shards, usage, Some(journal));
        let weak = Arc::downgrade(&store.shared);
        let compactor = thread::Builder::new()
            .name("compactor".into())
            .spawn(move || compact_on_request(&signal, &weak))
            .map_err(|e| OpenError::Io(durability.path.clone(), e))?;
        store.threads.push(compactor);
        let committer = Arc::new(Committer::default());
        let (queue, weak) = (Arc::clone(&committer), Arc::downgrade(&store.shared));
        // Set before spawning: a failed spawn drops the store, which must
        // close the compactor for its join to end.
        store.committer = Some(Arc::clone(&committer));
        let committer = thread::Builder::new()
            .name("committer".into())
            .spawn(move || commit_on_request(&queue, &weak))
            .map_err(|e| OpenError::Io(durability.path.clone(), e))?;
        store.threads.push(committer);
        Ok((store, recovery))
    }

    fn build(
        capacity: Capacity,
        shards: Vec<Shard>,
        usage: Usage,
        journal: Option<Journal>,
    ) -> Store {
        Store {
            committer: None,
            threads: Vec::new(),
            shared: Arc::new(Shared {
                shards: shards.into_iter().map(RwLock::new).collect(),
                usage,
                capacity,
                journal,
            }),
        }
    }

    /// Why changes are refused, once the journal has failed.
    pub fn failure(&self) -> Option<Arc<str>> {
        self.shared.journal.as_ref()?.failure()
    }

    /// Adds a plant; refuses an existing id (the stored plant is unchanged)
    /// and a full store. Waits for the journal.
    pub fn create(&self, new: NewPlant) -> Result<(), StoreError> {
        let ack = self.create_nowait(new)?;
        self.wait(ack)
    }

    /// As [`create`](Self::create), without waiting for the journal: what
    /// the change still needs before it may be acknowledged.
    pub fn create_nowait(&self, new: NewPlant) -> Result<Ack, StoreError> {
        let Ack(seq) = self.create_queued(new)?;
        self.shared.ack(seq)
    }

    /// As [`create_nowait`](Self::create_nowait), but the record is left
    /// queued even with `--sync never` (where `create_nowait` writes it at
    /// once): the next [`wait`](Self::wait) writes everything queued in one
    /// go. For bulk loads at start-up, where a write per plant would cost
    /// more than the plant.
    pub fn create_queued(&self, new: NewPlant) -> Result<Ack, StoreError> {
        let change = Change::Put {
            id: new.id,
            name: &new.plant.name,
            tag: new.plant.tag.as_deref(),
        };
        let seq = self.shared.change_logged(&change, |old| match old {
            Some(_) => Err(StoreError::Exists(new.id)),
            None => Ok(()),
        })?;
        Ok(Ack(seq))
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
                "Length of the journal file, records queued for it included.",
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
        self.shared
            .read(shard_of(id))
            .plants
            .get(&id)
            .map(Packed::to_plant)
    }

    /// Replaces the name and tag of an existing plant. Waits for the
    /// journal.
    pub fn replace(&self, id: i64, plant: Plant) -> Result<(), StoreError> {
        let ack = self.replace_nowait(id, plant)?;
        self.wait(ack)
    }

    /// As [`replace`](Self::replace), without waiting for the journal.
    pub fn replace_nowait(&self, id: i64, plant: Plant) -> Result<Ack, StoreError> {
        let change = Change::Put {
            id,
            name: &plant.name,
            tag: plant.tag.as_deref(),
        };
        self.shared.change(&change, |old| match old {
            Some(_) => Ok(()),
            None => Err(StoreError::NotFound(id)),
        })
    }

    /// Removes a plant. Waits for the journal.
    pub fn delete(&self, id: i64) -> Result<(), StoreError> {
        let ack = self.delete_nowait(id)?;
        self.wait(ack)
    }

    /// As [`delete`](Self::delete), without waiting for the journal.
    pub fn delete_nowait(&self, id: i64) -> Result<Ack, StoreError> {
        self.shared.change(&Change::Delete(id), |old| match old {
            Some(_) => Ok(()),
            None => Err(StoreError::NotFound(id)),
        })
    }

    /// Waits until a change may be acknowledged.
    pub fn wait(&self, ack: Ack) -> Result<(), StoreError> {
        self.shared.commit(ack.0, true)
    }

    /// Starts writing the journal records of every change queued with
    /// `when_acked` so far: call it when a batch of requests is done (the
    /// event loops do, after each turn), so that one write and one sync
    /// cover them all.
    pub fn flush(&self) {
        if let Some(committer) = &self.committer {
            committer.kick();
        }
    }

    /// Calls `done` once a change may be acknowledged: at once for one
    /// that needs nothing more, else from the committer thread once its
    /// journal record is written (and synced, with `--sync always`). Never
    /// waits for the disk.
    pub fn when_acked(&self, ack: Ack, done: impl FnOnce(Result<(), StoreError>) + Send + 'static) {
        match (ack.0, &self.committer) {
            (Some(seq), Some(committer)) => committer.push(seq, Box::new(done)),
            (None, _) => done(Ok(())),
            (Some(seq), None) => done(self.shared.commit(Some(seq), true)),
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
        if let Some(committer) = &self.committer {
            committer.close();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn empty_shards() -> Vec<Shard> {
    let hasher = std::hash::RandomState::new();
    (0..SHARDS).map(|_| Shard::new(hasher.clone())).collect()
}

impl Shared {
    /// Makes a change under its shard's lock: `check` sees the plant it
    /// would replace and may refuse; then the change is admitted within the
    /// capacity, logged, and applied.
    fn change(
        &self,
        change: &Change<'_>,
        check: impl FnOnce(Option<&Packed>) -> Result<(), StoreError>,
    ) -> Result<Ack, StoreError> {
        let seq = self.change_logged(change, check)?;
        self.ack(seq)
    }

    /// As `change`, leaving its journal record queued: its sequence number.
    fn change_logged(
        &self,
        change: &Change<'_>,
        check: impl FnOnce(Option<&Packed>) -> Result<(), StoreError>,
    ) -> Result<Option<u64>, StoreError> {
        let seq = {
            let mut shard = self.write(shard_of(change.id()));
            let old = shard.plants.get(&change.id());
            check(old)?;
            let new = match *change {
                Change::Put { name, tag, .. } => Some(Cost::new(name, tag)),
                Change::Delete(_) => None,
            };
            let delta = Delta::between(old.map(Cost::of), new);
            self.usage
                .admit(delta, self.capacity)
                .map_err(|over| match over {
                    Over::Plants => StoreError::Full(self.capacity.plants),
                    Over::Data => StoreError::DataFull(self.capacity.data),
                })?;
            let seq = match &self.journal {
                Some(journal) => match journal.log(change) {
                    Ok(seq) => Some(seq),
                    Err(reason) => {
                        self.usage.retract(delta);
                        return Err(StoreError::Storage(reason));
                    }
                },
                None => None,
            };
            shard.apply(change);
            self.usage.settle(delta);
            seq
        };
        Ok(seq)
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

    /// What a change with this journal record still needs: with `--sync
    /// never` the record is written here (a write to the page cache, no
    /// wait for the disk), so only `--sync always` leaves the commit to the
    /// committer thread.
    fn ack(&self, seq: Option<u64>) -> Result<Ack, StoreError> {
        match &self.journal {
            Some(journal) if !journal.waits_for_disk() => {
                self.commit(seq, true)?;
                Ok(Ack(None))
            }
            _ => Ok(Ack(seq)),
        }
    }

    /// Waits for an appended record to be written. `gather`: see
    /// `Journal::commit`.
    fn commit(&self, seq: Option<u64>, gather: bool) -> Result<(), StoreError> {
        match (&self.journal, seq) {
            (Some(journal), Some(seq)) => journal
                .commit(seq, self.usage.records(), gather)
                .map_err(StoreError::Storage),
            _ => Ok(()),
        }
    }

    /// Rewrites the journal from the live plants, read one short step at a
    /// time: each step holds one shard's read lock while it encodes at most
    /// `COMPACT_STEP` records. Whether it ran (`false`: none to do, or one
    /// already running).
    fn compact(&self) -> std::io::Result<bool> {
        self.compact_between_steps(|_| {})
    }

    /// As `compact`, calling `between(n)` before the n-th step (0-based)
    /// takes its lock: the seam through which tests change the store while
    /// a compaction runs.
    fn compact_between_steps(&self, mut between: impl FnMut(usize)) -> std::io::Result<bool> {
        let Some(journal) = &self.journal else {
            return Ok(false);
        };
        let started = Instant::now();
        let (mut shard, mut after) = (0, None);
        let mut longest = Duration::ZERO;
        let mut steps = 0;
        let fill = |buf: &mut Vec<u8>| {
            between(steps);
            steps += 1;
            let plants = self.read(shard);
            let held = Instant::now();
            let from = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
            let mut taken = 0;
            for (&id, plant) in plants.plants.range((from, std::ops::Bound::Unbounded)) {
                if taken == COMPACT_STEP {
                    break;
                }
                let (name, tag) = (plant.name(), plant.tag());
                journal::encode(buf, &Change::Put { id, name, tag });
                after = Some(id);
                taken += 1;
            }
            drop(plants);
            longest = longest.max(held.elapsed());
            if taken < COMPACT_STEP {
                (shard, after) = (shard + 1, None);
            }
            shard < SHARDS
        };
        match journal.rewrite(self.usage.records(), fill)? {
            Some(len) => {
                log::info!(
                    "journal compacted to {len} bytes in {} ms (longest store lock hold {} µs)",
                    started.elapsed().as_millis(),
                    longest.as_micros()
                );
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// The compaction thread: runs until the store is dropped. A failed
/// compaction is logged once and tried again later, the wait doubling
/// (from `RETRY_MIN` up to `RETRY_MAX`) until one succeeds; requests in
/// between are ignored.
fn compact_on_request(signal: &Signal, store: &Weak<Shared>) {
    let mut retry: Option<(Instant, Duration)> = None;
    while signal.wait() {
        if retry.is_some_and(|(at, _)| Instant::now() < at) {
            continue;
        }
        let Some(shared) = store.upgrade() else {
            return;
        };
        match shared.compact() {
            Ok(_) => {
                if retry.take().is_some() {
                    log::info!("journal compaction works again");
                }
            }
            Err(e) => {
                let wait = retry.map_or(RETRY_MIN, |(_, wait)| (wait * 2).min(RETRY_MAX));
                if retry.is_none() {
                    log::warn!(
                        "journal compaction failed, the journal stays as it was and keeps \
                         taking changes; retrying with growing pauses (up to {} s): {e}",
                        RETRY_MAX.as_secs()
                    );
                }
                retry = Some((Instant::now() + wait, wait));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_plant(id: i64, name: &str) -> NewPlant {
        NewPlant {
            id,
            plant: Plant {
                name: name.to_string(),
                tag: None,
            },
        }
    }

    #[test]
    fn create_refuses_existing_id_and_keeps_the_first() {
        let store = Store::new(Capacity::plants(10));
        store.create(new_plant(1, "fern")).unwrap();
        assert_eq!(
            store.create(new_plant(1, "moss")),
            Err(StoreError::Exists(1))
        );
        assert_eq!(store.get(1).unwrap().name, "fern");
    }

    #[test]
    fn page_walks_from_the_cursor_and_filters_by_tag() {
        let store = Store::new(Capacity::plants(100));
        for id in [5, 1, 3, 2, 4] {
            let tag = (id % 2 == 0).then(|| "even".to_string());
            store
                .create(NewPlant {
                    id,
                    plant: Plant {
                        name: format!("p{id}"),
                        tag,
                    },
                })
                .unwrap();
        }
        let ids = |page: &Page| page.items.iter().map(|(id, _)| *id).collect::<Vec<_>>();
        let first = store.page(None, 2, None);
        assert_eq!((ids(&first), first.more), (vec![1, 2], true));
        let last = store.page(Some(3), 2, None);
        assert_eq!((ids(&last), last.more), (vec![4, 5], false));
        let even = store.page(None, 10, Some("even"));
        assert_eq!((ids(&even), even.more), (vec![2, 4], false));
        assert_eq!(store.page(Some(i64::MAX), 10, None), Page::default());
        assert!(
            !store.page(None, 0, None).more,
            "limit 0 never promises more"
        );
    }

    #[test]
    fn pages_merge_every_shard_in_id_order() {
        let store = Store::new(Capacity::plants(10_000));
        // Ids in a scrambled order, negative and positive, across shards.
        let ids: Vec<i64> = (0..1000i64).map(|i| (i * 7919) % 1000 - 500).collect();
        for &id in &ids {
            let tag = (id % 3 == 0).then(|| "three".to_string());
            let plant = Plant {
                name: format!("p{id}"),
                tag,
            };
            store.create(NewPlant { id, plant }).unwrap();
        }
        let walk = |tag: Option<&str>| {
            let (mut seen, mut after) = (Vec::new(), None);
            loop {
                let page = store.page(after, 7, tag);
                seen.extend(page.items.iter().map(|(id, _)| *id));
                after = seen.last().copied();
                if !page.more {
                    return seen;
                }
            }
        };
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        assert_eq!(walk(None), sorted);
        let threes: Vec<i64> = sorted.iter().copied().filter(|id| id % 3 == 0).collect();
        assert_eq!(walk(Some("three")), threes);
        assert_eq!(store.len(), 1000);
    }

    #[test]
    fn pages_are_whole_when_every_id_is_in_one_shard() {
        // A page reads each shard a step at a time; here one shard holds
        // every plant, so the page takes many steps of that shard.
        let store = Store::new(Capacity::plants(10_000));
        let ids: Vec<i64> = (0..20_000i64).filter(|&id| shard_of(id) == 3).collect();
        for &id in &ids {
            let tag = (id % 5 == 0).then(|| "five".to_string());
            let plant = Plant {
                name: format!("p{id}"),
                tag,
            };
            store.create(NewPlant { id, plant }).unwrap();
        }
        let page = store.page(None, 1000, None);
        let got: Vec<i64> = page.items.iter().map(|(id, _)| *id).collect();
        assert_eq!(
            (got.as_slice(), page.more),
            (&ids[..ids.len().min(1000)], ids.len() > 1000)
        );
        let fives: Vec<i64> = ids.iter().copied().filter(|id| id % 5 == 0).collect();
        let page = store.page(Some(fives[2]), 10_000, Some("five"));
        let got: Vec<i64> = page.items.iter().map(|(id, _)| *id).collect();
        assert_eq!((got.as_slice(), page.more), (&fives[3..], false));
        assert_eq!(store.page(None, 10, Some("none")), Page::default());
    }

    #[test]
    fn a_page_within_a_byte_budget_stops_early_and_says_more_follow() {
        let store = Store::new(Capacity::plants(100));
        for id in 0..10 {
            let plant = Plant {
                name: "n".repeat(100),
                tag: None,
            };
            store.create(NewPlant { id, plant }).unwrap();
        }
        let ids = |page: &Page| page.items.iter().map(|(id, _)| *id).collect::<Vec<_>>();
        let page = store.page_within(None, 100, None, 250);
        assert_eq!((ids(&page), page.more), (vec![0, 1, 2], true));
        let page = store.page_within(Some(7), 100, None, 250);
        assert_eq!((ids(&page), page.more), (vec![8, 9], false));
        let page = store.page_within(None, 100, None, 0);
        assert_eq!((ids(&page), page.more), (vec![0], true), "one at least");
    }

    #[test]
    fn writers_of_every_shard_go_on_while_a_page_is_read() {
        // A listing once held every shard's read lock for the whole page;
        // now between its steps it holds none, so a writer on any shard
        // (here: from another thread, waited for from inside the page)
        // finishes at once.
        let store = Arc::new(Store::new(Capacity::plants(10_000)));
        for id in 0..2000 {
            store.create(new_plant(id, "p")).unwrap();
        }
        let mut next = 10_000;
        let mut steps = 0;
        let page = store.page_between_steps(None, 1000, None, usize::MAX, || {
            steps += 1;
            let (writer, id) = (Arc::clone(&store), next);
            next += 1;
            let (done, finished) = std::sync::mpsc::channel();
            thread::spawn(move || {
                let _ = done.send(writer.create(new_plant(id, "during")));
            });
            let result = finished.recv_timeout(std::time::Duration::from_secs(5));
            assert_eq!(
                result,
                Ok(Ok(())),
                "a writer waited for a page (step {steps})"
            );
        });
        assert!(steps >= SHARDS, "{steps} steps");
        let ids: Vec<i64> = page.items.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, (0..1000).collect::<Vec<_>>());
        assert_eq!(store.len(), 2000 + steps);
    }

    #[test]
    fn reading_all_plants_while_they_change_keeps_the_listing_promises() {
        // Even ids exist throughout; odd ones are deleted, created and
        // renamed between pieces, ahead of and behind the read.
        let store = Store::new(Capacity::plants(100_000));
        for id in 0..5000 {
            store.create(new_plant(id, "before")).unwrap();
        }
        let mut all = store.all_plants();
        let mut read: Vec<i64> = Vec::new();
        let mut pieces = 0;
        while !all.is_done() {
            let piece = all.next_piece(97, usize::MAX);
            assert!(!piece.is_empty() || all.is_done());
            read.extend(piece.iter().map(|(id, _)| *id));
            pieces += 1;
            let at = 100 * pieces;
            for id in [at + 1, at + 2001, 7001 + at] {
                let _ = store.delete(id);
                let _ = store.create(new_plant(id + 2, "during"));
                let _ = store.replace(
                    id - 2,
                    Plant {
                        name: "renamed".into(),
                        tag: None,
                    },
                );
            }
        }
        assert!(pieces > 50, "{pieces} pieces");
        assert!(read.windows(2).all(|w| w[0] < w[1]), "strictly ascending");
        let evens: Vec<i64> = read.iter().copied().filter(|id| id % 2 == 0).collect();
        assert_eq!(evens, (0..5000).step_by(2).collect::<Vec<_>>());
        assert!(all.next_piece(97, usize::MAX).is_empty(), "done stays done");
    }

    #[test]
    fn all_plants_come_in_pieces_bounded_in_bytes() {
        let store = Store::new(Capacity::plants(100));
        for id in 0..10 {
            store.create(new_plant(id, &"n".repeat(100))).unwrap();
        }
        let mut all = store.all_plants();
        let sizes: Vec<usize> =
            std::iter::from_fn(|| Some(all.next_piece(100, 250).len()).filter(|&n| n > 0))
                .collect();
        assert_eq!(sizes, [3, 3, 3, 1]);
        assert!(
            Store::new(Capacity::plants(1))
                .all_plants()
                .next_piece(100, 1)
                .is_empty()
        );
    }

    #[test]
    fn retagging_and_deleting_keep_tag_pages_right() {
        let store = Store::new(Capacity::plants(100));
        let plant = |tag: Option<&str>| Plant {
            name: "p".into(),
            tag: tag.map(String::from),
        };
        for id in 0..10 {
            store
                .create(NewPlant {
                    id,
                    plant: plant(Some("a")),
                })
                .unwrap();
        }
        store.replace(3, plant(Some("b"))).unwrap();
        store.replace(4, plant(None)).unwrap();
        store.delete(5).unwrap();
        let ids = |tag| {
            let page = store.page(None, 100, Some(tag));
            page.items.iter().map(|(id, _)| *id).collect::<Vec<_>>()
        };
        assert_eq!(ids("a"), vec![0, 1, 2, 6, 7, 8, 9]);
        assert_eq!(ids("b"), vec![3]);
    }

    #[test]
    fn data_is_bounded_in_bytes_of_names_and_tags() {
        let store = Store::new(Capacity {
            plants: 100,
            data: 10,
        });
        let plant = |name: &str, tag: Option<&str>| Plant {
            name: name.into(),
            tag: tag.map(String::from),
        };
        store
            .create(NewPlant {
                id: 1,
                plant: plant("abcd", Some("ef")),
            })
            .unwrap();
        assert_eq!(store.data_bytes(), 6);
        assert_eq!(
            store.create(NewPlant {
                id: 2,
                plant: plant("12345", None)
            }),
            Err(StoreError::DataFull(10))
        );
        assert_eq!(
            store.replace(1, plant("abcdefghijk", None)),
            Err(StoreError::DataFull(10))
        );
        assert_eq!(
            store.get(1),
            Some(plant("abcd", Some("ef"))),
            "refused: unchanged"
        );
        store
            .create(NewPlant {
                id: 2,
                plant: plant("1234", None),
            })
            .unwrap();
        store.replace(1, plant("a", None)).unwrap();
        store.delete(2).unwrap();
        assert_eq!((store.len(), store.data_bytes()), (1, 1));
    }

    #[test]
    fn replace_and_delete_need_an_existing_plant() {
        let store = Store::new(Capacity::plants(10));
        let plant = Plant {
            name: "x".into(),
            tag: None,
        };
        assert_eq!(
            store.replace(1, plant.clone()),
            Err(StoreError::NotFound(1))
        );
        assert_eq!(store.delete(1), Err(StoreError::NotFound(1)));
        store.create(new_plant(1, "a")).unwrap();
        store.replace(1, plant.clone()).unwrap();
        assert_eq!(store.get(1), Some(plant));
        store.delete(1).unwrap();
        assert!(store.get(1).is_none());
    }

    #[test]
    fn create_refuses_past_the_cap() {
        let store = Store::new(Capacity::plants(2));
        store.create(new_plant(1, "a")).unwrap();
        store.create(new_plant(2, "b")).unwrap();
        assert_eq!(store.create(new_plant(3, "c")), Err(StoreError::Full(2)));
        assert_eq!(store.len(), 2);
        assert!(store.get(3).is_none());
    }
}

#[cfg(test)]
mod durability_tests;
#[cfg(test)]
mod format_tests;
