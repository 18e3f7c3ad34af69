//! Work finished by another thread: deferred responses, and wakes for
//! streams that wait for pieces made elsewhere.
//!
//! A handler that must wait for something slow (the journal's `fdatasync`)
//! calls [`Request::defer`](super::Request::defer), returns
//! [`Response::deferred`](super::Response::deferred) at once, and hands the
//! [`Deferred`] to the thread that will finish the work. That thread calls
//! [`Deferred::complete`]; the response travels to the mailbox of the event
//! loop that owns the connection (woken if it waits for events), which
//! sends it. No loop thread ever waits. A `Deferred` dropped without
//! completing answers 500, so a lost completion can never leave a client
//! hanging.
//!
//! Or the thread hands back an [`Errand`] ([`Deferred::take_address`]): work
//! boxed on the loop, carried back to it as it is, and finished there
//! into the response. What the loop allocated for the request is then
//! freed on the loop too: freed on another thread, each allocation left
//! the loop's allocator cache, and its next allocations took the slow path
//! (`bench/run.sh durable`: malloc at 11% of a `--sync always` server's
//! samples, against 3% in memory).
//!
//! A streamed body whose pieces another thread makes answers
//! [`Fill::Pending`](super::Fill::Pending) while it has none; that thread
//! then calls [`StreamWaker::wake`] (from
//! [`Request::waker`](super::Request::waker)) when it has more, and the
//! wake travels through the same mailbox to make the loop pull the stream
//! again. Wakes are coalesced: while one is queued and not yet taken by the
//! loop, more add nothing (one atomic swap each). A wake that finds no
//! stream waiting (it ended, the connection closed, its slot was reused)
//! is dropped by the loop. A stream that is never woken is cut short by the
//! write timeout, like a client that stops reading.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, Ordering::Relaxed};

use super::Response;

/// Which request of which connection a deferred response or a wake is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    /// The connection's slot in its loop.
    pub(crate) slot: usize,
    /// The connection's id (a reused slot gets a new one).
    pub(crate) conn: u64,
    /// The request's number on its connection.
    pub(crate) request: u64,
}

/// Work to finish on the event loop that owns a request: it makes the
/// request's response there (see [`Deferred::take_address`]).
pub trait Errand: Send {
    /// The response; called once, on the owning loop.
    fn finish(self: Box<Self>) -> Response;
}

/// Where completed responses and wakes go: the owning loop's queue and
/// waker.
pub(crate) trait Mailbox: Send + Sync {
    /// Queues `response` for the request `ticket` names, waking its loop
    /// if it waits for events.
    fn deliver(&self, ticket: Ticket, response: Response);

    /// Queues `errand`, whose response answers the request `ticket` names,
    /// waking its loop if it waits for events.
    fn run(&self, ticket: Ticket, errand: Box<dyn Errand>);

    /// Queues a wake for the stream answering `ticket`, waking its loop if
    /// it waits for events.
    /// The loop clears `queued` when it takes the wake (see [`taken`]).
    fn wake(&self, ticket: Ticket, queued: Arc<AtomicBool>);
}

/// A promise to answer one request later, from any thread.
pub struct Deferred {
    /// The owning loop's; `None` once answered (the errand sent home
    /// holds no way back to the mailbox it waits in, so a loop that stops
    /// with errands queued frees them).
    mailbox: Option<Arc<dyn Mailbox>>,
    ticket: Ticket,
    /// The number of the connection's last request whose client left
    /// before its answer came.
    left: Arc<AtomicU64>,
}

impl Deferred {
    pub(crate) fn new(mailbox: Arc<dyn Mailbox>, ticket: Ticket, left: Arc<AtomicU64>) -> Deferred {
        Deferred {
            mailbox: Some(mailbox),
            ticket,
            left,
        }
    }

    /// Whether the client still waits for the answer: `false` once it has
    /// left (its connection read as closed, see docs/engine.md), so that
    /// work done only to answer it (a search) can be skipped. The answer
    /// may still be sent; it is dropped.
    pub fn wanted(&self) -> bool {
        self.left.load(Relaxed) != self.ticket.request
    }

    /// Sends `response` as the answer to the deferred request.
    pub fn complete(mut self, response: Response) {
        if let Some(mailbox) = self.mailbox.take() {
            mailbox.deliver(self.ticket, response);
        }
    }

    /// Where to send an [`Errand`] that answers the request: the owning
    /// loop finishes it there and answers with what it makes. Once taken,
    /// `self` (usually inside the errand) no longer answers when dropped:
    /// the errand is the answer, and only a connection already gone (or a
    /// loop stopped) drops it unfinished. `None` if already answered.
    pub fn take_address(&mut self) -> Option<Address> {
        let mailbox = self.mailbox.take()?;
        Some(Address {
            mailbox,
            ticket: self.ticket,
        })
    }
}

