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
//! The thread starts with the first scan and ends when the door is
//! dropped. At most [`QUEUED`] scans wait for it; past that a scan is
//! answered 503 (`Unavailable::Busy`) at once, so a flood of searches
//! costs a bounded queue, not memory or threads.

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

use log::warn;

use super::{Outcome, Pending, Reply};
use crate::lock::lock;
use crate::model::{NotDone, Page, Query, Unavailable};
use crate::store::Store;

/// Scans waiting for the thread, at most.
const QUEUED: usize = 64;

/// One scan: the query, its byte bound, and where its page goes.
type Job = (Query, usize, Reply<Page>);

/// The scan thread, once started.
#[derive(Default)]
pub(super) struct Scans {
    thread: Mutex<Option<(SyncSender<Job>, JoinHandle<()>)>>,
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
    pub fn page(&self, store: &Arc<Store>, query: Query, bytes: usize) -> Outcome<Page> {
        let sender = {
            let mut thread = lock(&self.thread);
            if thread.is_none() {
                match start(Arc::clone(store)) {
                    Ok(started) => *thread = Some(started),
                    Err(e) => {
                        warn!("cannot start the scan thread: {e}");
                        return Outcome::Ready(Err(NotDone::Unavailable(Unavailable::Busy)));
                    }
                }
            }
            thread.as_ref().map(|(sender, _)| sender.clone())
        };
        let Some(sender) = sender else {
            return Outcome::Ready(Err(NotDone::Unavailable(Unavailable::Busy)));
        };
        Outcome::Pending(Pending::new(move |reply: Reply<Page>| {
            match sender.try_send((query, bytes, reply)) {
                Ok(()) => {}
                Err(TrySendError::Full((_, _, reply))) => {
                    reply(Err(NotDone::Unavailable(Unavailable::Busy)));
                }
                Err(TrySendError::Disconnected((_, _, reply))) => {
                    reply(Err(NotDone::Unavailable(Unavailable::Stopping)));
                }
            }
        }))
    }
}

impl Drop for Scans {
    fn drop(&mut self) {
        let started = lock(&self.thread).take();
        if let Some((sender, handle)) = started {
            // The thread ends once the queue is closed and drained.
            drop(sender);
            let _ = handle.join();
        }
    }
}

fn start(store: Arc<Store>) -> std::io::Result<(SyncSender<Job>, JoinHandle<()>)> {
    let (sender, receiver) = sync_channel(QUEUED);
    let handle = thread::Builder::new()
        .name("scan".into())
        .spawn(move || serve(&store, &receiver))?;
    Ok((sender, handle))
}

fn serve(store: &Store, jobs: &Receiver<Job>) {
    while let Ok((query, bytes, reply)) = jobs.recv() {
        reply(Ok(store.query(&query, bytes)));
    }
}
