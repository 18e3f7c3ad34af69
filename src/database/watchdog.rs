//! The watchdog: the one thread that meets a database which stopped
//! answering without closing its connections, where no timeout of the
//! client's own fires.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;

use log::warn;

use super::health::ANSWER;
use super::state::{Job, PoolState, Refuse, Slot};
use super::worker::{start_worker, went_down};
use super::{JobFailure, MAX_WAIT, STUCK, WATCH};
use crate::lock::lock;

/// The watchdog: every `WATCH`, refuses jobs and changes that waited
/// `MAX_WAIT` (when every worker is held, none would reach them) and gives
/// up on a worker whose job has run `STUCK`, or `ANSWER` while the
/// heartbeat gets no answer. A server that stops answering without
/// closing the connection (frozen, or its machine gone with no reset) is
/// met by no timeout of the client's own: its request is answered 503,
/// the worker counted down, and another started in its place while fewer
/// than `pool` given-up workers are still held.
pub(super) fn watch(shared: &Arc<PoolState>) {
    while !shared.is_stopping() {
        thread::sleep(WATCH);
        let (expired, changes): (Vec<Job>, _) = {
            let mut queues = shared.lock_queue();
            let old = queues
                .jobs
                .iter()
                .take_while(|job| job.queued.is_some_and(|q| q.elapsed() > MAX_WAIT))
                .count();
            (queues.jobs.drain(..old).collect(), queues.changes.expired())
        };
        for job in expired {
            shared.stats.refuse(&JobFailure::Expired);
            (job.refuse)(JobFailure::Expired);
        }
        for change in changes {
            shared.stats.refuse(&JobFailure::Expired);
            change.refuse(JobFailure::Expired);
        }
        // While the heartbeat gets no answer, a job running longer than an
        // answer may take is held by the database too.
        let limit = match shared.answering.load(Ordering::Acquire) {
            true => STUCK,
            false => ANSWER,
        };
        // A stuck job is taken from its worker's place, and the worker
        // marked given up on, under the place's lock: the worker, taking
        // its job back under the same lock, finds both or neither. The
        // places of replacements are made under the places' lock too, so
        // a given-up worker coming back counts them.
        let (stuck, replacements): (Vec<Refuse>, Vec<Arc<Slot>>) = {
            let mut slots = lock(&shared.slots);
            let (mut stuck, mut replacements) = (Vec::new(), Vec::new());
            slots.retain(|slot| {
                let mut current = lock(&slot.current);
                match &*current {
                    Some((since, _)) if since.elapsed() > limit => {
                        stuck.extend(current.take().map(|(_, refuse)| refuse));
                        // A replacement while fewer than `pool` given-up
                        // workers are held; past that, each comes back in
                        // a place of its own when its job ends.
                        if shared.abandoned.fetch_add(1, Ordering::AcqRel) < shared.config.pool {
                            replacements.push(Arc::new(Slot::default()));
                        }
                        false
                    }
                    _ => true,
                }
            });
            slots.extend(replacements.iter().cloned());
            (stuck, replacements)
        };
        // Each worker given up on is said, not only the last: stuck jobs
        // met in different looks leave a replacement up in between, and
        // the pool as a whole is then never down.
        for refuse in stuck {
            let why = JobFailure::Failed("no answer from the database".into());
            shared.stats.refuse(&why);
            refuse(why);
            let left = shared.up.fetch_sub(1, Ordering::AcqRel) - 1;
            warn!(
                "database {}: the database stopped answering a job for {} ms; \
                 it is answered 503 and its worker given up on ({left} still up)",
                shared.config.describe(),
                limit.as_millis()
            );
            went_down(shared, "the database stopped answering".into(), left);
        }
        for slot in replacements {
            if let Err(e) = start_worker(shared, slot) {
                warn!("database: cannot start a worker: {e}");
            }
        }
    }
}
