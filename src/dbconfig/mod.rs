//! The `postgres` seam: `--database URL` and `--database-pool N` checked
//! into a [`DatabaseConfig`] (`settings.rs`, with TLS as the URL asks for
//! it in `sslmode.rs`), and the bounds a connection is made with.
//!
//! A module of its own, below `config/`, the door and `database/`: the
//! flags are checked here when they are read, a bad URL or `sslrootcert`
//! being a flag error at start-up and at reload, and the database connects
//! with what they made, so neither `config/` nor the door imports the
//! database to say where it is. It knows nothing of pools, workers or SQL
//! (`database/` does).
//!
//! Every build has a [`DatabaseConfig`]: with the feature the real one,
//! without it an enum with no variant, so no `--database` can be chosen,
//! an `Option` of one is always `None`, and every branch that holds one is
//! known dead and compiled away. The door's own seam (`plants/remote.rs`)
//! does the same for the store; with this one, no file outside the two
//! (and `config/`'s flags) names the feature but the crate root, which
//! declares `database/`.

#[cfg(feature = "postgres")]
mod settings;
#[cfg(feature = "postgres")]
mod sslmode;

#[cfg(feature = "postgres")]
pub use settings::{CONNECT_TIMEOUT, DEFAULT_POOL, DatabaseConfig, STATEMENT_TIMEOUT, TCP_TIMEOUT};

/// `--database`'s settings: never, in this build.
#[cfg(not(feature = "postgres"))]
#[derive(Debug, Clone)]
pub enum DatabaseConfig {}
