//! Why an operation on the plants was not done, in the words every store
//! speaks: refused by the plants' rules or limits ([`Refusal`]), or the
//! store cannot be used now ([`Unavailable`]); [`NotDone`] is either.
//!
//! They live in the model, not in a store, because the memory store, the
//! database store, the door (`crate::plants`) and the API all say them:
//! the PostgreSQL store answers 409 and 404 with the same `Refusal` the
//! memory store does, and the API turns each into its status without
//! knowing which store spoke.

use std::fmt;
use std::sync::Arc;

/// Why a store refused an operation. A refusal other than `Storage`
/// changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A plant with this id already exists (create).
    Exists(i64),
    /// No plant has this id.
    NotFound(i64),
    /// The store already holds the maximum number of plants.
    Full(usize),
    /// The change would take the names and tags stored past `--max-data`
    /// bytes (the limit).
    DataFull(u64),
    /// The journal failed; no change is accepted any more (the reason).
    Storage(Arc<str>),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Exists(id) => write!(f, "a plant with id {id} already exists"),
            Refusal::NotFound(id) => write!(f, "no plant with id {id}"),
            Refusal::Full(max) => write!(
                f,
                "the store is full ({max} plant{})",
                super::plural(*max as u64)
            ),
            Refusal::DataFull(max) => write!(
                f,
                "the store is full ({max} bytes of names and tags); delete or shorten plants first"
            ),
            Refusal::Storage(_) => {
                f.write_str("the store cannot write changes to disk; changes are refused")
            }
        }
    }
}

impl std::error::Error for Refusal {}

/// Why a store cannot be used now, in the words a client is told (the
/// detail is logged where it is known); the client may try again shortly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// No connection to the database is up, or its statement failed.
    Down,
    /// Too much waits already, or it waited too long.
    Busy,
    /// The server is stopping.
    Stopping,
    /// A reset cannot be done now, for this reason (`POST /plants/reset`).
    Reset(&'static str),
    /// The memory store's search queue is full (or this client's share
    /// of it).
    Searches,
    /// Not done: no one waited for the answer any more.
    Gone,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unavailable::Down => "the database is unavailable; try again shortly",
            Unavailable::Busy => "the database is busy; try again shortly",
            Unavailable::Stopping => "the server is stopping",
            Unavailable::Reset(why) => why,
            Unavailable::Searches => "the search queue is full; try again shortly",
            Unavailable::Gone => "the client has gone",
        })
    }
}

/// Why an operation on the plants did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotDone {
    /// The store refused it (exists, not found, full, cannot write).
    Refused(Refusal),
    /// The store cannot be used now; the client may try again shortly.
    Unavailable(Unavailable),
}

impl From<Refusal> for NotDone {
    fn from(e: Refusal) -> NotDone {
        NotDone::Refused(e)
    }
}

impl From<Unavailable> for NotDone {
    fn from(e: Unavailable) -> NotDone {
        NotDone::Unavailable(e)
    }
}
