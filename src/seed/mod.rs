//! `--seed FILE`: plants loaded into an empty store at start-up.
//!
//! This module reads and checks the file (`read.rs`, `read/array.rs`) and
//! loads it into the memory store; the door (`crate::plants`) decides when
//! and into which store, and the database store writes it with its own
//! SQL (`database/seed.rs`) from the records read here.
//!
//! The file holds PlantRecords `{"id","name","tag"?}`, the shape `GET
//! /plants` lists, as a JSON array or as NDJSON (one a line); `read.rs`
//! reads either a record at a time and says where each one is. Every record
//! is checked as `POST /plants` checks a body (`NewPlant::parse` with the
//! configured `--max-name` and `--max-tag`), ids must be unique within the
//! file, and the whole seed must fit `--max-plants` and `--max-data`. The
//! first record that breaks a rule stops start-up, naming the file, the
//! record's position and the rule. An empty file, or `[]`, loads nothing.
//!
//! When it is loaded. Without `--data` the store always starts empty, so
//! the seed is always loaded. With `--data`, only into a journal with no
//! records at all (a new or empty file); any other is left as it is, with a
//! log line saying why, so a restart with the same flags neither doubles
//! the seed nor undoes changes made since, deletions included (a journal
//! whose plants were all deleted still holds records). The one exception:
//! a compaction of a journal with no plants left rewrites it to no records,
//! and the next start seeds it again.
//!
//! How it is applied. Through the store's normal create path, so with
//! `--data` every plant is in the journal, written in batches of
//! `BATCH` (one write, and with `--sync always` one `fdatasync`, each;
//! `Store::create_queued` leaves the write to the batch's end even with
//! `--sync never`, where a create would write each record itself).
//! Seeded plants are not announced to webhooks (start-up has no
//! subscribers running yet, and they are not new to anyone).
//!
//! Reading twice. With `--data` the file is read twice: first checked
//! whole (ids kept in a set, to find duplicates), then applied. A seed that
//! fails a check therefore leaves the journal untouched, which matters
//! doubly here: a half-seeded journal has records, so the next start would
//! skip the seed and serve half of it without a word. The price is a second
//! read and parse of the file (see the README for timings), chosen over
//! holding every record in memory beside the store. Without `--data` a
//! failed start leaves nothing behind, so the file is read once and each
//! record applied as it is read, the store's own checks catching
//! duplicates and limits. What remains possible: a journal write that fails
//! half way, or a file changed between the two reads; either stops
//! start-up, and the message says the journal may hold part of the seed.
//!
//! A duplicate id is found where it repeats; the first position of that id
//! is then found by reading the file again up to it (only on that error),
//! so the check keeps ids only, not their positions.

mod read;
#[cfg(test)]
mod tests;

pub use read::Position;

use std::collections::HashSet;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use log::info;

use crate::model::{InvalidBody, NewPlant, TextLimits};
use crate::store::{Capacity, Store, StoreError};
pub(crate) use read::{Failure, read};

/// Plants written to the journal per batch.
pub(crate) const BATCH: u64 = 8192;

/// Why a seed cannot be loaded, and where in the file.
#[derive(Debug)]
pub struct SeedError {
    /// The seed file, as given.
    pub path: PathBuf,
    /// The record or text at fault; `None` for the file as a whole.
    pub at: Option<Position>,
    /// What is wrong.
    pub fault: Fault,
    /// Whether the journal may hold part of the seed.
    pub partial: bool,
}

