//! A change made to the plants, as reported after it is durable: what a
//! change feed, a replica or an audit log needs to follow the store.

use super::{Plant, Reply};

/// What happened to a plant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// `POST /plants` (or a seed) stored a new plant.
    Created,
    /// `PUT /plants/{id}` replaced its name and tag.
    Replaced,
    /// `DELETE /plants/{id}` removed it.
    Deleted,
    /// `POST /plants/reset` replaced every plant with the seed's (`id` 0,
    /// no plant): a reader re-lists.
    Reset,
}

/// A change asked of a store, to the plant of one id: the door hands the
/// same value to whichever store is in use.
#[derive(Debug, Clone)]
pub enum Edit {
    /// Store a new plant; refused if the id is taken.
    Create(Plant),
    /// Replace an existing plant's name and tag.
    Replace(Plant),
    /// Remove an existing plant.
    Delete,
}

impl Edit {
    /// What it does, as the change hook reports it.
    pub fn kind(&self) -> ChangeKind {
        match self {
            Edit::Create(_) => ChangeKind::Created,
            Edit::Replace(_) => ChangeKind::Replaced,
            Edit::Delete => ChangeKind::Deleted,
        }
    }

    /// The plant it leaves; `None` for a delete.
    pub fn plant(&self) -> Option<&Plant> {
        match self {
            Edit::Create(plant) | Edit::Replace(plant) => Some(plant),
            Edit::Delete => None,
        }
    }
}

/// One acknowledged change, numbered in commit order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantChange {
    /// Increases by one with each change reported, in the order the changes
    /// were committed: in memory from 1 in each process; with the database,
    /// the change log's number, the same on every instance.
    pub seq: u64,
    /// The plant's id.
    pub id: i64,
    /// What happened.
    pub kind: ChangeKind,
    /// The plant as it is now; `None` once deleted.
    pub plant: Option<Plant>,
}

impl PlantChange {
    /// Bytes of the plant's name and tag after the change (0 after a
    /// delete).
    pub fn bytes(&self) -> usize {
        self.plant
            .as_ref()
            .map_or(0, |p| p.name.len() + p.tag.as_ref().map_or(0, String::len))
    }
}

/// Called with each change once it is durable, in commit order, from
/// whichever thread made it durable. It runs while the store holds the
/// lock that keeps that order, so it must be quick and must not call back
/// into the store: hand the change on (to a queue, a channel) and return.
pub type ChangeHook = Box<dyn Fn(&PlantChange) + Send + Sync>;

/// The change log that every instance shares (the database's), for a
/// change feed whose subscriber resumes from outside what the feed holds:
/// an id older than its history, or newer than the last change it has
/// been handed yet. Each call returns at once and its reply is answered
/// exactly once: mostly later, from another thread, but a refusal (the
/// database is down, too busy) before the call returns, so the caller
/// must not hold a lock that the answer takes.
pub trait ChangeLog: Send + Sync {
    /// Reads the changes numbered `after + 1 ..= upto` from the newest
    /// down, stopping once their names and tags take more than `bytes`:
    /// answers those read, in ascending order and without gaps, ending at
    /// `upto` (fewer than asked for when the log no longer holds the older
    /// ones, or they did not fit), or why the log could not be read.
    fn read(&self, after: u64, upto: u64, bytes: usize, reply: Box<dyn Reply<Vec<PlantChange>>>);
    /// Answers the number of the last change in the log (every instance's),
    /// or why the log could not be read.
    fn last(&self, reply: Box<dyn Reply<u64>>);
}
