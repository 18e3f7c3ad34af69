//! The journal file itself: which file `--data` names, whether it may be
//! used, whether the path still names it, and how much room is left
//! beside it.
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
//! The file's device and inode are recorded. [`Entry::check`] compares them
//! with what the path names now (a `stat`): another inode means the file
//! was replaced, none means it was deleted, and in either case what is
//! appended from then on is not what a restart will read.
//! [`Entry::check_links`] is the cheaper half (an `fstat` of the open
//! file, no path walk): a link count of 0 means the file was deleted, or
//! replaced by a rename over it; it misses a file moved to another name.
//! A compaction renames its file over the journal through
//! [`Entry::replace`], under the same lock, so no check ever sees the path
//! half swapped.
//!
//! Both checks ask `statx` for the inode and link count only, never the
//! timestamps (which `fs::metadata` asks for): on a file system with
//! fine-grained timestamps (Linux 6.13 on: ext4, xfs, btrfs, tmpfs), a
//! timestamp that was looked at makes the next write store a new one in
//! the inode, and that doubled the cost of a `--sync never` write.
//!
//! Deliberately not here: the format, recovery and writing (see the module
//! header of `journal`).

use std::ffi::CString;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::OpenError;
use crate::lock::lock;

/// Links followed before giving up, as many as Linux follows (`ELOOP`).
const MAX_LINKS: usize = 40;

/// The journal file, opened and locked.
pub(super) struct Opened {
    /// Open for reading and writing, under an exclusive lock.
    pub(super) file: File,
    /// The real file's absolute path (no link in it).
    pub(super) path: PathBuf,
    /// Whether the file existed before (else it was created, empty).
    pub(super) existed: bool,
    /// What the path names, for later checks.
    pub(super) entry: Entry,
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
        .write(true)
        .create(true)
        // A new journal is the owner's alone: it holds the plants and the
        // salt that keeps recovery from being fooled. An existing one keeps
        // its mode.
        .mode(0o600)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(&path)
        .map_err(io_error)?;
    // O_NONBLOCK has no effect on a regular file, which this must be.
    let meta = file.metadata().map_err(io_error)?;
    regular(given, &path, &meta)?;
    match crate::os::claiming(|| file.try_lock()) {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(OpenError::Locked(given.to_path_buf())),
        Err(TryLockError::Error(e)) => return Err(io_error(e)),
    }
    if path != given {
        log::info!("journal {} is the file {}", given.display(), path.display());
    }
    let entry = Entry {
        path: path.clone(),
        file: Mutex::new((
            file.try_clone().map_err(io_error)?,
            look(Of::File(&file)).map_err(io_error)?.inode,
        )),
    };
    Ok(Opened {
        file,
        path,
        existed,
        entry,
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
    let kind = crate::os::kind_of(kind);
    Err(OpenError::NotAFile {
        path: given.to_path_buf(),
        real: (real != given).then(|| real.to_path_buf()),
        kind,
    })
}

/// A file's device and inode: which file it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Inode {
    dev: u64,
    ino: u64,
}

/// What `look` tells of a file.
struct Seen {
    inode: Inode,
    links: u64,
}

/// The file `look` asks about.
#[derive(Clone, Copy)]
enum Of<'a> {
    Path(&'a Path),
    File(&'a File),
}

/// A file's inode and link count, from `statx` asking for nothing else
/// (see the module header); from `fs::metadata` where `statx` is missing
/// (Linux before 4.11) or filtered out (`EPERM` from old seccomp
/// profiles).
#[allow(unsafe_code)]
fn look(of: Of<'_>) -> io::Result<Seen> {
    let (fd, path, flags) = match of {
        Of::Path(path) => (libc::AT_FDCWD, c_path(path)?, 0),
        Of::File(file) => (file.as_raw_fd(), CString::default(), libc::AT_EMPTY_PATH),
    };
    let mask = libc::STATX_INO | libc::STATX_NLINK;
    // SAFETY: `statx` is plain integers, for which all zeroes is valid;
    // `fd` is AT_FDCWD or borrowed from a `File` that outlives the call,
    // `path` is NUL-terminated and outlives it, and `buf` is writable
    // memory of the type the call fills.
    let (result, buf) = unsafe {
        let mut buf: libc::statx = std::mem::zeroed();
        let result = libc::syscall(
            libc::SYS_statx,
            fd,
            path.as_ptr(),
            flags,
            mask,
            &raw mut buf,
        );
        (result, buf)
    };
    if result == 0 {
        let dev = libc::makedev(buf.stx_dev_major, buf.stx_dev_minor);
        let (ino, links) = (buf.stx_ino, u64::from(buf.stx_nlink));
        return Ok(Seen {
            inode: Inode { dev, ino },
            links,
        });
    }
    let error = io::Error::last_os_error();
    if !matches!(error.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) {
        return Err(error);
    }
    let meta = match of {
        Of::Path(path) => fs::metadata(path)?,
        Of::File(file) => file.metadata()?,
    };
    let inode = Inode {
        dev: meta.dev(),
        ino: meta.ino(),
    };
    Ok(Seen {
        inode,
        links: meta.nlink(),
    })
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))
}

/// The journal's directory entry: its path, and which file it should name.
pub(super) struct Entry {
    path: PathBuf,
    /// The file the journal writes to (a second handle on it) and its
    /// inode; changed only by `replace`.
    file: Mutex<(File, Inode)>,
}