/// What is wrong with a seed.
#[derive(Debug)]
pub enum Fault {
    /// The file cannot be opened or read.
    Io(io::Error),
    /// The path names something other than a regular file (what it is:
    /// "a FIFO", "a directory", ...).
    NotAFile(&'static str),
    /// The array is not valid JSON (the array scanner's words, or
    /// serde_json's for a record).
    Syntax(String),
    /// A record that `POST /plants` would refuse.
    Invalid(InvalidBody),
    /// A record longer than this many bytes.
    TooLong(usize),
    /// An id that an earlier record has (where, once found).
    Duplicate {
        /// The id.
        id: i64,
        /// The earlier record.
        first: Option<Position>,
    },
    /// More plants than `--max-plants`.
    TooMany(usize),
    /// More bytes of names and tags than `--max-data`.
    TooMuchData(u64),
    /// The journal failed while the seed was applied (the reason).
    Storage(String),
    /// The database failed while the seed was applied (the reason).
    #[cfg(feature = "postgres")]
    Database(String),
}

impl Fault {
    fn from_store(e: StoreError) -> Fault {
        match e {
            StoreError::Exists(id) => Fault::Duplicate { id, first: None },
            StoreError::Full(most) => Fault::TooMany(most),
            StoreError::DataFull(most) => Fault::TooMuchData(most),
            StoreError::Storage(reason) => Fault::Storage(reason.to_string()),
            // A create never looks for an existing plant.
            e @ StoreError::NotFound(_) => Fault::Storage(e.to_string()),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Io(e) => write!(f, "cannot read it: {e}"),
            Fault::NotAFile(kind) => write!(f, "it is {kind}, not a regular file"),
            Fault::Syntax(detail) => write!(f, "not valid JSON: {detail}"),
            Fault::Invalid(e) => invalid(f, e),
            Fault::TooLong(most) => write!(f, "record longer than {most} bytes"),
            Fault::Duplicate { id, first: None } => write!(f, "id {id} appears twice"),
            Fault::Duplicate {
                id,
                first: Some(first),
            } => write!(f, "id {id} repeats {first}"),
            Fault::TooMany(most) => write!(f, "more than --max-plants {most} plants"),
            Fault::TooMuchData(most) => {
                write!(f, "names and tags take more than --max-data {most} bytes")
            }
            Fault::Storage(reason) => write!(f, "cannot write the journal: {reason}"),
            #[cfg(feature = "postgres")]
            Fault::Database(reason) => write!(f, "cannot write to the database: {reason}"),
        }
    }
}

/// A record's validation failure, in the words of a seed rather than of a
/// request body.
fn invalid(f: &mut fmt::Formatter<'_>, e: &InvalidBody) -> fmt::Result {
    match e {
        // A record is one line of NDJSON, and an array element is valid
        // JSON before it is checked: "line 1" says nothing.
        InvalidBody::Syntax(detail) => {
            write!(
                f,
                "not valid JSON: {}",
                detail.replace(" at line 1 column ", " at column ")
            )
        }
        InvalidBody::NotObject => f.write_str("not a JSON object"),
        InvalidBody::DuplicateKey(key) => write!(f, "duplicate key {key:?}"),
        InvalidBody::Missing(field) => write!(f, "{field}: missing"),
        InvalidBody::WrongType(field, want) => write!(f, "{field}: must be {want}"),
        InvalidBody::TooLong(field, most) => {
            write!(f, "{field}: longer than {most} characters (--max-{field})")
        }
    }
}

impl fmt::Display for SeedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--seed {}: ", self.path.display())?;
        if let Some(at) = &self.at {
            write!(f, "{at}: ")?;
        }
        write!(f, "{}", self.fault)?;
        if self.partial {
            f.write_str(
                "; the journal may hold part of the seed: remove it before starting again",
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for SeedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.fault {
            Fault::Io(e) => Some(e),
            Fault::Invalid(e) => Some(e),
            _ => None,
        }
    }
}

impl SeedError {
    /// Whether the fault is the seed's (a bad file: like a bad flag value)
    /// rather than the journal's.
    pub fn is_in_seed(&self) -> bool {
        match self.fault {
            Fault::Storage(_) => false,
            #[cfg(feature = "postgres")]
            Fault::Database(_) => false,
            _ => true,
        }
    }
}

/// What the store held before the seed, which decides whether it is
/// loaded.
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
pub fn load(
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
                "--seed {}: not loaded: the journal already holds {records} records, \
                 and a seed only fills a new, empty one",
                path.display()
            );
            return Ok(None);
        }
        Before::Journal(_) => {
            check(path, limits, capacity)?;
            apply(path, store, limits).map_err(|e| SeedError { partial: true, ..e })?
        }
        Before::InMemory => apply(path, store, limits)?,
    };
    Ok(Some(loaded(path, plants, started)))
}

