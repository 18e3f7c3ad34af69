//! Fresh files and directories in the temporary directory for tests,
//! removed when dropped: the one helper of the unit tests (included by
//! `src/os.rs` under `cfg(test)`, as `os::temp`) and of the integration
//! tests (included by `tests/integration/support/mod.rs`, as
//! `support::files`). A file of plain `std` code included with `#[path]`
//! builds in both without a crate of its own.
//!
//! Names hold the process id and a counter, so tests running side by side,
//! in one process or several, never share a path.

// Each includer uses a part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A path in the temporary directory that no other test uses.
pub fn temp_path(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("plantstore-test-{}-{n}-{name}", std::process::id()))
}

/// A fresh path in the temporary directory, nothing there yet; the file
/// (and a journal's leftover `.compact` beside it) is removed when
/// dropped.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new(name: &str) -> TempFile {
        let path = temp_path(name);
        let _ = std::fs::remove_file(&path);
        TempFile(path)
    }

    /// A fresh file holding `contents`.
    pub fn with(name: &str, contents: &[u8]) -> TempFile {
        let file = TempFile::new(name);
        std::fs::write(&file.0, contents).unwrap();
        file
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let mut compact = self.0.clone().into_os_string();
        compact.push(".compact");
        let _ = std::fs::remove_file(compact);
    }
}

/// A fresh directory in the temporary directory, removed with all it holds
/// (files, FIFOs, links, directories) when dropped. Its path is canonical:
/// links in the temporary directory's own path are resolved, so a path
/// the code under test resolves compares equal to one made here.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let path = temp_path(name);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(std::fs::canonicalize(path).unwrap())
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// A FIFO made in it, named `name`.
    pub fn fifo(&self, name: &str) -> PathBuf {
        let fifo = self.0.join(name);
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", fifo.display());
        fifo
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
