//! The ACME state directory (`--acme-dir`): the account, and the
//! certificate with its key, kept across restarts so that a start makes
//! no request when what it has is still good (a CA limits how many orders
//! and accounts a name and an address may make).
//!
//! Files: `account.json` (the directory URL the account belongs to and
//! its credentials, with the account key), `cert.pem` (the chain),
//! `key.pem` (its key) and `cert.directory` (the directory URL that
//! issued them, written by `renew.rs`: a certificate from the staging CA
//! is not served once the server is pointed at production). The directory is opened and every file (0600)
//! written by `state_dir.rs`, as `--tls-auto`'s are: made 0700 if
//! missing, never through a symlink, each file replaced whole. A key and
//! certificate that do not match (a crash between the two renames) are
//! not served: `certificate.rs` refuses the pair, and a new order
//! replaces it.

use std::path::{Path, PathBuf};

use instant_acme::AccountCredentials;
use serde::{Deserialize, Serialize};

use super::super::state_dir;

const ACCOUNT: &str = "account.json";
const CERT: &str = "cert.pem";
const KEY: &str = "key.pem";

/// The state directory, checked, and claimed for as long as a clone of
/// this lives (no other server writes in it meanwhile).
#[derive(Debug, Clone)]
pub struct StateDir {
    path: PathBuf,
    _claim: state_dir::Claim,
}

/// `account.json`.
#[derive(Deserialize)]
struct Stored {
    directory: String,
    credentials: AccountCredentials,
}

impl StateDir {
    /// The directory at `path`, made (0700) if missing, and claimed;
    /// refused if it is a symlink, not a directory, writable by every user
    /// or another user's, cannot be written, or another server holds it
    /// (`state_dir`).
    pub fn open(path: &Path) -> Result<StateDir, String> {
        let claim = state_dir::open(path).map_err(|why| format!("{} {why}", path.display()))?;
        Ok(StateDir {
            path: path.to_path_buf(),
            _claim: claim,
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The account kept for `directory`, if there is one; one kept for
    /// another directory is `None` (a new one replaces it). A file that
    /// cannot be read is an error, never replaced unseen.
    pub fn account(&self, directory: &str) -> Result<Option<AccountCredentials>, String> {
        let Some(text) = self.read(ACCOUNT)? else {
            return Ok(None);
        };
        let stored: Stored = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: not an account this server wrote ({e}); move it away to make a new one",
                self.path.join(ACCOUNT).display()
            )
        })?;
        Ok((stored.directory == directory).then_some(stored.credentials))
    }

    /// Keeps the account made on `directory`.
    pub fn save_account(
        &self,
        directory: &str,
        credentials: &AccountCredentials,
    ) -> Result<(), String> {
        #[derive(Serialize)]
        struct Keeping<'a> {
            directory: &'a str,
            credentials: &'a AccountCredentials,
        }
        let keeping = Keeping {
            directory,
            credentials,
        };
        let text = serde_json::to_vec_pretty(&keeping).map_err(|e| e.to_string())?;
        self.write(ACCOUNT, &text)
            .map_err(|e| self.cannot(ACCOUNT, e))
    }

    /// The certificate chain and key kept, both PEM, if both are there.
    pub fn certificate(&self) -> Result<Option<(String, String)>, String> {
        match (self.read(CERT)?, self.read(KEY)?) {
            (Some(cert), Some(key)) => Ok(Some((cert, key))),
            _ => Ok(None),
        }
    }

    /// Keeps a new certificate chain and key, the key first.
    pub fn save_certificate(&self, cert: &str, key: &str) -> Result<(), String> {
        self.write(KEY, key.as_bytes())
            .map_err(|e| self.cannot(KEY, e))?;
        self.write(CERT, cert.as_bytes())
            .map_err(|e| self.cannot(CERT, e))
    }

    fn cannot(&self, name: &str, e: std::io::Error) -> String {
        format!("cannot write {}: {e}", self.path.join(name).display())
    }

    /// The text of `name`, `None` if it is not there.
    fn read(&self, name: &str) -> Result<Option<String>, String> {
        let path = self.path.join(name);
        match crate::os::read_text(&path) {
            Ok(text) => Ok(Some(text)),
            Err(crate::os::FileError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(None)
            }
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Writes `name` whole, 0600, or leaves the old one.
    fn write(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        state_dir::write_file(&self.path.join(name), bytes, 0o600)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn temporary(name: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "plantstore-acme-{name}-{}-{}",
            std::process::id(),
            crate::os::random_hex(4).unwrap()
        ));
        let _ = fs::remove_dir_all(&path);
        path
    }

    #[test]
    fn a_missing_directory_is_made_private_and_files_are_written_0600() {
        let path = temporary("made").join("acme");
        let dir = StateDir::open(&path).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(dir.certificate().unwrap(), None);
        dir.save_certificate("CERT", "KEY").unwrap();
        assert_eq!(
            dir.certificate().unwrap(),
            Some(("CERT".to_string(), "KEY".to_string()))
        );
        let key = fs::metadata(path.join(KEY)).unwrap().permissions().mode();
        assert_eq!(key & 0o777, 0o600);
        let _ = fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn a_symlink_a_file_and_a_corrupt_account_are_refused() {
        let base = temporary("refused");
        fs::create_dir_all(base.join("real")).unwrap();
        std::os::unix::fs::symlink(base.join("real"), base.join("link")).unwrap();
        let err = StateDir::open(&base.join("link")).unwrap_err();
        assert!(err.contains("is a symbolic link"), "{err}");
        fs::write(base.join("file"), "x").unwrap();
        let err = StateDir::open(&base.join("file")).unwrap_err();
        assert!(err.contains("not a directory"), "{err}");
        let dir = StateDir::open(&base.join("real")).unwrap();
        fs::write(base.join("real").join(ACCOUNT), "{garbage").unwrap();
        let err = dir.account("https://acme.test/dir").err().unwrap();
        assert!(err.contains("not an account this server wrote"), "{err}");
        let _ = fs::remove_dir_all(&base);
    }

    #[test]
    fn a_directory_another_server_holds_is_refused() {
        let base = temporary("claimed");
        let dir = StateDir::open(&base).unwrap();
        let err = StateDir::open(&base).unwrap_err();
        assert!(err.contains("in use by another server"), "{err}");
        assert!(
            err.contains(&format!("process {}", std::process::id())),
            "{err}"
        );
        drop(dir);
        StateDir::open(&base).unwrap();
        let _ = fs::remove_dir_all(&base);
    }
}
