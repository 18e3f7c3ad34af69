//! The plant store: every plant, in memory, in 16 shards each behind its own
//! `RwLock`, and with `--data` a journal that makes each change durable
//! before it is acknowledged.
//!
//! Owns the map from id to plant and the `--max-plants` cap. Knows nothing
//! of HTTP. Each shard is a `BTreeMap` so that listing in id order from a
//! cursor is a range walk per shard and a merge of the walks, not a
//! copy-and-sort of the whole store. Sharding is for writers: with one lock,
//! a writer preempted while holding it (its allocation page-faulting, its
//! time slice ending) stalled every other writer, which set the tail
//! latency under load.
//!
//! Invariants: a call that returns `Ok` has applied its change (and, with a
//! journal, written it as `--sync` asks; a `*_nowait` call's `Ack` says
//! what is still to be written, and `when_acked` reports it from the
//! committer thread); a call that returns `Err` other
//! than [`StoreError::Storage`] has changed nothing. Critical sections are
//! short: requests are parsed before a shard lock is taken, the journal
//! record is encoded under it (so the journal order of each id's changes is
//! their apply order; changes to different ids commute), and the wait for
//! the disk happens after it is released. A compaction snapshot and a
//! listing page hold every shard's read lock, taken in index order.
//!
//! A change is visible to readers as soon as it is applied, a moment
//! before its write is acknowledged. If that write fails, the change stays
//! in memory, its request gets a 500 (the change may or may not be on
//! disk), and the store refuses every later change until restarted; reads
//! keep working. See `journal.rs` for the file format and compaction.

mod journal;
mod packed;
mod plant;

pub use journal::{
    Damage, Disk, Durability, MAGIC, OpenError, Record, Recovery, Scan, SyncMode, crc32c, decode,
    scan,
};
pub use packed::Packed;
pub use plant::{InvalidBody, NewPlant, Plant, PlantRecord, TextLimits, int64_text};

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::thread;
use std::time::Instant;

use journal::{Journal, Signal, encode_put, record_size};

/// Why a store operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// A plant with this id already exists (create).
    Exists(i64),
    /// No plant has this id.
    NotFound(i64),
    /// The store already holds the maximum number of plants.
    Full(usize),
    /// The journal failed; no change is accepted any more (the reason).
    Storage(Arc<str>),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Exists(id) => write!(f, "a plant with id {id} already exists"),
            StoreError::NotFound(id) => write!(f, "no plant with id {id}"),
            StoreError::Full(max) => write!(f, "the store is full ({max} plants)"),
            StoreError::Storage(_) => {
                f.write_str("the store cannot write changes to disk; changes are refused")
            }
        }
    }
}

impl std::error::Error for StoreError {}

/// One page of a listing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Page {
    /// The plants, ascending by id.
    pub items: Vec<(i64, Plant)>,
    /// Whether more matching plants follow the last one.
    pub more: bool,
}

/// The plants, keyed and ordered by id.
pub struct Store {
    shared: Arc<Shared>,
    /// With a journal: the thread that writes records and acknowledges
    /// the changes waiting for them.
    committer: Option<Arc<Committer>>,
}

/// What a change applied in memory still needs before it may be
/// acknowledged: nothing (`Ack::is_done`), or its journal record written.
#[must_use]
#[derive(Debug)]
pub struct Ack(Option<(u64, u64)>);

impl Ack {
    /// Whether the change may be acknowledged now.
    pub fn is_done(&self) -> bool {
        self.0.is_none()
    }
}

type Done = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
/// A queued change waits at most this long for a `kick`.
const LATEST: std::time::Duration = std::time::Duration::from_millis(5);
/// Changes waiting for their records: (sequence, live bytes), and what to
/// call once it is written.
type Waiting = Vec<((u64, u64), Done)>;

/// Changes waiting for their journal records, and the committer thread's
/// wake-up.
#[derive(Default)]
struct Committer {
    queue: Mutex<Queue>,
    kicked: Condvar,
}

#[derive(Default)]
struct Queue {
    waiting: Waiting,
    kicked: bool,
    closed: bool,
}

