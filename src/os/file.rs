//! Reading a small file that a flag names (the token file, the webhook
//! secret, later TLS files), at start-up or on SIGHUP, so that the read
//! can neither hang nor exhaust memory; and opening a file of any size the
//! same way (the seed, [`open_regular`]).
//!
//! Only a regular file is read; symbolic links are followed. The path is
//! `stat`ed first and anything else is refused, naming what it is, before
//! it is opened: a FIFO would block the open until a writer comes (on the
//! thread that reloads, forever), a device such as `/dev/zero` never ends,
//! a directory cannot be read. The open itself does not block
//! (`O_NONBLOCK`, which changes nothing for a regular file) and cannot make
//! a terminal the controlling one (`O_NOCTTY`), and the opened file is
//! checked again, so one swapped in between the two is refused too.
//!
//! At most [`MAX_FILE_BYTES`] (16 MiB) are read: a larger file is refused,
//! never cut short. That is far more than such a file needs (100,000
//! generated tokens of 64 bytes take 6.5 MB) and little enough to hold in
//! memory twice while it is checked.
//!
//! Deliberately not here: what the text means (each caller checks its
//! own), and the journal, which is opened for good and has its own checks
//! (`store::journal::file`).

use std::fmt;
use std::fs::{self, File, FileType, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The most bytes read from such a file: 16 MiB.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Why a file could not be read.
#[derive(Debug)]
pub enum FileError {
    /// The path names something other than a regular file (what it is:
    /// "a FIFO", "a directory", "a character device", ...).
    NotAFile(&'static str),
    /// The file holds more than [`MAX_FILE_BYTES`].
    TooLarge,
    /// The file is not UTF-8 text.
    NotText,
    /// The file could not be looked at, opened or read.
    Io(io::Error),
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::NotAFile(kind) => write!(f, "it is {kind}, not a regular file"),
            FileError::TooLarge => f.write_str("it is larger than 16 MiB"),
            FileError::NotText => f.write_str("it is not UTF-8 text"),
            FileError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FileError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for FileError {
    fn from(e: io::Error) -> FileError {
        FileError::Io(e)
    }
}

/// The text of the regular file at `path` (links followed), at most
/// [`MAX_FILE_BYTES`] long; see the module header.
pub fn read_text(path: &Path) -> Result<String, FileError> {
    String::from_utf8(read(path)?).map_err(|_| FileError::NotText)
}

/// The regular file at `path` (links followed), opened for reading as the
/// module header says: anything else is refused, naming what it is, and
/// neither the open nor a read can block (a file under another process's
/// lease, as Samba takes, fails at once with `EWOULDBLOCK` rather than
/// waiting for the lease to be given up).
pub fn open_regular(path: &Path) -> Result<File, FileError> {
    regular(fs::metadata(path)?.file_type())?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    regular(file.metadata()?.file_type())?;
    Ok(file)
}

/// The bytes of the regular file at `path`, at most [`MAX_FILE_BYTES`].
fn read(path: &Path) -> Result<Vec<u8>, FileError> {
    let file = open_regular(path)?;
    let opened = file.metadata()?;
    if opened.len() > MAX_FILE_BYTES {
        return Err(FileError::TooLarge);
    }
    // The size is a hint only: the file may grow while it is read, and
    // `take` keeps to one byte past the cap however long it gets.
    let hint = usize::try_from(opened.len().min(MAX_FILE_BYTES)).unwrap_or(0);
    let mut bytes = Vec::with_capacity(hint.saturating_add(1));
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(FileError::TooLarge);
    }
    Ok(bytes)
}

/// Refuses anything but a regular file, naming what it is.
fn regular(kind: FileType) -> Result<(), FileError> {
    if kind.is_file() {
        return Ok(());
    }
    Err(FileError::NotAFile(kind_of(kind)))
}

/// What a file of type `kind`, not a regular one, is in words ("a FIFO").
pub fn kind_of(kind: FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "something else"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::temp::TempDir;
    use std::fs::File;

    fn refused_as(path: &Path) -> &'static str {
        match read_text(path) {
            Err(FileError::NotAFile(kind)) => kind,
            other => panic!("{}: {other:?}", path.display()),
        }
    }

    #[test]
    fn a_regular_file_is_read_through_links() {
        let dir = TempDir::new("regular");
        let file = dir.0.join("tokens");
        fs::write(&file, "a\nb\n").unwrap();
        let link = dir.0.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_text(&file).unwrap(), "a\nb\n");
        assert_eq!(read_text(&link).unwrap(), "a\nb\n");
        fs::write(&file, "").unwrap();
        assert_eq!(read_text(&file).unwrap(), "");
    }

    #[test]
    fn a_fifo_a_device_or_a_directory_is_refused_by_kind_without_reading() {
        let dir = TempDir::new("kinds");
        let fifo = dir.fifo("fifo");
        // Opening the FIFO for reading would wait for a writer: the test
        // returning at all shows it was not opened.
        assert_eq!(refused_as(&fifo), "a FIFO");
        assert_eq!(refused_as(Path::new("/dev/zero")), "a character device");
        let zero = dir.0.join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert_eq!(refused_as(&zero), "a character device");
        assert_eq!(refused_as(&dir.0), "a directory");
        let message = read_text(&fifo).unwrap_err().to_string();
        assert_eq!(message, "it is a FIFO, not a regular file");
    }

    #[test]
    fn a_file_over_the_cap_is_refused_and_one_at_it_is_read() {
        let dir = TempDir::new("cap");
        let path = dir.0.join("big");
        let file = File::create(&path).unwrap();
        file.set_len(MAX_FILE_BYTES).unwrap();
        assert_eq!(read_text(&path).unwrap().len() as u64, MAX_FILE_BYTES);
        file.set_len(MAX_FILE_BYTES + 1).unwrap();
        assert!(matches!(read_text(&path), Err(FileError::TooLarge)));
        assert_eq!(FileError::TooLarge.to_string(), "it is larger than 16 MiB");
    }

    #[test]
    fn missing_or_not_text_is_an_error_not_a_panic() {
        let dir = TempDir::new("other");
        let missing = dir.0.join("missing");
        let e = read_text(&missing).unwrap_err();
        assert!(matches!(&e, FileError::Io(io) if io.kind() == io::ErrorKind::NotFound));
        let binary = dir.0.join("binary");
        fs::write(&binary, b"\xff\xfe token").unwrap();
        assert!(matches!(read_text(&binary), Err(FileError::NotText)));
    }
}
