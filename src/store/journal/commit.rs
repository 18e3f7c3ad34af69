//! Group commit: appending records to the pending buffer, and writing
//! (and syncing) them in batches. The protocol is in the journal's module
//! header, under "Writing".

use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use super::format::{Change, HEADER, encode, seal, seal_each};
use super::rewrite::sync_dir;
use super::{Journal, State, SyncMode};
use crate::lock::{lock, wait, wait_timeout};

/// The longest a leader waits for more writers (see `Journal::gather`).
const MAX_GATHER: Duration = Duration::from_millis(2);
/// The most capacity a written batch's buffer keeps for the next one.
const SPARE_BYTES: usize = 1 << 20;

impl Journal {
    /// Appends the record of `change`, its check left for the writer to
    /// fill in (see `commit`); call with the store's lock on its
    /// id held, so that the journal order of each id's changes is their
    /// apply order. Returns the sequence number to
    /// [`commit`](Self::commit) after releasing that lock.
    pub(in crate::store) fn log(&self, change: &Change<'_>) -> Result<u64, Arc<str>> {
        let mut state = lock(&self.state);
        if let Some(reason) = &state.failed {
            return Err(Arc::clone(reason));
        }
        if let Change::Put { version, .. } = *change {
            state.lineage.mark = state.lineage.mark.max(version);
        }
        let start = state.pending.len();
        encode(&mut state.pending, change);
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
        let seq = state.appended;
        // The gathering leader wants a batch as large as the last: woken
        // once, when it is there (or by its deadline), not for each record;
        // once the lock is free, which it takes first.
        let complete = state.gathering && seq - state.taken == state.last_batch;
        drop(state);
        if complete {
            self.arrived.notify_one();
        }
        Ok(seq)
    }

    /// The sequence number of the last record appended (0: none yet).
    pub(in crate::store) fn appended(&self) -> u64 {
        lock(&self.state).appended
    }

