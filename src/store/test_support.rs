//! What the store's tests share (those in `store/` and in
//! `store/journal/tests/`): plants made short, a store's contents in id
//! order, a journal in a fresh temporary file opened as the tests want it
//! (sync always, no compaction unless a test asks), and changes waited
//! for.

use super::{Recovery, Store};
use crate::model::{Capacity, Durability, Edit, NewPlant, Plant, Refusal, SyncMode};
use crate::os::temp::TempFile;

/// A [`TempFile`] as a store's journal.
pub(super) trait Journalled {
    /// Syncing every change, never compacting on its own.
    fn durability(&self) -> Durability;
    /// A store of up to 1000 plants on it.
    fn open(&self) -> Result<(Store, Recovery), super::OpenError>;
}

impl Journalled for TempFile {
    fn durability(&self) -> Durability {
        Durability {
            path: self.0.clone(),
            sync: SyncMode::Always,
            compact_min: u64::MAX,
        }
    }

    fn open(&self) -> Result<(Store, Recovery), super::OpenError> {
        Store::open(Capacity::plants(1000), &self.durability())
    }
}

/// A change made and waited for until it is durable, as most tests want
/// it (`Store::change`, then `Store::wait`).
pub(super) trait Waited {
    fn create(&self, new: NewPlant) -> Result<(), Refusal>;
    fn replace(&self, id: i64, plant: Plant) -> Result<(), Refusal>;
    fn delete(&self, id: i64) -> Result<(), Refusal>;
}

impl Waited for Store {
    fn create(&self, new: NewPlant) -> Result<(), Refusal> {
        self.wait(self.change(new.id, Edit::Create(new.plant))?)
    }

    fn replace(&self, id: i64, plant: Plant) -> Result<(), Refusal> {
        self.wait(self.change(id, Edit::Replace(plant))?)
    }

    fn delete(&self, id: i64) -> Result<(), Refusal> {
        self.wait(self.change(id, Edit::Delete)?)
    }
}

pub(super) fn plant(name: &str, tag: Option<&str>) -> Plant {
    Plant {
        name: name.to_string(),
        tag: tag.map(String::from),
    }
}

pub(super) fn new(id: i64, name: &str) -> NewPlant {
    NewPlant {
        id,
        plant: plant(name, None),
    }
}

pub(super) fn contents(store: &Store) -> Vec<(i64, Plant)> {
    store.page(None, usize::MAX, None).items
}
