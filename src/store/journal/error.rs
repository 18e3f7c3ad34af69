//! Why a journal cannot be opened, in words that name the file.

use std::io;
use std::path::PathBuf;

use super::HEADER;

/// Why a journal cannot be opened.
#[derive(Debug)]
pub enum OpenError {
    /// Another process holds the file's lock.
    Locked(PathBuf),
    /// The path names something other than a regular file.
    NotAFile {
        /// The path as given.
        path: PathBuf,
        /// Where its links lead, if it is one.
        real: Option<PathBuf>,
        /// What it is instead ("a FIFO", "a directory", ...).
        kind: &'static str,
    },
    /// The file does not start with the journal magic.
    NotAJournal(PathBuf),
    /// The header fails its check, so no record can be checked.
    DamagedHeader(PathBuf),
    /// A damaged record with valid records after it.
    Damaged {
        /// The file.
        path: PathBuf,
        /// 1-based number of the damaged record.
        record: u64,
        /// Byte offset where it starts.
        offset: u64,
    },
    /// Reading, truncating or creating the file failed.
    Io(PathBuf, io::Error),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Locked(path) => write!(
                f,
                "{} is locked by another process (is another plantstore using it?)",
                path.display()
            ),
            OpenError::NotAFile { path, real, kind } => {
                write!(f, "{}", path.display())?;
                if let Some(real) = real {
                    write!(f, " leads to {}, which", real.display())?;
                }
                write!(f, " is {kind}, not a regular file; the journal must be one")
            }
            OpenError::NotAJournal(path) => {
                write!(f, "{} is not a plantstore journal", path.display())
            }
            OpenError::DamagedHeader(path) => write!(
                f,
                "{}: the journal's header (its first {HEADER} bytes) is damaged, so none of \
                 its records can be checked; refusing to start (the file is unchanged)",
                path.display()
            ),
            OpenError::Damaged {
                path,
                record,
                offset,
            } => write!(
                f,
                "{}: record {record} at byte offset {offset} is damaged and valid records \
                 follow it; refusing to start rather than drop them (the file is unchanged; \
                 `truncate -s {offset}` keeps only the records before it)",
                path.display()
            ),
            OpenError::Io(path, e) => write!(f, "{}: {e}", path.display()),
        }
    }
}

impl std::error::Error for OpenError {}
