//! The journal behind `--data FILE`: an append-only log of changes, replayed
//! at start-up, written with group commit and compacted in the background.
//!
//! The journal knows nothing of the store: recovery hands each record's
//! [`Change`] to a callback, and a compaction asks the store for its live
//! plants through one.
//!
//! # The format, recovery and older versions
//!
//! The file format, what recovery cuts and what it refuses, why the
//! checks cover a salt and why the length has a check of its own, what
//! the header's lineage (nonce and mark) is for, and how versions 1 to 4
//! are read and converted are specified once, for users
//! and for this code alike, in docs/storage.md ("The journal format").
//! Where the code does it: the layout and checksums in `format.rs`
//! (`MAX_PAYLOAD`, `HEADER`, `seal`), the zeros written ahead in
//! `ahead.rs`, the streaming read and the search after damage in
//! `recovery.rs` (a window of about 64 KiB and the record being read;
//! zeros are passed by comparing bytes, at most `ahead::STEP` of them;
//! an older file's puts numbered), the conversion of an older file in
//! `convert.rs`. `Version`'s `Debug` leaves the salt out, as every log
//! line and error does.
//!
//! # Versions and the lineage
//!
//! Every put carries the plant's version, which the store gives; the
//! journal keeps the highest it has logged (`State::lineage`), with the
//! nonce of its file, so that a file it writes whole says both in its
//! header: a compaction keeps the nonce and writes the mark it had when
//! it began (a version logged after is in a record of the new file), a
//! reset writes the store's new nonce and mark, a new or converted file
//! the nonce the store gives it.
//!
//! # Writing
//!
//! A change is encoded into the pending buffer while the store lock is
//! held, so the journal order is the order in which changes were applied;
//! its check is left empty, since only the writer knows which file the
//! record will go to (a compaction changes the file and its salt). The
//! record is then committed outside the store lock in [`Journal::commit`]:
//! the first caller becomes the leader, seals the batch (fills in each
//! check, for the salt of the file it goes to), writes everything pending
//! in one `write`, calls `fdatasync` (`--sync always`) and wakes every
//! caller its batch covered (group commit). When serving, the one caller is
//! the store's committer thread (see `Committer::answer`), so no event loop
//! waits; direct callers of the blocking `Store` methods park here. A
//! failed write or sync is never retried: the journal is poisoned, every
//! change waiting on it and every later one fails, and the reason is
//! reported on `/healthz`.
//!
//! After a batch is written, and before any change it covers is
//! acknowledged, the leader checks that the file is still the one at its
//! path (see `file.rs`): with `--sync always` a `stat` of the path (about
//! 1 µs, beside a sync's hundreds), with `--sync never` the open file's
//! link count (an `fstat`, about 0.6 µs a change), which notices a deleted
//! file and one replaced by a rename over it, not one moved to another
//! name. `/healthz` and a compaction check the path. A file found gone
//! poisons the journal as a failed write does: what is appended from then
//! on would not be read at a restart.
//!
//! # Compaction
//!
//! When the file has grown past `compact_min` and past twice the size the
//! live plants would take, a background thread rewrites it. `FILE` is the
//! real file: a path given through symbolic links is resolved once, at
//! open, so the link stays a link to it. First the free space (`statvfs`)
//! must hold the new file and a reserve for the changes that keep arriving
//! meanwhile, which are written to both files (an eighth of the new file,
//! at least 1 MiB: see `rewrite::reserve`). From the moment it starts,
//! every appended record is also collected; it reads the live plants from
//! the store a short step at a time (each step holds one shard's read lock
//! while it encodes at most 512 records) and writes each step to
//! `FILE.compact` under a fresh salt (created 0600, then given the
//! journal's owner and mode),
//! stopping if a step would leave less than half the reserve free; it
//! syncs it, then briefly takes the writer role, appends the records
//! collected meanwhile (sealed for the new file), syncs, checks that the path still names the
//! journal, renames over `FILE` and syncs the directory. With `--sync
//! never` neither the collected records nor the directory are synced while
//! the writer role is held (the directory is synced just after), so a
//! change answered by an event loop never waits for the disk. A plant changed
//! while the snapshot is read appears both in the snapshot and in the
//! collected records; replay applies the later one last, so the result is
//! the current state. Records still pending when the new file is swapped in
//! are sealed for it when they are written.
//! A crash at any point leaves either the old or the new file complete; a
//! leftover `FILE.compact` is removed at the next start.
//!
//! A compaction that fails (too little room, an I/O error, an owner it may
//! not give) removes `FILE.compact` and leaves the journal as it was,
//! taking changes; the store logs it once and tries again later, backing
//! off. It never poisons the journal, with two exceptions that are about
//! clients' changes: finding the file deleted or replaced, and a failed
//! directory sync after the rename. The records written only to the new
//! file (those pending when the compaction took the writer role) are then
//! not acknowledged: the next batch syncs the directory first, and if that
//! fails too, the batch fails and the journal is poisoned. With `--sync
//! never` nothing waits for it; it is tried again at shutdown.
//!
//! # Reset
//!
//! A reset (`reset.rs`) writes a file as a compaction does, holding only
//! the reset's plants: claimed as a compaction is (refused while one
//! runs, none starts until it ends), written to `FILE.compact` under a
//! fresh salt and synced, with the room a compaction needs. Then it waits
//! for the writer role and, with every shard lock of the store held,
//! renames the file over `FILE` and syncs the directory (both modes of
//! `--sync`), drops the records still pending (changes made before the
//! reset, answered by it) and gives the reset the next sequence number, no
//! record of its own: the rename is its record. So a crash leaves the old
//! file or the new one, whole, and no change made after the reset is
//! acknowledged before the rename is durable. A failure before the rename
//! changes nothing; after it (the directory sync), the journal is
//! poisoned: the file holds the reset, the store still the old plants.
//!
//! The file is held under an exclusive `flock` for the life of the process
//! (the compacted file is locked before it is renamed into place), so a
//! second server on the same file, or on a link to it, refuses to start.
//! Anything but a regular file (a FIFO, a device, a directory) is refused
//! at open without being opened.

