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
//! dropped. Its queue is shared fairly: each asker (the API's: a client
//! address, IPv6 by /64) has a line of its own, and the thread takes one
//! job from each line in turn, so one client looping searches delays
//! another's by about one scan, however many it queues. At most
//! [`PER_ASKER`] jobs wait in one line and [`QUEUED`] in all; past either
//! a job is answered `Unavailable::Searches` (a 503) at once, so a flood
//! of searches costs a bounded queue, not memory or threads. A job whose
//! asker no longer waits for it (`Answer::wanted`: its client has gone)
//! is answered `Unavailable::Gone` without running.

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
/// Scans of one asker waiting, at most.
const PER_ASKER: usize = 8;

/// One job: a scan (or a reset) of the store, answering its reply.
type Job = Box<dyn FnOnce(&Store) + Send>;

/// Who asks for a scan, to share the thread fairly (any key the caller
/// chooses: the API's is the client's address).
pub type Asker = u128;

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
    jobs: Mutex<Lines<Job>>,
    ready: Condvar,
}

/// The askers' lines of jobs `J`, served in turn, and whether the door is
/// gone.
struct Lines<J> {
    /// Each asker with jobs waiting, in the order they are served; a line
    /// served goes to the back if it has more.
    lines: VecDeque<(Asker, VecDeque<J>)>,
    waiting: usize,
    closed: bool,
}

impl<J> Default for Lines<J> {
    fn default() -> Lines<J> {
        Lines {
            lines: VecDeque::new(),
            waiting: 0,
            closed: false,
        }
    }
}

impl<J> Lines<J> {
    /// Why a job of `asker` cannot be queued now, if it cannot.
    fn refusal(&self, asker: Asker) -> Option<Unavailable> {
        let full = || {
            self.waiting >= QUEUED
                || self
                    .lines
                    .iter()
                    .any(|(a, line)| *a == asker && line.len() >= PER_ASKER)
        };
        if self.closed {
            Some(Unavailable::Stopping)
        } else {
            full().then_some(Unavailable::Searches)
        }
    }

    /// Queues `job` at the end of `asker`'s line (there is room: see
    /// `refusal`).
    fn push(&mut self, asker: Asker, job: J) {
        match self.lines.iter_mut().find(|(a, _)| *a == asker) {
            Some((_, line)) => line.push_back(job),
            None => self.lines.push_back((asker, VecDeque::from([job]))),
        }
        self.waiting += 1;
    }

    /// The next job: the first of the line whose turn it is.
    fn pop(&mut self) -> Option<J> {
        let (asker, mut line) = self.lines.pop_front()?;
        let job = line.pop_front();
        if !line.is_empty() {
            self.lines.push_back((asker, line));
        }
        self.waiting -= usize::from(job.is_some());
        job
    }
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

    /// `query` answered later, from the scan thread, in `asker`'s line.
    pub fn page(
        &self,
        store: &Arc<Store>,
        asker: Asker,
        query: Query,
        budget: Budget,
    ) -> Outcome<Page> {
        self.later(store, asker, move |store| Ok(store.query(&query, budget)))
    }

    /// `work` done later, on the scan thread, in `asker`'s line, its
    /// answer the outcome's.
    pub fn later<T: Send + 'static>(
        &self,
        store: &Arc<Store>,
        asker: Asker,
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
            if let Some(refused) = jobs.refusal(asker) {
                drop(jobs);
                return reply.answer(Err(NotDone::Unavailable(refused)));
            }
            jobs.push(
                asker,
                Box::new(move |store| {
                    if reply.wanted() {
                        reply.answer(work(store));
                    } else {
                        reply.answer(Err(NotDone::Unavailable(Unavailable::Gone)));
                    }
                }),
            );
            drop(jobs);
            queue.ready.notify_one();
        }))
    }
}

impl Drop for Scans {
    fn drop(&mut self) {
        lock(&self.queue.jobs).closed = true;
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
        while jobs.waiting == 0 && !jobs.closed {
            jobs = wait(&queue.ready, jobs);
        }
        let Some(job) = jobs.pop() else {
            return;
        };
        drop(jobs);
        job(store);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn askers_are_served_in_turn_and_each_line_is_bounded() {
        let mut lines = Lines::default();
        // One asker queues a loop's worth before two others ask once.
        for n in 0..PER_ASKER {
            assert_eq!(lines.refusal(1), None);
            lines.push(1, ("a", n));
        }
        assert_eq!(
            lines.refusal(1),
            Some(Unavailable::Searches),
            "its line is full"
        );
        for asker in [2, 3] {
            assert_eq!(lines.refusal(asker), None, "others still may");
            lines.push(asker, (if asker == 2 { "b" } else { "c" }, 0));
        }
        let order: Vec<(&str, usize)> = std::iter::from_fn(|| lines.pop()).collect();
        assert_eq!(&order[..4], [("a", 0), ("b", 0), ("c", 0), ("a", 1)]);
        assert_eq!(order.len(), PER_ASKER + 2);
        assert_eq!(lines.waiting, 0);
        // QUEUED in all, whoever asks.
        for asker in 0..QUEUED as Asker {
            lines.push(asker, ("x", 0));
        }
        assert_eq!(lines.refusal(999), Some(Unavailable::Searches));
        lines.closed = true;
        assert_eq!(lines.refusal(999), Some(Unavailable::Stopping));
    }
}
