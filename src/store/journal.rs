//! The journal behind `--data FILE`: an append-only log of changes, replayed
//! at start-up, written with group commit and compacted in the background.
//!
//! # File format (version 1)
//!
//! ```text
//! file    = magic record*
//! magic   = "PLANTSJ1"                         8 bytes
//! record  = len:u32le crc:u32le payload        8 + len bytes
//! crc     = CRC-32C of the four `len` bytes followed by the payload
//! payload = 0x01 id:i64le name_len:u32le name tag_len:u32le tag    put
//!         | 0x02 id:i64le                                          delete
//! ```
//!
//! `put` is a create or a replace (the plant with this id is now this one);
//! `tag_len` is `0xFFFF_FFFF` when the plant has no tag. Names and tags are
//! UTF-8. A compacted file is the same format: one `put` per live plant.
//!
//! # Recovery
//!
//! Records are read in order. At the first record that is incomplete or
//! fails its checksum, the rest of the file is searched for any complete,
//! valid record. If none exists the damage is a torn tail (a crash during
//! the last write): it is cut off and start-up logs a warning with the byte
//! count. If one exists the damage is in the middle of the journal: start-up
//! is refused with an error naming the file, the record number and its byte
//! offset, and the file is left untouched. Nothing is dropped silently.
//!
//! # Writing
//!
//! A change is encoded into the pending buffer while the store lock is held,
//! so the journal order is the order in which changes were applied. The
//! record is then committed outside the store lock in [`Journal::commit`]:
//! the first caller becomes the leader, writes everything pending in one
//! `write`, calls `fdatasync` (`--sync always`) and wakes every caller its
//! batch covered (group commit). When serving, the one caller is the
//! store's committer thread (see `Store::when_acked`), so no event loop
//! waits; direct callers of the blocking `Store` methods park here. A failed write or sync is never retried:
//! the journal is poisoned, every change waiting on it and every later one
//! fails, and the reason is reported on `/healthz`.
//!
//! # Compaction
//!
//! When the file has grown past `compact_min` and past twice the size the
//! live plants would take, a background thread rewrites it: it snapshots the
//! map under the store lock (only encoding, no I/O), writes the snapshot to
//! `FILE.compact` and syncs it without holding any lock, then briefly takes
//! the writer role, appends the records that arrived meanwhile (collected
//! since the snapshot), syncs, renames over `FILE` and syncs the directory.
//! A crash at any point leaves either the old or the new file complete; a
//! leftover `FILE.compact` is removed at the next start.
//!
//! The file is held under an exclusive `flock` for the life of the process
//! (the compacted file is locked before it is renamed into place), so a
//! second server on the same file refuses to start.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use super::{Packed, Plant, Shards};

/// The first eight bytes of every journal.
pub const MAGIC: &[u8; 8] = b"PLANTSJ1";

const HEADER: usize = 8;
const PUT: u8 = 1;
const DELETE: u8 = 2;
const NO_TAG: u32 = u32::MAX;
/// The longest a leader waits for more writers (see `Journal::gather`).
const MAX_GATHER: Duration = Duration::from_millis(2);

/// When a change counts as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// After `fdatasync`: survives a power cut.
    Always,
    /// After `write`: survives a crash of the process, not of the machine.
    Never,
}

/// Where and how the store keeps its journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durability {
    /// The journal file.
    pub path: PathBuf,
    /// When a change counts as written.
    pub sync: SyncMode,
    /// No compaction below this file size, in bytes.
    pub compact_min: u64,
}

/// The write side of the journal file: the seam through which tests inject
/// failures. `File` is the real one.
pub trait Disk: Send {
    /// Appends all of `bytes`.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Makes everything appended so far durable.
    fn sync(&mut self) -> io::Result<()>;
}

impl Disk for File {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write_all(bytes)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.sync_data()
    }
}

/// What start-up found in the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Complete records replayed.
    pub records: u64,
    /// Bytes of torn tail cut off (0 for a clean file).
    pub torn_bytes: u64,
    /// Time spent reading and replaying.
    pub elapsed: Duration,
}

