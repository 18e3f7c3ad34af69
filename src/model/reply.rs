//! Where an answer given later goes: a [`Reply`], given it once, from
//! whichever thread has it (the journal's committer, a database worker,
//! the door's scan thread). It is the one word for that role from the
//! door down: the door's `Pending` hands one to the store, the store's
//! committer and the database's batches answer it, and the API's deferred
//! reply is one (ARCHITECTURE.md, "The answer given later").

use super::NotDone;

/// Takes the answer to an operation answered later, once. Any `FnOnce`
/// closure is one; a type of its own may instead carry itself, boxed as
/// it came, to another thread to finish there (the API's deferred reply
/// goes back to the event loop that made it, so what that loop allocated
/// is freed there). `E`: why it was not done, in the words of the layer
/// that answers (the door's `NotDone`; a database batch's own failure).
pub trait Reply<T, E = NotDone>: Send {
    /// Takes the answer.
    fn answer(self: Box<Self>, answer: Result<T, E>);

    /// Whether anyone still waits for the answer: a store may skip work
    /// done only to answer (a search) when no one does, and answer
    /// `Unavailable::Gone` instead.
    fn wanted(&self) -> bool {
        true
    }
}

impl<T, E, F: FnOnce(Result<T, E>) + Send> Reply<T, E> for F {
    fn answer(self: Box<Self>, answer: Result<T, E>) {
        (*self)(answer);
    }
}