mod ahead;
mod commit;
mod convert;
mod error;
mod file;
mod format;
mod recovery;
mod reset;
mod rewrite;
#[cfg(test)]
mod tests;

pub use ahead::JournalFile;
pub use convert::convert;
pub use error::OpenError;
pub use format::{
    Change, HEADER, HEADER_V4, Lineage, MAGIC, MAGIC_V1, MAGIC_V2, MAGIC_V3, MAGIC_V4, MAX_PAYLOAD,
    Salt, Version, crc32c, crc64, decode, encode, header, seal, seal_each,
};
pub use recovery::{Damage, Scan, ScanError, scan, scan_from};
pub(super) use reset::Fault;
pub(super) use rewrite::compact_path;

use std::fs;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::lock::{lock, wait};
use crate::model::{Durability, SyncMode};
use format::fresh_salt;
use rewrite::sync_dir;

/// The write side of the journal file: the seam through which tests inject
/// failures. [`JournalFile`] is the real one.
pub trait Disk: Send {
    /// Writes all of `bytes` after the records written so far.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Makes everything appended so far durable.
    fn sync(&mut self) -> io::Result<()>;
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

/// The journal's size and history, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalStats {
    /// The bytes of the file's records once those queued are written (the
    /// zeros written ahead of them not counted).
    pub bytes: u64,
    /// Compactions completed since start-up (failed ones not counted).
    pub compactions: u64,
}

