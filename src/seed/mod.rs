//! `--seed FILE`: the file read and checked, a record at a time. It knows
//! no store: the door (`crate::plants`, `plants/seed.rs`) decides whether
//! and into which store a seed is loaded, and hands each record read here
//! to that store.
//!
//! The file holds PlantRecords `{"id","name","tag"?}`, the shape `GET
//! /plants` lists, as a JSON array or as NDJSON (one a line); `read.rs`
//! reads either a record at a time and says where each one is. Every record
//! is checked as `POST /plants` checks a body (`NewPlant::parse` with the
//! configured `--max-name` and `--max-tag`), ids must be unique within the
//! file, and the whole seed must fit `--max-plants` and `--max-data`
//! ([`check`], which changes nothing). The first record that breaks a rule
//! stops start-up, naming the file, the record's position and the rule. An
//! empty file, or `[]`, loads nothing.
//!
//! A store that fails while a seed is loaded says so in its own words
//! ([`Fault::Store`]); whether the store may then hold part of the seed is
//! the loader's to say ([`SeedError::partial`]).
//!
//! A duplicate id is found where it repeats; the first position of that id
//! is then found by reading the file again up to it (only on that error),
//! so the check keeps ids only, not their positions.

mod read;
#[cfg(test)]
mod tests;

pub use read::Place;

use std::collections::HashSet;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use log::info;

use crate::model::{Capacity, InvalidBody, NewPlant, TextLimits, plural};
use read::{Failure, read};

/// Why a seed cannot be loaded, and where in the file.
#[derive(Debug)]
pub struct SeedError {
    /// The seed file, as given.
    pub path: PathBuf,
    /// The record or text at fault; `None` for the file as a whole.
    pub at: Option<Place>,
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
        first: Option<Place>,
    },
    /// More plants than `--max-plants`.
    TooMany(usize),
    /// More bytes of names and tags than `--max-data`.
    TooMuchData(u64),
    /// The store failed while the seed was applied: what it could not do
    /// and why, in its words (`cannot write the journal: ...`).
    Store(String),
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
            Fault::Store(words) => f.write_str(words),
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
    /// rather than the store's.
    pub fn is_in_seed(&self) -> bool {
        !matches!(self.fault, Fault::Store(_))
    }

    /// A fault of the whole file, at no record.
    pub fn whole(path: &Path, fault: Fault) -> SeedError {
        SeedError {
            path: path.to_path_buf(),
            at: None,
            fault,
            partial: false,
        }
    }
}

/// Logs that `plants` were loaded from `path` since `started`.
pub fn loaded(path: &Path, plants: u64, started: Instant) -> u64 {
    info!(
        "--seed {}: loaded {plants} plant{} in {} ms",
        path.display(),
        plural(plants),
        // As u64: a u128's formatter is 1 KB of the binary.
        started.elapsed().as_millis() as u64
    );
    plants
}

/// Reads the whole seed and checks it against the limits of an empty
/// store of this capacity, changing nothing: how many records it holds.
pub fn check(path: &Path, limits: TextLimits, capacity: Capacity) -> Result<u64, SeedError> {
    let mut admission = Admission {
        ids: HashSet::new(),
        plants: 0,
        data: 0,
        capacity,
    };
    read(path, limits, |_, plant| admission.admit(&plant)).map_err(|e| located(path, e, limits))
}

/// Reads the seed, handing each record to `each`, in the order of the
/// file: how many there were. The first record that fails a check, or
/// that `each` refuses with a fault, stops it, named where it is.
///
/// `each` is a `dyn`: every caller shares one copy of the reader.
pub fn records(
    path: &Path,
    limits: TextLimits,
    each: &mut dyn FnMut(NewPlant) -> Result<(), Fault>,
) -> Result<u64, SeedError> {
    read(path, limits, |_, plant| each(plant)).map_err(|e| located(path, e, limits))
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
fn located(path: &Path, failure: Failure, limits: TextLimits) -> SeedError {
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
fn first_of(path: &Path, id: i64, limits: TextLimits) -> Option<Place> {
    // Stopping at it with a fault hands back its position.
    let stop = |_, plant: NewPlant| match plant.id == id {
        true => Err(Fault::Duplicate { id, first: None }),
        false => Ok(()),
    };
    read(path, limits, stop).err()?.at
}
