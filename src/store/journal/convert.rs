//! Converting a version-1 journal to version 2 at start-up, so that a
//! version-1 file never takes another append. The protocol is in the
//! journal's module header, under "Version 1".

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use super::file::Entry;
use super::format::{HEADER, MAGIC_V1, Salt, Version, decode, encode, fresh_salt, header, seal};
use super::rewrite::{compact_path, create_temp, sync_dir};

/// The version-2 image of the whole records at the start of the version-1
/// image `v1` (its header included), salted with `salt`: the same records
/// in the same order. Stops at the first record that does not decode, so
/// a torn tail is left out.
pub fn convert(v1: &[u8], salt: &Salt) -> Vec<u8> {
    let mut image = header(salt).to_vec();
    let mut at = MAGIC_V1.len();
    while let Some((change, size)) = decode(v1, at, Version::V1) {
        encode(&mut image, &change);
        at += size;
    }
    seal(&mut image[HEADER..], salt);
    image
}

/// Converts the version-1 journal at `path` (the real file, which `entry`
/// names), whose whole records (`records` of them) are the image `v1`, and
/// logs that it did. The new file is written and synced beside it
/// (`FILE.compact`, locked, with the journal's owner and mode), renamed over
/// it through `entry` (so the identity checks follow the new file), and the
/// directory synced. Returns the new file, open for appending, its salt and
/// its length. On an error the version-1 file is still in place.
pub(super) fn upgrade(
    path: &Path,
    entry: &Entry,
    v1: &[u8],
    records: u64,
) -> io::Result<(File, Salt, usize)> {
    let salt = fresh_salt()?;
    let image = convert(v1, &salt);
    let temp_path = compact_path(path);
    let written = (|| {
        let mut temp = create_temp(path, &temp_path)?;
        temp.write_all(&image)?;
        temp.sync_data()?;
        entry
            .replace(&temp_path, &temp)
            .map_err(io::Error::other)??;
        Ok(temp)
    })();
    let file = match written {
        Ok(file) => file,
        Err(e) => {
            let _ = fs::remove_file(&temp_path);
            return Err(e);
        }
    };
    sync_dir(path)?;
    log::info!(
        "{}: journal converted from format version 1 to 2 ({records} records)",
        path.display()
    );
    Ok((file, salt, image.len()))
}