/// An open journal. See the module header.
pub(super) struct Journal {
    /// The real file (links resolved).
    path: PathBuf,
    /// Which file the path names (see `file.rs`).
    entry: file::Entry,
    /// A compaction's rename is not yet known durable: its directory
    /// still needs a sync (see `Journal::write`).
    dir_unsynced: AtomicBool,
    sync: SyncMode,
    compact_min: u64,
    state: Mutex<State>,
    /// Signalled when a batch finishes while `State::role_waiters` says
    /// someone waits on it: the compactor, or a reset (writers park, see
    /// `wake`); wait on it through `Journal::wait_for_role`.
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
    /// The last batch's buffer, emptied, for `pending` to take over when
    /// the next batch is taken (so appends during a write do not grow a
    /// new buffer from nothing); kept only up to `commit::SPARE_BYTES`.
    spare: Vec<u8>,
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
    /// Threads waiting on `Journal::written` for the writer role (a
    /// compaction or a reset): `wake` signals it only then, since a
    /// condition variable's signal is a system call even with no one to
    /// wake (with `--sync never`, one per change).
    role_waiters: usize,
    /// A leader is waiting for the writers it expects (see `gather`).
    gathering: bool,
    /// Records in the last batch, and how long writing it took.
    last_batch: u64,
    last_write: Duration,
    /// Set once by the first failed write or sync; never cleared.
    failed: Option<Arc<str>>,
    /// Where the records end once `pending` is written (the zeros written
    /// ahead of them, `ahead.rs`, not counted).
    len: u64,
    /// Compactions completed since the journal was opened.
    compactions: u64,
    /// The salt of the file written to; see the module header.
    salt: Salt,
    /// The file's nonce, and the highest version logged (or read, or in
    /// the header): see "Versions and the lineage" in the module header.
    lineage: Lineage,
    /// While a compaction runs: every record appended since its snapshot
    /// began, until the compaction takes them (before its rename).
    since_snapshot: Option<Vec<u8>>,
    /// A compaction runs, from its start to its end, success or failure:
    /// the one flag that keeps a second from starting (`since_snapshot`
    /// is taken before the first one's rename).
    compacting: bool,
}

/// A wake-up flag for the compaction thread.
#[derive(Default)]
pub(super) struct Signal {
    flags: Mutex<(bool, bool)>, // (requested, closed)
    changed: Condvar,
}

impl Signal {
    fn request(&self) {
        lock(&self.flags).0 = true;
        self.changed.notify_one();
    }

    pub(super) fn close(&self) {
        lock(&self.flags).1 = true;
        self.changed.notify_one();
    }

    /// Waits for a request; `false` once closed.
    pub(super) fn wait(&self) -> bool {
        let mut flags = lock(&self.flags);
        loop {
            match *flags {
                (_, true) => return false,
                (true, false) => {
                    flags.0 = false;
                    return true;
                }
                (false, false) => flags = wait(&self.changed, flags),
            }
        }
    }
}

