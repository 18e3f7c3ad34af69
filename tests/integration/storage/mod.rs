//! The memory store's bounds, the `--data` journal and `--seed`.

mod backup;
mod crash;
mod durability;
mod journal;
mod journal_file;
mod memory;
mod seed;

/// The journal's format written and read again from its documentation,
/// sharing no code with the server's: the file the unit tests and the fuzz
/// target include too.
#[path = "../../shared/journal_oracle.rs"]
mod oracle;
