//! Answering journalled changes: the changes whose replies wait for their
//! records (`Committer::answer`) are queued here and written in batches,
//! each change's reply answered once its record is written.
//!
//! Who writes a batch depends on `--sync`. With `always` the committer
//! thread does, one batch per event-loop turn (the loops `kick` it after
//! each): it writes and syncs off the loops, which never wait for the
//! disk. With `never` a write only reaches the page cache, and the event
//! loop writes what its turn queued itself, at the turn's end
//! (`Store::flush`): one write for the turn's changes, where a write for
//! each had cost a system call, a file check and a file-system update
//! per change (`bench/run.sh durable`), and no other thread is woken for
//! it. The committer thread then only stands by for changes no loop
//! flushes (a caller that waits instead): woken by a change queued while
//! it waits with no deadline, it takes what is still queued `LATEST`
//! later.
//!
//! The thread is notified only while it waits and only once until it has
//! run: a kick or a change at each loop turn while it writes (or before
//! it has woken) made a system call that woke no one (`perf stat` at 64
//! connections, on one core: the loop's futex calls per request 0.052 ->
//! 0.023 with `always`, 0.043 -> 0.004 with `never`). It looks at the
//! queue, under its lock, before it waits again.

use std::sync::{Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use super::Core;
use crate::lock::{lock, wait, wait_timeout};
use crate::model::{NotDone, Reply};
use crate::os::batch_scheduling;

/// A queued change waits at most this long for a `kick` (or, with `--sync
/// never`, for a loop's flush).
const LATEST: Duration = Duration::from_millis(5);
/// Changes waiting for their records: the record's sequence number, and
/// the reply to answer once it is written (the door's, as it is: nothing
/// is wrapped around it to put the store's error in the door's words).
type Waiting = Vec<(u64, Box<dyn Reply<()>>)>;
/// The most entries a batch's list keeps room for, for the next batch.
const SPARE_ENTRIES: usize = 4096;

/// Changes waiting for their journal records, and the committer thread's
/// wake-up.
#[derive(Default)]
pub(super) struct Queue {
    queue: Mutex<Backlog>,
    kicked: Condvar,
    /// `--sync never`: the event loops write at the end of each turn
    /// (`take_now`), and the committer thread only stands by.
    by_loops: bool,
}

#[derive(Default)]
struct Backlog {
    waiting: Waiting,
    kicked: bool,
    closed: bool,
    /// Batches taken so far, by the committer thread or a loop: a batch
    /// taken while the committer waits restarts its `LATEST`.
    taken: u64,
    /// The committer thread waits with no deadline (for a first change).
    idle: bool,
    /// It waits (with or without a deadline) and has not been notified
    /// since it began (see the module header).
    asleep: bool,
    /// An emptied list for the next batch a loop takes.
    spare: Waiting,
}

impl Queue {
    /// A queue whose batches are written by the committer thread
    /// (`by_loops` false: `--sync always`) or by the event loops.
    pub(super) fn new(by_loops: bool) -> Queue {
        Queue {
            by_loops,
            ..Queue::default()
        }
    }

    /// Queues a change; the committer starts on it at the next `kick` (or
    /// after `LATEST` at the latest); with `by_loops`, the loop's flush
    /// takes it first.
    pub(super) fn push(&self, seq: u64, reply: Box<dyn Reply<()>>) {
        let mut queue = lock(&self.queue);
        queue.waiting.push((seq, reply));
        // The first change wakes the committer to wait (at most `LATEST`)
        // for the kick; with `by_loops` only one that waits for nothing:
        // one that waits with a deadline looks again then. One that is
        // writing takes it when it looks next.
        if queue.waiting.len() == 1 && (!self.by_loops || queue.idle) {
            self.wake(queue);
        }
    }

    /// A loop's turn has ended: with `by_loops` its batch is written here,
    /// else the committer thread is kicked to write it.
    pub(super) fn flush(&self, shared: &Core) {
        if self.by_loops {
            self.write_now(shared);
        } else {
            self.kick();
        }
    }

    /// Starts a batch of everything queued.
    fn kick(&self) {
        let mut queue = lock(&self.queue);
        if !queue.waiting.is_empty() && !queue.kicked {
            queue.kicked = true;
            self.wake(queue);
        }
    }

    /// Notifies the committer thread if it waits and has not been
    /// notified since; one that is not waiting finds what changed when it
    /// looks next, under the lock, before it waits again.
    fn wake(&self, mut queue: MutexGuard<'_, Backlog>) {
        if queue.asleep {
            queue.asleep = false;
            // Notified once the lock is free: a committer that ran at once
            // would otherwise find it held, and wait for this thread.
            drop(queue);
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
        // When the wait for the first change queued began, and how many
        // batches had been taken then.
        let mut since: Option<(Instant, u64)> = None;
        loop {
            if queue.waiting.is_empty() {
                if queue.closed {
                    return false;
                }
                since = None;
                (queue.idle, queue.asleep) = (true, true);
                queue = wait(&self.kicked, queue);
                (queue.idle, queue.asleep) = (false, false);
                continue;
            }
            let now = Instant::now();
            let first = match since {
                Some((first, taken)) if taken == queue.taken => first,
                // New, or what it waited for was taken by a loop: what is
                // queued now came since.
                _ => since.insert((now, queue.taken)).0,
            };
            if queue.kicked || queue.closed || now >= first + LATEST {
                queue.kicked = false;
                queue.taken += 1;
                std::mem::swap(&mut queue.waiting, batch);
                return true;
            }
            queue.asleep = true;
            queue = wait_timeout(&self.kicked, queue, first + LATEST - now).0;
            queue.asleep = false;
        }
    }

    /// Everything queued, for an event loop to write now (`by_loops`), in
    /// a list of its own; `None` if nothing is.
    fn take_now(&self) -> Option<Waiting> {
        let mut queue = lock(&self.queue);
        if queue.waiting.is_empty() {
            return None;
        }
        queue.taken += 1;
        let spare = std::mem::take(&mut queue.spare);
        Some(std::mem::replace(&mut queue.waiting, spare))
    }

    /// Keeps a batch's emptied list for the next `take_now`.
    fn give_back(&self, batch: Waiting) {
        if batch.capacity() <= SPARE_ENTRIES {
            let mut queue = lock(&self.queue);
            if queue.spare.capacity() == 0 {
                queue.spare = batch;
            }
        }
    }

    /// With `by_loops`: writes everything queued on the calling thread (an
    /// event loop, at the end of its turn) and acknowledges it.
    fn write_now(&self, shared: &Core) {
        if let Some(mut batch) = self.take_now() {
            let result = write(shared, &batch, false);
            answer(&mut batch, &result);
            self.give_back(batch);
        }
    }
}

/// Writes the records of `batch` (and syncs them, with `--sync always`).
/// `gather`: see `Journal::commit`.
fn write(shared: &Core, batch: &Waiting, gather: bool) -> Result<(), NotDone> {
    // Records are numbered in append order: writing up to the highest
    // writes them all.
    match batch.iter().map(|(seq, _)| *seq).max() {
        Some(last) => shared.commit(last, gather).map_err(NotDone::from),
        None => Ok(()),
    }
}

/// Gives every change of `batch` its answer, emptying it.
fn answer(batch: &mut Waiting, result: &Result<(), NotDone>) {
    for (_, reply) in batch.drain(..) {
        reply.answer(result.clone());
    }
}

/// The committer thread: writes (and syncs) everything pending as one
/// batch, then acknowledges every change the batch covered; runs until the
/// store is dropped.
pub(super) fn commit_on_request(committer: &Queue, store: &Weak<Core>) {
    // Its wake-ups (a kick, the disk's answer) wait for a loop on the same
    // CPU to block (or use its time slice) rather than cut its turn short
    // (`os::batch_scheduling`).
    batch_scheduling();
    let mut batch = Waiting::new();
    while committer.take(&mut batch) {
        let Some(shared) = store.upgrade() else {
            return;
        };
        // Gathering: each event loop kicks at the end of its own turn, so
        // with several loops one kick is not the whole load; records that
        // arrive while it waits are written with this batch, and their
        // callbacks, queued behind it, find them durable.
        let result = write(&shared, &batch, true);
        drop(shared);
        answer(&mut batch, &result);
        if batch.capacity() > SPARE_ENTRIES {
            batch = Waiting::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::{Sender, channel};
    use std::thread;
    use std::time::Duration;

    use crate::model::{Capacity, Edit, NotDone, SyncMode};
    use crate::os::temp::TempFile;
    use crate::store::test_support::{Journalled, plant};
    use crate::store::{Durable, Store};

    /// Far longer than `LATEST`: a wake-up that was lost never comes.
    const ANSWERED_WITHIN: Duration = Duration::from_secs(5);

    fn open(file: &TempFile, sync: SyncMode) -> Store {
        let durability = crate::model::Durability {
            sync,
            ..file.durability()
        };
        Store::open(Capacity::plants(100_000), &durability)
            .unwrap()
            .0
    }

    /// Queues a change that is `durable` later, its answer sent to
    /// `answers`.
    fn queue(store: &Store, durable: Durable, answers: &Sender<Result<(), NotDone>>) {
        let answers = answers.clone();
        store.committer().answer(
            durable,
            Box::new(move |answer| {
                let _ = answers.send(answer);
            }),
        );
    }

    /// A create of plant `id`.
    fn create(store: &Store, id: i64, name: &str) -> Durable {
        store.change(id, Edit::Create(plant(name, None))).unwrap()
    }

    #[test]
    fn a_change_no_loop_flushes_is_answered_by_the_committer_thread() {
        // One at a time: each finds the committer waiting with no deadline
        // (after the first, once it has written the one before), so each
        // must wake it.
        for sync in [SyncMode::Always, SyncMode::Never] {
            let file = TempFile::new("committer-standby");
            let store = open(&file, sync);
            let (answers, answered) = channel();
            for id in 0..20 {
                let durable = create(&store, id, "fern");
                queue(&store, durable, &answers);
                let answer = answered.recv_timeout(ANSWERED_WITHIN);
                assert!(
                    matches!(answer, Ok(Ok(()))),
                    "{sync:?}, change {id}: {answer:?}"
                );
            }
        }
    }

    #[test]
    fn changes_and_kicks_from_several_threads_while_it_writes_are_all_answered() {
        // Changes queued and kicked while the committer writes, waits for
        // its deadline or has been notified but not yet run: none of them
        // may be left waiting for a notify that was skipped.
        for sync in [SyncMode::Always, SyncMode::Never] {
            let file = TempFile::new("committer-kicks");
            let store = open(&file, sync);
            thread::scope(|scope| {
                for thread in 0..4 {
                    let store = &store;
                    scope.spawn(move || {
                        let (answers, answered) = channel();
                        for n in 0..300 {
                            let durable = create(store, thread * 1000 + n, "moss");
                            queue(store, durable, &answers);
                            // Every other change is kicked (a loop's turn
                            // ending), the rest left to the committer.
                            if n % 2 == 0 {
                                store.flush();
                            }
                            let answer = answered.recv_timeout(ANSWERED_WITHIN);
                            assert!(
                                matches!(answer, Ok(Ok(()))),
                                "{sync:?}, thread {thread}, change {n}: {answer:?}"
                            );
                        }
                    });
                }
            });
            assert_eq!(store.len(), 1200, "{sync:?}");
        }
    }
}
