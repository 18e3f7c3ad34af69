//! What the integration tests share, one file a job: the in-process
//! `TestServer` and its configuration (`server.rs`); a raw HTTP/1.1 client
//! that can send malformed bytes and read pipelined replies (`client.rs`);
//! which store a test runs on and a fresh PostgreSQL database
//! (`database.rs`); fresh files and directories (`files`, the helper the
//! unit tests share). Everything is re-exported here, so a test imports
//! `crate::support::{...}` whichever file holds it.

#![allow(dead_code)]

mod client;
mod database;
/// The temporary-file helper the unit tests include too.
#[path = "../../shared/temp.rs"]
mod files;
mod server;

pub use client::*;
pub use database::*;
pub use files::{TempDir, TempFile};
pub use server::*;

use std::thread;
use std::time::{Duration, Instant};

pub const TOKEN: &str = "test-token";

/// How long a test waits for something the code does in the background
/// (a log line, a closed connection, a counter): milliseconds on an idle
/// machine, so the bound only says when to give up, generous enough for a
/// loaded one. How fast things happen is measured by bench/run.sh.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Polls `done` every 10 ms until it holds or `PATIENCE` has passed;
/// whether it held. Used in place of a fixed sleep wherever a test waits
/// for something to happen: `assert!(eventually(|| ...), "what did not")`.
pub fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

pub const AUTH: (&str, &str) = ("Authorization", "Bearer test-token");
pub const JSON: (&str, &str) = ("Content-Type", "application/json");
