//! Where the records go in the file: at the end of the records, by
//! offset, and with `--sync always` into zeros written ahead of them.
//!
//! Appending grows the file, and with it its size in the inode: every
//! `fdatasync` of an append then commits the file system's metadata as
//! well as the data page (on ext4 with 4 KiB blocks, 8 to 16 KiB sent to
//! the device for a record of a few dozen bytes). A record written over
//! zeros that are already part of the file, and already on the device,
//! changes no metadata: the sync sends the data pages alone. So with
//! `--sync always`, a write that would pass the end of the zeros first
//! writes zeros up to the next `STEP` boundary past it (synced with the
//! batch that needed them: once a megabyte, the file system's commit of
//! the new size is paid for all the records that follow). Zeros rather
//! than `fallocate`: written blocks need no conversion from unwritten
//! extents at their first write (one more metadata commit per block),
//! the call is plain `std` on every target, and a file system without
//! `fallocate` is no different. Zeros that do not fit (a disk all but
//! full) are given up on, not failed on: the records then grow the file
//! as appends do. `STEP` caps what a start reads to tell
//! zeros written ahead from a torn tail (recovery passes zeros at the
//! speed of comparing bytes), and what a small journal costs on disk.
//!
//! With `--sync never` nothing is written ahead (the OS writes pages back
//! in any order, so zeros ahead could leave a hole before a later
//! batch's records, which recovery would refuse as damage), and a file
//! with zeros ahead from an earlier run is cut back to its records at
//! open.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use super::Disk;

/// Zeros are written ahead to the next multiple of this many bytes.
pub(super) const STEP: u64 = 1 << 20;
/// Zeros written at a time (from the heap, once a step: a static array
/// of them would be 64 KiB of the binary).
const ZEROS: usize = 64 * 1024;

/// The journal file as the writer sees it: the end of its records, and
/// how far zeros already reach. The `Disk` of a real journal.
pub struct JournalFile {
    file: File,
    /// Where the next record goes: the end of the records.
    end: u64,
    /// The file's length: the zeros after `end` reach this far.
    len: u64,
    /// Whether zeros are written ahead (`--sync always`).
    ahead: bool,
}

impl JournalFile {
    /// `file`, `len` bytes long, whose records end at `end` and whose
    /// bytes after that, if any, are zeros.
    pub(super) fn new(file: File, end: u64, len: u64, ahead: bool) -> JournalFile {
        JournalFile {
            file,
            end,
            len: len.max(end),
            ahead,
        }
    }

    /// Writes zeros from the file's end to the next `STEP` boundary past
    /// `until`.
    fn zero_to(&mut self, until: u64) -> io::Result<()> {
        let target = until.div_ceil(STEP).max(1) * STEP;
        let zeros = vec![0; ZEROS];
        while self.len < target {
            let n = (target - self.len).min(ZEROS as u64) as usize;
            self.file.write_all_at(&zeros[..n], self.len)?;
            self.len += n as u64;
        }
        Ok(())
    }
}

impl Disk for JournalFile {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let until = self.end + bytes.len() as u64;
        if self.ahead && until > self.len {
            // Zeros that do not fit (a disk all but full) are not a failed
            // write: the records then grow the file as appends do, and
            // whatever zeros were written are zeros after the records.
            let _ = self.zero_to(until);
        }
        self.file.write_all_at(bytes, self.end)?;
        self.end = until;
        self.len = self.len.max(until);
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn temp(name: &str) -> (std::path::PathBuf, File) {
        let path =
            std::env::temp_dir().join(format!("plantstore-ahead-{name}-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        (path, file)
    }

    fn contents(path: &std::path::Path) -> Vec<u8> {
        let mut bytes = Vec::new();
        File::open(path).unwrap().read_to_end(&mut bytes).unwrap();
        bytes
    }

    #[test]
    fn records_go_over_zeros_written_a_step_ahead_and_the_file_grows_a_step_at_a_time() {
        let (path, file) = temp("always");
        let mut disk = JournalFile::new(file, 0, 0, true);
        disk.append(b"header").unwrap();
        disk.append(&[7; 100]).unwrap();
        let bytes = contents(&path);
        assert_eq!(bytes.len() as u64, STEP);
        assert_eq!(&bytes[..6], b"header");
        assert!(bytes[6..106].iter().all(|&b| b == 7));
        assert!(bytes[106..].iter().all(|&b| b == 0));
        // A write past the zeros takes the file to the next step past it.
        disk.append(&vec![9; STEP as usize]).unwrap();
        assert_eq!(contents(&path).len() as u64, 2 * STEP);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn without_writing_ahead_records_end_the_file() {
        let (path, file) = temp("never");
        file.write_all_at(b"head", 0).unwrap();
        let mut disk = JournalFile::new(file, 4, 4, false);
        disk.append(b"er").unwrap();
        assert_eq!(contents(&path), b"header");
        std::fs::remove_file(path).unwrap();
    }
}
