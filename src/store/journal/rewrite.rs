//! Compaction: rewriting the journal as one record per live plant, next
//! to the file, then swapping it in. The protocol is in the journal's
//! module header, under "Compaction".

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::Journal;
use super::format::{fresh_salt, header, seal};

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
    /// stays in use, whole; after it, the journal is poisoned.
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
            let _ = fs::remove_file(&temp_path);
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
        let mut temp = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .truncate(false)
            .open(temp_path)?;
        temp.set_len(0)?;
        temp.try_lock().map_err(io::Error::from)?;
        let salt = fresh_salt()?;
        let header = header(&salt);
        temp.write_all(&header)?;
        let mut len = header.len() as u64;
        let mut step = Vec::new();
        loop {
            let more = fill(&mut step);
            seal(&mut step, &salt);
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
        let mut since = state.since_snapshot.take().unwrap_or_default();
        let covered = state.pending.len();
        let upto = state.appended;
        drop(state);
        seal(&mut since, &salt);

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
        len += since.len() as u64;
        let dir_synced = sync_dir(&self.path);
        *self.disk.lock().unwrap_or_else(|p| p.into_inner()) = Box::new(temp);
        let mut state = self.lock();
        state.writing = false;
        // Records still pending are sealed for the new file when written.
        state.salt = salt;
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