    /// Waits until record `seq` is written (and synced with `--sync
    /// always`), writing a batch itself if no one else is. `live_bytes` is
    /// the current size of the live data, for the compaction trigger.
    /// `gather`: a leader waits a moment for more writers first (see
    /// `gather`), as the committer thread does: its batch is what one event
    /// loop queued in one turn, and the other loops' turns end a moment
    /// later.
    pub(in crate::store) fn commit(
        &self,
        seq: u64,
        live_bytes: u64,
        gather: bool,
    ) -> Result<(), Arc<str>> {
        let mut state = lock(&self.state);
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
            let spare = std::mem::take(&mut state.spare);
            let mut batch = std::mem::replace(&mut state.pending, spare);
            let upto = state.appended;
            state.last_batch = upto - state.taken;
            state.taken = upto;
            let salt = state.salt;
            // Where the batch goes: the file's length counts what is pending.
            let at = state.len - batch.len() as u64;
            drop(state);
            // Over zeros written ahead (`--sync always`) a crash can keep a
            // later page of the batch and lose an earlier one: its records
            // say where it starts (see "Recovery" in the module header).
            // Records that end the file are each their own.
            match self.sync {
                SyncMode::Always => seal(&mut batch, &salt, at),
                SyncMode::Never => seal_each(&mut batch, &salt, at),
            }
            let started = Instant::now();
            // The path must still name the file, or a restart would not
            // read this batch: checked after the write, before any answer
            // (see "Writing" in the module header for the two checks).
            let result = self
                .write(&batch)
                .map_err(|e| format!("journal write failed: {e}"))
                .and_then(|()| match self.sync {
                    SyncMode::Always => self.entry.check(),
                    SyncMode::Never => self.entry.check_links(),
                });
            state = lock(&self.state);
            state.writing = false;
            state.last_write = started.elapsed();
            match result {
                Ok(()) => {
                    state.durable = upto;
                    // Keep the allocation for the next batch.
                    if batch.capacity() <= SPARE_BYTES {
                        batch.clear();
                        if state.pending.capacity() == 0 {
                            state.pending = batch;
                        } else {
                            state.spare = batch;
                        }
                    }
                    if !state.compacting
                        && state.len > self.compact_min
                        && state.len > 2 * (live_bytes + HEADER as u64)
                    {
                        self.compaction.request();
                    }
                }
                Err(reason) => self.poison(&mut state, reason),
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
            let state = lock(&self.state);
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
    pub(super) fn wake(&self, state: &mut State) {
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
        if state.role_waiters > 0 {
            self.written.notify_all();
        }
    }

    /// Waits, with the lock `state` held, until no one holds the writer
    /// role (for a compaction or a reset to take it).
    pub(super) fn wait_for_role<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
    ) -> MutexGuard<'a, State> {
        while state.writing {
            state.role_waiters += 1;
            state = wait(&self.written, state);
            state.role_waiters -= 1;
        }
        state
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
            state = wait_timeout(&self.arrived, state, left).0;
        }
        state.gathering = false;
        state
    }

    /// `fdatasync` of what is written (and of the directory, if a
    /// compaction's rename is not yet synced); a no-op once poisoned (the
    /// failure is already reported).
    pub(in crate::store) fn sync(&self) -> io::Result<()> {
        if self.failure().is_some() {
            return Ok(());
        }
        let mut disk = lock(&self.disk);
        self.sync_dir_if_needed()?;
        disk.sync()
    }

    /// Writes a batch, with the writer role held. With `--sync always`, a
    /// compaction's rename whose directory sync failed is synced first:
    /// records written only to the new file are acknowledged with this
    /// batch, so it fails if that sync does.
    fn write(&self, batch: &[u8]) -> io::Result<()> {
        let mut disk = lock(&self.disk);
        if self.sync == SyncMode::Always {
            self.sync_dir_if_needed()?;
        }
        disk.append(batch)?;
        if self.sync == SyncMode::Always {
            disk.sync()?;
        }
        Ok(())
    }

    fn sync_dir_if_needed(&self) -> io::Result<()> {
        if self.dir_unsynced.load(Ordering::Acquire) {
            sync_dir(&self.path).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("syncing the directory after a compaction failed: {e}"),
                )
            })?;
            self.dir_unsynced.store(false, Ordering::Release);
        }
        Ok(())
    }

    /// Refuses every change from now on (the first reason stays). The
    /// reason is shown on `/healthz` (so it names no path); the log names
    /// the file.
    pub(super) fn poison(&self, state: &mut State, reason: String) {
        if state.failed.is_some() {
            return;
        }
        log::error!(
            "{}: {reason}; refusing all further changes until restarted",
            self.path.display()
        );
        state.failed = Some(reason.into());
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::atomic::Ordering;

    use super::super::{Durability, Journal, JournalFile, SyncMode};
    use crate::os::temp::TempFile;
    use crate::store::Change;

    /// A journal in a fresh file, removed when dropped (the journal
    /// first: fields drop in order).
    struct Opened {
        journal: Journal,
        _file: TempFile,
    }

    impl Opened {
        fn new(name: &str) -> Opened {
            let file = TempFile::new(name);
            let durability = Durability {
                path: file.0.clone(),
                sync: SyncMode::Always,
                compact_min: u64::MAX,
            };
            let wrap = |file: JournalFile| Box::new(file) as Box<dyn super::super::Disk>;
            let (journal, _) = Journal::open(&durability, wrap, |_| {}, 1).unwrap();
            Opened {
                journal,
                _file: file,
            }
        }
    }

    #[test]
    fn a_pending_directory_sync_is_done_before_the_next_batch_is_answered() {
        let opened = Opened::new("dir-sync");
        let journal = &opened.journal;
        journal.dir_unsynced.store(true, Ordering::SeqCst);
        let seq = journal.log(&Change::Delete(1)).unwrap();
        assert_eq!(journal.commit(seq, 0, false), Ok(()));
        assert!(!journal.dir_unsynced.load(Ordering::SeqCst), "synced");
    }

    #[test]
    fn a_pending_directory_sync_that_fails_fails_the_batch_and_poisons() {
        let mut opened = Opened::new("dir-sync-fails");
        let journal = &mut opened.journal;
        // Only the directory sync looks here; the file is still checked
        // at its own path.
        journal.path = Path::new("/nonexistent/plantstore/j").to_path_buf();
        journal.dir_unsynced.store(true, Ordering::SeqCst);
        let seq = journal.log(&Change::Delete(1)).unwrap();
        let reason = journal.commit(seq, 0, false).unwrap_err();
        assert!(
            reason.contains("syncing the directory after a compaction"),
            "{reason}"
        );
        assert!(journal.log(&Change::Delete(2)).is_err(), "poisoned");
    }
}
