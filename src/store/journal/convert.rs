//! Converting a journal of an older version (1 to 4) to version 5 at
//! start-up, so that an old file never takes another append. The protocol
//! is in docs/storage.md, under "The journal format": the same records in
//! the same order, each put with the version the reader numbered it with,
//! under a header of the store's new lineage.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::file::Entry;
use super::format::{HEADER, Lineage, Salt, Version, encode, fresh_salt, header, seal};
use super::recovery::{scan, scan_from};
use super::rewrite::{compact_path, create_temp, sync_dir};

/// An older journal as recovery read it, to be converted.
pub(super) struct OldFile {
    /// Its version.
    pub from: Version,
    /// The bytes its whole records end at.
    pub valid_len: u64,
    /// Its whole records.
    pub records: u64,
    /// The lineage the new file takes: the store's nonce, and the mark
    /// recovery found (the number of puts).
    pub lineage: Lineage,
}

/// The version-5 image of the whole records at the start of the journal
/// image `old` (its header included), salted with `salt`, of the lineage
/// named by `nonce`: the same records in the same order, each put with
/// the version recovery numbers it with, the header's mark the highest.
/// Stops where recovery would, so a torn tail is left out.
pub fn convert(old: &[u8], salt: &Salt, nonce: u64) -> Vec<u8> {
    let mut image = Vec::new();
    let mark = scan(old, |_| {}).map_or(0, |scan| scan.high);
    let lineage = Lineage { nonce, mark };
    // Writing to a Vec cannot fail; a damaged `old` yields the records
    // before the damage.
    let _ = write_converted(old, salt, lineage, &mut image);
    image
}

/// Writes the version-5 image of the journal read from `old` to `out`:
/// the header for `salt` and `lineage`, then each whole record, sealed
/// for it. Returns the bytes written and the records.
fn write_converted(
    old: impl Read,
    salt: &Salt,
    lineage: Lineage,
    out: impl Write,
) -> io::Result<(u64, u64)> {
    let mut out = BufWriter::with_capacity(64 * 1024, out);
    out.write_all(&header(salt, lineage))?;
    let mut written = (HEADER as u64, 0);
    let mut record = Vec::new();
    let mut failed = Ok(());
    let scanned = scan_from(old, |change| {
        if failed.is_err() {
            return;
        }
        record.clear();
        encode(&mut record, &change);
        seal(&mut record, salt, written.0);
        written.0 += record.len() as u64;
        written.1 += 1;
        failed = out.write_all(&record);
    });
    failed?;
    out.flush()?;
    match scanned {
        Ok(_) => Ok(written),
        Err(e) => Err(io::Error::other(format!("{e:?}"))),
    }
}

/// Converts the journal `file` at `path` (the real file, which `entry`
/// names), as recovery read it (`old`), and logs that it did. The file is read again
/// as a stream, the new file written and synced beside it (`FILE.compact`,
/// locked, with the journal's owner and mode), renamed over it through
/// `entry` (so the identity checks follow the new file), and the
/// directory synced. Returns the new file, open for writing, its salt
/// and its length. On an error the old file is still in place.
pub(super) fn upgrade(
    path: &Path,
    entry: &Entry,
    file: &mut File,
    old: OldFile,
) -> io::Result<(File, Salt, u64)> {
    let OldFile {
        from,
        valid_len,
        records,
        lineage,
    } = old;
    let salt = fresh_salt()?;
    let temp_path = compact_path(path);
    let written = (|| {
        let mut temp = create_temp(path, &temp_path)?;
        file.seek(SeekFrom::Start(0))?;
        let (len, converted) =
            write_converted((&*file).take(valid_len), &salt, lineage, &mut temp)?;
        if converted != records {
            return Err(io::Error::other(
                "the journal changed while it was converted",
            ));
        }
        temp.sync_data()?;
        entry
            .replace(&temp_path, &temp)
            .map_err(io::Error::other)??;
        Ok((temp, len))
    })();
    let (file, len) = match written {
        Ok(written) => written,
        Err(e) => {
            let _ = fs::remove_file(&temp_path);
            return Err(e);
        }
    };
    sync_dir(path)?;
    let old = match from {
        Version::V1 => 1,
        Version::V2(_) => 2,
        Version::V3(_) => 3,
        _ => 4,
    };
    log::info!(
        "{}: journal converted from format version {old} to 5 ({records} record{})",
        path.display(),
        crate::model::plural(records)
    );
    Ok((file, salt, len))
}
