//! A reset (`POST /plants/reset`): the journal replaced by a new file that
//! holds only the reset's plants. No new record type: the new file is an
//! ordinary journal, as a compaction writes one. The protocol is in the
//! journal's module header, under "Reset".

use std::fs::{self, File};
use std::io::{self, Write};

use super::ahead::STEP;
use super::format::{HEADER, Lineage, Salt, fresh_salt, header, seal_each};
use super::rewrite::{compact_path, create_temp, reserve, sync_dir};
use super::{Journal, JournalFile, SyncMode};
use crate::lock::lock;

/// A step of a reset, named for fault injection: an `Err` stops it there.
pub(in crate::store) type Fault<'a> = &'a mut dyn FnMut(&'static str) -> io::Result<()>;

const COMPACTING: &str = "a journal compaction is running; try the reset again shortly";
const FAILED: &str = "the journal has failed and refuses changes until the server is restarted";
const NO_ROOM: &str = "too little free disk space for the reset's new journal file";
const NOT_WRITTEN: &str = "the reset's new journal file could not be written; nothing was reset";
const NOT_SWAPPED: &str = "the reset's new journal file could not be put in place; \
                           the journal refuses changes until the server is restarted";

/// The reset's file, written and synced beside the journal, not yet in
/// place; the journal is claimed (no compaction starts) until it is.
pub(in crate::store) struct NewFile {
    temp: File,
    salt: Salt,
    lineage: Lineage,
    len: u64,
}

impl Journal {
    /// Claims the journal and writes `records` (encoded, unsealed) to
    /// `FILE.compact` under a fresh salt and the store's new `lineage`,
    /// synced. Refused while a compaction runs, once the journal failed,
    /// or without the room a compaction would keep.
    pub(in crate::store) fn prepare_reset(
        &self,
        mut records: Vec<u8>,
        lineage: Lineage,
        fault: Fault<'_>,
    ) -> Result<NewFile, &'static str> {
        {
            let mut state = lock(&self.state);
            if state.failed.is_some() {
                return Err(FAILED);
            }
            if state.compacting {
                return Err(COMPACTING);
            }
            state.compacting = true;
        }
        let written = (|| {
            let len = (HEADER + records.len()) as u64;
            // With `--sync always`, room for the zeros its first batch
            // writes ahead (`ahead.rs`) too.
            let ahead = if self.sync == SyncMode::Always {
                STEP
            } else {
                0
            };
            self.room(len + ahead, reserve(len))?;
            let mut temp = create_temp(&self.path, &compact_path(&self.path))?;
            let salt = fresh_salt()?;
            temp.write_all(&header(&salt, lineage))?;
            fault("header written")?;
            seal_each(&mut records, &salt, HEADER as u64);
            temp.write_all(&records)?;
            fault("records written")?;
            temp.sync_data()?;
            fault("file synced")?;
            Ok(NewFile {
                temp,
                salt,
                lineage,
                len,
            })
        })();
        written.map_err(|e: io::Error| {
            log::warn!("{}: reset not done: {e}", self.path.display());
            self.abandon_reset(None);
            match e.kind() {
                io::ErrorKind::StorageFull => NO_ROOM,
                _ => NOT_WRITTEN,
            }
        })
    }

    /// Takes the writer role: no batch goes to the old file from here on.
    /// Call before taking the store's shard locks (a batch being written
    /// takes none, so waiting for it here cannot wait for them).
    pub(in crate::store) fn hold_writer(&self) -> Result<(), &'static str> {
        let mut state = self.wait_for_role(lock(&self.state));
        if state.failed.is_some() {
            drop(state);
            self.abandon_reset(None);
            return Err(FAILED);
        }
        state.writing = true;
        Ok(())
    }

    /// With the writer role and every shard lock held: renames the new
    /// file over the journal and syncs the directory, then drops the
    /// records still pending (changes made before the reset, which it
    /// replaces: their writers are answered with it) and gives the reset
    /// the next number, which it returns. Before the rename a failure
    /// changes nothing; after it, the journal is poisoned (the store
    /// still holds the old plants, the file the new ones).
    pub(in crate::store) fn swap_reset(
        &self,
        new: NewFile,
        fault: Fault<'_>,
    ) -> Result<u64, &'static str> {
        let temp_path = compact_path(&self.path);
        let renamed = match self.entry.replace(&temp_path, &new.temp) {
            Ok(Ok(())) => fault("renamed"),
            Ok(Err(e)) => {
                log::warn!("{}: reset not done: {e}", self.path.display());
                self.abandon_reset(Some(String::new()));
                return Err(NOT_WRITTEN);
            }
            Err(gone) => {
                self.abandon_reset(Some(gone));
                return Err(FAILED);
            }
        };
        let synced = renamed
            .and_then(|()| sync_dir(&self.path))
            .and_then(|()| fault("directory synced"));
        if let Err(e) = synced {
            let reason = format!("a reset's rename could not be made durable: {e}");
            self.abandon_reset(Some(reason));
            return Err(NOT_SWAPPED);
        }
        let ahead = self.sync == SyncMode::Always;
        *lock(&self.disk) = Box::new(JournalFile::new(new.temp, new.len, new.len, ahead));
        let mut state = lock(&self.state);
        state.pending.clear();
        state.appended += 1;
        let seq = state.appended;
        (state.taken, state.durable, state.len) = (seq, seq, new.len);
        state.salt = new.salt;
        // The records dropped above are of the old lineage: its mark goes
        // with them.
        state.lineage = new.lineage;
        (state.writing, state.compacting) = (false, false);
        self.wake(&mut state);
        Ok(seq)
    }

    /// Ends a reset that was not done: the temporary file removed, the
    /// writer role (if held) and the claim given back; `Some(reason)`
    /// also poisons the journal (unless empty: the role only).
    fn abandon_reset(&self, writer: Option<String>) {
        match fs::remove_file(compact_path(&self.path)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                log::warn!("cannot remove a reset's temporary file: {e}")
            }
            _ => {}
        }
        let mut state = lock(&self.state);
        state.compacting = false;
        if let Some(reason) = writer {
            state.writing = false;
            if !reason.is_empty() {
                self.poison(&mut state, reason);
            }
            self.wake(&mut state);
        }
    }
}
