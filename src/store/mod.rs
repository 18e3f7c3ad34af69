//! The plant store: every plant, in memory, behind one `Mutex`.
//!
//! Owns the map from id to plant and the `--max-plants` cap. Knows nothing
//! of HTTP. The map is a `BTreeMap` so that listing in id order from a cursor
//! is a range walk, not a copy-and-sort of the whole store.
//!
//! Invariants: a call that returns `Ok` has applied its change; a call that
//! returns `Err` has changed nothing. Critical sections are short: requests
//! are parsed before the lock is taken and answered after it is released.

mod plant;

pub use plant::{InvalidBody, NewPlant, Plant, PlantRecord};

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard};

/// Why a store operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// A plant with this id already exists (create).
    Exists(i64),
    /// No plant has this id.
    NotFound(i64),
    /// The store already holds the maximum number of plants.
    Full(usize),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Exists(id) => write!(f, "a plant with id {id} already exists"),
            StoreError::NotFound(id) => write!(f, "no plant with id {id}"),
            StoreError::Full(max) => write!(f, "the store is full ({max} plants)"),
        }
    }
}

impl std::error::Error for StoreError {}

/// The plants, keyed and ordered by id.
pub struct Store {
    plants: Mutex<BTreeMap<i64, Plant>>,
    max_plants: usize,
}

impl Store {
    /// An empty in-memory store holding at most `max_plants` plants.
    pub fn new(max_plants: usize) -> Store {
        Store {
            plants: Mutex::new(BTreeMap::new()),
            max_plants,
        }
    }

    /// Adds a plant; refuses an existing id (the stored plant is unchanged)
    /// and a full store.
    pub fn create(&self, new: NewPlant) -> Result<(), StoreError> {
        let mut plants = self.lock();
        if plants.contains_key(&new.id) {
            return Err(StoreError::Exists(new.id));
        }
        if plants.len() >= self.max_plants {
            return Err(StoreError::Full(self.max_plants));
        }
        plants.insert(new.id, new.plant);
        Ok(())
    }

    /// How many plants are stored.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of the plant with this id.
    pub fn get(&self, id: i64) -> Option<Plant> {
        self.lock().get(&id).cloned()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<i64, Plant>> {
        // A panic while holding the lock cannot leave the map half-changed
        // (every change is one insert or remove), so a poisoned lock is safe
        // to keep using.
        self.plants
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_plant(id: i64, name: &str) -> NewPlant {
        NewPlant {
            id,
            plant: Plant {
                name: name.to_string(),
                tag: None,
            },
        }
    }

    #[test]
    fn create_refuses_existing_id_and_keeps_the_first() {
        let store = Store::new(10);
        store.create(new_plant(1, "fern")).unwrap();
        assert_eq!(
            store.create(new_plant(1, "moss")),
            Err(StoreError::Exists(1))
        );
        assert_eq!(store.get(1).unwrap().name, "fern");
    }

    #[test]
    fn create_refuses_past_the_cap() {
        let store = Store::new(2);
        store.create(new_plant(1, "a")).unwrap();
        store.create(new_plant(2, "b")).unwrap();
        assert_eq!(store.create(new_plant(3, "c")), Err(StoreError::Full(2)));
        assert_eq!(store.len(), 2);
        assert!(store.get(3).is_none());
    }
}
