//! The HTTP engine, seen from a client.

pub mod date;
mod engine;
mod events;
mod hostile;
mod limits;
