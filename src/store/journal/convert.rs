//! Converting a version-1 journal to version 2 at start-up, so that a
//! version-1 file never takes another append. The protocol is in the
//! journal's module header, under "Version 1".

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use super::format::{HEADER, MAGIC_V1, Salt, Version, decode, encode, fresh_salt, header, seal};
use super::rewrite::{compact_path, sync_dir};

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

/// Converts the version-1 journal at `path`, whose whole records (`records`
/// of them) are the image `v1`, and logs that it did. Returns the new file,
/// open for appending, its salt and its length.
pub(super) fn upgrade(path: &Path, v1: &[u8], records: u64) -> io::Result<(File, Salt, usize)> {
    let salt = fresh_salt()?;
    let image = convert(v1, &salt);
    let file = replace(path, &image)?;
    log::info!(
        "{}: journal converted from format version 1 to 2 ({records} records)",
        path.display()
    );
    Ok((file, salt, image.len()))
}

/// Replaces the journal at `path` with `image`: written and synced next to
/// it (`FILE.compact`, locked before it is renamed into place), renamed
/// over it, the directory synced. Returns the new file, open for
/// appending. On an error the old file is still in place.
fn replace(path: &Path, image: &[u8]) -> io::Result<File> {
    let temp_path = compact_path(path);
    let written = (|| {
        let mut temp = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .truncate(false)
            .open(&temp_path)?;
        temp.try_lock().map_err(io::Error::from)?;
        temp.set_len(0)?;
        temp.write_all(image)?;
        temp.sync_data()?;
        fs::rename(&temp_path, path)?;
        Ok(temp)
    })();
    match written {
        Ok(file) => {
            sync_dir(path)?;
            Ok(file)
        }
        Err(e) => {
            let _ = fs::remove_file(&temp_path);
            Err(e)
        }
    }
}
