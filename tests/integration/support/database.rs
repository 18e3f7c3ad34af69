//! Which store a test runs on (`Kind`, `on_each_store!`) and, with the
//! `postgres` feature, a fresh database of its own in the cluster that
//! `PLANTSTORE_TEST_DATABASE` names, shared with other tests in turns.
//! Databases are made and dropped through `PLANTSTORE_TEST_DATABASE_ADMIN`
//! when it is set: straight to the cluster when the tests' own connections
//! go through a pooler (scripts/with-postgres.sh with `PGBOUNCER`), which
//! holds server connections that DROP DATABASE would wait on.

#[cfg(feature = "postgres")]
use std::sync::atomic::{AtomicUsize, Ordering};

use plantstore::config::Config;

/// Which store a test runs on. A test written once runs on each (see
/// `on_each_store!`); the PostgreSQL runs need `PLANTSTORE_TEST_DATABASE`
/// (`scripts/with-postgres.sh` sets it) and fail without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Memory,
    #[cfg(feature = "postgres")]
    Postgres,
}

/// Generates, for each named test `fn name(kind: Kind)`, a `#[test]` per
/// store: `memory::name` and, with the `postgres` feature,
/// `postgres::name`.
#[macro_export]
macro_rules! on_each_store {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(#[test]
            fn $name() {
                super::$name($crate::support::Kind::Memory)
            })*
        }
        #[cfg(feature = "postgres")]
        mod postgres {
            $(#[test]
            fn $name() {
                super::$name($crate::support::Kind::Postgres)
            })*
        }
    };
}

/// A database of its own for one test, made in the cluster that
/// `PLANTSTORE_TEST_DATABASE` names and dropped with it.
#[cfg(feature = "postgres")]
pub struct FreshDatabase {
    /// Its URL.
    pub url: String,
    name: String,
    admin: String,
    /// Its share of the cluster (see `Turn`); `None` for the test that
    /// holds the cluster alone.
    _turn: Option<Turn>,
}

/// Tests share the one cluster, except the one that stops it: each
/// database holds a shared turn while it exists, and that test takes the
/// cluster alone ([`Turn::alone`]), waiting until no other test has a
/// database and keeping new ones waiting until it is done.
#[cfg(feature = "postgres")]
pub struct Turn {
    alone: bool,
}

#[cfg(feature = "postgres")]
static TURNS: std::sync::Mutex<(usize, bool)> = std::sync::Mutex::new((0, false));
#[cfg(feature = "postgres")]
static TURN_FREED: std::sync::Condvar = std::sync::Condvar::new();

#[cfg(feature = "postgres")]
impl Turn {
    fn shared() -> Turn {
        let mut turns = TURNS.lock().unwrap_or_else(|p| p.into_inner());
        while turns.1 {
            turns = TURN_FREED.wait(turns).unwrap_or_else(|p| p.into_inner());
        }
        turns.0 += 1;
        Turn { alone: false }
    }

    /// The cluster for this test alone, until the turn is dropped.
    pub fn alone() -> Turn {
        let mut turns = TURNS.lock().unwrap_or_else(|p| p.into_inner());
        while turns.1 || turns.0 > 0 {
            turns = TURN_FREED.wait(turns).unwrap_or_else(|p| p.into_inner());
        }
        turns.1 = true;
        Turn { alone: true }
    }
}

#[cfg(feature = "postgres")]
impl Drop for Turn {
    fn drop(&mut self) {
        let mut turns = TURNS.lock().unwrap_or_else(|p| p.into_inner());
        if self.alone {
            turns.1 = false;
        } else {
            turns.0 -= 1;
        }
        TURN_FREED.notify_all();
    }
}

#[cfg(feature = "postgres")]
impl FreshDatabase {
    /// A database, sharing the cluster with other tests.
    pub fn new() -> FreshDatabase {
        FreshDatabase::make(Some(Turn::shared()))
    }

    /// A database for the test that holds `Turn::alone`.
    pub fn within(_alone: &Turn) -> FreshDatabase {
        FreshDatabase::make(None)
    }

    fn make(turn: Option<Turn>) -> FreshDatabase {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let url = std::env::var("PLANTSTORE_TEST_DATABASE").expect(
            "PLANTSTORE_TEST_DATABASE is not set: run the tests of the postgres feature \
             through scripts/with-postgres.sh",
        );
        let admin = std::env::var("PLANTSTORE_TEST_DATABASE_ADMIN").unwrap_or_else(|_| url.clone());
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("plantstore_test_{}_{n}", std::process::id());
        let mut client = postgres::Client::connect(&admin, postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot reach PLANTSTORE_TEST_DATABASE: {e}"));
        // One statement each: neither may run in a transaction block.
        for statement in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            client
                .batch_execute(&statement)
                .expect("a test database is created");
        }
        let (base, _) = url.rsplit_once('/').expect("a URL with /dbname");
        FreshDatabase {
            url: format!("{base}/{name}"),
            name,
            admin,
            _turn: turn,
        }
    }

    /// A client of this database, to look at it or change it from outside.
    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("the test database answers")
    }

    /// Its name in the cluster.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A client of the cluster's own database, straight to the cluster
    /// (`PLANTSTORE_TEST_DATABASE_ADMIN`, else `PLANTSTORE_TEST_DATABASE`),
    /// to do to this one what cannot be done from inside it (refuse it
    /// connections, end its sessions).
    pub fn admin(&self) -> postgres::Client {
        postgres::Client::connect(&self.admin, postgres::NoTls).expect("the cluster answers")
    }

    /// `config` set to use this database, with the tests' pool.
    pub fn config(&self, config: Config) -> Config {
        let parsed = plantstore::dbconfig::DatabaseConfig::parse(&self.url, TEST_POOL)
            .expect("the test URL parses");
        Config {
            database: Some(parsed),
            ..config
        }
    }
}

#[cfg(feature = "postgres")]
impl Drop for FreshDatabase {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = client.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// Workers per test server on PostgreSQL: tests run side by side on one
/// cluster.
#[cfg(feature = "postgres")]
pub const TEST_POOL: usize = 4;

/// `config` set to use `kind`'s store; for PostgreSQL, with the fresh
/// database to keep while it is used.
pub fn config_on(kind: Kind, config: Config) -> (Config, Option<Keep>) {
    match kind {
        Kind::Memory => (config, None),
        #[cfg(feature = "postgres")]
        Kind::Postgres => {
            let database = FreshDatabase::new();
            let config = database.config(config);
            (config, Some(Keep(std::sync::Arc::new(database))))
        }
    }
}

/// What a test server on a store must keep (its database), dropped after
/// the server stops.
#[derive(Clone)]
pub struct Keep(
    #[cfg(feature = "postgres")] pub std::sync::Arc<FreshDatabase>,
    #[cfg(not(feature = "postgres"))] (),
);

/// The flags that start the binary on `kind`'s store, and what to keep
/// while it runs.
pub fn store_args(kind: Kind) -> (Vec<String>, Option<Keep>) {
    match kind {
        Kind::Memory => (Vec::new(), None),
        #[cfg(feature = "postgres")]
        Kind::Postgres => {
            let database = FreshDatabase::new();
            let args = vec![
                "--database".to_string(),
                database.url.clone(),
                "--database-pool".to_string(),
                TEST_POOL.to_string(),
            ];
            (args, Some(Keep(std::sync::Arc::new(database))))
        }
    }
}
