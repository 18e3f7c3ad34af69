//! The door's side of the PostgreSQL store: each read as a job for a pool
//! worker, each change queued for the next batch (group commit), the
//! answer a pending [`Outcome`], and the export as a keyset cursor read a
//! piece at a time.
//!
//! What only this store needs to say is said here: a change not applied
//! becomes `Exists` or `NotFound`, a database error is logged and becomes
//! `Unavailable`, and the change hook follows the database's change log
//! (see [`Announcer`]), which a change feed may also read back on a
//! worker ([`Log`]).

use std::sync::{Arc, Mutex, OnceLock};

use log::warn;

use super::outcome::{Outcome, Pending};
use super::{Piece, Wake};
use crate::database::{self, Connection, DbError, InGeneration, JobSender};
use crate::lock::lock;
use crate::model::{Budget, Edit, NotDone, Page, Query, Refusal, Unavailable};
use crate::model::{ChangeHook, ChangeLog, Plant, PlantChange, Reply};

/// The database store as the door sees it.
pub(super) struct Remote {
    pub(super) pool: database::Pool,
    pub(super) announcer: Arc<Announcer>,
    /// The tickets' key as read when the store opened.
    pub(super) key: [u8; database::KEY_BYTES],
}

/// Reports the changes every instance commits, read from the database's
/// change log by a follower (`database::follow`) once the hook is set,
/// numbered cluster-wide in commit order. The follower lives as long as
/// this does.
pub(super) struct Announcer {
    config: crate::dbconfig::DatabaseConfig,
    /// The log's epoch and last number when the store opened.
    pub(super) start: (u64, u64),
    hooked: OnceLock<()>,
}

impl Announcer {
    pub(super) fn new(config: crate::dbconfig::DatabaseConfig, start: (u64, u64)) -> Announcer {
        Announcer {
            config,
            start,
            hooked: OnceLock::new(),
        }
    }

    pub(super) fn set(self: &Arc<Self>, hook: ChangeHook) -> bool {
        if self.hooked.set(()).is_err() {
            return false;
        }
        let follower = database::follow(
            self.config.clone(),
            self.start.1,
            hook,
            Arc::downgrade(self),
        );
        if let Err(e) = follower {
            warn!("database: no change feed follower ({e}): the change feed stays silent");
        }
        true
    }
}

/// The database's change log, read on a pool worker (as any request's
/// statements are: queued, bounded in time, answered once), for a change
/// feed asked to resume from outside what it holds.
pub(super) struct Log(pub(super) JobSender);

impl ChangeLog for Log {
    fn read(&self, after: u64, upto: u64, bytes: usize, reply: Box<dyn Reply<Vec<PlantChange>>>) {
        let read = move |c: &mut Connection| c.changes_back(after, upto, bytes);
        self.0
            .submit(read, move |read| reply.answer(logged(read, "read")));
    }

    fn last(&self, reply: Box<dyn Reply<u64>>) {
        self.0.submit(Connection::log_last, move |last| {
            reply.answer(logged(last, "ask"))
        });
    }
}

/// What a worker made of the change log, its failure logged.
fn logged<T>(
    made: Result<Result<T, DbError>, database::JobFailure>,
    did: &str,
) -> Result<T, NotDone> {
    match made {
        Ok(Ok(made)) => Ok(made),
        Ok(Err(e)) => {
            warn!("database: cannot {did} the change log for the change feed: {e}");
            Err(Unavailable::Down.into())
        }
        // Busy, down or stopping: said already where it happens, and a
        // line for each stream that resumes meanwhile would flood the log.
        Err(why) => {
            log::debug!("database: cannot {did} the change log for the change feed: {why:?}");
            Err(Unavailable::from(why).into())
        }
    }
}

impl From<database::JobFailure> for Unavailable {
    fn from(why: database::JobFailure) -> Unavailable {
        match why {
            database::JobFailure::Down(_) | database::JobFailure::Failed(_) => Unavailable::Down,
            database::JobFailure::Busy | database::JobFailure::Expired => Unavailable::Busy,
            database::JobFailure::Stopping => Unavailable::Stopping,
        }
    }
}

/// What a client is told of a reset that did not finish within
/// `database::RESET_FOR`.
const OUT_OF_TIME: &str = "the reset did not finish in time (another write held the plants, \
     or the seed is too large to write within 6 s); nothing changed";

/// A failed statement: logged here (the client is told only that the
/// database is unavailable).
fn failed(e: DbError) -> NotDone {
    warn!("database: {e}");
    NotDone::Unavailable(Unavailable::Down)
}

