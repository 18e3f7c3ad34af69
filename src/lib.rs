//! plantstore: a tiny, fast HTTP server for the Plant Store API.
//!
//! The layers, each importing only those below it (ARCHITECTURE.md's
//! table says exactly which may import which, and
//! `scripts/check/check-layers.sh` holds the code to it):
//!
//! - leaves, importing nothing of the crate: [`model`] (the model and its
//!   validation, and the words every store speaks: refusals, a page,
//!   capacity, durability), [`metrics`] (the Prometheus writer,
//!   histograms), [`os`], `lock` (the poisoned-lock policy), `percent`
//!   (percent-escapes), [`logging`], `reach` (the host's addresses),
//!   `assets` (the served files, packed), [`outbound`] (the one outbound
//!   HTTP/1.1 client, its TLS the caller's);
//! - [`transport`] (the TLS seam: the certificate served, a connection's
//!   TLS state, the webhook client's; stand-ins that cannot be made in a
//!   build without the `tls` feature), [`certs`] (where the certificate
//!   served comes from: files, the local CA, ACME), [`dbconfig`] (the
//!   `--database` URL checked, the `postgres` feature), [`store`] (memory
//!   shards and the `--data` journal), [`webhook`] (the sender), [`http`]
//!   (the engine, which knows nothing of plants), [`seed`] (the `--seed`
//!   reader), [`changes`] (the change feed), [`database`] (PostgreSQL,
//!   the `postgres` feature);
//! - [`plants`]: the one door to the plants, the only module that knows
//!   which store is in use;
//! - [`api`]: the Plant Store API as the engine's handler;
//! - [`config`] (flags to a checked `Config`), [`instance`] (start, run,
//!   reload, stop) and [`signals`], which `main.rs` drives.

// Denied, not forbidden: audited calls allow it locally, in
// `store/journal/file.rs` (`statvfs`, which std lacks, and `statx` asking
// for less than std does), in `signals.rs` (blocking signals and taking
// them with `sigwait`) and in `os/cpus.rs` (the affinity mask, which std
// reads only inside its far larger `available_parallelism`).
#![deny(unsafe_code)]

pub mod api;
mod assets;
pub mod certs;
pub mod changes;
pub mod config;
#[cfg(feature = "postgres")]
pub mod database;
pub mod dbconfig;
pub mod http;
pub mod instance;
mod lock;
pub mod logging;
pub mod metrics;
pub mod model;
pub mod os;
pub mod outbound;
mod percent;
pub mod plants;
mod reach;
pub mod seed;
pub mod signals;
pub mod store;
pub mod transport;
pub mod webhook;

pub use instance::{Instance, Reloader, StartError, WEBHOOK_GRACE, serve, start};
