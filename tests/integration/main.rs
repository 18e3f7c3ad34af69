//! Integration tests: real HTTP against a real server on 127.0.0.1:0, in
//! one test binary, grouped like the code.
//!
//! - `http/`: the engine (persistence, pipelining, chunking, deadlines,
//!   hostile clients, limits);
//! - `api/`: the Plant Store API on each store (resource, validation, auth,
//!   CORS, export, metrics, the page, webhooks);
//! - `storage/`: the memory store's bounds, the `--data` journal (restarts,
//!   failures, its file seen from outside, crashes) and `--seed`;
//! - `database/`: what only the PostgreSQL store has (the `postgres`
//!   feature; they need `PLANTSTORE_TEST_DATABASE`, see
//!   `scripts/with-postgres.sh`);
//! - `process/`: the built binary (flags, environment, logs, signals,
//!   reload, the start-up line);
//! - `support/`: the in-process `TestServer`, a raw TCP client that can
//!   send anything, the binary and database fixtures. A test written as
//!   `fn name(kind: Kind)` runs on each store (`on_each_store!`).

mod support;

mod api;
#[cfg(feature = "postgres")]
mod database;
mod http;
mod process;
mod storage;