/// Why a journal cannot be opened.
#[derive(Debug)]
pub enum OpenError {
    /// Another process holds the file's lock.
    Locked(PathBuf),
    /// The file does not start with the journal magic.
    NotAJournal(PathBuf),
    /// A damaged record with valid records after it.
    Damaged {
        /// The file.
        path: PathBuf,
        /// 1-based number of the damaged record.
        record: u64,
        /// Byte offset where it starts.
        offset: u64,
    },
    /// Reading, truncating or creating the file failed.
    Io(PathBuf, io::Error),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Locked(path) => write!(
                f,
                "{} is locked by another process (is another plantstore using it?)",
                path.display()
            ),
            OpenError::NotAJournal(path) => {
                write!(f, "{} is not a plantstore journal", path.display())
            }
            OpenError::Damaged {
                path,
                record,
                offset,
            } => write!(
                f,
                "{}: record {record} at byte offset {offset} is damaged and valid records \
                 follow it; refusing to start rather than drop them (the file is unchanged; \
                 `truncate -s {offset}` keeps only the records before it)",
                path.display()
            ),
            OpenError::Io(path, e) => write!(f, "{}: {e}", path.display()),
        }
    }
}

impl std::error::Error for OpenError {}

/// The in-memory side of recovery: the map and the bytes its records take.
pub(super) struct Replayed {
    pub map: Shards,
    pub live_bytes: u64,
}

/// An open journal. See the module header.
pub(super) struct Journal {
    path: PathBuf,
    sync: SyncMode,
    compact_min: u64,
    state: Mutex<State>,
    /// Signalled when a batch finishes; only the compactor waits on it
    /// (writers park, see `wake`).
    written: Condvar,
    /// `State::durable`, readable without the lock by a woken writer.
    durable_seq: AtomicU64,
    /// Signalled when a record is appended while a leader gathers.
    arrived: Condvar,
    /// Only the holder of `State::writing` touches the disk.
    disk: Mutex<Box<dyn Disk>>,
    /// Wakes the compaction thread.
    pub(super) compaction: Arc<Signal>,
}

struct State {
    /// Records appended but not yet handed to the disk.
    pending: Vec<u8>,
    /// Sequence number of the last record appended.
    appended: u64,
    /// Sequence number of the last record written (and synced).
    durable: u64,
    /// Sequence number of the last record handed to the disk.
    taken: u64,
    /// Someone (a leader or the compactor) is writing.
    writing: bool,
    /// Writers parked until their record is written: (sequence, thread).
    waiters: Vec<(u64, Thread)>,
    /// A leader is waiting for the writers it expects (see `gather`).
    gathering: bool,
    /// Records in the last batch, and how long writing it took.
    last_batch: u64,
    last_write: Duration,
    /// Set once by the first failed write or sync; never cleared.
    failed: Option<Arc<str>>,
    /// File length once `pending` is written.
    len: u64,
    /// While a compaction runs: every record appended since its snapshot.
    since_snapshot: Option<Vec<u8>>,
}

/// A wake-up flag for the compaction thread.
#[derive(Default)]
pub(super) struct Signal {
    flags: Mutex<(bool, bool)>, // (requested, closed)
    changed: Condvar,
}

impl Signal {
    fn request(&self) {
        self.flags.lock().unwrap_or_else(|p| p.into_inner()).0 = true;
        self.changed.notify_one();
    }

    pub(super) fn close(&self) {
        self.flags.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.changed.notify_one();
    }

    /// Waits for a request; `false` once closed.
    pub(super) fn wait(&self) -> bool {
        let mut flags = self.flags.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            match *flags {
                (_, true) => return false,
                (true, false) => {
                    flags.0 = false;
                    return true;
                }
                (false, false) => {
                    flags = self.changed.wait(flags).unwrap_or_else(|p| p.into_inner())
                }
            }
        }
    }
}

