//! The HTTP engine, seen from a client.

mod engine;
mod events;
mod hostile;
mod limits;
