//! The journal file itself: which file `--data` names, and whether it may
//! be used.
//!
//! The path is resolved once, at open: symbolic links are followed to the
//! real file (a path that does not exist yet resolves through its
//! directory), and from then on everything happens to the real file: its
//! lock, a compaction's temporary file beside it and the rename over it.
//! A link stays a link to the same file.
//!
//! Anything but a regular file is refused, naming the path. The check is
//! a `stat` before opening, so a FIFO or a device is never opened (opening
//! a FIFO, or reading it, could wait forever); the open itself does not
//! block and does not follow a link, and the opened file is checked again,
//! so a file swapped in between is refused too.
//!
//! Deliberately not here: the format, recovery and writing (see the module
//! header of `journal`).

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::OpenError;

/// Links followed before giving up, as many as Linux follows (`ELOOP`).
const MAX_LINKS: usize = 40;

/// The journal file, opened and locked.
pub(super) struct Opened {
    /// Open for reading and appending, under an exclusive lock.
    pub(super) file: File,
    /// The real file's absolute path (no link in it).
    pub(super) path: PathBuf,
    /// Whether the file existed before (else it was created, empty).
    pub(super) existed: bool,
}

/// Resolves `given`, checks that it is (or will be) a regular file, and
/// opens and locks it. Errors name `given`.
pub(super) fn open(given: &Path) -> Result<Opened, OpenError> {
    let io_error = |e| OpenError::Io(given.to_path_buf(), e);
    let path = resolve(given).map_err(io_error)?;
    let existed = match fs::metadata(&path) {
        Ok(meta) => {
            regular(given, &path, &meta)?;
            true
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(io_error(e)),
    };
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(&path)
        .map_err(io_error)?;
    // O_NONBLOCK has no effect on a regular file, which this must be.
    let meta = file.metadata().map_err(io_error)?;
    regular(given, &path, &meta)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(OpenError::Locked(given.to_path_buf())),
        Err(TryLockError::Error(e)) => return Err(io_error(e)),
    }
    if path != given {
        log::info!("journal {} is the file {}", given.display(), path.display());
    }
    Ok(Opened {
        file,
        path,
        existed,
    })
}

/// The real file `given` names: links followed, then the directory made
/// absolute and free of links. The file itself need not exist.
fn resolve(given: &Path) -> io::Result<PathBuf> {
    let mut path = given.to_path_buf();
    for _ in 0..=MAX_LINKS {
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                // A relative target is relative to the link's directory;
                // joining an absolute one replaces the directory.
                let target = fs::read_link(&path)?;
                path = match path.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                };
                continue;
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let Some(name) = path.file_name() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the path names no file",
            ));
        };
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        return Ok(fs::canonicalize(dir)?.join(name));
    }
    Err(io::Error::other(format!(
        "more than {MAX_LINKS} symbolic links in a row"
    )))
}

/// Refuses anything but a regular file.
fn regular(given: &Path, real: &Path, meta: &fs::Metadata) -> Result<(), OpenError> {
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(());
    }
    let kind = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "something else"
    };
    Err(OpenError::NotAFile {
        path: given.to_path_buf(),
        real: (real != given).then(|| real.to_path_buf()),
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh directory, removed with its contents when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir()
                .join(format!("plantstore-unit-{}-{n}-{name}", std::process::id()));
            let _ = fs::remove_dir_all(&path);
            fs::create_dir_all(&path).unwrap();
            Dir(fs::canonicalize(path).unwrap())
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn links_resolve_to_the_real_file_even_before_it_exists() {
        let dir = Dir::new("resolve");
        fs::create_dir(dir.0.join("real")).unwrap();
        let link = dir.0.join("link");
        std::os::unix::fs::symlink("real/j", &link).unwrap();
        let chain = dir.0.join("chain");
        std::os::unix::fs::symlink(&link, &chain).unwrap();
        let real = dir.0.join("real/j");
        assert_eq!(
            resolve(&link).unwrap(),
            real,
            "dangling: through its directory"
        );
        fs::write(&real, b"").unwrap();
        assert_eq!(resolve(&chain).unwrap(), real);
        let via_dir = dir.0.join("real/../real/./j");
        assert_eq!(resolve(&via_dir).unwrap(), real);
        let looped = dir.0.join("loop");
        std::os::unix::fs::symlink(&looped, &looped).unwrap();
        assert!(resolve(&looped).is_err());
        assert!(resolve(Path::new("/")).is_err());
    }

    #[test]
    fn opening_locks_the_real_file_and_refuses_what_is_not_one() {
        let dir = Dir::new("open");
        let real = dir.0.join("j");
        let link = dir.0.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let opened = open(&link).unwrap();
        assert_eq!(
            (opened.path.as_path(), opened.existed),
            (real.as_path(), false)
        );
        assert!(real.is_file() && link.is_symlink());
        assert!(matches!(open(&real), Err(OpenError::Locked(_))));
        drop(opened);

        let fifo = dir.0.join("fifo");
        assert!(
            Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let refused = open(&fifo).err().expect("a FIFO is refused");
        let message = refused.to_string();
        assert!(
            message.contains("is a FIFO, not a regular file"),
            "{message}"
        );
        assert!(message.contains(fifo.to_str().unwrap()), "{message}");
        match open(&dir.0) {
            Err(OpenError::NotAFile { kind, .. }) => assert_eq!(kind, "a directory"),
            other => panic!("a directory: {:?}", other.err()),
        }
        match open(Path::new("/dev/null")) {
            Err(OpenError::NotAFile { kind, .. }) => assert_eq!(kind, "a character device"),
            other => panic!("/dev/null: {:?}", other.err()),
        }
    }
}