impl Journal {
    /// Opens (or creates) the journal, replays it and cuts a torn tail.
    /// `wrap` turns the opened file into the `Disk` that appends to it.
    pub(super) fn open(
        durability: &Durability,
        wrap: impl FnOnce(File) -> Box<dyn Disk>,
    ) -> Result<(Journal, Replayed, Recovery), OpenError> {
        let started = Instant::now();
        let path = &durability.path;
        let io_error = |e| OpenError::Io(path.clone(), e);
        let existed = path.exists();
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(io_error)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(OpenError::Locked(path.clone())),
            Err(TryLockError::Error(e)) => return Err(io_error(e)),
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io_error)?;
        let scan = scan(&bytes).map_err(|damage| match damage {
            Damage::NotAJournal => OpenError::NotAJournal(path.clone()),
            Damage::Record { record, offset } => OpenError::Damaged {
                path: path.clone(),
                record,
                offset,
            },
        })?;
        let torn_bytes = (bytes.len() - scan.valid_len) as u64;
        if scan.valid_len < MAGIC.len() {
            // New, empty, or torn inside the magic itself.
            file.set_len(0).map_err(io_error)?;
            file.write_all(MAGIC).map_err(io_error)?;
            file.sync_all().map_err(io_error)?;
            if !existed {
                sync_dir(path).map_err(io_error)?;
            }
        } else if torn_bytes > 0 {
            file.set_len(scan.valid_len as u64).map_err(io_error)?;
            file.sync_all().map_err(io_error)?;
        }
        let leftover = compact_path(path);
        if leftover.exists() {
            fs::remove_file(&leftover).map_err(|e| OpenError::Io(leftover.clone(), e))?;
            log::warn!(
                "removed {} left by an interrupted compaction",
                leftover.display()
            );
        }
        let len = scan.valid_len.max(MAGIC.len()) as u64;
        let journal = Journal {
            path: path.clone(),
            sync: durability.sync,
            compact_min: durability.compact_min,
            state: Mutex::new(State {
                pending: Vec::new(),
                appended: 0,
                durable: 0,
                taken: 0,
                writing: false,
                waiters: Vec::new(),
                gathering: false,
                last_batch: 0,
                last_write: Duration::ZERO,
                failed: None,
                len,
                since_snapshot: None,
            }),
            written: Condvar::new(),
            durable_seq: AtomicU64::new(0),
            arrived: Condvar::new(),
            disk: Mutex::new(wrap(file)),
            compaction: Arc::default(),
        };
        let recovery = Recovery {
            records: scan.records,
            torn_bytes,
            elapsed: started.elapsed(),
        };
        let replayed = Replayed {
            map: scan.map,
            live_bytes: scan.live_bytes,
        };
        Ok((journal, replayed, recovery))
    }

    /// Whether a commit waits for the disk (`--sync always`).
    pub(super) fn waits_for_disk(&self) -> bool {
        self.sync == SyncMode::Always
    }

    /// The reason writes are refused, once a write or sync has failed.
    pub(super) fn failure(&self) -> Option<Arc<str>> {
        self.lock().failed.clone()
    }

    /// Appends a `put` record; call with the store lock held. Returns the
    /// sequence number to [`commit`](Self::commit) after releasing it.
    pub(super) fn put(&self, id: i64, plant: &Packed) -> Result<u64, Arc<str>> {
        self.append(|buf| encode_put(buf, id, plant))
    }

    /// Appends a `delete` record; as [`put`](Self::put).
    pub(super) fn delete(&self, id: i64) -> Result<u64, Arc<str>> {
        self.append(|buf| encode_delete(buf, id))
    }

    fn append(&self, encode: impl Fn(&mut Vec<u8>)) -> Result<u64, Arc<str>> {
        let mut state = self.lock();
        if let Some(reason) = &state.failed {
            return Err(Arc::clone(reason));
        }
        let start = state.pending.len();
        encode(&mut state.pending);
        let added = state.pending.len() - start;
        state.len += added as u64;
        let State {
            pending,
            since_snapshot,
            ..
        } = &mut *state;
        if let Some(copy) = since_snapshot {
            copy.extend_from_slice(&pending[start..]);
        }
        state.appended += 1;
        if state.gathering {
            self.arrived.notify_one();
        }
        Ok(state.appended)
    }

    /// Waits until record `seq` is written (and synced with `--sync
    /// always`), writing a batch itself if no one else is. `live_bytes` is
    /// the current size of the live data, for the compaction trigger.
    /// `gather`: a leader waits a moment for more writers first (see
    /// `gather`); the committer thread does not, its batches are already
    /// whole (everything an event loop queued in one turn).
    pub(super) fn commit(&self, seq: u64, live_bytes: u64, gather: bool) -> Result<(), Arc<str>> {
        let mut state = self.lock();
        loop {
            if state.durable >= seq {
                return Ok(());
            }
            if let Some(reason) = &state.failed {
                return Err(Arc::clone(reason));
            }
            if state.writing {
                match self.park(state, seq) {
                    Some(again) => state = again,
                    None => return Ok(()),
                }
                continue;
            }
            state.writing = true;
            if gather {
                state = self.gather(state);
            }
            let batch = std::mem::take(&mut state.pending);
            let upto = state.appended;
            state.last_batch = upto - state.taken;
            state.taken = upto;
            drop(state);
            let started = Instant::now();
            let result = self.write(&batch);
            state = self.lock();
            state.writing = false;
            state.last_write = started.elapsed();
            match result {
                Ok(()) => {
                    state.durable = upto;
                    if state.pending.is_empty() {
                        // Keep the allocation for the next batch.
                        let mut batch = batch;
                        batch.clear();
                        state.pending = batch;
                    }
                    if state.since_snapshot.is_none()
                        && state.len > self.compact_min
                        && state.len > 2 * (live_bytes + MAGIC.len() as u64)
                    {
                        self.compaction.request();
                    }
                }
                Err(e) => self.poison(&mut state, format!("journal write failed: {e}")),
            }
            self.wake(&mut state);
        }
    }

    /// Parks the calling writer until its record `seq` is written or it is
    /// chosen to lead the next batch: `None` once the record is written
    /// (known without taking the lock again), else the lock.
    fn park<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        seq: u64,
    ) -> Option<MutexGuard<'a, State>> {
        let me = thread::current();
        state.waiters.push((seq, me.clone()));
        drop(state);
        loop {
            thread::park();
            if self.durable_seq.load(Ordering::Acquire) >= seq {
                return None;
            }
            let state = self.lock();
            if !state.waiters.iter().any(|(_, t)| t.id() == me.id()) {
                return Some(state); // chosen to lead, or the journal failed
            }
            // A spurious wake-up: still listed, so park again.
        }
    }

    /// After a batch or a compaction, with the writer role released: wakes
    /// every writer whose record is now written (all of them if the
    /// journal failed), and one of the rest to lead the next batch. Each is
    /// removed from the list before it is woken.
    fn wake(&self, state: &mut State) {
        self.durable_seq.store(state.durable, Ordering::Release);
        let (durable, failed) = (state.durable, state.failed.is_some());
        state.waiters.retain(|(seq, thread)| {
            let done = *seq <= durable || failed;
            if done {
                thread.unpark();
            }
            !done
        });
        if !state.writing
            && let Some(first) = (0..state.waiters.len()).min_by_key(|&i| state.waiters[i].0)
        {
            state.waiters.swap_remove(first).1.unpark();
        }
        self.written.notify_all();
    }

    /// The leader's short wait before it writes. Writers answered by the
    /// last batch come back with their next change a moment later; a leader
    /// that wrote at once would write only the first of them, and the rest
    /// would wait a whole sync for the next batch (batches alternating one
    /// and many). So while the last batch held several records, the leader
    /// waits until as many are pending, but never longer than half the last
    /// write took: at most that much latency buys a batch as large as the
    /// load. A lone writer (last batch of one) never waits.
    fn gather<'a>(&self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        let want = state.last_batch;
        if want <= 1 {
            return state;
        }
        let deadline = Instant::now() + (state.last_write / 2).min(MAX_GATHER);
        state.gathering = true;
        while state.appended - state.taken < want {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = self
                .arrived
                .wait_timeout(state, left)
                .map(|(s, _)| s)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        state.gathering = false;
        state
    }

    /// `fdatasync` of what is written; a no-op once poisoned (the failure
    /// is already reported).
    pub(super) fn sync(&self) -> io::Result<()> {
        if self.failure().is_some() {
            return Ok(());
        }
        self.disk.lock().unwrap_or_else(|p| p.into_inner()).sync()
    }

    fn write(&self, batch: &[u8]) -> io::Result<()> {
        let mut disk = self.disk.lock().unwrap_or_else(|p| p.into_inner());
        disk.append(batch)?;
        if self.sync == SyncMode::Always {
            disk.sync()?;
        }
        Ok(())
    }

    /// Starts a compaction: call with the store lock held, after encoding
    /// the snapshot. From now on appended records are also collected.
    pub(super) fn begin_compaction(&self) -> bool {
        let mut state = self.lock();
        if state.failed.is_some() || state.since_snapshot.is_some() {
            return false;
        }
        state.since_snapshot = Some(Vec::new());
        true
    }

    /// Finishes a compaction begun with [`begin_compaction`]: writes
    /// `snapshot` (magic and one put per live plant) and the records that
    /// arrived since, then swaps the new file in. On an error before the
    /// rename the old journal stays in use, whole; after it, the journal is
    /// poisoned.
    pub(super) fn finish_compaction(&self, snapshot: &[u8]) -> io::Result<u64> {
        let temp_path = compact_path(&self.path);
        let result = self.write_compacted(&temp_path, snapshot);
        if result.is_err() {
            let _ = fs::remove_file(&temp_path);
            // If the error came after the writer role was taken, that role
            // was already given back; only the collection stops here.
            self.lock().since_snapshot = None;
        }
        result
    }

    fn write_compacted(&self, temp_path: &Path, snapshot: &[u8]) -> io::Result<u64> {
        let mut temp = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .truncate(false)
            .open(temp_path)?;
        temp.set_len(0)?;
        temp.try_lock().map_err(io::Error::from)?;
        temp.write_all(snapshot)?;
        temp.sync_data()?;

        // Become the writer: no batch may go to the old file from here on.
        let mut state = self.lock();
        while state.writing {
            state = self.written.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        if let Some(reason) = &state.failed {
            return Err(io::Error::other(reason.to_string()));
        }
        state.writing = true;
        let since = state.since_snapshot.take().unwrap_or_default();
        let covered = state.pending.len();
        let upto = state.appended;
        drop(state);

        let swapped = (|| {
            temp.write_all(&since)?;
            temp.sync_data()?;
            fs::rename(temp_path, &self.path)
        })();
        if let Err(e) = swapped {
            let mut state = self.lock();
            state.writing = false;
            self.wake(&mut state);
            return Err(e);
        }
        let len = (snapshot.len() + since.len()) as u64;
        let dir_synced = sync_dir(&self.path);
        *self.disk.lock().unwrap_or_else(|p| p.into_inner()) = Box::new(temp);
        let mut state = self.lock();
        state.writing = false;
        match dir_synced {
            Ok(()) => {
                // The pending records up to `covered` are in `since`.
                state.pending.drain(..covered);
                state.durable = state.durable.max(upto);
                state.taken = state.taken.max(upto);
                state.len = len + state.pending.len() as u64;
            }
            Err(e) => self.poison(
                &mut state,
                format!("syncing the journal's directory after compaction failed: {e}"),
            ),
        }
        self.wake(&mut state);
        Ok(len)
    }

    /// Refuses every change from now on. The reason is shown on `/healthz`
    /// (so it names no path); the log names the file.
    fn poison(&self, state: &mut State, reason: String) {
        log::error!(
            "{}: {reason}; refusing all further changes until restarted",
            self.path.display()
        );
        state.failed = Some(reason.into());
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The bytes a plant's `put` record takes in the file.
pub(super) fn record_size(plant: &Packed) -> u64 {
    (HEADER + 1 + 8 + 4 + plant.name().len() + 4 + plant.tag().map_or(0, str::len)) as u64
}

/// Appends the `put` record for this plant.
pub(super) fn encode_put(buf: &mut Vec<u8>, id: i64, plant: &Packed) {
    let start = begin_record(buf);
    buf.push(PUT);
    buf.extend_from_slice(&id.to_le_bytes());
    push_text(buf, Some(plant.name()));
    push_text(buf, plant.tag());
    end_record(buf, start);
}

fn encode_delete(buf: &mut Vec<u8>, id: i64) {
    let start = begin_record(buf);
    buf.push(DELETE);
    buf.extend_from_slice(&id.to_le_bytes());
    end_record(buf, start);
}

fn push_text(buf: &mut Vec<u8>, text: Option<&str>) {
    match text {
        // A text longer than u32 cannot arrive: bodies are capped far below.
        Some(text) => {
            buf.extend_from_slice(&(text.len() as u32).to_le_bytes());
            buf.extend_from_slice(text.as_bytes());
        }
        None => buf.extend_from_slice(&NO_TAG.to_le_bytes()),
    }
}

fn begin_record(buf: &mut Vec<u8>) -> usize {
    let start = buf.len();
    buf.extend_from_slice(&[0; HEADER]);
    start
}

fn end_record(buf: &mut [u8], start: usize) {
    let len = (buf.len() - start - HEADER) as u32;
    buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
    let crc = crc32c(crc32c(0, &len.to_le_bytes()), &buf[start + HEADER..]);
    buf[start + 4..start + HEADER].copy_from_slice(&crc.to_le_bytes());
}

/// One decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// The plant with this id is now this one.
    Put(i64, Plant),
    /// The plant with this id is gone.
    Delete(i64),
}

/// Decodes the record at the start of `bytes`: the record and its size, or
/// `None` if it is incomplete, fails its checksum or does not decode.
pub fn decode(bytes: &[u8]) -> Option<(Record, usize)> {
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    let crc = u32::from_le_bytes(bytes.get(4..HEADER)?.try_into().ok()?);
    let end = HEADER.checked_add(len as usize)?;
    let payload = bytes.get(HEADER..end)?;
    if crc32c(crc32c(0, &len.to_le_bytes()), payload) != crc {
        return None;
    }
    let (&op, rest) = payload.split_first()?;
    let id = i64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
    let rest = &rest[8..];
    let record = match op {
        DELETE if rest.is_empty() => Record::Delete(id),
        PUT => {
            let (name, rest) = take_text(rest)?;
            let (tag, rest) = take_text(rest)?;
            if !rest.is_empty() {
                return None;
            }
            Record::Put(id, Plant { name: name?, tag })
        }
        _ => return None,
    };
    Some((record, end))
}

/// A length-prefixed text: `Some(None)` for the no-tag marker.
fn take_text(bytes: &[u8]) -> Option<(Option<String>, &[u8])> {
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    let rest = &bytes[4..];
    if len == NO_TAG {
        return Some((None, rest));
    }
    let text = rest.get(..len as usize)?;
    let text = std::str::from_utf8(text).ok()?.to_owned();
    Some((Some(text), &rest[len as usize..]))
}

/// The result of reading a whole journal.
#[derive(Debug, Default)]
pub struct Scan {
    /// The plants the records leave.
    pub map: Shards,
    /// Complete records read.
    pub records: u64,
    /// Length of the valid prefix; anything after it is a torn tail.
    pub valid_len: usize,
    /// Bytes the live plants' records take.
    pub live_bytes: u64,
}

/// Why a journal is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// The file does not start with the magic.
    NotAJournal,
    /// A damaged record (1-based number, byte offset) with valid ones after.
    Record {
        /// 1-based number of the damaged record.
        record: u64,
        /// Its byte offset.
        offset: u64,
    },
}

