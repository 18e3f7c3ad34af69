//! The memory store's scans, read off the event loops.
//!
//! A page that may have to read the whole store to fill (a search, whose
//! matches may be few, or a tag in name order) or to count (`count` with a
//! tag or a search) takes
//! tens of milliseconds at a million plants. Read on an event loop, it
//! would hold every other connection of that loop for as long; so such a
//! query is answered later, from one scan thread, as a database query is
//! from a pool worker. The store is read there in its usual short steps,
//! one shard lock at a time, so writers wait at most one step.
//!
//! The same thread runs resets (`reset.rs`), which write and sync a file
//! with `--data`: one at a time, in turn with the scans.
//!
//! The thread starts with the first scan and ends when the door is
//! dropped. At most [`QUEUED`] scans wait for it; past that a scan is
//! answered 503 (`Unavailable::Busy`) at once, so a flood of searches
//! costs a bounded queue, not memory or threads.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};

use log::warn;

use super::{Outcome, Pending, Reply};
use crate::lock::{lock, wait};
use crate::model::{Budget, NotDone, Page, Query, Unavailable};
use crate::store::Store;

/// Scans waiting for the thread, at most.
const QUEUED: usize = 64;

/// One job: a scan (or a reset) of the store, answering its reply.
type Job = Box<dyn FnOnce(&Store) + Send>;

/// The scan thread, once started, and its queue. (A `Mutex` and a
/// `Condvar` rather than a channel: the binary has them already, and
/// std's channel costs some kilobytes of code.)
#[derive(Default)]
pub(super) struct Scans {
    queue: Arc<Queue>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// The jobs waiting, and whether the door is gone.
#[derive(Default)]
struct Queue {
    jobs: Mutex<(VecDeque<Job>, bool)>,
    ready: Condvar,
}

impl Scans {
    /// Whether `query` may read more than a page's worth of the store: a
    /// search, a count with a filter, or a tag in name order (the tag
    /// index is in id order, so a rare tag is looked for among every
    /// name).
    pub fn needed(query: &Query) -> bool {
        let tagged = query.tag.is_some();
        query.search.is_some() || (tagged && (query.count || query.order.by_name()))
    }

    /// `query` answered later, from the scan thread.
    pub fn page(&self, store: &Arc<Store>, query: Query, budget: Budget) -> Outcome<Page> {
        self.later(store, move |store| Ok(store.query(&query, budget)))
    }

    /// `work` done later, on the scan thread, its answer the outcome's.
    pub fn later<T: Send + 'static>(
        &self,
        store: &Arc<Store>,
        work: impl FnOnce(&Store) -> Result<T, NotDone> + Send + 'static,
    ) -> Outcome<T> {
        {
            let mut thread = lock(&self.thread);
            if thread.is_none() {
                let (store, queue) = (Arc::clone(store), Arc::clone(&self.queue));
                let started = thread::Builder::new()
                    .name("scan".into())
                    .spawn(move || serve(&store, &queue));
                match started {
                    Ok(handle) => *thread = Some(handle),
                    Err(e) => {
                        warn!("cannot start the scan thread: {e}");
                        return Outcome::Ready(Err(NotDone::Unavailable(Unavailable::Busy)));
                    }
                }
            }
        }
        let queue = Arc::clone(&self.queue);
        Outcome::Pending(Pending::new(move |reply: Reply<T>| {
            let mut jobs = lock(&queue.jobs);
            let refused = match &*jobs {
                (_, true) => Unavailable::Stopping,
                (waiting, _) if waiting.len() >= QUEUED => Unavailable::Busy,
                _ => {
                    jobs.0
                        .push_back(Box::new(move |store| reply.answer(work(store))));
                    queue.ready.notify_one();
                    return;
                }
            };
            drop(jobs);
            reply.answer(Err(NotDone::Unavailable(refused)));
        }))
    }
}

impl Drop for Scans {
    fn drop(&mut self) {
        lock(&self.queue.jobs).1 = true;
        self.queue.ready.notify_one();
        // The thread ends once the queue is closed and drained.
        let started = lock(&self.thread).take();
        if let Some(handle) = started {
            let _ = handle.join();
        }
    }
}

fn serve(store: &Store, queue: &Queue) {
    loop {
        let mut jobs = lock(&queue.jobs);
        while jobs.0.is_empty() && !jobs.1 {
            jobs = wait(&queue.ready, jobs);
        }
        let Some(job) = jobs.0.pop_front() else {
            return;
        };
        drop(jobs);
        job(store);
    }
}