impl Entry {
    /// Whether the path still names the journal's file; if not, why (a
    /// reason for `/healthz`, so without the path). One `stat`.
    pub(super) fn check(&self) -> Result<(), String> {
        let file = lock(&self.file);
        names(&self.path, file.1)
    }

    /// As `check`, from the open file's link count (one `fstat`): notices
    /// a deleted file and one replaced by a rename over it, not one moved
    /// to another name. The reason comes from `check`.
    pub(super) fn check_links(&self) -> Result<(), String> {
        let file = lock(&self.file);
        match look(Of::File(&file.0)) {
            Ok(seen) if seen.links > 0 => Ok(()),
            Ok(_) => names(&self.path, file.1).and(Err(
                "the journal file lost its last link while the server was running".into(),
            )),
            Err(e) => Err(format!("cannot check the journal file: {e}")),
        }
    }

    /// Renames `temp_path`, the open `temp`, over the journal, if the path
    /// still names the journal's file (`Err` with the reason if not,
    /// nothing renamed); the rename's own result inside.
    pub(super) fn replace(&self, temp_path: &Path, temp: &File) -> Result<io::Result<()>, String> {
        let mut file = lock(&self.file);
        names(&self.path, file.1)?;
        let new = match (temp.try_clone(), look(Of::File(temp))) {
            (Ok(handle), Ok(seen)) => (handle, seen.inode),
            (Err(e), _) | (_, Err(e)) => return Ok(Err(e)),
        };
        let renamed = fs::rename(temp_path, &self.path);
        if renamed.is_ok() {
            *file = new;
        }
        Ok(renamed)
    }
}

/// Whether `path` names the file `inode`.
fn names(path: &Path, inode: Inode) -> Result<(), String> {
    match look(Of::Path(path)) {
        Ok(seen) if seen.inode == inode => Ok(()),
        Ok(_) => Err(
            "the journal file was replaced by another file while the server \
                      was running; changes can no longer be written where a restart \
                      would read them"
                .into(),
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(
            "the journal file was deleted (or moved away) while the server was running; changes can \
             no longer be written where a restart would read them"
                .into(),
        ),
        Err(e) => Err(format!("cannot check the journal file: {e}")),
    }
}

/// Bytes an unprivileged writer may still use on the file system holding
/// `path` (`statvfs`: available blocks times the fragment size).
#[allow(unsafe_code)]
pub(super) fn available(path: &Path) -> io::Result<u64> {
    let path = c_path(path)?;
    // SAFETY: `statvfs` is plain integers, for which all zeroes is valid;
    // `path` is NUL-terminated and outlives the call, and `stats` is
    // writable memory of the type the call fills.
    let (result, stats) = unsafe {
        let mut stats: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(path.as_ptr(), &mut stats), stats)
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    // `as`: these are u32 on some 32-bit targets, u64 elsewhere.
    #[allow(clippy::unnecessary_cast)]
    let (blocks, size) = (stats.f_bavail as u64, stats.f_frsize as u64);
    Ok(blocks.saturating_mul(size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::temp::TempDir;

    #[test]
    fn links_resolve_to_the_real_file_even_before_it_exists() {
        let dir = TempDir::new("resolve");
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
        let dir = TempDir::new("open");
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

        let fifo = dir.fifo("fifo");
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

    #[test]
    fn the_entry_notices_a_deleted_or_replaced_file_and_follows_a_rename() {
        let dir = TempDir::new("entry");
        let path = dir.0.join("j");
        let opened = open(&path).unwrap();
        let entry = &opened.entry;
        assert_eq!((entry.check(), entry.check_links()), (Ok(()), Ok(())));

        let temp_path = dir.0.join("j.compact");
        let temp = File::create(&temp_path).unwrap();
        assert!(matches!(entry.replace(&temp_path, &temp), Ok(Ok(()))));
        assert_eq!(entry.check(), Ok(()), "the renamed file is the journal now");

        let other = dir.0.join("other");
        fs::write(&other, b"").unwrap();
        fs::rename(&other, &path).unwrap();
        assert!(entry.check().unwrap_err().contains("replaced"));
        assert!(entry.check_links().unwrap_err().contains("replaced"));
        let again = File::create(&temp_path).unwrap();
        assert!(
            entry.replace(&temp_path, &again).is_err(),
            "never over a stranger"
        );
        assert!(temp_path.exists());

        fs::remove_file(&path).unwrap();
        assert!(entry.check().unwrap_err().contains("deleted"));
        assert!(entry.check_links().unwrap_err().contains("deleted"));
    }

    #[test]
    fn a_file_moved_away_is_noticed_at_its_path_not_by_its_links() {
        let dir = TempDir::new("moved");
        let path = dir.0.join("j");
        let opened = open(&path).unwrap();
        fs::rename(&path, dir.0.join("elsewhere")).unwrap();
        assert_eq!(opened.entry.check_links(), Ok(()), "still linked");
        assert!(opened.entry.check().unwrap_err().contains("deleted"));
    }

    #[test]
    fn available_space_is_reported_for_a_directory_that_exists() {
        let dir = TempDir::new("space");
        let free = available(&dir.0).unwrap();
        assert!(free > 0);
        assert!(available(&dir.0.join("missing/dir")).is_err());
    }
}
