//! The journal behind `--data FILE`: an append-only log of changes, replayed
//! at start-up, written with group commit and compacted in the background.
//!
//! The journal knows nothing of the store: recovery hands each record's
//! [`Change`] to a callback, and a compaction asks the store for its live
//! plants through one.
//!
//! # File format (version 4)
//!
//! ```text
//! file    = header record* zero*
//! header  = "PLANTSJ4" salt hcheck:u64le       24 bytes
//! salt    = 8 bytes from the OS's random source, drawn for each new file
//! hcheck  = CRC-64/XZ of the magic and the salt
//! record  = len:u32le lcheck:u32le check:u64le batch:u64le payload
//!                                                          24 + len bytes
//! lcheck  = CRC-32C of the salt and the four `len` bytes
//! check   = CRC-64/XZ of the salt, the four `len` bytes, the eight
//!           `batch` bytes and the payload
//! batch   = the byte offset in this file of the first record of the
//!           write the record was part of (its own offset, in a file
//!           synced whole before use: a compaction's, a reset's, a
//!           conversion's)
//! payload = 0x01 id:i64le name_len:u32le name tag_len:u32le tag    put
//!         | 0x02 id:i64le                                          delete
//! zero    = 0x00, written ahead of the records with `--sync always`
//!           (`ahead.rs`): so that a sync writes data pages, not a
//!           metadata commit for a file grown by every record
//! ```
//!
//! `put` is a create or a replace (the plant with this id is now this one);
//! `tag_len` is `0xFFFF_FFFF` when the plant has no tag. Names and tags are
//! UTF-8. A compacted file is the same format, one `put` per live plant,
//! under a salt of its own. No payload is longer than `MAX_PAYLOAD`
//! (16 MiB and 17 bytes): `--max-body` is at most 16 MiB and a plant's
//! texts fit in its body; a longer `len` is damage whatever the flags.
//!
//! # Why the check covers a salt
//!
//! A name or tag is written into the file as the client sent it, so a
//! client can put a whole record, framing and checksum included, inside
//! one. Recovery looks for valid records past a damaged one (below); with
//! a checksum of the record alone, such a planted record left whole in a
//! tail torn by a crash or a full disk passed for a record after damage,
//! and start-up was refused on every restart. With the salt in the check,
//! a client would have to know the salt, and it never leaves the server:
//! it is in the file's header and nowhere else, not in any response, log
//! line or error (`Version`'s `Debug` leaves it out), and neither is any
//! check value, from which the salt could be worked out (a CRC is linear,
//! not a MAC). For a given length, the salt's share of a CRC-64 is a
//! one-to-one function of its 64 bits, so whatever a client writes, each
//! run of bytes shaped as a record passes with odds of 2^-64: a torn
//! megabyte of planted records holds fewer than 2^16 of them. Whoever can
//! read the file can read the salt, but can also write the file.
//!
//! The header has a check of its own because every record depends on the
//! salt: a damaged salt would fail them all, and without it the file would
//! read as one long torn tail and be cut to nothing.
//!
//! The check does not cover the record's own offset or number: records
//! shifted by damage (bytes lost or inserted in the middle) still check
//! out where they now lie, so the search below finds them and start-up is
//! refused (those of a later batch than the damage: see "Recovery"), where
//! a check tied to the place would call them a torn tail and cut them off.
//!
//! # Why the length has a check of its own
//!
//! The search below tries every offset of what follows damage. Version 2
//! believed the length found there and ran its check over that many bytes:
//! a torn megabyte of `00 00 08 00` claims 512 KiB at a quarter of its
//! offsets, and start-up took minutes (the work grew with the square of
//! the tail). In versions 3 and 4 a length is believed only if it is at most
//! `MAX_PAYLOAD` and its own check (`lcheck`, salted as `check` is, so a
//! client cannot plant one either) passes, which bytes that are not a
//! record do with odds of 2^-32. Trying an offset costs a checksum over
//! four bytes, so recovery is linear in the file: a torn tail of a
//! megabyte costs a few megabytes of checksums, whatever it holds. The
//! search still looks at every offset to the end (a limit on how far it
//! looks would cut off good records after damage in the middle). The
//! payload's shape (its kind, text lengths that fill it) is looked at
//! before its checksum too, which is what keeps reading a damaged older
//! file cheap in the common cases.
//!
//! # Recovery
//!
//! The header says which rules apply. Records are read in order, as a
//! stream: the file is never held whole in memory, only a window of about
//! 64 KiB and the record being read. In version 4, where the records end
//! and every byte after them is zero, the file ends cleanly: those are
//! zeros written ahead, kept for the next records, with no warning and no
//! search (no record's length is zero, so zeros are passed at the speed of
//! comparing bytes; they are at most `ahead::STEP`, a megabyte, past the
//! records). At the first record that is incomplete or fails a check,
//! with anything but zeros after it, the rest of the file is searched, at
//! every byte offset, for any complete, valid record by the same rule (in
//! versions 2 to 4: under this file's salt) that counts. If none exists
//! the damage is a torn tail (a crash during the last write): it is cut
//! off and start-up logs a warning with the byte count. If one exists the
//! damage is in the middle of the journal: start-up is refused with an
//! error naming the file, the record number and its byte offset, and the
//! file is left untouched. Nothing is dropped silently.
//!
//! Which records count: in versions 1 to 3, every one. In version 4, a
//! record counts only if its batch starts after the damage. The rule is
//! for records written over zeros: a crash during a batch can leave any
//! of its pages written back and any not, so a later page of the batch
//! can hold whole records while an earlier one is still zeros. None of
//! those records was acknowledged: a batch is acknowledged only once its
//! `fdatasync` returned, which writes back every page of the file, and
//! with `--sync always` the next batch is written only after that. So
//! records whose batch starts at or before the damage are of the one batch
//! the crash tore and are cut with it; a record whose batch starts after
//! the damage was written after a sync that covered the damaged bytes, so
//! the damage came later, and start-up is refused. (With `--sync never`
//! no batch waits for a sync, pages of several batches could be missing
//! at once, and nothing is written ahead: records end the file, as
//! appends do.) The price: damage to the last batch of a file that was
//! synced, with records of that batch after it, reads as that batch torn,
//! as damage to its last record always has. A file shorter than its header,
//! or just a header that fails its check (new, torn while the header was
//! written: a header is synced before any record follows it), starts
//! again with a fresh header. A header that fails its check with anything
//! after it refuses start-up, the file untouched.
//!
//! # Older versions
//!
//! Version 3 (`PLANTSJ3`) is version 4 without `batch` (`record =
//! len:u32le lcheck:u32le check:u64le payload`, `check` over the salt,
//! `len` and the payload) and never ends in zeros: every record after
//! damage counts. Version 2 (`PLANTSJ2`) is version 3 without `lcheck`: `record =
//! len:u32le check:u64le payload`. Version 1 (`PLANTSJ1`, an 8-byte
//! header) had no salt: `record = len:u32le crc:u32le payload`, the CRC-32C
//! over the four `len` bytes and the payload, the same payloads. Such a
//! file is read by its own rules (a torn tail cut, damage in the middle
//! refused, as above), then converted before anything is appended: its
//! file is read again, its records, in order, are written under a fresh
//! salt to `FILE.compact` (locked), synced, renamed over `FILE`, and the
//! directory is synced; start-up logs one line saying how many records
//! were converted. A crash before the rename leaves the old file,
//! converted again at the next start. An old file never takes another
//! append. Version 1's rules cannot tell a planted record from a real
//! one, so a version-1 file whose torn tail holds one is still refused,
//! as before, until it is cut as the error says. Without `lcheck`, the
//! search in an old file's torn tail can still cost more than linear work
//! when the tail holds many runs of bytes shaped as records that claim
//! long lengths; it happens at most once, at the start that converts it.
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
//! the store's committer thread (see `Store::when_acked`), so no event loop
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
    Change, HEADER, MAGIC, MAGIC_V1, MAGIC_V2, MAGIC_V3, MAX_PAYLOAD, Salt, Version, crc32c, crc64,
    decode, encode, header, seal, seal_each,
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
    /// error, throw away what was built from them.
    pub(super) fn open(
        durability: &Durability,
        wrap: impl FnOnce(JournalFile) -> Box<dyn Disk>,
        apply: impl FnMut(Change<'_>),
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
        let (file, salt, len, file_len) = match scan.version {
            Some(Version::V4(salt)) => {
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
            Some(old @ (Version::V1 | Version::V2(_) | Version::V3(_))) => {
                let (file, salt, len) =
                    convert::upgrade(&real, &entry, &mut file, old, scan.valid_len, scan.records)
                        .map_err(io_error)?;
                (file, salt, len, len)
            }
            None => {
                // New, empty, or torn inside the header itself.
                let salt = fresh_salt().map_err(io_error)?;
                file.set_len(0).map_err(io_error)?;
                file.write_all_at(&header(&salt), 0).map_err(io_error)?;
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

    /// Its length and the compactions completed.
    pub(super) fn stats(&self) -> JournalStats {
        let state = lock(&self.state);
        JournalStats {
            bytes: state.len,
            compactions: state.compactions,
        }
    }
}
