//! Each URL's queue: the attempts waiting (the first of each event, and
//! retries when they are due), bounded by `--webhook-queue`, and how its
//! worker waits for the next one due, or for the shutdown's deadline.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use log::warn;

use super::Counters;
use super::event::Announcement;
use super::target::Target;
use crate::lock::{lock, wait, wait_timeout};

/// An attempt to deliver an announcement, due at `due`.
pub(super) struct Attempt {
    pub(super) event: Arc<Announcement>,
    pub(super) attempt: u32,
    pub(super) due: Instant,
}

/// A URL and its queue.
pub(super) struct Endpoint {
    pub(super) target: Target,
    queue: Mutex<Outbox>,
    changed: Condvar,
}

#[derive(Default)]
struct Outbox {
    pending: VecDeque<Attempt>,
    /// Set by `shutdown`: deliver until then, drop what is left.
    closing: Option<Instant>,
}

impl Endpoint {
    pub(super) fn new(target: Target) -> Endpoint {
        Endpoint {
            target,
            queue: Mutex::default(),
            changed: Condvar::new(),
        }
    }

    /// Queues the first attempt of `event`, unless the queue holds `limit`
    /// attempts already or is closing: then why not.
    pub(super) fn offer(
        &self,
        event: &Arc<Announcement>,
        limit: usize,
    ) -> Result<(), &'static str> {
        let mut queue = lock(&self.queue);
        if queue.closing.is_some() {
            return Err("shutting down");
        }
        if queue.pending.len() >= limit {
            return Err("queue full");
        }
        queue.pending.push_back(Attempt {
            event: Arc::clone(event),
            attempt: 0,
            due: Instant::now(),
        });
        drop(queue);
        self.changed.notify_one();
        Ok(())
    }

    /// Queues `attempt` again (its worker's own call: no one to wake).
    pub(super) fn again(&self, attempt: Attempt) {
        lock(&self.queue).pending.push_back(attempt);
    }

    /// Takes no more events; delivers until `until`.
    pub(super) fn close(&self, until: Instant) {
        lock(&self.queue).closing = Some(until);
        self.changed.notify_one();
    }

    /// Empties the queue; how many attempts it held.
    pub(super) fn abandon(&self) -> usize {
        std::mem::take(&mut lock(&self.queue).pending).len()
    }

    /// The next delivery due, waiting for it; `None` once closed and done.
    pub(super) fn next(&self, counters: &Counters) -> Option<(Attempt, Option<Instant>)> {
        let mut queue = lock(&self.queue);
        loop {
            let now = Instant::now();
            if let Some(until) = queue.closing
                && (now >= until || queue.pending.is_empty())
            {
                let left = queue.pending.len();
                if left > 0 {
                    counters.dropped.fetch_add(left as u64, Ordering::Relaxed);
                    warn!(
                        "shutting down: dropped {left} undelivered webhook events for {}",
                        self.target.url
                    );
                }
                return None;
            }
            let soonest = (0..queue.pending.len()).min_by_key(|&i| queue.pending[i].due);
            let wait_until = match soonest {
                Some(i) if queue.pending[i].due <= now => {
                    let pending = queue.pending.remove(i)?;
                    return Some((pending, queue.closing));
                }
                Some(i) => Some(queue.pending[i].due),
                None => None,
            };
            let wait_until = match (wait_until, queue.closing) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            queue = match wait_until {
                Some(at) => {
                    let left = at.saturating_duration_since(now);
                    wait_timeout(&self.changed, queue, left).0
                }
                None => wait(&self.changed, queue),
            };
        }
    }
}
