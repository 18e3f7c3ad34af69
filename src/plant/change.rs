//! A change made to the plants, as reported after it is durable: what a
//! change feed, a replica or an audit log needs to follow the store.

use super::Plant;

/// What happened to a plant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// `POST /plants` (or a seed) stored a new plant.
    Created,
    /// `PUT /plants/{id}` replaced its name and tag.
    Replaced,
    /// `DELETE /plants/{id}` removed it.
    Deleted,
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

/// Called with each change once it is durable, in commit order, from
/// whichever thread made it durable. It runs while the store holds the
/// lock that keeps that order, so it must be quick and must not call back
/// into the store: hand the change on (to a queue, a channel) and return.
pub type ChangeHook = Box<dyn Fn(&PlantChange) + Send + Sync>;
