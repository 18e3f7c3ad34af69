//! The door's `postgres` seam: the PostgreSQL store as the door holds it
//! ([`Remote`], and its export's [`Cursor`]), opened from `--database`'s
//! settings. With the feature they are `database.rs`'s, and what the door
//! asks of them besides its operations is answered here; without it they
//! are enums with no variant, so `Kept::Database` cannot be made and every
//! arm that holds one is compiled away (the plain build does not grow),
//! and the rest of the door reads the same in every build.

#[cfg(feature = "postgres")]
pub(super) use super::database::{Cursor, Remote};
#[cfg(not(feature = "postgres"))]
pub(super) use plain::{Cursor, Remote};

#[cfg(feature = "postgres")]
mod real {
    use std::fmt;
    use std::sync::Arc;

    use log::warn;

    use super::super::database::{Announcer, Log, Remote};
    use super::super::{Setup, SetupError, key, seed};
    use crate::dbconfig::{CONNECT_TIMEOUT, DatabaseConfig};
    use crate::metrics::Exposition;
    use crate::model::{ChangeHook, ChangeLog};

    impl Remote {
        /// Connects, creates or checks the schema, loads the seed into an
        /// empty table, and starts the pool (waiting briefly for its
        /// first connection, so the first requests find one).
        pub(in super::super) fn open(
            setup: &Setup,
            config: &DatabaseConfig,
        ) -> Result<Remote, SetupError> {
            use crate::database::{self as db, Connect};
            let at = config.describe();
            let failed = |e: &dyn fmt::Display| SetupError::Database(format!("database {at}: {e}"));
            let mut client = config.connect_client().map_err(|e| failed(&e))?;
            let schema = db::ensure_schema(&mut client).map_err(|e| failed(&e))?;
            if let Some(why) = schema.search_scans {
                warn!(
                    target: "plantstore",
                    "database {at}: search scans: pg_trgm not available ({why}); \
                     a search (q=) reads every plant (see docs/postgres.md)"
                );
            }
            if let Some(path) = &setup.seed {
                seed::into_database(path, &mut client, setup.limits).map_err(SetupError::Seed)?;
            }
            let start = db::feed_start(&mut client).map_err(|e| failed(&e))?;
            let fresh = key::fresh().map_err(|e| failed(&e))?;
            let key = db::ticket_key(&mut client, &fresh).map_err(|e| failed(&e))?;
            drop(client);
            let pool = db::Pool::start(config.clone()).map_err(|e| failed(&e))?;
            if !pool.wait_up(CONNECT_TIMEOUT) {
                warn!(target: "plantstore", "database {at}: no pool connection yet; answering 503 until one is up");
            }
            let announcer = Arc::new(Announcer::new(config.clone(), start));
            Ok(Remote {
                pool,
                announcer,
                key,
            })
        }

        /// Where the plants are, for the start-up line.
        pub(in super::super) fn describe(&self) -> String {
            format!("database {}", self.pool.describe())
        }

        /// The change log's epoch and its last number when the store
        /// opened.
        pub(in super::super) fn changes_start(&self) -> (Option<u64>, u64) {
            let (epoch, last) = self.announcer.start;
            (Some(epoch), last)
        }

        /// The change log every instance shares, read on a worker.
        pub(in super::super) fn change_log(&self) -> Option<Arc<dyn ChangeLog>> {
            Some(Arc::new(Log(self.pool.queue())))
        }

        /// Follows the change log into `hook`; `false` if one is set.
        pub(in super::super) fn set_change_hook(&self, hook: ChangeHook) -> bool {
            self.announcer.set(hook)
        }

        /// Why the database cannot be reached, if it cannot.
        pub(in super::super) fn failure(&self) -> Option<Arc<str>> {
            self.pool
                .failure()
                .map(|why| format!("database unreachable: {why}").into())
        }

        /// The pool's lines of `/metrics`.
        pub(in super::super) fn render(&self, out: &mut Exposition) {
            self.pool.render(out)
        }

        /// Finishes the queued work, its answers included.
        pub(in super::super) fn shut_down(&self) {
            self.pool.shut_down()
        }

        /// The tickets' key as read when the store opened.
        pub(in super::super) fn key(&self) -> key::TicketKey {
            self.key
        }
    }
}

#[cfg(not(feature = "postgres"))]
mod plain {
    use std::sync::Arc;

    use super::super::outcome::Outcome;
    use super::super::{Piece, Setup, SetupError, Wake, key::TicketKey};
    use crate::dbconfig::DatabaseConfig;
    use crate::metrics::Exposition;
    use crate::model::{Budget, ChangeHook, ChangeLog, NotDone, Page, Plant, Query};

    /// The PostgreSQL store: never, in this build.
    pub(crate) enum Remote {}

    impl Remote {
        pub(in super::super) fn open(
            _: &Setup,
            config: &DatabaseConfig,
        ) -> Result<Remote, SetupError> {
            match *config {}
        }

        pub(in super::super) fn create(&self, _: i64, _: Plant) -> Outcome<()> {
            match *self {}
        }

        pub(in super::super) fn get(&self, _: i64) -> Outcome<Option<Plant>> {
            match *self {}
        }

        pub(in super::super) fn replace(&self, _: i64, _: Plant) -> Outcome<()> {
            match *self {}
        }

        pub(in super::super) fn delete(&self, _: i64) -> Outcome<()> {
            match *self {}
        }

        pub(in super::super) fn page(&self, _: Query, _: Budget) -> Outcome<Page> {
            match *self {}
        }

        pub(in super::super) fn reset(&self, _: Arc<[(i64, Plant)]>) -> Outcome<usize> {
            match *self {}
        }

        pub(in super::super) fn ticket_key(&self, _: TicketKey) -> Outcome<TicketKey> {
            match *self {}
        }

        pub(in super::super) fn export(&self, _: Option<Wake>) -> Result<Cursor, NotDone> {
            match *self {}
        }

        pub(in super::super) fn describe(&self) -> String {
            match *self {}
        }

        pub(in super::super) fn changes_start(&self) -> (Option<u64>, u64) {
            match *self {}
        }

        pub(in super::super) fn change_log(&self) -> Option<Arc<dyn ChangeLog>> {
            match *self {}
        }

        pub(in super::super) fn set_change_hook(&self, _: ChangeHook) -> bool {
            match *self {}
        }

        pub(in super::super) fn failure(&self) -> Option<Arc<str>> {
            match *self {}
        }

        pub(in super::super) fn render(&self, _: &mut Exposition) {
            match *self {}
        }

        pub(in super::super) fn shut_down(&self) {
            match *self {}
        }

        pub(in super::super) fn key(&self) -> TicketKey {
            match *self {}
        }
    }

    /// An export from the PostgreSQL store: never, in this build.
    pub(crate) enum Cursor {}

    impl Cursor {
        pub(in super::super) fn next(&mut self) -> Piece {
            match *self {}
        }
    }
}
