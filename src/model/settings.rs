//! What the flags ask of a store: its [`Capacity`] (`--max-plants`,
//! `--max-data`) and, with `--data`, its [`Durability`] (the journal file,
//! `--sync`, `--compact-min`).
//!
//! Here, not in the store, because `config/` reads them from the flags,
//! the door (`crate::plants`) and the seed check use them, and the store
//! obeys them: a setting is said once, where all of them can import it.

use std::path::PathBuf;

/// What the store may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// Most plants (`--max-plants`).
    pub plants: usize,
    /// Most bytes of names and tags (`--max-data`).
    pub data: u64,
}

impl Capacity {
    /// At most `plants` plants, with no limit on their bytes.
    pub fn plants(plants: usize) -> Capacity {
        Capacity {
            plants,
            data: u64::MAX,
        }
    }
}

/// When a change counts as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// After `fdatasync`: survives a power cut.
    Always,
    /// After `write`: survives a crash of the process, not of the machine.
    Never,
}

/// Where and how the store keeps its journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durability {
    /// The journal file.
    pub path: PathBuf,
    /// When a change counts as written.
    pub sync: SyncMode,
    /// No compaction below this file size, in bytes.
    pub compact_min: u64,
}
