//! What only the PostgreSQL store has (the `postgres` feature).

mod batches;
mod cluster;
mod feed;
mod frozen;
mod logs;
mod serving;
mod start;
mod tls;