/// Reads a journal image: every complete record in order, up to a torn
/// tail. Never panics, whatever the bytes.
pub fn scan(bytes: &[u8]) -> Result<Scan, Damage> {
    let mut scan = Scan::default();
    if bytes.len() < MAGIC.len() {
        return if MAGIC.starts_with(bytes) {
            Ok(scan)
        } else {
            Err(Damage::NotAJournal)
        };
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        return Err(Damage::NotAJournal);
    }
    let mut at = MAGIC.len();
    while at < bytes.len() {
        let Some((record, size)) = decode(&bytes[at..]) else {
            if (at + 1..bytes.len()).any(|from| decode(&bytes[from..]).is_some()) {
                return Err(Damage::Record {
                    record: scan.records + 1,
                    offset: at as u64,
                });
            }
            break;
        };
        match record {
            Record::Put(id, plant) => {
                let plant = Packed::from(&plant);
                scan.live_bytes += record_size(&plant);
                if let Some(old) = scan.map.insert(id, plant) {
                    scan.live_bytes -= record_size(&old);
                }
            }
            Record::Delete(id) => {
                if let Some(old) = scan.map.remove(id) {
                    scan.live_bytes -= record_size(&old);
                }
            }
        }
        scan.records += 1;
        at += size;
    }
    scan.valid_len = at;
    Ok(scan)
}

/// `FILE.compact`: where a compaction writes before renaming.
pub(super) fn compact_path(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".compact");
    PathBuf::from(name)
}

/// Makes a create or rename in `path`'s directory durable.
fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// CRC-32C (Castagnoli), table-driven; `crc32c(crc32c(0, a), b)` is the
/// checksum of `a` followed by `b`.
pub fn crc32c(crc: u32, bytes: &[u8]) -> u32 {
    let mut crc = !crc;
    for &b in bytes {
        crc = CRC_TABLE[((crc ^ b as u32) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};
