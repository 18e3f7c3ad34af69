//! Integration tests: real HTTP against a real server on 127.0.0.1:0.
//!
//! `support` has the in-process `TestServer` and a raw TCP client that can
//! send anything; `binary` drives the built `plantstore` executable,
//! `crash` kills it mid-write to check what the journal keeps, and
//! `journal` writes journal files as an outsider would.

mod auth;
mod binary;
mod cors;
mod crash;
mod durability;
mod engine;
mod events;
mod hostile;
mod journal;
mod journal_file;
mod limits;
mod memory;
mod numbers;
mod plants;
mod resource;
mod support;
mod ui;
mod webhook;
