//! plantstore: a tiny, fast HTTP server for the Plant Store API.
//!
//! The layers, each importing only those below it (ARCHITECTURE.md has
//! the map and a request's path; `scripts/check-layers.sh` checks it):
//!
//! - leaves: [`model`] (the model and its validation, and the words every
//!   store speaks: refusals, a page, capacity, durability), [`metrics`]
//!   (the Prometheus writer, histograms), [`os`], `lock` (the
//!   poisoned-lock policy), `percent` (percent-escapes), [`logging`];
//! - [`dbconfig`] (the `--database` URL checked, the `postgres` feature);
//! - [`store`] (memory shards and the `--data` journal), [`database`]
//!   (PostgreSQL, the `postgres` feature), [`seed`] (the `--seed` reader),
//!   [`webhook`] (the sender), and [`http`], the engine, which knows
//!   nothing of plants;
//! - [`plants`]: the one door to the plants, the only module that knows
//!   which store is in use;
//! - [`api`]: the Plant Store API as the engine's handler;
//! - [`config`] (flags to a checked `Config`) and [`instance`] (start,
//!   run, reload, stop), which `main.rs` drives.

// Denied, not forbidden: audited calls allow it locally, in
// `store/journal/file.rs` (`statvfs`, which std lacks, and `statx` asking
// for less than std does) and in `signals.rs` (blocking signals and taking
// them with `sigwait`).
#![deny(unsafe_code)]

pub mod api;
pub mod changes;
pub mod config;
#[cfg(feature = "postgres")]
pub mod database;
#[cfg(feature = "postgres")]
pub mod dbconfig;
pub mod http;
pub mod instance;
mod lock;
pub mod logging;
pub mod metrics;
pub mod model;
pub mod os;
mod percent;
pub mod plants;
mod reach;
pub mod seed;
pub mod signals;
pub mod store;
#[cfg(feature = "tls")]
pub mod tls;
pub mod webhook;

pub use instance::{Instance, Reloader, StartError, WEBHOOK_GRACE, serve, start};
