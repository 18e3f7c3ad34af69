//! The memory store's bounds, the `--data` journal and `--seed`.

mod backup;
mod crash;
mod durability;
pub mod journal;
mod journal_file;
mod memory;
mod seed;
