//! A directory the server keeps its own state in (`--tls-auto`'s CA and
//! certificate, `--acme-dir`'s account and certificate), opened one way
//! and written one way, for both: the keys in it are worth the same care.
//!
//! Opening makes the directory 0700 if missing and refuses a symbolic
//! link (it could lead the keys anywhere), what is not a directory, and a
//! directory this process cannot write (found at start, not at the first
//! renewal). A file is replaced whole: written under its name with `.tmp`
//! appended (each file its own, so two writes never share one), synced,
//! renamed over the old, and the directory synced, so that a crash leaves
//! the old file or the new one, never half of one, and the rename itself
//! survives a power cut.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// Checks `dir` as a state directory: made (0700) if missing; refused,
/// with why (without the path), if it is a symbolic link, not a
/// directory, or cannot be written.
pub fn open(dir: &Path) -> Result<(), String> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(
                "is a symbolic link; give the directory itself (a link could lead the \
                        keys kept in it anywhere)"
                    .into(),
            );
        }
        Ok(meta) if !meta.is_dir() => return Err("is not a directory".into()),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot be made: {e}"))?,
        Err(e) => return Err(e.to_string()),
    }
    let probe = dir.join(".plantstore-probe");
    let written = write_file(&probe, b"", 0o600);
    let _ = fs::remove_file(&probe);
    written.map_err(|e| format!("cannot be written: {e}"))
}

/// Replaces `path` whole with `bytes`, a new file of `mode`, or leaves the
/// old one.
pub fn write_file(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other("no file name"))?;
    let mut temporary = name.to_os_string();
    temporary.push(".tmp");
    let temporary = path.with_file_name(temporary);
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let write = || -> io::Result<()> {
        let _ = fs::remove_file(&temporary);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, path)?;
        fs::File::open(dir)?.sync_all()
    };
    write().inspect_err(|_| {
        let _ = fs::remove_file(&temporary);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::temp::TempDir;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_missing_directory_is_made_private_and_files_are_replaced_whole() {
        let base = TempDir::new("state-dir");
        let dir = base.join("state");
        open(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        // Two files whose names differ only after a dot: no shared temporary.
        write_file(&dir.join("ca.key"), b"key", 0o600).unwrap();
        write_file(&dir.join("ca.pem"), b"cert", 0o644).unwrap();
        write_file(&dir.join("ca.key"), b"key 2", 0o600).unwrap();
        assert_eq!(fs::read(dir.join("ca.key")).unwrap(), b"key 2");
        assert_eq!(fs::read(dir.join("ca.pem")).unwrap(), b"cert");
        assert_eq!(
            fs::metadata(dir.join("ca.key")).unwrap().mode() & 0o777,
            0o600
        );
        let mut left: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["ca.key", "ca.pem"]);
    }

    #[test]
    fn a_symlink_a_file_and_an_unwritable_place_are_refused() {
        let base = TempDir::new("state-dir-bad");
        let real = base.join("real");
        open(&real).unwrap();
        let link = base.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(open(&link).unwrap_err().contains("symbolic link"));
        fs::write(real.join("file"), "x").unwrap();
        assert!(
            open(&real.join("file"))
                .unwrap_err()
                .contains("not a directory")
        );
        // Under a file nothing can be made or written.
        let under = real.join("file").join("state");
        assert!(open(&under).unwrap_err().contains("Not a directory"));
        assert!(write_file(&under.join("x"), b"", 0o600).is_err());
    }
}
