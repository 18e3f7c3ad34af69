//! Group commit: changes (create, replace, delete) wait in one queue, and a
//! worker applies every change waiting, up to [`BATCH_CHANGES`](super::waiting::BATCH_CHANGES) and
//! [`BATCH_BYTES`](super::waiting::BATCH_BYTES), in one statement: one round trip and one commit for
//! the lot, as the journal's committer writes every waiting record with
//! one fsync.
//!
//! Nothing waits for a batch to fill: a worker takes what is there when
//! it is free, one change or hundreds; changes gather while at most
//! [`BATCHES`](super::waiting::BATCHES) batches run. How they wait, and the order kept per id, is
//! `waiting.rs`; this file runs a batch taken from there as a job.
//!
//! A batch is answered as a whole: each change by what the statement
//! returned (applied, or not: the id taken, or absent), or all of them
//! with why the statement did not commit. Since it is one statement, the
//! database holds all of it or none. Its ids are released once the
//! statement has ended and the answers are given, so the next batch, and
//! the change hook, follow it. A batch the watchdog gives up on is
//! answered 503 and lets the next batch start, but keeps its ids until its
//! statement ends, since that may still commit: a later change to one of
//! them waits (at most `MAX_WAIT`) rather than overtake it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use log::{error, warn};

use super::state::{Job, PoolState, Refuse};
use super::waiting::{ChangeReply, Changes, Queued};
use super::{Connection, JobFailure};
use crate::lock::lock;

/// What the worker running a batch and whoever refuses it (the watchdog,
/// shutdown) share.
struct Batch {
    shared: Weak<PoolState>,
    /// The answers, until given (once).
    answers: Mutex<Option<Vec<ChangeReply>>>,
    /// Whether the batch still counts against `BATCHES`.
    holds_slot: AtomicBool,
}

impl Batch {
    /// Gives every answer from `made` (one result per change, or one for
    /// all), unless they were given already.
    fn answer(&self, made: Result<Vec<bool>, JobFailure>) {
        let Some(answers) = lock(&self.answers).take() else {
            return;
        };
        match made {
            Ok(applied) => {
                for (answer, applied) in answers.into_iter().zip(applied) {
                    give(answer, Ok(applied));
                }
            }
            Err(why) => {
                for answer in answers {
                    give(answer, Err(why.clone()));
                }
            }
        }
    }

    /// Answers `why` to every change and lets another batch start. The
    /// ids stay taken until the statement has ended, since it may still
    /// commit: a later change to one of them must not overtake it.
    fn refuse(&self, why: JobFailure) {
        self.answer(Err(why));
        if self.holds_slot.swap(false, Ordering::AcqRel)
            && let Some(shared) = self.shared.upgrade()
        {
            lock(&shared.queue).changes.free_slot();
            // The worker running it is held: another may take the next.
            shared.ready.notify_one();
        }
    }
}

/// One answer, a panic in it contained: the other changes of the batch
/// are still answered.
fn give(reply: ChangeReply, result: Result<bool, JobFailure>) {
    if catch_unwind(AssertUnwindSafe(|| reply.answer(result))).is_err() {
        error!("answering a database change panicked");
    }
}

/// Releases a batch's ids (and its slot, if still held) when its
/// statement has ended: dropped after the answers, or while unwinding
/// from a panic (then answering 503 to what was not answered).
struct Release {
    batch: Arc<Batch>,
    ids: Vec<i64>,
}

impl Drop for Release {
    fn drop(&mut self) {
        // Answered already unless the job panicked or never ran.
        self.batch
            .answer(Err(JobFailure::Failed("the batch did not complete".into())));
        let Some(shared) = self.batch.shared.upgrade() else {
            return;
        };
        let held = self.batch.holds_slot.swap(false, Ordering::AcqRel);
        let mut queues = lock(&shared.queue);
        if held {
            queues.changes.free_slot();
        }
        queues.changes.release(&self.ids);
        let waiting = queues.changes.len() > 0;
        drop(queues);
        if !held && waiting {
            // Given up on earlier: changes to these ids wait, and this
            // worker may not be the one to take them.
            shared.ready.notify_one();
        }
    }
}

/// `batch` as a job for the worker that took it: its statement, then its
/// answers, given once, by the worker or through `refuse` (the watchdog
/// or shutdown). Its ids are released when the statement has ended and
/// after the answers, so the next batch (and the change hook it feeds)
/// follows this one.
pub(super) fn job(shared: &Arc<PoolState>, batch: Vec<Queued>) -> Job {
    let ids: Vec<i64> = batch.iter().map(|c| c.id).collect();
    let mut changes: Changes = Vec::with_capacity(batch.len());
    let mut answers: Vec<ChangeReply> = Vec::with_capacity(batch.len());
    for change in batch {
        shared.stats.wait.observe(change.queued.elapsed());
        changes.push((change.id, change.edit));
        answers.push(change.reply);
    }
    let state = Arc::new(Batch {
        shared: Arc::downgrade(shared),
        answers: Mutex::new(Some(answers)),
        holds_slot: AtomicBool::new(true),
    });
    let refused = Arc::clone(&state);
    let refuse: Refuse = Arc::new(move |why| refused.refuse(why));
    // Made now and moved into the job, so that a job dropped unrun would
    // release its ids too.
    let release = Release {
        batch: Arc::clone(&state),
        ids,
    };
    Job {
        queued: None,
        run: Box::new(move |connection: &mut Connection| {
            let _release = release;
            let made = connection.apply(&changes).map_err(|e| {
                warn!(
                    "database: a batch of {} change{}: {e}",
                    changes.len(),
                    crate::model::plural(changes.len() as u64)
                );
                JobFailure::from(e)
            });
            if let (Ok(_), Some(shared)) = (&made, state.shared.upgrade()) {
                shared.stats.batches.fetch_add(1, Ordering::Relaxed);
                let n = changes.len() as u64;
                shared.stats.batched.fetch_add(n, Ordering::Relaxed);
            }
            state.answer(made);
        }),
        refuse,
    }
}
