//! Integration tests: real HTTP against a real server on 127.0.0.1:0.
//!
//! `support` has the in-process `TestServer` and a raw TCP client that can
//! send anything; `binary` drives the built `plantstore` executable
//! (`flags`: where it takes its flags from),
//! `crash` kills it mid-write to check what the journal keeps,
//! `journal` writes journal files as an outsider would, and `seed` starts
//! it with `--seed` files. A test written as `fn name(kind: Kind)` runs on
//! each store (`on_each_store!`); `database`, `database_serving` and `database_frozen` have what
//! only the PostgreSQL store has.

mod auth;
mod binary;
#[cfg(feature = "postgres")]
mod cluster;
mod cors;
mod crash;
#[cfg(feature = "postgres")]
mod database;
#[cfg(feature = "postgres")]
mod database_frozen;
#[cfg(feature = "postgres")]
mod database_serving;
mod durability;
mod engine;
mod events;
mod export;
mod flags;
mod hostile;
mod journal;
mod journal_file;
mod limits;
mod logs;
mod memory;
mod metrics;
mod numbers;
mod plants;
mod reload;
mod resource;
mod seed;
mod startup;
mod support;
mod ui;
mod webhook;
