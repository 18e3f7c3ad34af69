//! The one door to the plants: every plant operation the API, start-up and
//! seeding need, over whichever store the flags chose.
//!
//! [`Plants`] is the only place that knows which store is in use: the
//! memory store (with `--data`, its journal) or the PostgreSQL store
//! (`--database`, the `postgres` feature). Everything above it is written
//! once, against [`Outcome`]: an answer ready now, or pending and given
//! later from another thread (the journal's committer, a pool worker). The
//! door also reports each change after it is durable, in commit order,
//! numbered (`set_change_hook`), for whoever follows the plants.
//!
//! It knows nothing of HTTP: the API turns outcomes into responses and
//! pieces of the export into a streamed body. It does not validate: a
//! plant arrives here already checked against the limits. What it answers
//! is said in the model's words (`model/refusal.rs`: `NotDone`, a
//! `Refusal` or `Unavailable`; `Page`), which every store speaks.
//!
//! Files: `outcome.rs` (an answer ready now or pending), `scan.rs` (the
//! memory store's searches and counts, read on a thread of their own),
//! `seed.rs` (the
//! `--seed` file, read by `crate::seed`, loaded into either store),
//! `reset.rs` (`--allow-reset`: the seed kept, and the reset on either
//! store), `database.rs` (the PostgreSQL store's side of the door), `key.rs` (the
//! key of the change feed's tickets, shared where the plants are); the
//! memory store's side is short enough to be here.

#[cfg(feature = "postgres")]
mod database;
mod key;
mod outcome;
mod remote;
mod reset;
mod scan;
mod seed;
#[cfg(test)]
mod seed_tests;
#[cfg(test)]
mod tests;

pub use key::TicketKey;
pub use outcome::{Outcome, Pending};
pub use scan::Asker;
use seed::Before;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use log::{info, warn};

use crate::metrics::Exposition;
use crate::model::{
    Budget, Capacity, ChangeHook, ChangeLog, Durability, Edit, NewPlant, NotDone, Page, Plant,
    Query, Refusal, SyncMode, TextLimits, plural,
};
use crate::seed::SeedError;
use crate::store::{AllPlants, Durable, OpenError, Store};

/// Plants read for one piece of the export, at most.
pub const PIECE_PLANTS: usize = 512;

/// The database store's capacity: `--max-plants` and `--max-data` bound
/// the memory store only.
const UNBOUNDED: Capacity = Capacity {
    plants: usize::MAX,
    data: u64::MAX,
};

/// Asks the reader of a pending export piece to ask again.
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// What the flags ask of the store.
#[derive(Debug, Clone)]
pub struct Setup {
    /// `--max-plants` and `--max-data` (the memory store's bounds).
    pub capacity: Capacity,
    /// `--max-name` and `--max-tag`, for the seed's records.
    pub limits: TextLimits,
    /// `--data`: a journal.
    pub journal: Option<Durability>,
    /// `--seed`: plants loaded into an empty store at start-up.
    pub seed: Option<PathBuf>,
    /// `--allow-reset`: the seed's plants kept for `POST /plants/reset`.
    pub allow_reset: bool,
    /// `--database`: the PostgreSQL store instead.
    pub database: Option<crate::dbconfig::DatabaseConfig>,
}

/// Why the store could not be opened.
#[derive(Debug)]
pub enum SetupError {
    /// The journal cannot be opened or recovered.
    Journal(OpenError),
    /// The `--seed` file cannot be loaded.
    Seed(SeedError),
    /// The database cannot be reached or its schema used.
    Database(String),
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupError::Journal(e) => write!(f, "cannot open the data file: {e}"),
            SetupError::Seed(e) => e.fmt(f),
            SetupError::Database(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for SetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SetupError::Journal(e) => Some(e),
            SetupError::Seed(e) => Some(e),
            SetupError::Database(_) => None,
        }
    }
}

/// The plants, wherever they are kept.
pub struct Plants {
    kept: Kept,
    /// With `--allow-reset` (`reset.rs`).
    resets: Option<reset::Seeded>,
}

/// Where they are kept.
enum Kept {
    /// In this process; `journal` names its file, if any.
    Memory {
        /// Dropped first: its thread holds the store.
        scans: scan::Scans,
        store: Arc<Store>,
        journal: Option<(PathBuf, SyncMode)>,
    },
    /// In PostgreSQL, through a pool of worker threads.
    Database(remote::Remote),
}

/// The next piece of an export.
pub enum Piece {
    /// Plants in ascending id order; `last` when none follow.
    Plants {
        plants: Vec<(i64, Plant)>,
        last: bool,
    },
    /// Not read yet: the export's `Wake` is called when it is.
    Pending,
    /// The store failed part way; the export cannot be completed.
    Failed,
}

