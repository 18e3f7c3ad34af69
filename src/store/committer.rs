//! The committer thread: writes the journal records of changes whose
//! answers wait for them (`Store::when_acked`), one batch per event-loop
//! turn, and calls each change's callback once its record is durable.

use std::sync::{Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use super::Core;
use crate::lock::{lock, wait, wait_timeout};
use crate::model::{Answer, NotDone};

/// What a change's acknowledgement is given to: the door's reply as it
/// is (`plants::Reply<()>` is this type), so nothing is wrapped around it
/// to put the store's error in the door's words.
pub type Done = Box<dyn Answer<()>>;
/// A queued change waits at most this long for a `kick`.
const LATEST: Duration = Duration::from_millis(5);
/// Changes waiting for their records: the record's sequence number, and
/// what to call once it is written.
type Waiting = Vec<(u64, Done)>;
/// The most entries a batch's list keeps room for, for the next batch.
const SPARE_ENTRIES: usize = 4096;

/// Changes waiting for their journal records, and the committer thread's
/// wake-up.
#[derive(Default)]
pub(super) struct Committer {
    queue: Mutex<Backlog>,
    kicked: Condvar,
}

#[derive(Default)]
struct Backlog {
    waiting: Waiting,
    kicked: bool,
    closed: bool,
}

impl Committer {
    /// Queues a change; the committer starts on it at the next `kick` (or
    /// after `LATEST` at the latest).
    pub(super) fn push(&self, seq: u64, done: Done) {
        let mut queue = lock(&self.queue);
        queue.waiting.push((seq, done));
        if queue.waiting.len() == 1 {
            // Wakes the committer to wait (at most `LATEST`) for the kick.
            self.kicked.notify_one();
        }
    }

    /// Starts a batch of everything queued.
    pub(super) fn kick(&self) {
        let mut queue = lock(&self.queue);
        if !queue.waiting.is_empty() && !queue.kicked {
            queue.kicked = true;
            self.kicked.notify_one();
        }
    }

    pub(super) fn close(&self) {
        lock(&self.queue).closed = true;
        self.kicked.notify_one();
    }

    /// The next batch, swapped into `batch` (empty; its room becomes the
    /// queue's, so the queue does not grow a new list for each batch):
    /// everything queued once kicked, or once the first of it has waited
    /// `LATEST`; `false` once closed and empty.
    fn take(&self, batch: &mut Waiting) -> bool {
        let mut queue = lock(&self.queue);
        let mut since = None;
        loop {
            if queue.waiting.is_empty() {
                if queue.closed {
                    return false;
                }
                since = None;
                queue = wait(&self.kicked, queue);
                continue;
            }
            let now = Instant::now();
            let first = *since.get_or_insert(now);
            if queue.kicked || queue.closed || now >= first + LATEST {
                queue.kicked = false;
                std::mem::swap(&mut queue.waiting, batch);
                return true;
            }
            queue = wait_timeout(&self.kicked, queue, first + LATEST - now).0;
        }
    }
}

/// The committer thread: writes (and syncs) everything pending as one
/// batch, then acknowledges every change the batch covered; runs until the
/// store is dropped.
pub(super) fn commit_on_request(committer: &Committer, store: &Weak<Core>) {
    let mut batch = Waiting::new();
    while committer.take(&mut batch) {
        let Some(shared) = store.upgrade() else {
            return;
        };
        // Records are numbered in append order: writing up to the highest
        // writes them all.
        let last = batch.iter().map(|(seq, _)| *seq).max();
        // Gathering: each event loop kicks at the end of its own turn, so
        // with several loops one kick is not the whole load; records that
        // arrive while it waits are written with this batch, and their
        // callbacks, queued behind it, find them durable.
        let result = shared.commit(last, true).map_err(NotDone::from);
        drop(shared);
        for (_, done) in batch.drain(..) {
            done.answer(result.clone());
        }
        if batch.capacity() > SPARE_ENTRIES {
            batch = Waiting::new();
        }
    }
}
