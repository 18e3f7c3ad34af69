//! Small questions to the operating system that several layers ask:
//! random bytes for tokens, keys and webhook ids, the open-file limit, the
//! CPUs this process may use ([`available_cpus`], in `cpus.rs`), and the
//! text of a file a flag names, read so that it cannot hang or bloat
//! ([`read_text`], in `file.rs`), and such a file opened ([`open_regular`]).
//!
//! A leaf: imports nothing of the crate, keeps no state.

mod cpus;
mod file;

pub use cpus::available_cpus;
pub use file::{FileError, MAX_FILE_BYTES, kind_of, open_regular, read_text};

/// Fresh files and directories for the unit tests: the file the
/// integration tests include too, so that there is one such helper.
#[cfg(test)]
#[path = "../tests/shared/temp.rs"]
pub(crate) mod temp;

use std::io::{self, Read};

/// `bytes` random bytes from the OS, as hex (tokens, webhook ids).
pub fn random_hex(bytes: usize) -> io::Result<String> {
    let mut buf = vec![0u8; bytes];
    random_fill(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Fills `buf` with random bytes from the OS (keys).
pub fn random_fill(buf: &mut [u8]) -> io::Result<()> {
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

/// This process's soft open-file limit; `None` where it cannot be read or
/// is unlimited.
pub fn open_file_limit() -> Option<usize> {
    let (soft, _) = rlimit::getrlimit(rlimit::Resource::NOFILE).ok()?;
    (soft != rlimit::INFINITY)
        .then(|| usize::try_from(soft).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_hex_is_hex_of_the_length_asked_and_differs_each_time() {
        let (a, b) = (random_hex(16).unwrap(), random_hex(16).unwrap());
        assert_eq!(a.len(), 32);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
    }
}
