//! The journal's tests through the store: its file format as an outsider
//! writes it (`format.rs`, against the shared oracle), its durability
//! (`durability.rs`: recovery, damage, failures, group commit,
//! compaction, the lock) and the versions it keeps (`versions.rs`). Helpers they share with the store's other tests
//! are in `store/test_support.rs`.

mod ahead;
mod durability;
mod format;
mod versions;

/// The journal's format written and read again from its documentation,
/// sharing no code with the server's: the file the integration tests and
/// the fuzz target include too.
#[path = "../../../../tests/shared/journal_oracle.rs"]
mod oracle;