/// Every plant, read a piece at a time (see [`Plants::export`]).
pub struct Export {
    source: Source,
}

enum Source {
    Memory(AllPlants),
    Database(remote::Cursor),
}

impl Export {
    /// The next piece: about `want` bytes of names and tags, at most
    /// [`PIECE_PLANTS`] plants.
    pub fn next(&mut self, want: usize) -> Piece {
        match &mut self.source {
            Source::Memory(all) => {
                let plants = all.next_piece(PIECE_PLANTS, want);
                if all.was_reset() {
                    warn!(target: "plantstore", "an export was cut short: the plants were reset while it was read");
                    return Piece::Failed;
                }
                let last = all.is_done();
                Piece::Plants { plants, last }
            }
            Source::Database(cursor) => cursor.next(),
        }
    }
}

impl Plants {
    /// Opens the store `setup` asks for: the journal replayed, or the
    /// database's schema checked and its pool started; then the seed
    /// loaded if the store is empty.
    pub fn open(setup: &Setup) -> Result<Plants, SetupError> {
        if let Some(config) = &setup.database {
            let remote = remote::Remote::open(setup, config)?;
            return Ok(Plants {
                kept: Kept::Database(remote),
                resets: reset::kept(setup, UNBOUNDED)?,
            });
        }
        let (store, before) = match &setup.journal {
            None => (Store::new(setup.capacity), Before::InMemory),
            Some(journal) => {
                let (store, recovery) =
                    Store::open(setup.capacity, journal).map_err(SetupError::Journal)?;
                if recovery.torn_bytes > 0 {
                    warn!(
                        target: "plantstore",
                        "{}: cut off a torn final record ({} byte{}) left by an interrupted write",
                        journal.path.display(),
                        recovery.torn_bytes,
                        plural(recovery.torn_bytes)
                    );
                }
                info!(
                    target: "plantstore",
                    "recovered {} plant{} from {} journal record{} in {} ms",
                    store.len(),
                    plural(store.len() as u64),
                    recovery.records,
                    plural(recovery.records),
                    // As u64: a u128's formatter is 1 KB of the binary.
                    recovery.elapsed.as_millis() as u64
                );
                (store, Before::Journal(recovery.records))
            }
        };
        if let Some(path) = &setup.seed {
            seed::into_memory(path, &store, before, setup.limits, setup.capacity)
                .map_err(SetupError::Seed)?;
        }
        let resets = reset::kept(setup, setup.capacity)?;
        Ok(Plants {
            resets,
            ..Plants::memory(store, setup.journal.as_ref())
        })
    }

    /// The door over a memory store opened elsewhere (its journal, if
    /// any, named by `journal` for the start-up line).
    pub fn memory(store: Store, journal: Option<&Durability>) -> Plants {
        Plants {
            kept: Kept::Memory {
                scans: scan::Scans::default(),
                store: Arc::new(store),
                journal: journal.map(|j| (j.path.clone(), j.sync)),
            },
            resets: None,
        }
    }

    /// Where the plants are, for the start-up line.
    pub fn describe(&self) -> String {
        match &self.kept {
            Kept::Memory { store, journal, .. } => {
                let plants = store.len();
                match journal {
                    None => format!(
                        "in memory only (a restart starts empty), {plants} plant{}",
                        plural(plants as u64)
                    ),
                    Some((path, sync)) => format!(
                        "journal {} (sync {}), {plants} plant{}",
                        path.display(),
                        match sync {
                            SyncMode::Always => "always",
                            SyncMode::Never => "never",
                        },
                        plural(plants as u64)
                    ),
                }
            }
            Kept::Database(remote) => remote.describe(),
        }
    }

    /// Where the change hook's numbers start: the epoch they are of (for
    /// the database, when its change log was made; `None`: this process)
    /// and the number of the last change before the first reported (0 in
    /// memory, the log's last number for the database).
    pub fn changes_start(&self) -> (Option<u64>, u64) {
        match &self.kept {
            Kept::Memory { .. } => (None, 0),
            Kept::Database(remote) => remote.changes_start(),
        }
    }

    /// The change log every instance shares, for a change feed to read
    /// back (`None` in memory: a process's changes are its own).
    pub fn change_log(&self) -> Option<Arc<dyn ChangeLog>> {
        match &self.kept {
            Kept::Memory { .. } => None,
            Kept::Database(remote) => remote.change_log(),
        }
    }

