//! What only the PostgreSQL store has (the `postgres` feature).

mod batches;
mod cluster;
mod frozen;
mod serving;
mod start;
mod tls;
