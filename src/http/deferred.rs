//! Responses completed by another thread.
//!
//! A handler that must wait for something slow (the journal's `fdatasync`)
//! calls [`Request::defer`](super::Request::defer), returns
//! [`Response::deferred`](super::Response::deferred) at once, and hands the
//! [`Deferred`] to the thread that will finish the work. That thread calls
//! [`Deferred::complete`]; the response travels to the mailbox of the event
//! loop that owns the connection, which wakes and sends it. No loop thread
//! ever waits. A `Deferred` dropped without completing answers 500, so a
//! lost completion can never leave a client hanging.

use std::sync::Arc;

use super::Response;

/// Which request of which connection a deferred response answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    /// The connection's slot in its loop.
    pub(crate) slot: usize,
    /// The connection's id (a reused slot gets a new one).
    pub(crate) conn: u64,
    /// The request's number on its connection.
    pub(crate) request: u64,
}

/// Where completed responses go: the owning loop's queue and waker.
pub(crate) trait Mailbox: Send + Sync {
    /// Queues `response` for the request `ticket` names and wakes its loop.
    fn deliver(&self, ticket: Ticket, response: Response);
}

/// A promise to answer one request later, from any thread.
pub struct Deferred {
    mailbox: Arc<dyn Mailbox>,
    ticket: Ticket,
    done: bool,
}

impl Deferred {
    pub(crate) fn new(mailbox: Arc<dyn Mailbox>, ticket: Ticket) -> Deferred {
        Deferred {
            mailbox,
            ticket,
            done: false,
        }
    }

    /// Sends `response` as the answer to the deferred request.
    pub fn complete(mut self, response: Response) {
        self.done = true;
        self.mailbox.deliver(self.ticket, response);
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        if !self.done {
            let response = Response::error(500, "internal error: the response was never completed");
            self.mailbox.deliver(self.ticket, response);
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
