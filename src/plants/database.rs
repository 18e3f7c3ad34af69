//! The door's side of the PostgreSQL store: each read as a job for a pool
//! worker, each change queued for the next batch (group commit), the
//! answer a pending [`Outcome`], and the export as a keyset cursor read a
//! piece at a time.
//!
//! What only this store needs to say is said here: a change not applied
//! becomes `Exists` or `NotFound`, a database error is logged and becomes
//! `Unavailable`, and each change that committed is reported to the
//! change hook (see [`Announcer`]).

use std::sync::{Arc, Mutex, OnceLock};

use log::warn;

use super::outcome::{Outcome, Pending, Refused, Unavailable};
use super::{Piece, Wake};
use crate::database::{self, Change, Connection, DbError, JobSender};
use crate::lock::lock;
use crate::plant::{ChangeHook, ChangeKind, Plant, PlantChange};
use crate::store::{Page, StoreError};

/// The database store as the door sees it.
pub(super) struct Remote {
    pub(super) pool: database::Pool,
    pub(super) announcer: Arc<Announcer>,
}

/// Reports the changes this instance committed, numbered in the order
/// their commits returned. Two changes to one id from two workers commit
/// in the order the database's row lock gave them, which their returns
/// normally follow; changes other instances make are not seen here.
#[derive(Default)]
pub(super) struct Announcer {
    hook: OnceLock<ChangeHook>,
    last: Mutex<u64>,
}

impl Announcer {
    pub(super) fn set(&self, hook: ChangeHook) -> bool {
        self.hook.set(hook).is_ok()
    }

    /// Whether anyone listens (a change's plant is kept for it).
    fn listened(&self) -> bool {
        self.hook.get().is_some()
    }

    fn announce(&self, id: i64, kind: ChangeKind, plant: Option<Plant>) {
        if let Some(hook) = self.hook.get() {
            let mut last = lock(&self.last);
            *last += 1;
            let seq = *last;
            hook(&PlantChange {
                seq,
                id,
                kind,
                plant,
            });
        }
    }
}

impl From<database::Unavailable> for Unavailable {
    fn from(why: database::Unavailable) -> Unavailable {
        match why {
            database::Unavailable::Down(_) | database::Unavailable::Failed(_) => Unavailable::Down,
            database::Unavailable::Busy | database::Unavailable::Expired => Unavailable::Busy,
            database::Unavailable::Stopping => Unavailable::Stopping,
        }
    }
}

/// A failed statement: logged here (the client is told only that the
/// database is unavailable).
fn failed(e: DbError) -> Refused {
    warn!("database: {e}");
    Refused::Unavailable(Unavailable::Down)
}

