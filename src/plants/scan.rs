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
//! [`PER_ASKER`] jobs wait in one line and [`QUEUED`] in all (when full, a
//! newcomer takes the place of the longest line's last, while that line is
//! longer than the newcomer's would be); past either a job is answered
//! `Unavailable::Searches` (a 503) at once, so a flood of searches costs a
//! bounded queue, not memory or threads. A reset waits in a line of its
//! own and is never skipped. A job whose
//! asker no longer waits for it (`Reply::wanted`: its client has gone)
//! is answered `Unavailable::Gone` without running.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};

use log::warn;

use super::{Outcome, Pending};
use crate::lock::{lock, wait};
use crate::model::{Budget, NotDone, Page, Query, Reply, Unavailable};
use crate::store::Store;

/// Scans waiting for the thread, at most.
const QUEUED: usize = 64;
/// Scans of one asker waiting, at most.
const PER_ASKER: usize = 8;

/// Why a reset is refused when the queue has no room.
const RESETS_FULL: &str = "too many searches and resets wait; try the reset again shortly";

/// One job: a scan (or a reset) of the store, answering its reply.
type Job = Box<dyn Work>;

/// What a job does: run on the store, or be refused, answering its reply
/// either way.
trait Work: Send {
    fn run(self: Box<Self>, store: &Store);
    fn refuse(self: Box<Self>, why: Unavailable);
}

/// What a job is to the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A page: not run once no one waits for its answer.
    Search,
    /// A reset: done once asked, whether or not anyone waits.
    Reset,
}

/// A job answering `reply` with what `work` makes.
struct Task<T, W> {
    reply: Box<dyn Reply<T>>,
    work: W,
    purpose: Purpose,
}

impl<T, W> Work for Task<T, W>
where
    T: Send + 'static,
    W: FnOnce(&Store) -> Result<T, NotDone> + Send + 'static,
{
    fn run(self: Box<Self>, store: &Store) {
        if self.purpose == Purpose::Search && !self.reply.wanted() {
            return self.refuse(Unavailable::Gone);
        }
        let Task { reply, work, .. } = *self;
        reply.answer(work(store));
    }

    fn refuse(self: Box<Self>, why: Unavailable) {
        let why = match (self.purpose, why) {
            (Purpose::Reset, Unavailable::Searches) => Unavailable::Reset(RESETS_FULL),
            (_, why) => why,
        };
        self.reply.answer(Err(NotDone::Unavailable(why)));
    }
}

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
    /// Each asker with jobs waiting (none with an empty line), in the
    /// order they are served; a line served goes to the back if it has
    /// more.
    lines: VecDeque<(Asker, VecDeque<J>)>,
    closed: bool,
}

impl<J> Default for Lines<J> {
    fn default() -> Lines<J> {
        Lines {
            lines: VecDeque::new(),
            closed: false,
        }
    }
}

impl<J> Lines<J> {
    /// The jobs waiting, in all lines.
    fn waiting(&self) -> usize {
        self.lines.iter().map(|(_, line)| line.len()).sum()
    }

    /// Queues `job` at the end of `asker`'s line; past [`QUEUED`] in all,
    /// in place of the last job of the longest line if that is longer than
    /// `asker`'s would be (that job handed back, to be refused), so that
    /// a few askers cannot fill the queue for everyone. `Err` with why,
    /// and the job, when it is refused.
    fn admit(&mut self, asker: Asker, job: J) -> Result<Option<J>, (Unavailable, J)> {
        if self.closed {
            return Err((Unavailable::Stopping, job));
        }
        let own = self.lines.iter().position(|(a, _)| *a == asker);
        let length = own.map_or(0, |at| self.lines[at].1.len());
        if length >= PER_ASKER {
            return Err((Unavailable::Searches, job));
        }
        let mut evicted = None;
        if self.waiting() >= QUEUED {
            let longest = self.lines.iter_mut().max_by_key(|(_, line)| line.len());
            match longest {
                Some((_, line)) if line.len() > length + 1 => evicted = line.pop_back(),
                _ => return Err((Unavailable::Searches, job)),
            }
        }
        match own {
            Some(at) => self.lines[at].1.push_back(job),
            None => self.lines.push_back((asker, VecDeque::from([job]))),
        }
        Ok(evicted)
    }

