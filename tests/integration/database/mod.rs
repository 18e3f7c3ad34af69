//! What only the PostgreSQL store has (the `postgres` feature).

mod batches;
mod cluster;
mod feed;
mod frozen;
mod listing;
mod logs;
mod numbering;
mod ordering;
mod orders;
mod reset;
mod serving;
mod start;
mod tickets;
mod tls;
