//! Compaction: rewriting the journal as one record per live plant, next
//! to the file, then swapping it in. The protocol is in the journal's
//! module header, under "Compaction".

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::Journal;
use super::format::MAGIC;

impl Journal {
    /// Rewrites the journal as the live plants: `fill` appends the next
    /// step of them, as `put` records, to the buffer it is given, and
    /// returns `false` after the last step. Call `fill` with no lock of
    /// the journal's held; it takes the store's locks one short step at a
    /// time. `Ok(None)` if a compaction is already running or the journal
    /// has failed, else the new file's length.
    ///
    /// Records appended from the start are also collected, and written
    /// after the snapshot: a plant changed after its step was read has its
    /// change there; one changed before has it in both places, the later
    /// winning at replay. On an error before the rename the old journal
    /// stays in use, whole, and the temporary file is removed; finding the
    /// journal deleted or replaced, or an error after the rename, poisons
    /// it.
    pub(in crate::store) fn rewrite(
        &self,
        fill: impl FnMut(&mut Vec<u8>) -> bool,
    ) -> io::Result<Option<u64>> {
        {
            let mut state = self.lock();
            if state.failed.is_some() || state.since_snapshot.is_some() {
                return Ok(None);
            }
            state.since_snapshot = Some(Vec::new());
        }
        let temp_path = compact_path(&self.path);
        let result = self.write_compacted(&temp_path, fill);
        if result.is_err() {
            match fs::remove_file(&temp_path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => log::warn!(
                    "cannot remove {} after a failed compaction: {e}",
                    temp_path.display()
                ),
                _ => {}
            }
            // If the error came after the writer role was taken, that role
            // was already given back; only the collection stops here.
            self.lock().since_snapshot = None;
        }
        result.map(Some)
    }

    fn write_compacted(
        &self,
        temp_path: &Path,
        mut fill: impl FnMut(&mut Vec<u8>) -> bool,
    ) -> io::Result<u64> {
        let mut temp = self.create_temp(temp_path)?;
        let mut step = MAGIC.to_vec();
        let mut len = 0u64;
        loop {
            let more = fill(&mut step);
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

        let written = temp.write_all(&since).and_then(|()| temp.sync_data());
        let failed = match written.map(|()| self.entry.replace(temp_path, &temp)) {
            Ok(Ok(Ok(()))) => None,
            Ok(Ok(Err(e))) | Err(e) => Some((e, None)),
            Ok(Err(gone)) => Some((io::Error::other(gone.clone()), Some(gone))),
        };
        if let Some((e, gone)) = failed {
            let mut state = self.lock();
            state.writing = false;
            if let Some(reason) = gone {
                self.poison(&mut state, reason);
            }
            self.wake(&mut state);
            return Err(e);
        }
        len += since.len() as u64;
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

    /// `FILE.compact`, new, locked, and with the journal's owner and mode
    /// (created 0600, so no one else reads it before it has them).
    fn create_temp(&self, temp_path: &Path) -> io::Result<File> {
        let journal = fs::metadata(&self.path)?;
        match fs::remove_file(temp_path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let temp = OpenOptions::new()
            .read(true)
            .append(true)
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