/// The event loop a deferred request's answer goes to (see
/// [`Deferred::take_address`]).
pub struct Address {
    mailbox: Arc<dyn Mailbox>,
    ticket: Ticket,
}

impl Address {
    /// Queues `errand` on its loop, waking it if it waits for events.
    pub fn send(self, errand: Box<dyn Errand>) {
        self.mailbox.run(self.ticket, errand);
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        if let Some(mailbox) = self.mailbox.take() {
            let response = Response::error(500, "internal error: the response was never completed");
            mailbox.deliver(self.ticket, response);
        }
    }
}

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deferred")
            .field("ticket", &self.ticket)
            .finish_non_exhaustive()
    }
}

/// Makes the event loop that owns a connection pull its response's
/// [`Stream`](super::Stream) again after it answered
/// [`Fill::Pending`](super::Fill::Pending). Cheap to clone and to wake,
/// from any thread, any number of times.
#[derive(Clone)]
pub struct StreamWaker {
    mailbox: Arc<dyn Mailbox>,
    ticket: Ticket,
    /// A wake of this waker (or a clone) is queued and the loop has not
    /// taken it yet: another would add nothing.
    queued: Arc<AtomicBool>,
}

impl StreamWaker {
    pub(crate) fn new(mailbox: Arc<dyn Mailbox>, ticket: Ticket) -> StreamWaker {
        StreamWaker {
            mailbox,
            ticket,
            queued: Arc::default(),
        }
    }

    /// Asks the loop to pull the stream again: call it after making more
    /// of the body available to the stream (never before, or the pull may
    /// find nothing and the piece wait for the next wake). Never blocks.
    /// Harmless when the stream is not waiting, has ended, or its
    /// connection has closed.
    pub fn wake(&self) {
        // AcqRel: what was made before this wake is seen by the pull that
        // follows the loop taking a later one (see `taken`).
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.mailbox.wake(self.ticket, Arc::clone(&self.queued));
        }
    }
}

/// A waker for a stream pulled by hand (unit tests of a `Stream`): it
/// counts its wakes.
#[cfg(test)]
pub(crate) fn counting_waker() -> (StreamWaker, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::AtomicUsize;
    struct Counter(Arc<AtomicUsize>);
    impl Mailbox for Counter {
        fn deliver(&self, _: Ticket, _: Response) {}
        fn run(&self, _: Ticket, _: Box<dyn Errand>) {}
        fn wake(&self, _: Ticket, queued: Arc<AtomicBool>) {
            taken(&queued);
            self.0.fetch_add(1, Ordering::AcqRel);
        }
    }
    let count = Arc::new(AtomicUsize::new(0));
    let ticket = Ticket {
        slot: 0,
        conn: 0,
        request: 0,
    };
    let waker = StreamWaker::new(Arc::new(Counter(Arc::clone(&count))), ticket);
    (waker, count)
}

/// The loop took a queued wake: the next `wake` queues again. Called
/// before the stream is pulled, so a wake during the pull is not lost.
pub(crate) fn taken(queued: &AtomicBool) {
    queued.swap(false, Ordering::AcqRel);
}

impl std::fmt::Debug for StreamWaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamWaker")
            .field("ticket", &self.ticket)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records the wakes it is given.
    #[derive(Default)]
    struct Recorded(Mutex<Vec<(Ticket, Arc<AtomicBool>)>>);

    impl Mailbox for Recorded {
        fn deliver(&self, _: Ticket, _: Response) {}

        fn run(&self, _: Ticket, _: Box<dyn Errand>) {}

        fn wake(&self, ticket: Ticket, queued: Arc<AtomicBool>) {
            self.0.lock().unwrap().push((ticket, queued));
        }
    }

    fn is_shareable<T: Clone + Send + Sync + 'static>() {}

    #[test]
    fn wakes_before_the_loop_takes_one_queue_it_once() {
        is_shareable::<StreamWaker>();
        let mailbox = Arc::new(Recorded::default());
        let ticket = Ticket {
            slot: 3,
            conn: 7,
            request: 2,
        };
        let waker = StreamWaker::new(Arc::clone(&mailbox) as Arc<dyn Mailbox>, ticket);
        let clone = waker.clone();
        for _ in 0..100 {
            waker.wake();
            clone.wake();
        }
        let queued = std::mem::take(&mut *mailbox.0.lock().unwrap());
        assert_eq!(queued.len(), 1);
        assert_eq!(queued[0].0, ticket);
        // Once the loop has taken it, the next wake queues again.
        taken(&queued[0].1);
        clone.wake();
        waker.wake();
        assert_eq!(mailbox.0.lock().unwrap().len(), 1);
    }
}
