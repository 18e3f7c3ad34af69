//! Compaction: rewriting the journal as one record per live plant, next
//! to the file, then swapping it in. The protocol is in the journal's
//! module header, under "Compaction".

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::ahead::STEP;
use super::format::{HEADER, Lineage, fresh_salt, header, seal_each};
use super::{Journal, JournalFile, SyncMode, file};
use crate::lock::lock;

/// The least free space a compaction leaves for the changes that arrive
/// while it runs (see `reserve`).
const RESERVE_MIN: u64 = 1 << 20;

/// Free space a compaction of a file of `estimate` bytes keeps for the
/// changes that arrive while it runs (written to both files): an eighth
/// of the new file, at least `RESERVE_MIN`. A compaction writes from
/// memory, at the speed of the page cache, then syncs once; changes
/// arrive at the rate of the server's commits, their records a few dozen
/// bytes each. Even on a disk that syncs at 50 MB/s and under the most
/// writes this server commits, they come to a few percent of the new
/// file's size; an eighth leaves room to spare, and the floor covers
/// small files, where the sync's fixed cost dominates.
pub(super) fn reserve(estimate: u64) -> u64 {
    (estimate / 8).max(RESERVE_MIN)
}

impl Journal {
    /// Rewrites the journal as the live plants, of the same lineage (its
    /// header's mark the highest version logged when it began): `fill` appends the next
    /// step of them, as `put` records, to the buffer it is given, and
    /// returns `false` after the last step. Call `fill` with no lock of
    /// the journal's held; it takes the store's locks one short step at a
    /// time. `Ok(None)` if a compaction is already running or the journal
    /// has failed, else the new file's length.
    ///
    /// Records appended from the start are also collected, and written
    /// after the snapshot: a plant changed after its step was read has its
    /// change there; one changed before has it in both places, the later
    /// winning at replay. On any error the old journal stays in use,
    /// whole, and the temporary file is removed; only finding the journal
    /// deleted or replaced poisons it.
    ///
    /// `live_bytes` (the records of the live plants) sizes the new file:
    /// unless it fits with `reserve` bytes to spare, nothing is written,
    /// and a step that would leave less than half that free stops it.
    pub(in crate::store) fn rewrite(
        &self,
        live_bytes: u64,
        fill: impl FnMut(&mut Vec<u8>) -> bool,
    ) -> io::Result<Option<u64>> {
        let lineage = {
            let mut state = lock(&self.state);
            if state.failed.is_some() || state.compacting {
                return Ok(None);
            }
            state.compacting = true;
            state.since_snapshot = Some(Vec::new());
            // Every version logged from here on is in a record of the new
            // file; this mark covers those logged before.
            state.lineage
        };
        let temp_path = compact_path(&self.path);
        let result = self.write_compacted(&temp_path, live_bytes, lineage, fill);
        if result.is_err() {
            match fs::remove_file(&temp_path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => log::warn!(
                    "cannot remove {} after a failed compaction: {e}",
                    temp_path.display()
                ),
                _ => {}
            }
        }
        // Only now may another compaction start (and use the temporary
        // file). After an error the collection stops here; if it came after
        // the writer role was taken, that role was already given back.
        let mut state = lock(&self.state);
        state.since_snapshot = None;
        state.compacting = false;
        drop(state);
        result.map(Some)
    }