    /// Reports every change from now on to `hook`, once it is durable, in
    /// commit order, numbered after `changes_start` (in memory from 1; for
    /// the database cluster-wide, every instance's changes). One hook:
    /// `false` if one is set.
    pub fn set_change_hook(&self, hook: ChangeHook) -> bool {
        match &self.kept {
            Kept::Memory { store, .. } => store.set_change_hook(hook),
            Kept::Database(remote) => remote.set_change_hook(hook),
        }
    }

    /// Stores a new plant; refuses an id already taken.
    pub fn create(&self, new: NewPlant) -> Outcome<()> {
        match &self.kept {
            Kept::Memory { store, .. } => {
                later(store, store.change(new.id, Edit::Create(new.plant)))
            }
            Kept::Database(remote) => remote.create(new.id, new.plant),
        }
    }

    /// The plant with this id, if any.
    pub fn get(&self, id: i64) -> Outcome<Option<Plant>> {
        match &self.kept {
            Kept::Memory { store, .. } => Outcome::Ready(Ok(store.get(id))),
            Kept::Database(remote) => remote.get(id),
        }
    }

    /// Replaces the name and tag of an existing plant.
    pub fn replace(&self, id: i64, plant: Plant) -> Outcome<()> {
        match &self.kept {
            Kept::Memory { store, .. } => later(store, store.change(id, Edit::Replace(plant))),
            Kept::Database(remote) => remote.replace(id, plant),
        }
    }

    /// Removes a plant.
    pub fn delete(&self, id: i64) -> Outcome<()> {
        match &self.kept {
            Kept::Memory { store, .. } => later(store, store.change(id, Edit::Delete)),
            Kept::Database(remote) => remote.delete(id),
        }
    }

    /// One page of a listing `query`, no larger than `budget`: each store
    /// takes plants only while the page's JSON holds them. The memory
    /// store answers a query that may read the whole store later, from
    /// its scan thread (`scan.rs`), and every other at once.
    /// `asker` shares the scan thread fairly with other askers.
    pub fn page(&self, asker: Asker, query: Query, budget: Budget) -> Outcome<Page> {
        match &self.kept {
            Kept::Memory { store, scans, .. } if scan::Scans::needed(&query) => {
                scans.page(store, asker, query, budget)
            }
            Kept::Memory { store, .. } => Outcome::Ready(Ok(store.query(&query, budget))),
            Kept::Database(remote) => remote.page(query, budget),
        }
    }

    /// Every plant, a piece at a time, in ascending id order. `wake` is
    /// called when a pending piece has arrived; a store that answers later
    /// refuses an export without one.
    pub fn export(&self, wake: Option<Wake>) -> Result<Export, NotDone> {
        let source = match &self.kept {
            Kept::Memory { store, .. } => {
                let _ = wake;
                Source::Memory(store.all_plants())
            }
            Kept::Database(remote) => Source::Database(remote.export(wake)?),
        };
        Ok(Export { source })
    }

    /// `None` while changes can be made, else why not (`/healthz`).
    pub fn failure(&self) -> Option<Arc<str>> {
        match &self.kept {
            Kept::Memory { store, .. } => store.failure(),
            Kept::Database(remote) => remote.failure(),
        }
    }

    /// The store's lines of `/metrics` (the database store leaves out the
    /// plants' count: counting rows would scan the table at every scrape).
    pub fn render(&self, out: &mut Exposition) {
        match &self.kept {
            Kept::Memory { store, .. } => store.render(out),
            Kept::Database(remote) => remote.render(out),
        }
    }

    /// Starts writing what the changes acknowledged later wait for: the
    /// event loops call it after each turn, so one journal write covers
    /// the turn. (A database worker answers as soon as its statement is
    /// done: nothing to start.)
    pub fn flush(&self) {
        match &self.kept {
            Kept::Memory { store, .. } => store.flush(),
            Kept::Database(_) => {}
        }
    }

    /// At shutdown: finishes the database's queued work (its answers
    /// included), or makes the journal durable (it matters with `--sync
    /// never`).
    pub fn shut_down(&self) {
        match &self.kept {
            Kept::Memory { store, .. } => {
                if let Err(e) = store.sync() {
                    log::error!(target: "plantstore", "final sync of the journal failed: {e}");
                }
            }
            Kept::Database(remote) => remote.shut_down(),
        }
    }
}

/// The outcome of a change the memory store has applied: ready when it
/// is durable now, else pending until the committer thread has written
/// (and synced) its journal record.
fn later(store: &Store, applied: Result<Durable, Refusal>) -> Outcome<()> {
    match applied {
        Err(e) => Outcome::Ready(Err(e.into())),
        Ok(Durable::Now) => Outcome::Ready(Ok(())),
        Ok(durable) => {
            let committer = store.committer();
            Outcome::Pending(Pending::new(move |reply| committer.answer(durable, reply)))
        }
    }
}
