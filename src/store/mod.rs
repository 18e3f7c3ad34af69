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

pub use plant::{InvalidBody, NewPlant, Plant, PlantRecord, int64_text};

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;
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

/// One page of a listing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Page {
    /// The plants, ascending by id.
    pub items: Vec<(i64, Plant)>,
    /// Whether more matching plants follow the last one.
    pub more: bool,
}

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

    /// Replaces the name and tag of an existing plant.
    pub fn replace(&self, id: i64, plant: Plant) -> Result<(), StoreError> {
        match self.lock().get_mut(&id) {
            Some(stored) => {
                *stored = plant;
                Ok(())
            }
            None => Err(StoreError::NotFound(id)),
        }
    }

    /// Removes a plant.
    pub fn delete(&self, id: i64) -> Result<(), StoreError> {
        self.lock()
            .remove(&id)
            .map(drop)
            .ok_or(StoreError::NotFound(id))
    }

    /// One page of plants in ascending id order: ids greater than `after`,
    /// with this `tag` if given, at most `limit`. `more` says whether a
    /// further matching plant exists. Only the page is copied; the walk
    /// starts at the cursor, so paging deep into a large store stays cheap
    /// (a rare tag still scans forward until the page fills).
    pub fn page(&self, after: Option<i64>, limit: usize, tag: Option<&str>) -> Page {
        let start = match after {
            Some(i64::MAX) => return Page::default(),
            Some(after) => Bound::Included(after + 1),
            None => Bound::Unbounded,
        };
        let plants = self.lock();
        let mut matching = plants
            .range((start, Bound::Unbounded))
            .filter(|(_, p)| tag.is_none() || p.tag.as_deref() == tag);
        let items: Vec<(i64, Plant)> = matching
            .by_ref()
            .take(limit)
            .map(|(id, p)| (*id, p.clone()))
            .collect();
        let more = limit > 0 && matching.next().is_some();
        Page { items, more }
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
    fn page_walks_from_the_cursor_and_filters_by_tag() {
        let store = Store::new(100);
        for id in [5, 1, 3, 2, 4] {
            let tag = (id % 2 == 0).then(|| "even".to_string());
            store
                .create(NewPlant {
                    id,
                    plant: Plant {
                        name: format!("p{id}"),
                        tag,
                    },
                })
                .unwrap();
        }
        let ids = |page: &Page| page.items.iter().map(|(id, _)| *id).collect::<Vec<_>>();
        let first = store.page(None, 2, None);
        assert_eq!((ids(&first), first.more), (vec![1, 2], true));
        let last = store.page(Some(3), 2, None);
        assert_eq!((ids(&last), last.more), (vec![4, 5], false));
        let even = store.page(None, 10, Some("even"));
        assert_eq!((ids(&even), even.more), (vec![2, 4], false));
        assert_eq!(store.page(Some(i64::MAX), 10, None), Page::default());
        assert!(
            !store.page(None, 0, None).more,
            "limit 0 never promises more"
        );
    }

    #[test]
    fn replace_and_delete_need_an_existing_plant() {
        let store = Store::new(10);
        let plant = Plant {
            name: "x".into(),
            tag: None,
        };
        assert_eq!(
            store.replace(1, plant.clone()),
            Err(StoreError::NotFound(1))
        );
        assert_eq!(store.delete(1), Err(StoreError::NotFound(1)));
        store.create(new_plant(1, "a")).unwrap();
        store.replace(1, plant.clone()).unwrap();
        assert_eq!(store.get(1), Some(plant));
        store.delete(1).unwrap();
        assert!(store.get(1).is_none());
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
