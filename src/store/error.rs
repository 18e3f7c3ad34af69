//! `StoreError`: why the store refused an operation. A refusal other than
//! `Storage` changed nothing; the API turns each into its status.

use std::fmt;
use std::sync::Arc;

/// Why a store operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
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

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Exists(id) => write!(f, "a plant with id {id} already exists"),
            StoreError::NotFound(id) => write!(f, "no plant with id {id}"),
            StoreError::Full(max) => write!(f, "the store is full ({max} plants)"),
            StoreError::DataFull(max) => write!(
                f,
                "the store is full ({max} bytes of names and tags); delete or shorten plants first"
            ),
            StoreError::Storage(_) => {
                f.write_str("the store cannot write changes to disk; changes are refused")
            }
        }
    }
}

impl std::error::Error for StoreError {}
