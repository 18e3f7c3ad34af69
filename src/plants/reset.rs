//! `--allow-reset`: every plant replaced by the `--seed` file's (or by
//! none), on either store. The seed is read once, at start, as it was
//! loaded (checked against the limits of an empty store) and kept here;
//! a later change to the file is not seen until a restart.
//!
//! The memory store resets on its scan thread (`scan.rs`), in turn with
//! the scans, since with a journal it writes and syncs a file: never on
//! an event loop. The database does
//! it in one transaction on a pool worker (`database.rs`). Seeded plants
//! are not announced to webhooks (nothing here knows them); the change
//! hook gets one `ChangeKind::Reset`.

use std::path::Path;
use std::sync::Arc;

use super::outcome::Outcome;
use super::scan::{self, Asker};
use super::{Kept, Plants, Setup, SetupError};
use crate::model::{Capacity, NotDone, Plant, Unavailable};

/// The scan thread's line of resets: a key no client address has (an IPv6
/// /64's low half is zero, an IPv4 address is `::ffff:a.b.c.d`).
const RESETS: Asker = 2;

/// The seed's plants, kept for `POST /plants/reset`.
pub(super) type Seeded = Arc<[(i64, Plant)]>;

/// With `--allow-reset`: the seed's plants (none without `--seed`),
/// checked as a seed loaded into an empty store is (the database's
/// capacity unbounded).
pub(super) fn kept(setup: &Setup, capacity: Capacity) -> Result<Option<Seeded>, SetupError> {
    if !setup.allow_reset {
        return Ok(None);
    }
    let mut plants = Vec::new();
    if let Some(path) = &setup.seed {
        read_seed(path, setup, capacity, &mut plants).map_err(SetupError::Seed)?;
    }
    Ok(Some(plants.into()))
}

fn read_seed(
    path: &Path,
    setup: &Setup,
    capacity: Capacity,
    plants: &mut Vec<(i64, Plant)>,
) -> Result<(), crate::seed::SeedError> {
    crate::seed::check(path, setup.limits, capacity)?;
    crate::seed::records(path, setup.limits, &mut |new| {
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
        let Some(plants) = &self.resets else {
            return Outcome::Ready(Err(NotDone::Unavailable(Unavailable::Reset(
                "resets are not allowed (--allow-reset)",
            ))));
        };
        let plants = Arc::clone(plants);
        match &self.kept {
            // Resets share one line of the scan thread's queue, and are
            // never skipped: a reset whose client left is done all the same.
            Kept::Memory { store, scans, .. } => {
                scans.later(store, RESETS, scan::Purpose::Reset, move |store| {
                    store.reset(&plants).map(|()| plants.len())
                })
            }
            Kept::Database(remote) => remote.reset(plants),
        }
    }
}
