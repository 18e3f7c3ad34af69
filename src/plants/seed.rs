//! `--seed` loaded through the door, into whichever store is in use: the
//! file is read and checked by `crate::seed`, which knows no store; this
//! decides whether it is loaded and hands each record to the store.
//!
//! When it is loaded. Without `--data` the memory store always starts
//! empty, so the seed is always loaded. With `--data`, only into a journal
//! with no records at all (a new or empty file); any other is left as it
//! is, with a log line saying why, so a restart with the same flags neither
//! doubles the seed nor undoes changes made since, deletions included (a
//! journal whose plants were all deleted still holds records). The one
//! exception: a compaction of a journal with no plants left rewrites it to
//! no records, and the next start seeds it again. The database is seeded
//! only while its table holds no plants (`into_database`).
//!
//! How it is applied. Through the memory store's normal create path, so
//! with `--data` every plant is in the journal, written in batches of
//! [`BATCH`] (one write, and with `--sync always` one `fdatasync`, each:
//! `Store::change` leaves the write to the batch's end); into
//! the database in batches of as many rows, in one transaction. Seeded
//! plants are not announced to webhooks (start-up has no subscribers
//! running yet, and they are not new to anyone).
//!
//! Reading twice. With `--data` the file is read twice: first checked
//! whole (ids kept in a set, to find duplicates), then applied. A seed that
//! fails a check therefore leaves the journal untouched, which matters
//! doubly here: a half-seeded journal has records, so the next start would
//! skip the seed and serve half of it without a word. The price is a second
//! read and parse of the file (`docs/seeding-and-export.md` has the
//! timings), chosen over holding every record in memory beside the store.
//! Without `--data` a failed start leaves nothing behind, so the file is
//! read once and each record applied as it is read, the store's own checks
//! catching duplicates and limits. What remains possible: a journal write
//! that fails half way, or a file changed between the two reads; either
//! stops start-up, and the message says the journal may hold part of the
//! seed. The database is checked whole too, and a load that fails there
//! leaves its table empty (one transaction).

use std::path::Path;
use std::time::Instant;

use log::info;

use crate::model::{Capacity, Edit, Refusal, TextLimits, plural};
use crate::seed::{self, Fault, SeedError};
use crate::store::{Durable, Store};

/// Plants written per batch: to the journal, or as one `INSERT`.
pub const BATCH: u64 = 8192;

/// What the memory store held before the seed, which decides whether it
/// is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Before {
    /// No journal: an empty store that forgets everything at exit.
    InMemory,
    /// A journal, replayed: this many records.
    Journal(u64),
}

/// Loads the seed at `path` into `store` if `before` says it is to be
/// (see the module header), and logs what was done: how many plants it
/// stored, `None` if it was skipped.
pub fn into_memory(
    path: &Path,
    store: &Store,
    before: Before,
    limits: TextLimits,
    capacity: Capacity,
) -> Result<Option<u64>, SeedError> {
    let started = Instant::now();
    let plants = match before {
        Before::Journal(records) if records > 0 => {
            info!(
                target: "plantstore::seed",
                "--seed {}: not loaded: the journal already holds {records} record{}, \
                 and a seed only fills a new, empty one",
                path.display(),
                plural(records)
            );
            return Ok(None);
        }
        Before::Journal(_) => {
            seed::check(path, limits, capacity)?;
            apply(path, store, limits).map_err(|e| SeedError { partial: true, ..e })?
        }
        Before::InMemory => apply(path, store, limits)?,
    };
    Ok(Some(seed::loaded(path, plants, started)))
}

/// Adds every plant of the seed to `store`, waiting for the journal once
/// every `BATCH` plants and at the end; a plant the store refuses stops
/// it, leaving those before it stored.
fn apply(path: &Path, store: &Store, limits: TextLimits) -> Result<u64, SeedError> {
    let (mut written, mut last) = (0, Durable::Now);
    let wait = |durable| store.wait(durable).map_err(fault);
    let records = seed::records(path, limits, &mut |new| {
        let durable = store
            .change(new.id, Edit::Create(new.plant))
            .map_err(fault)?;
        written += 1;
        if written % BATCH == 0 {
            last = Durable::Now;
            wait(durable)
        } else {
            last = durable;
            Ok(())
        }
    })?;
    wait(last).map_err(|fault| SeedError::whole(path, fault))?;
    Ok(records)
}

/// The memory store's refusal of a seeded plant, as the seed's fault.
fn fault(e: Refusal) -> Fault {
    match e {
        Refusal::Exists(id) => Fault::Duplicate { id, first: None },
        Refusal::Full(most) => Fault::TooMany(most),
        Refusal::DataFull(most) => Fault::TooMuchData(most),
        Refusal::Storage(reason) => Fault::Store(format!("cannot write the journal: {reason}")),
        // A create never looks for an existing plant.
        e @ Refusal::NotFound(_) => Fault::Store(format!("cannot write the journal: {e}")),
    }
}

/// Loads the seed at `path` into the database's `plants` table if it has
/// none, in one transaction: a seed that fails leaves the table empty, and
/// of instances starting together on an empty database exactly one loads
/// it (the table is locked while it checks and loads). Checked as
/// `POST /plants` checks a body, and for ids repeated in the file;
/// `--max-plants` and `--max-data` bound the in-memory store, not this.
#[cfg(feature = "postgres")]
pub fn into_database(
    path: &Path,
    client: &mut postgres::Client,
    limits: TextLimits,
) -> Result<Option<u64>, SeedError> {
    use crate::database::{DbError, SeedLoad};
    let started = Instant::now();
    let unbounded = Capacity {
        plants: usize::MAX,
        data: u64::MAX,
    };
    seed::check(path, limits, unbounded)?;
    let fault = |e: DbError| Fault::Store(format!("cannot write to the database: {}", e.0));
    let failed = |e: DbError| SeedError::whole(path, fault(e));
    let Some(mut load) = SeedLoad::begin(client).map_err(failed)? else {
        info!(
            target: "plantstore::seed",
            "--seed {}: not loaded: the database already holds plants, and a seed only \
             fills an empty one",
            path.display()
        );
        return Ok(None);
    };
    let plants = seed::records(path, limits, &mut |new| {
        load.push(new);
        match load.rows() as u64 >= BATCH {
            true => load.write().map_err(fault),
            false => Ok(()),
        }
    })?;
    load.commit().map_err(failed)?;
    Ok(Some(seed::loaded(path, plants, started)))
}