impl Committer {
    /// Queues a change; the committer starts on it at the next `kick` (or
    /// after `LATEST` at the latest).
    fn push(&self, commit: (u64, u64), done: Done) {
        let mut queue = self.lock();
        queue.waiting.push((commit, done));
        if queue.waiting.len() == 1 {
            // Wakes the committer to wait (at most `LATEST`) for the kick.
            self.kicked.notify_one();
        }
    }

    /// Starts a batch of everything queued.
    fn kick(&self) {
        let mut queue = self.lock();
        if !queue.waiting.is_empty() && !queue.kicked {
            queue.kicked = true;
            self.kicked.notify_one();
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.kicked.notify_one();
    }

    /// The next batch: everything queued once kicked, or once the first
    /// of it has waited `LATEST`; `None` once closed and empty.
    fn take(&self) -> Option<Waiting> {
        let mut queue = self.lock();
        let mut since = None;
        loop {
            if queue.waiting.is_empty() {
                if queue.closed {
                    return None;
                }
                since = None;
                queue = self.kicked.wait(queue).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            let now = Instant::now();
            let first = *since.get_or_insert(now);
            if queue.kicked || queue.closed || now >= first + LATEST {
                queue.kicked = false;
                return Some(std::mem::take(&mut queue.waiting));
            }
            queue = self
                .kicked
                .wait_timeout(queue, first + LATEST - now)
                .map_or_else(|p| p.into_inner().0, |(q, _)| q);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The committer thread: writes (and syncs) everything pending as one
/// batch, then acknowledges every change the batch covered; runs until the
/// store is dropped.
fn commit_on_request(committer: &Committer, store: &Weak<Shared>) {
    while let Some(batch) = committer.take() {
        let Some(shared) = store.upgrade() else {
            return;
        };
        // Records are numbered in append order: writing up to the highest
        // writes them all. The live-bytes figure of the latest is current.
        let last = batch.iter().map(|(commit, _)| *commit).max_by_key(|c| c.0);
        let result = shared.commit_with(last, false);
        drop(shared);
        for (_, done) in batch {
            done(result.clone());
        }
    }
}

/// Shards of the map: a power of two, so that a shard is a few bits of a
/// hash of the id.
const SHARDS: usize = 16;

struct Shared {
    /// The plants, spread over shards by a hash of the id, each behind its
    /// own lock: writers of different ids rarely wait for each other, and a
    /// writer preempted while holding a lock stalls only its shard. Readers
    /// share the locks (a listing holds all sixteen at once).
    shards: Box<[RwLock<Shard>]>,
    /// Plants stored, over all shards; a create reserves its place here
    /// before inserting, so the cap holds without a global lock.
    count: AtomicUsize,
    /// Bytes the live plants' journal records take (kept only with a
    /// journal; it decides when to compact).
    live_bytes: AtomicU64,
    max_plants: usize,
    journal: Option<Journal>,
}

type Shard = BTreeMap<i64, Packed>;

/// Plants split into shards by [`shard_of`]: what recovery replays into,
/// so that the store starts from it without re-inserting every plant.
#[derive(Debug)]
pub struct Shards(Vec<Shard>);

impl Default for Shards {
    fn default() -> Shards {
        Shards((0..SHARDS).map(|_| BTreeMap::new()).collect())
    }
}

impl Shards {
    /// Stores a plant; the one it replaces, if any.
    pub fn insert(&mut self, id: i64, plant: Packed) -> Option<Packed> {
        self.0[shard_of(id)].insert(id, plant)
    }

    /// Removes a plant; the one removed, if any.
    pub fn remove(&mut self, id: i64) -> Option<Packed> {
        self.0[shard_of(id)].remove(&id)
    }

    /// How many plants.
    pub fn len(&self) -> usize {
        self.0.iter().map(BTreeMap::len).sum()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(BTreeMap::is_empty)
    }

    /// Every plant, shard by shard (ascending ids within a shard only).
    pub fn iter(&self) -> impl Iterator<Item = (&i64, &Packed)> {
        self.0.iter().flatten()
    }

    /// Every id, ascending.
    pub fn ids(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids
    }
}

/// The shard of an id: the top bits of a multiplicative hash, so that
/// consecutive ids spread over every shard.
fn shard_of(id: i64) -> usize {
    ((id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SHARDS.trailing_zeros())) as usize
}

impl Store {
    /// An empty in-memory store holding at most `max_plants` plants.
    pub fn new(max_plants: usize) -> Store {
        Store::build(max_plants, Shards::default(), 0, None)
    }

    /// A store kept in the journal `durability.path`, replayed from it.
    pub fn open(
        max_plants: usize,
        durability: &Durability,
    ) -> Result<(Store, Recovery), OpenError> {
        Store::open_with(max_plants, durability, |file| Box::new(file))
    }

    /// As [`open`](Self::open), with `wrap` choosing how records reach the
    /// file: the seam for injecting write and sync failures.
    pub fn open_with(
        max_plants: usize,
        durability: &Durability,
        wrap: impl FnOnce(File) -> Box<dyn Disk>,
    ) -> Result<(Store, Recovery), OpenError> {
        let (journal, replayed, recovery) = Journal::open(durability, wrap)?;
        let signal = Arc::clone(&journal.compaction);
        let mut store = Store::build(max_plants, replayed.map, replayed.live_bytes, Some(journal));
        let weak = Arc::downgrade(&store.shared);
        thread::Builder::new()
            .name("compactor".into())
            .spawn(move || compact_on_request(&signal, &weak))
            .map_err(|e| OpenError::Io(durability.path.clone(), e))?;
        let committer = Arc::new(Committer::default());
        let (queue, weak) = (Arc::clone(&committer), Arc::downgrade(&store.shared));
        thread::Builder::new()
            .name("committer".into())
            .spawn(move || commit_on_request(&queue, &weak))
            .map_err(|e| OpenError::Io(durability.path.clone(), e))?;
        store.committer = Some(committer);
        Ok((store, recovery))
    }

    fn build(
        max_plants: usize,
        shards: Shards,
        live_bytes: u64,
        journal: Option<Journal>,
    ) -> Store {
        let count = shards.len();
        Store {
            committer: None,
            shared: Arc::new(Shared {
                shards: shards.0.into_iter().map(RwLock::new).collect(),
                count: AtomicUsize::new(count),
                live_bytes: AtomicU64::new(live_bytes),
                max_plants,
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
        let shared = &*self.shared;
        let plant = Packed::from(&new.plant);
        let commit = {
            let mut shard = shared.shard(new.id);
            if shard.contains_key(&new.id) {
                return Err(StoreError::Exists(new.id));
            }
            if shared.count.fetch_add(1, Ordering::Relaxed) >= shared.max_plants {
                shared.count.fetch_sub(1, Ordering::Relaxed);
                return Err(StoreError::Full(shared.max_plants));
            }
            let commit = shared.log(|j| j.put(new.id, &plant)).inspect_err(|_| {
                shared.count.fetch_sub(1, Ordering::Relaxed);
            })?;
            let live_bytes = shared.add_live_bytes(commit, record_size(&plant), 0);
            shard.insert(new.id, plant);
            commit.map(|seq| (seq, live_bytes))
        };
        shared.ack(commit)
    }

    /// How many plants are stored.
    pub fn len(&self) -> usize {
        self.shared.count.load(Ordering::Relaxed)
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of the plant with this id.
    pub fn get(&self, id: i64) -> Option<Plant> {
        self.shared.read(id).get(&id).map(Packed::to_plant)
    }

    /// Replaces the name and tag of an existing plant. Waits for the
    /// journal.
    pub fn replace(&self, id: i64, plant: Plant) -> Result<(), StoreError> {
        let ack = self.replace_nowait(id, plant)?;
        self.wait(ack)
    }

    /// As [`replace`](Self::replace), without waiting for the journal.
    pub fn replace_nowait(&self, id: i64, plant: Plant) -> Result<Ack, StoreError> {
        let shared = &*self.shared;
        let plant = Packed::from(&plant);
        let commit = {
            let mut shard = shared.shard(id);
            let Some(stored) = shard.get_mut(&id) else {
                return Err(StoreError::NotFound(id));
            };
            let commit = shared.log(|j| j.put(id, &plant))?;
            let live_bytes =
                shared.add_live_bytes(commit, record_size(&plant), record_size(stored));
            *stored = plant;
            commit.map(|seq| (seq, live_bytes))
        };
        shared.ack(commit)
    }

    /// Removes a plant. Waits for the journal.
    pub fn delete(&self, id: i64) -> Result<(), StoreError> {
        let ack = self.delete_nowait(id)?;
        self.wait(ack)
    }

    /// As [`delete`](Self::delete), without waiting for the journal.
    pub fn delete_nowait(&self, id: i64) -> Result<Ack, StoreError> {
        let shared = &*self.shared;
        let commit = {
            let mut shard = shared.shard(id);
            let Some(stored) = shard.get(&id) else {
                return Err(StoreError::NotFound(id));
            };
            let commit = shared.log(|j| j.delete(id))?;
            let live_bytes = shared.add_live_bytes(commit, 0, record_size(stored));
            shard.remove(&id);
            shared.count.fetch_sub(1, Ordering::Relaxed);
            commit.map(|seq| (seq, live_bytes))
        };
        shared.ack(commit)
    }

    /// Waits until a change may be acknowledged.
    pub fn wait(&self, ack: Ack) -> Result<(), StoreError> {
        self.shared.commit(ack.0)
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
            (Some(commit), Some(committer)) => committer.push(commit, Box::new(done)),
            (None, _) => done(Ok(())),
            (Some(commit), None) => done(self.shared.commit(Some(commit))),
        }
    }

    /// One page of plants in ascending id order: ids greater than `after`,
    /// with this `tag` if given, at most `limit`. `more` says whether a
    /// further matching plant exists. Only the page is copied; each shard's
    /// walk starts at the cursor and the shards are merged in id order, so
    /// paging deep into a large store stays cheap (a rare tag still scans
    /// forward until the page fills). Every shard is locked for the walk,
    /// so a page is one consistent state of the store.
    pub fn page(&self, after: Option<i64>, limit: usize, tag: Option<&str>) -> Page {
        let start = match after {
            Some(i64::MAX) => return Page::default(),
            Some(after) => Bound::Included(after + 1),
            None => Bound::Unbounded,
        };
        let shards = self.shared.read_all();
        let mut walks: Vec<_> = shards
            .iter()
            .map(|shard| {
                shard
                    .range((start, Bound::Unbounded))
                    .filter(|(_, p)| tag.is_none() || p.tag() == tag)
                    .peekable()
            })
            .collect();
        // The smallest next id over all shards, taken from its walk.
        let mut next = || {
            let walk = walks
                .iter_mut()
                .filter_map(|w| w.peek().map(|(id, _)| **id).zip(Some(w)))
                .min_by_key(|(id, _)| *id)
                .map(|(_, w)| w)?;
            walk.next()
        };
        let mut items = Vec::with_capacity(limit.min(1024));
        while items.len() < limit {
            match next() {
                Some((id, p)) => items.push((*id, p.to_plant())),
                None => break,
            }
        }
        let more = limit > 0 && next().is_some();
        Page { items, more }
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
    /// when the journal has grown); a no-op without a journal.
    pub fn compact(&self) {
        self.shared.compact();
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
    }
}

/// Read-locks a shard. A panic while holding a lock cannot leave the map
/// half-changed (every change is one insert or remove after its journal
/// record is encoded), so a poisoned lock is safe to keep using.
fn read(shard: &RwLock<Shard>) -> RwLockReadGuard<'_, Shard> {
    shard
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    /// The shard of this id, locked for a change.
    fn shard(&self, id: i64) -> RwLockWriteGuard<'_, Shard> {
        self.shards[shard_of(id)]
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The shard of this id, locked for reading.
    fn read(&self, id: i64) -> RwLockReadGuard<'_, Shard> {
        read(&self.shards[shard_of(id)])
    }

    /// Every shard, read-locked in index order. A writer holds one shard
    /// at a time and nothing else, so this cannot deadlock.
    fn read_all(&self) -> Vec<RwLockReadGuard<'_, Shard>> {
        self.shards.iter().map(read).collect()
    }

    /// With a journal (`commit` is `Some`), moves the live-bytes count by
    /// `added - removed` and returns the new count.
    fn add_live_bytes(&self, commit: Option<u64>, added: u64, removed: u64) -> u64 {
        if commit.is_none() {
            return 0;
        }
        // Two's complement: adding `added - removed` wraps to a subtraction.
        let delta = added.wrapping_sub(removed);
        self.live_bytes
            .fetch_add(delta, Ordering::Relaxed)
            .wrapping_add(delta)
    }

    /// Appends a record if there is a journal: its sequence number.
    fn log(
        &self,
        append: impl FnOnce(&Journal) -> Result<u64, Arc<str>>,
    ) -> Result<Option<u64>, StoreError> {
        match &self.journal {
            Some(journal) => append(journal).map(Some).map_err(StoreError::Storage),
            None => Ok(None),
        }
    }

    /// What a change with this journal record still needs: with `--sync
    /// never` the record is written here (a write to the page cache, no
    /// wait for the disk), so only `--sync always` leaves the commit to the
    /// committer thread.
    fn ack(&self, commit: Option<(u64, u64)>) -> Result<Ack, StoreError> {
        match &self.journal {
            Some(journal) if !journal.waits_for_disk() => {
                self.commit(commit)?;
                Ok(Ack(None))
            }
            _ => Ok(Ack(commit)),
        }
    }

    /// Waits for an appended record to be written.
    fn commit(&self, commit: Option<(u64, u64)>) -> Result<(), StoreError> {
        self.commit_with(commit, true)
    }

    fn commit_with(&self, commit: Option<(u64, u64)>, gather: bool) -> Result<(), StoreError> {
        match (&self.journal, commit) {
            (Some(journal), Some((seq, live_bytes))) => journal
                .commit(seq, live_bytes, gather)
                .map_err(StoreError::Storage),
            _ => Ok(()),
        }
    }

    fn compact(&self) {
        let Some(journal) = &self.journal else {
            return;
        };
        let started = Instant::now();
        let Some(snapshot) = self.snapshot(journal) else {
            return;
        };
        let snapshot_ms = started.elapsed().as_millis();
        match journal.finish_compaction(&snapshot) {
            Ok(len) => log::info!(
                "journal compacted to {len} bytes in {} ms ({snapshot_ms} ms under the store locks)",
                started.elapsed().as_millis()
            ),
            Err(e) => log::warn!("journal compaction failed, the journal stays as it was: {e}"),
        }
    }

    /// The first step of a compaction, with every shard read-locked (so no
    /// change is between being applied and being logged): the live plants
    /// encoded as a journal image; `None` if one is already running or the
    /// journal has failed.
    fn snapshot(&self, journal: &Journal) -> Option<Vec<u8>> {
        let shards = self.read_all();
        if !journal.begin_compaction() {
            return None;
        }
        let live_bytes = self.live_bytes.load(Ordering::Relaxed);
        let mut buf = Vec::with_capacity(MAGIC.len() + live_bytes as usize);
        buf.extend_from_slice(MAGIC);
        for shard in &shards {
            for (id, plant) in shard.iter() {
                encode_put(&mut buf, *id, plant);
            }
        }
        Some(buf)
    }
}

/// The compaction thread: runs until the store is dropped.
fn compact_on_request(signal: &Signal, store: &Weak<Shared>) {
    while signal.wait() {
        match store.upgrade() {
            Some(shared) => shared.compact(),
            None => return,
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
        let store = Store::new(10);
        store.create(new_plant(1, "fern")).unwrap();
        assert_eq!(
            store.create(new_plant(1, "moss")),
            Err(StoreError::Exists(1))
        );
        assert_eq!(store.get(1).unwrap().name, "fern");
    }

    #[test]
    fn page_walks_from_the_cursor_and_filters_by_tag() {
        let store = Store::new(100);
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
        let store = Store::new(10_000);
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
    fn replace_and_delete_need_an_existing_plant() {
        let store = Store::new(10);
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
        let store = Store::new(2);
        store.create(new_plant(1, "a")).unwrap();
        store.create(new_plant(2, "b")).unwrap();
        assert_eq!(store.create(new_plant(3, "c")), Err(StoreError::Full(2)));
        assert_eq!(store.len(), 2);
        assert!(store.get(3).is_none());
    }
}

#[cfg(test)]
mod durability_tests;