impl Remote {
    /// Runs `work` on a worker; its answer (or why it did not run) is the
    /// outcome.
    fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, Refused> + Send + 'static,
    ) -> Outcome<T> {
        let queue = self.pool.queue();
        Outcome::Pending(Pending::new(move |reply| {
            queue.submit(work, move |made| {
                reply(made.unwrap_or_else(|why| Err(Unavailable::from(why).into())))
            });
        }))
    }

    /// Queues `change` for the next batch; not applied is `unapplied`.
    fn change(&self, id: i64, change: Change, unapplied: StoreError) -> Outcome<()> {
        let queue = self.pool.queue();
        let announcer = Arc::clone(&self.announcer);
        Outcome::Pending(Pending::new(move |reply| {
            let (kind, plant) = match &change {
                Change::Create(plant) => (ChangeKind::Created, Some(plant)),
                Change::Replace(plant) => (ChangeKind::Replaced, Some(plant)),
                Change::Delete => (ChangeKind::Deleted, None),
            };
            // Kept for the change hook, only where there is one.
            let plant = plant.filter(|_| announcer.listened()).cloned();
            let answer = move |applied: Result<bool, database::Unavailable>| {
                reply(match applied {
                    Ok(true) => {
                        announcer.announce(id, kind, plant);
                        Ok(())
                    }
                    Ok(false) => Err(unapplied.into()),
                    Err(why) => Err(Unavailable::from(why).into()),
                })
            };
            queue.change(id, change, Box::new(answer));
        }))
    }

    pub(super) fn create(&self, id: i64, plant: Plant) -> Outcome<()> {
        self.change(id, Change::Create(plant), StoreError::Exists(id))
    }

    pub(super) fn get(&self, id: i64) -> Outcome<Option<Plant>> {
        self.run(move |c| c.get(id).map_err(failed))
    }

    pub(super) fn replace(&self, id: i64, plant: Plant) -> Outcome<()> {
        self.change(id, Change::Replace(plant), StoreError::NotFound(id))
    }

    pub(super) fn delete(&self, id: i64) -> Outcome<()> {
        self.change(id, Change::Delete, StoreError::NotFound(id))
    }

    pub(super) fn page(
        &self,
        after: Option<i64>,
        limit: usize,
        tag: Option<String>,
    ) -> Outcome<Page> {
        self.run(move |c| {
            // One more than the page, to know whether more follow.
            let mut items = c
                .page(after, limit.saturating_add(1), tag.as_deref())
                .map_err(failed)?;
            let more = items.len() > limit;
            items.truncate(limit);
            Ok(Page { items, more })
        })
    }

    /// A cursor over every plant, or why there cannot be one now.
    pub(super) fn export(&self, wake: Option<Wake>) -> Result<Cursor, Refused> {
        self.pool
            .check()
            .map_err(|why| Refused::Unavailable(why.into()))?;
        let wake = wake.ok_or(Refused::Unavailable(Unavailable::Busy))?;
        Ok(Cursor {
            queue: self.pool.queue(),
            wake,
            after: None,
            piece: Arc::new(Mutex::new(None)),
            asked: false,
        })
    }
}

/// A piece read for the export, or why it could not be.
type Read = Result<Vec<(i64, Plant)>, database::Unavailable>;

/// `GET /export` from the database: a keyset cursor. Each piece is one
/// statement, `id > last ORDER BY id LIMIT PIECE_PLANTS`, run on any
/// worker, asked for as the previous piece goes out; until it arrives the
/// export is `Pending`, and the worker's `wake` says when to ask again. So
/// a slow reader holds no connection and no transaction, and the export
/// keeps the promises of a listing page over its whole length: ids
/// ascending, none twice, every plant that exists from start to end.
pub(super) struct Cursor {
    queue: JobSender,
    wake: Wake,
    /// The last id handed out.
    after: Option<i64>,
    /// Where a worker leaves the next piece.
    piece: Arc<Mutex<Option<Read>>>,
    /// Whether a piece is being read.
    asked: bool,
}

impl Cursor {
    /// Has a worker read the piece after `after`, then wake the reader.
    fn ask(&mut self) {
        self.asked = true;
        let (after, piece, wake) = (self.after, Arc::clone(&self.piece), Arc::clone(&self.wake));
        let read = move |c: &mut Connection| c.page(after, super::PIECE_PLANTS, None);
        let answer = move |read: Result<Result<_, _>, database::Unavailable>| {
            let read = read.and_then(|plants| plants.map_err(database::Unavailable::from));
            *lock(&piece) = Some(read);
            wake();
        };
        self.queue.submit(read, answer);
    }

    pub(super) fn next(&mut self) -> Piece {
        let ready = lock(&self.piece).take();
        match ready {
            None => {
                if !self.asked {
                    self.ask();
                }
                Piece::Pending
            }
            Some(Err(why)) => {
                warn!("export from the database cut short: {why:?}");
                Piece::Failed
            }
            Some(Ok(plants)) => {
                self.asked = false;
                let last = plants.len() < super::PIECE_PLANTS;
                self.after = plants.last().map(|(id, _)| *id).or(self.after);
                if !last {
                    // The next piece is read while this one goes out.
                    self.ask();
                }
                Piece::Plants { plants, last }
            }
        }
    }
}
