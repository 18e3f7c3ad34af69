//! `--allow-reset`: every plant replaced by the `--seed` file's (or by
//! none), on either store. The seed is read once, at start, as it was
//! loaded (checked against the limits of an empty store) and kept here;
//! a later change to the file is not seen until a restart.
//!
//! The memory store resets on a thread of its own, one reset at a time
//! (a second while one runs is refused with a 503), since with a journal
//! it writes and syncs a file: never on an event loop. The database does
//! it in one transaction on a pool worker (`database.rs`). Seeded plants
//! are not announced to webhooks (nothing here knows them); the change
//! hook gets one `ChangeKind::Reset`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use super::outcome::{Outcome, Pending};
use super::{Kept, Plants, Setup, SetupError};
use crate::model::{Capacity, NotDone, Plant, Unavailable};

/// The seed's plants, and whether a reset runs.
pub(super) struct Resets {
    plants: Arc<[(i64, Plant)]>,
    busy: Arc<AtomicBool>,
}

const BUSY: &str = "a reset is already running; try again shortly";

impl Resets {
    /// With `--allow-reset`: the seed's plants, checked as a seed loaded
    /// into an empty store is (the database's capacity unbounded).
    pub(super) fn read(setup: &Setup, capacity: Capacity) -> Result<Option<Resets>, SetupError> {
        if !setup.allow_reset {
            return Ok(None);
        }
        let mut plants = Vec::new();
        if let Some(path) = &setup.seed {
            read_seed(path, setup, capacity, &mut plants).map_err(SetupError::Seed)?;
        }
        Ok(Some(Resets {
            plants: plants.into(),
            busy: Arc::default(),
        }))
    }
}

fn read_seed(
    path: &Path,
    setup: &Setup,
    capacity: Capacity,
    plants: &mut Vec<(i64, Plant)>,
) -> Result<(), crate::seed::SeedError> {
    crate::seed::check(path, setup.limits, capacity)?;
    crate::seed::records(path, setup.limits, |new| {
        plants.push((new.id, new.plant));
        Ok(())
    })?;
    Ok(())
}

impl Plants {
    /// Whether `POST /plants/reset` is there (`--allow-reset`).
    pub fn resettable(&self) -> bool {
        self.resets.is_some()
    }

    /// Replaces every plant with the seed's: how many there are now, once
    /// durable. Without `--allow-reset`, refused as the store cannot.
    pub fn reset(&self) -> Outcome<usize> {
        let Some(resets) = &self.resets else {
            return Outcome::Ready(Err(NotDone::Unavailable(Unavailable::Reset(
                "resets are not allowed (--allow-reset)",
            ))));
        };
        let plants = Arc::clone(&resets.plants);
        match &self.kept {
            Kept::Memory { store, .. } => {
                if resets.busy.swap(true, Ordering::AcqRel) {
                    return Outcome::Ready(Err(NotDone::Unavailable(Unavailable::Reset(BUSY))));
                }
                let (store, busy) = (Arc::clone(store), Arc::clone(&resets.busy));
                Outcome::Pending(Pending::new(move |reply| {
                    let spawned = thread::Builder::new().name("reset".into()).spawn({
                        let busy = Arc::clone(&busy);
                        move || {
                            let done = store.reset(&plants).map(|()| plants.len());
                            busy.store(false, Ordering::Release);
                            reply(done);
                        }
                    });
                    if spawned.is_err() {
                        // The reply went with the closure: dropped unanswered
                        // (a deferred response answers 500).
                        busy.store(false, Ordering::Release);
                    }
                }))
            }
            #[cfg(feature = "postgres")]
            Kept::Database(remote) => remote.reset(plants),
        }
    }
}