    /// The next job: the first of the line whose turn it is.
    fn pop(&mut self) -> Option<J> {
        let (asker, mut line) = self.lines.pop_front()?;
        let job = line.pop_front();
        if !line.is_empty() {
            self.lines.push_back((asker, line));
        }
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

    /// `query` answered later, from the scan thread, in `asker`'s line;
    /// not run if no one waits for it by its turn.
    pub fn page(
        &self,
        store: &Arc<Store>,
        asker: Asker,
        query: Query,
        budget: Budget,
    ) -> Outcome<Page> {
        let work = move |store: &Store| Ok(store.query(&query, budget));
        self.later(store, asker, Purpose::Search, work)
    }

    /// `work` done later, on the scan thread, in `asker`'s line, its
    /// answer the outcome's (a search's not made if no one waits for it
    /// by its turn).
    pub fn later<T: Send + 'static>(
        &self,
        store: &Arc<Store>,
        asker: Asker,
        purpose: Purpose,
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
        Outcome::Pending(Pending::new(move |reply: Box<dyn Reply<T>>| {
            let task = Task {
                reply,
                work,
                purpose,
            };
            let admitted = lock(&queue.jobs).admit(asker, Box::new(task));
            match admitted {
                Ok(evicted) => {
                    queue.ready.notify_one();
                    if let Some(job) = evicted {
                        job.refuse(Unavailable::Searches);
                    }
                }
                Err((why, job)) => job.refuse(why),
            }
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
        while jobs.lines.is_empty() && !jobs.closed {
            jobs = wait(&queue.ready, jobs);
        }
        let Some(job) = jobs.pop() else {
            return;
        };
        drop(jobs);
        job.run(store);
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
            assert!(matches!(lines.admit(1, ("a", n)), Ok(None)));
        }
        assert!(
            matches!(
                lines.admit(1, ("a", 99)),
                Err((Unavailable::Searches, ("a", 99)))
            ),
            "its line is full"
        );
        assert!(
            matches!(lines.admit(2, ("b", 0)), Ok(None)),
            "others still may"
        );
        assert!(matches!(lines.admit(3, ("c", 0)), Ok(None)));
        let order: Vec<(&str, usize)> = std::iter::from_fn(|| lines.pop()).collect();
        assert_eq!(&order[..4], [("a", 0), ("b", 0), ("c", 0), ("a", 1)]);
        assert_eq!(order.len(), PER_ASKER + 2);
        assert_eq!(lines.waiting(), 0);
    }

    #[test]
    fn a_full_queue_makes_room_for_a_newcomer_from_the_longest_line() {
        let mut lines = Lines::default();
        // QUEUED / PER_ASKER askers fill the queue with full lines.
        for n in 0..QUEUED {
            let asker = (n / PER_ASKER) as Asker;
            assert!(matches!(lines.admit(asker, (asker, n)), Ok(None)));
        }
        // A newcomer takes the place of the last of a longest line.
        let Ok(Some((evicted, _))) = lines.admit(100, (100, 0)) else {
            panic!("the newcomer is refused");
        };
        assert!(evicted < 100);
        assert_eq!(lines.waiting(), QUEUED);
        // Until the lines are as short as its own would be.
        let mut admitted = 1;
        while let Ok(Some(_)) = lines.admit(100, (100, admitted)) {
            admitted += 1;
        }
        assert!((2..=PER_ASKER).contains(&admitted), "{admitted}");
        lines.closed = true;
        assert!(matches!(
            lines.admit(7, (7, 0)),
            Err((Unavailable::Stopping, _))
        ));
    }
}