impl Remote {
    /// Runs `work` on a worker; its answer (or why it did not run) is the
    /// outcome.
    fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, NotDone> + Send + 'static,
    ) -> Outcome<T> {
        let queue = self.pool.queue();
        Outcome::Pending(Pending::new(move |reply| {
            queue.submit(work, move |made| {
                reply.answer(made.unwrap_or_else(|why| Err(Unavailable::from(why).into())))
            });
        }))
    }

    /// Queues `edit` for the next batch; not applied is `unapplied`.
    fn change(&self, id: i64, edit: Edit, unapplied: Refusal) -> Outcome<()> {
        let queue = self.pool.queue();
        Outcome::Pending(Pending::new(move |reply| {
            let answer = move |applied: Result<bool, database::JobFailure>| {
                reply.answer(match applied {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(unapplied.into()),
                    Err(why) => Err(Unavailable::from(why).into()),
                })
            };
            queue.change(id, edit, Box::new(answer));
        }))
    }

    pub(super) fn create(&self, id: i64, plant: Plant) -> Outcome<()> {
        self.change(id, Edit::Create(plant), Refusal::Exists(id))
    }

    pub(super) fn get(&self, id: i64) -> Outcome<Option<Plant>> {
        self.run(move |c| c.get(id).map_err(failed))
    }

    pub(super) fn replace(&self, id: i64, plant: Plant) -> Outcome<()> {
        self.change(id, Edit::Replace(plant), Refusal::NotFound(id))
    }

    pub(super) fn delete(&self, id: i64) -> Outcome<()> {
        self.change(id, Edit::Delete, Refusal::NotFound(id))
    }

    pub(super) fn page(&self, query: Query, budget: Budget) -> Outcome<Page> {
        self.run(move |c| c.query(&query, budget).map_err(failed))
    }

    /// Replaces every plant by `plants` in one transaction (see
    /// `database::reset`): the answer is how many plants it left, once
    /// committed; nothing is changed when it is not done.
    pub fn reset(&self, plants: Arc<[(i64, Plant)]>) -> Outcome<usize> {
        self.run(move |c| match c.reset(&plants) {
            Ok(done) => Ok(done.plants),
            Err(database::ResetFailed::Db(e)) => Err(failed(e)),
            Err(database::ResetFailed::OutOfTime(e)) => {
                warn!("database: a reset did not finish in time, nothing changed: {e}");
                Err(NotDone::Unavailable(Unavailable::Reset(OUT_OF_TIME)))
            }
        })
    }

    /// The tickets' key every instance shares; `fresh` stored if none is.
    pub(super) fn ticket_key(
        &self,
        fresh: [u8; database::KEY_BYTES],
    ) -> Outcome<[u8; database::KEY_BYTES]> {
        self.run(move |c| database::ticket_key(c.client(), &fresh).map_err(failed))
    }

    /// A cursor over every plant, or why there cannot be one now.
    pub(super) fn export(&self, wake: Option<Wake>) -> Result<Cursor, NotDone> {
        self.pool
            .check()
            .map_err(|why| NotDone::Unavailable(why.into()))?;
        let wake = wake.ok_or(NotDone::Unavailable(Unavailable::Busy))?;
        Ok(Cursor {
            queue: self.pool.queue(),
            wake,
            after: None,
            piece: Arc::new(Mutex::new(None)),
            asked: false,
            generation: None,
        })
    }
}

/// A piece read for the export (in the generation of its first piece,
/// or the plants were reset since), or why it could not be.
type Read = Result<InGeneration<Vec<(i64, Plant)>>, database::JobFailure>;

/// `GET /export` from the database: a keyset cursor. Each piece is one
/// statement, `id > last ORDER BY id LIMIT PIECE_PLANTS`, run on any
/// worker, asked for as the previous piece goes out; until it arrives the
/// export is `Pending`, and the worker's `wake` says when to ask again. So
/// a slow reader holds no connection and no transaction, and the export
/// keeps the promises of a listing page over its whole length: ids
/// ascending, none twice, every plant that exists from start to end. A
/// reset (`POST /plants/reset`, on any instance) while it is read ends it
/// unfinished: each piece is checked against the count of resets when the
/// first was read (`Connection::in_generation`), so an export never holds
/// plants from before a reset and after it.
pub(super) struct Cursor {
    queue: JobSender,
    wake: Wake,
    /// The last id handed out.
    after: Option<i64>,
    /// Where a worker leaves the next piece.
    piece: Arc<Mutex<Option<Read>>>,
    /// Whether a piece is being read.
    asked: bool,
    /// The count of resets when the first piece was read.
    generation: Option<u64>,
}

impl Cursor {
    /// Has a worker read the piece after `after`, then wake the reader.
    fn ask(&mut self) {
        self.asked = true;
        let (after, piece, wake) = (self.after, Arc::clone(&self.piece), Arc::clone(&self.wake));
        let generation = self.generation;
        let read = move |c: &mut Connection| {
            c.in_generation(generation, |c| c.page(after, super::PIECE_PLANTS, None))
        };
        let answer = move |read: Result<Result<_, _>, database::JobFailure>| {
            let read = read.and_then(|plants| plants.map_err(database::JobFailure::from));
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
            Some(Ok(InGeneration::Reset(_))) => {
                warn!(
                    target: "plantstore",
                    "an export was cut short: the plants were reset while it was read"
                );
                Piece::Failed
            }
            Some(Ok(InGeneration::Read(plants, generation))) => {
                self.generation = Some(generation);
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
