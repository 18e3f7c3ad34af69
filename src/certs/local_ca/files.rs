//! The local CA's directory and files: `DIR` checked (made) and claimed,
//! and files replaced whole, both by `state_dir.rs`, which ACME's store
//! shares; PEM written and read back; the key's mode kept; the CA's name read out of
//! its certificate.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};

use super::super::state_dir::{self, Claim};
use crate::transport::{TlsError, in_file};

/// Checks and claims `dir` as `--tls-auto` takes it (`state_dir::open`):
/// made (0700) if missing; a symbolic link, what is not a directory, a
/// directory every user may write or another user's, one this process
/// cannot write, and one another server holds are refused.
pub fn check_dir(dir: &Path) -> Result<Claim, TlsError> {
    state_dir::open(dir).map_err(|why| in_file(dir, why))
}

/// `label` PEM of `der`.
pub(super) fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// SHA-256 of `der` as `AA:BB:...`.
pub(super) fn fingerprint(der: &[u8]) -> String {
    let hex: Vec<String> = Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    hex.join(":")
}

/// Replaces `path` whole with `text`, a file of `mode`
/// (`state_dir::write_file`).
pub(super) fn write_file(path: &Path, text: &str, mode: u32) -> Result<(), TlsError> {
    state_dir::write_file(path, text.as_bytes(), mode)
        .map_err(|e| in_file(path, format!("cannot be written: {e}")))
}

/// The text of `path`, or `None` if there is no such file.
pub(super) fn read(path: &Path) -> Result<Option<String>, TlsError> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        _ => crate::os::read_text(path)
            .map(Some)
            .map_err(|e| in_file(path, e.to_string())),
    }
}

/// The one PKCS#8 key of a PEM text.
pub(super) fn pkcs8(path: &Path, text: &str) -> Result<Vec<u8>, TlsError> {
    match PrivateKeyDer::from_pem_slice(text.as_bytes()) {
        Ok(PrivateKeyDer::Pkcs8(key)) => Ok(key.secret_pkcs8_der().to_vec()),
        _ => Err(in_file(
            path,
            "holds no private key (PKCS#8, PEM) that this server wrote",
        )),
    }
}

/// The certificates of a PEM text (at least one).
pub(super) fn certificates(
    path: &Path,
    text: &str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| in_file(path, format!("not a PEM certificate: {e}")))?;
    if chain.is_empty() {
        return Err(in_file(path, "holds no PEM certificate"));
    }
    Ok(chain)
}

/// Makes sure a key file is readable by its owner only. A symbolic link
/// is refused, not followed: its mode is not the key's, and making what it
/// points to 0600 could change a file outside `DIR`.
pub(super) fn owner_only(path: &Path) -> Result<(), TlsError> {
    let meta = fs::symlink_metadata(path).map_err(|e| in_file(path, e.to_string()))?;
    if !meta.is_file() {
        return Err(in_file(
            path,
            "is not a plain file (a symbolic link?); put the key itself there",
        ));
    }
    if meta.mode() & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))
            .map_err(|e| in_file(path, format!("cannot be made 0600: {e}")))?;
    }
    Ok(())
}

/// The common name of a certificate's subject, when it is one UTF8String.
pub(super) fn common_name(der: &[u8]) -> Option<String> {
    use crate::transport::tlv;
    let (_, cert, _) = tlv(der)?;
    let (_, mut tbs, _) = tlv(cert)?;
    if tlv(tbs)?.0 == 0xA0 {
        tbs = tlv(tbs)?.2;
    }
    for _ in 0..4 {
        tbs = tlv(tbs)?.2; // serial number, signature algorithm, issuer, validity
    }
    let (_, subject, _) = tlv(tbs)?;
    let (_, set, rest) = tlv(subject)?;
    let (_, pair, _) = tlv(set)?;
    let (tag, oid, value) = tlv(pair)?;
    let (text_tag, text, _) = tlv(value)?;
    let is_cn = tag == 0x06 && oid == [0x55, 0x04, 0x03] && text_tag == 0x0C;
    (is_cn && rest.is_empty())
        .then(|| String::from_utf8(text.to_vec()).ok())
        .flatten()
}
