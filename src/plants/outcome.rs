//! What the door answers: an [`Outcome`] that is ready now or pending
//! (answered later, from another thread). Why an operation was not done
//! ([`NotDone`]) is the model's word (`model/refusal.rs`), which every
//! store speaks.
//!
//! Handlers are written once against `Outcome`: the memory store answers
//! most operations at once and a change whose journal record is still to
//! be written later (from the committer thread); the database store
//! answers every operation later (from a pool worker); a batch writer
//! would answer later too. Nothing here knows HTTP: the API turns a
//! pending outcome into a deferred response.

use std::sync::{Arc, Condvar, Mutex};

use crate::lock::{lock, wait};
use crate::model::{NotDone, Reply, Unavailable};

/// The answer to an operation: ready now, or later.
#[must_use]
pub enum Outcome<T> {
    /// Answered now, on the caller's thread.
    Ready(Result<T, NotDone>),
    /// Answered later, through [`Pending::then`].
    Pending(Pending<T>),
}

/// An answer still to come. Nothing starts until [`then`](Self::then)
/// (or [`wait`](Self::wait)) says where the answer goes, so an answer can
/// never arrive before someone listens for it.
#[must_use]
pub struct Pending<T> {
    start: Box<dyn FnOnce(Box<dyn Reply<T>>) + Send>,
}

impl<T: Send + 'static> Pending<T> {
    /// An answer that `start` will give, once, to the reply it is handed.
    pub fn new(start: impl FnOnce(Box<dyn Reply<T>>) + Send + 'static) -> Pending<T> {
        Pending {
            start: Box::new(start),
        }
    }

    /// Gives `reply` the answer, once, from whichever thread has it.
    pub fn then(self, reply: Box<dyn Reply<T>>) {
        (self.start)(reply);
    }

    /// Blocks this thread until the answer comes (for a caller that cannot
    /// be answered later).
    pub fn wait(self) -> Result<T, NotDone> {
        let slot = Arc::new(Slot::default());
        let filler = Filler(Some(Arc::clone(&slot)));
        self.then(Box::new(move |answer| filler.fill(answer)));
        slot.take()
    }
}

/// Where a waiting thread gets its answer. A reply dropped unanswered
/// (a broken promise) leaves `Stopping`, so the waiter never hangs.
struct Slot<T> {
    answer: Mutex<Option<Option<Result<T, NotDone>>>>,
    filled: Condvar,
}

impl<T> Default for Slot<T> {
    fn default() -> Slot<T> {
        Slot {
            answer: Mutex::new(None),
            filled: Condvar::new(),
        }
    }
}

impl<T> Slot<T> {
    fn fill(&self, answer: Option<Result<T, NotDone>>) {
        *lock(&self.answer) = Some(answer);
        self.filled.notify_one();
    }

    fn take(&self) -> Result<T, NotDone> {
        let mut answer = lock(&self.answer);
        loop {
            match answer.take() {
                Some(Some(answer)) => return answer,
                Some(None) => return Err(NotDone::Unavailable(Unavailable::Stopping)),
                None => answer = wait(&self.filled, answer),
            }
        }
    }
}

/// Fills its slot once: with the answer, or, dropped unanswered, with none.
struct Filler<T>(Option<Arc<Slot<T>>>);

impl<T> Filler<T> {
    fn fill(mut self, answer: Result<T, NotDone>) {
        if let Some(slot) = self.0.take() {
            slot.fill(Some(answer));
        }
    }
}

impl<T> Drop for Filler<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            slot.fill(None);
        }
    }
}

impl<T: Send + 'static> Outcome<T> {
    /// The answer, waiting for it if it is pending.
    pub fn wait(self) -> Result<T, NotDone> {
        match self {
            Outcome::Ready(answer) => answer,
            Outcome::Pending(pending) => pending.wait(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Refusal;
    use std::sync::mpsc;
    use std::thread;

    #[test]
    fn a_pending_outcome_starts_only_when_its_reply_is_given_and_answers_once() {
        let started = Arc::new(Mutex::new(false));
        let flag = Arc::clone(&started);
        let pending = Pending::new(move |reply: Box<dyn Reply<i32>>| {
            *flag.lock().unwrap() = true;
            thread::spawn(move || reply.answer(Ok(42)));
        });
        assert!(!*started.lock().unwrap(), "started before anyone listened");
        let (tx, rx) = mpsc::channel();
        pending.then(Box::new(move |answer| tx.send(answer).unwrap()));
        assert_eq!(rx.recv().unwrap(), Ok(42));
        assert!(rx.recv().is_err(), "answered twice");
    }

    #[test]
    fn waiting_gives_a_ready_answer_or_the_later_one() {
        let refused = NotDone::Refused(Refusal::NotFound(3));
        assert_eq!(
            Outcome::<()>::Ready(Err(refused.clone())).wait(),
            Err(refused)
        );
        let later = Outcome::Pending(Pending::new(|reply: Box<dyn Reply<&str>>| {
            thread::spawn(move || reply.answer(Ok("later")));
        }));
        assert_eq!(later.wait(), Ok("later"));
        // A reply dropped without an answer does not hang the waiter.
        let dropped = Pending::new(|reply: Box<dyn Reply<()>>| drop(reply));
        assert_eq!(
            dropped.wait(),
            Err(NotDone::Unavailable(Unavailable::Stopping))
        );
    }
}