impl Journal {
    /// Opens (or creates) the journal, replays it and cuts a torn tail.
    /// `wrap` turns the opened file into the `Disk` that writes to it.
    /// Every record's change is handed to `apply`, in order; after an
    /// error, throw away what was built from them. A new file, and one
    /// converted from an older version, take the nonce `fresh`.
    pub(super) fn open(
        durability: &Durability,
        wrap: impl FnOnce(JournalFile) -> Box<dyn Disk>,
        apply: impl FnMut(Change<'_>),
        fresh: u64,
    ) -> Result<(Journal, Recovery), OpenError> {
        let started = Instant::now();
        let path = &durability.path;
        let io_error = |e| OpenError::Io(path.clone(), e);
        let file::Opened {
            mut file,
            path: real,
            existed,
            entry,
        } = file::open(path)?;
        let scan = scan_from(&file, apply).map_err(|e| match e {
            ScanError::Io(e) => io_error(e),
            ScanError::Damage(Damage::NotAJournal) => OpenError::NotAJournal(path.clone()),
            ScanError::Damage(Damage::Header) => OpenError::DamagedHeader(path.clone()),
            ScanError::Damage(Damage::Record { record, offset }) => OpenError::Damaged {
                path: path.clone(),
                record,
                offset,
            },
        })?;
        // Zeros written ahead of the records are not a torn tail.
        let torn_bytes = if scan.zeroed {
            0
        } else {
            scan.len - scan.valid_len
        };
        let ahead = durability.sync == SyncMode::Always;
        // The file, its salt, the end of its records and its length.
        let mut lineage = Lineage {
            nonce: scan.lineage.nonce,
            mark: scan.high,
        };
        let (file, salt, len, file_len) = match scan.version {
            Some(Version::V5(salt)) => {
                // Without writing ahead, records end the file (see
                // `ahead.rs`): zeros an earlier run wrote ahead go too.
                if torn_bytes > 0 || (!ahead && scan.len > scan.valid_len) {
                    file.set_len(scan.valid_len).map_err(io_error)?;
                    file.sync_all().map_err(io_error)?;
                    (file, salt, scan.valid_len, scan.valid_len)
                } else {
                    (file, salt, scan.valid_len, scan.len)
                }
            }
            Some(old) => {
                lineage.nonce = fresh;
                let read = convert::OldFile {
                    from: old,
                    valid_len: scan.valid_len,
                    records: scan.records,
                    lineage,
                };
                let (file, salt, len) =
                    convert::upgrade(&real, &entry, &mut file, read).map_err(io_error)?;
                (file, salt, len, len)
            }
            None => {
                // New, empty, or torn inside the header itself.
                let salt = fresh_salt().map_err(io_error)?;
                lineage = Lineage {
                    nonce: fresh,
                    mark: 0,
                };
                file.set_len(0).map_err(io_error)?;
                file.write_all_at(&header(&salt, lineage), 0)
                    .map_err(io_error)?;
                file.sync_all().map_err(io_error)?;
                if !existed {
                    sync_dir(&real).map_err(io_error)?;
                }
                (file, salt, HEADER as u64, HEADER as u64)
            }
        };
        let leftover = compact_path(&real);
        if leftover.exists() {
            fs::remove_file(&leftover).map_err(|e| OpenError::Io(leftover.clone(), e))?;
            log::warn!(
                "removed {} left by an interrupted compaction",
                leftover.display()
            );
        }
        let journal = Journal {
            path: real,
            entry,
            dir_unsynced: AtomicBool::new(false),
            sync: durability.sync,
            compact_min: durability.compact_min,
            state: Mutex::new(State {
                pending: Vec::new(),
                spare: Vec::new(),
                appended: 0,
                durable: 0,
                taken: 0,
                writing: false,
                waiters: Vec::new(),
                role_waiters: 0,
                gathering: false,
                last_batch: 0,
                last_write: Duration::ZERO,
                failed: None,
                len,
                compactions: 0,
                salt,
                lineage,
                since_snapshot: None,
                compacting: false,
            }),
            written: Condvar::new(),
            durable_seq: AtomicU64::new(0),
            arrived: Condvar::new(),
            disk: Mutex::new(wrap(JournalFile::new(file, len, file_len, ahead))),
            compaction: Arc::default(),
        };
        let recovery = Recovery {
            records: scan.records,
            torn_bytes,
            elapsed: started.elapsed(),
        };
        Ok((journal, recovery))
    }

    /// Whether a commit waits for the disk (`--sync always`).
    pub(super) fn waits_for_disk(&self) -> bool {
        self.sync == SyncMode::Always
    }

    /// The reason writes are refused, once a write or sync has failed or
    /// the file is no longer at its path (checked here too, so that
    /// `/healthz` notices without a write).
    pub(super) fn failure(&self) -> Option<Arc<str>> {
        if let Some(reason) = &lock(&self.state).failed {
            return Some(Arc::clone(reason));
        }
        let reason = self.entry.check().err()?;
        let mut state = lock(&self.state);
        self.poison(&mut state, reason);
        state.failed.clone()
    }

    /// The nonce of its file and the highest version it has seen.
    pub(super) fn lineage(&self) -> Lineage {
        lock(&self.state).lineage
    }

    /// Its length and the compactions completed.
    pub(super) fn stats(&self) -> JournalStats {
        let state = lock(&self.state);
        JournalStats {
            bytes: state.len,
            compactions: state.compactions,
        }
    }
}
