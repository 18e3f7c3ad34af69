//! `--tls-cert` and `--tls-key`: the two files of the certificate served,
//! read at start and again on SIGHUP into what `transport` serves.
//!
//! Both files are read as every file taken at start or on a reload
//! ([`os::read_text`](crate::os::read_text): a regular file, symlinks
//! followed, since certbot's `live/` files are links; at most 16 MiB; never
//! a FIFO or a device); what their text may hold is `transport`'s to say
//! ([`from_pem`]).

use super::TlsFiles;
use crate::transport::{Part, Served, TlsError, from_pem, in_file};

/// Reads both files and makes the configuration to serve. An expired or
/// not yet valid certificate loads (the caller warns, see
/// [`Validity::warning`](crate::transport::Validity::warning)): the clock of a board without a real-time clock
/// may be wrong at boot.
pub fn load(files: &TlsFiles) -> Result<Served, TlsError> {
    let cert_text =
        crate::os::read_text(&files.cert).map_err(|e| in_file(&files.cert, e.to_string()))?;
    let key_text =
        crate::os::read_text(&files.key).map_err(|e| in_file(&files.key, e.to_string()))?;
    from_pem(&cert_text, &key_text).map_err(|(part, why)| match part {
        Part::Cert => in_file(&files.cert, why),
        Part::Key => in_file(&files.key, why),
        Part::Both => TlsError {
            file: None,
            why: format!(
                "{} with {}: {why}",
                files.cert.display(),
                files.key.display()
            ),
        },
    })
}