    fn write_compacted(
        &self,
        temp_path: &Path,
        live_bytes: u64,
        lineage: Lineage,
        mut fill: impl FnMut(&mut Vec<u8>) -> bool,
    ) -> io::Result<u64> {
        let never = self.sync == SyncMode::Never;
        // With `--sync always` the new file's first batch writes zeros a
        // step ahead (`ahead.rs`): room for them too.
        let ahead = if never { 0 } else { STEP };
        let estimate = live_bytes + HEADER as u64 + ahead;
        let keep = reserve(estimate);
        self.room(estimate, keep)?;
        let mut temp = create_temp(&self.path, temp_path)?;
        let salt = fresh_salt()?;
        let header = header(&salt, lineage);
        temp.write_all(&header)?;
        let mut len = header.len() as u64;
        let mut step = Vec::new();
        loop {
            let more = fill(&mut step);
            seal_each(&mut step, &salt, len);
            self.room(step.len() as u64, keep / 2)?;
            temp.write_all(&step)?;
            len += step.len() as u64;
            step.clear();
            if !more {
                break;
            }
        }
        drop(step);
        temp.sync_data()?;

        // Become the writer: no batch may go to the old file from here on.
        let mut state = self.wait_for_role(lock(&self.state));
        if let Some(reason) = &state.failed {
            return Err(io::Error::other(reason.to_string()));
        }
        state.writing = true;
        let mut since = state.since_snapshot.take().unwrap_or_default();
        let covered = state.pending.len();
        let upto = state.appended;
        drop(state);
        seal_each(&mut since, &salt, len);

        let written = self
            .room(since.len() as u64, keep / 2)
            .and_then(|()| temp.write_all(&since))
            // With `--sync never` nothing else is synced before it is
            // answered either; the snapshot itself was synced above.
            .and_then(|()| if never { Ok(()) } else { temp.sync_data() });
        let failed = match written.map(|()| self.entry.replace(temp_path, &temp)) {
            Ok(Ok(Ok(()))) => None,
            Ok(Ok(Err(e))) | Err(e) => Some((e, None)),
            Ok(Err(gone)) => Some((io::Error::other(gone.clone()), Some(gone))),
        };
        if let Some((e, gone)) = failed {
            let mut state = lock(&self.state);
            state.writing = false;
            if let Some(reason) = gone {
                self.poison(&mut state, reason);
            }
            self.wake(&mut state);
            return Err(e);
        }
        len += since.len() as u64;
        // With `--sync never` the directory is synced after the writer role
        // is given back, so no event loop waits for it.
        let dir_synced = if never { Ok(()) } else { sync_dir(&self.path) };
        let temp = JournalFile::new(temp, len, len, self.sync == SyncMode::Always);
        *lock(&self.disk) = Box::new(temp);
        let mut state = lock(&self.state);
        state.writing = false;
        // The pending records up to `covered` are in `since`, written.
        state.pending.drain(..covered);
        state.taken = state.taken.max(upto);
        state.len = len + state.pending.len() as u64;
        state.compactions += 1;
        // Records still pending are sealed for the new file when written.
        state.salt = salt;
        match dir_synced {
            Ok(()) => state.durable = state.durable.max(upto),
            // Without `--sync always` nothing waits for the disk: the
            // directory is synced at shutdown.
            // The records written only to the new file wait: the next
            // batch syncs the directory first (see `Journal::write`).
            Err(e) => {
                self.dir_unsynced.store(true, Ordering::Release);
                log::warn!(
                    "{}: syncing its directory after compaction failed, tried again before \
                     the next change is acknowledged: {e}",
                    self.path.display()
                );
            }
        }
        self.wake(&mut state);
        drop(state);
        if never && let Err(e) = sync_dir(&self.path) {
            self.dir_unsynced.store(true, Ordering::Release);
            log::warn!(
                "{}: syncing its directory after compaction failed, tried again at shutdown: {e}",
                self.path.display()
            );
        }
        Ok(len)
    }

    /// Refuses to go on unless `bytes` more fit with `keep` to spare.
    pub(super) fn room(&self, bytes: u64, keep: u64) -> io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let free = file::available(dir)?;
        if free >= bytes.saturating_add(keep) {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::StorageFull,
            format!(
                "not enough free space to compact: {free} bytes free, {bytes} to write and \
                 {keep} to leave for the changes that arrive meanwhile"
            ),
        ))
    }
}

/// `FILE.compact`, new, locked, and with the journal's owner and mode
/// (created 0600, so no one else reads it before it has them).
pub(super) fn create_temp(journal: &Path, temp_path: &Path) -> io::Result<File> {
    let journal = fs::metadata(journal)?;
    match fs::remove_file(temp_path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let temp = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(temp_path)?;
    temp.try_lock().map_err(io::Error::from)?;
    let (uid, gid) = (journal.uid(), journal.gid());
    let own = temp.metadata()?;
    if (own.uid(), own.gid()) != (uid, gid) {
        std::os::unix::fs::fchown(&temp, Some(uid), Some(gid)).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot give the new file the journal's owner {uid}:{gid}: {e}"),
            )
        })?;
    }
    temp.set_permissions(fs::Permissions::from_mode(journal.mode() & 0o7777))?;
    Ok(temp)
}

/// `FILE.compact`: where a compaction writes before renaming.
pub(in crate::store) fn compact_path(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".compact");
    PathBuf::from(name)
}

/// Makes a create or rename in `path`'s directory durable.
pub(super) fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}