/// Logs that `plants` were loaded from `path` since `started`.
pub(crate) fn loaded(path: &Path, plants: u64, started: Instant) -> u64 {
    info!(
        "--seed {}: loaded {plants} plants in {} ms",
        path.display(),
        started.elapsed().as_millis()
    );
    plants
}

/// Reads the whole seed and checks it, changing nothing.
pub(crate) fn check(path: &Path, limits: TextLimits, capacity: Capacity) -> Result<u64, SeedError> {
    let mut admission = Admission {
        ids: HashSet::new(),
        plants: 0,
        data: 0,
        capacity,
    };
    read(path, limits, |_, plant| admission.admit(&plant)).map_err(|e| located(path, e, limits))
}

/// Adds every plant of the seed to `store`, waiting for the journal once
/// every `BATCH` plants and at the end; a plant the store refuses stops
/// it, leaving those before it stored.
fn apply(path: &Path, store: &Store, limits: TextLimits) -> Result<u64, SeedError> {
    let (mut written, mut last) = (0, None);
    let wait = |ack| store.wait(ack).map_err(Fault::from_store);
    let records = read(path, limits, |_, plant| {
        let ack = store.create_queued(plant).map_err(Fault::from_store)?;
        written += 1;
        if written % BATCH == 0 {
            last = None;
            wait(ack)
        } else {
            last = Some(ack);
            Ok(())
        }
    })
    .map_err(|e| located(path, e, limits))?;
    if let Some(ack) = last {
        wait(ack).map_err(|fault| SeedError {
            path: path.to_path_buf(),
            at: None,
            fault,
            partial: false,
        })?;
    }
    Ok(records)
}

/// The whole seed against the limits of an empty store, as the store would
/// admit it.
struct Admission {
    ids: HashSet<i64>,
    plants: u64,
    data: u64,
    capacity: Capacity,
}

impl Admission {
    fn admit(&mut self, new: &NewPlant) -> Result<(), Fault> {
        if !self.ids.insert(new.id) {
            return Err(Fault::Duplicate {
                id: new.id,
                first: None,
            });
        }
        self.plants += 1;
        if self.plants > self.capacity.plants as u64 {
            return Err(Fault::TooMany(self.capacity.plants));
        }
        let plant = &new.plant;
        let bytes = plant.name.len() + plant.tag.as_ref().map_or(0, String::len);
        self.data = self.data.saturating_add(bytes as u64);
        if self.data > self.capacity.data {
            return Err(Fault::TooMuchData(self.capacity.data));
        }
        Ok(())
    }
}

/// A read's failure as a `SeedError`; for a duplicate id, with the
/// position of its first record, found by reading the file again.
pub(crate) fn located(path: &Path, failure: Failure, limits: TextLimits) -> SeedError {
    let fault = match failure.fault {
        Fault::Duplicate { id, first: None } => Fault::Duplicate {
            id,
            first: first_of(path, id, limits),
        },
        fault => fault,
    };
    SeedError {
        path: path.to_path_buf(),
        at: failure.at,
        fault,
        partial: false,
    }
}

/// Where the first record with this id is.
fn first_of(path: &Path, id: i64, limits: TextLimits) -> Option<Position> {
    // Stopping at it with a fault hands back its position.
    let stop = |_, plant: NewPlant| match plant.id == id {
        true => Err(Fault::Duplicate { id, first: None }),
        false => Ok(()),
    };
    read(path, limits, stop).err()?.at
}
