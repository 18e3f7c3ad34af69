//! What the flags chose to serve ([`Setup`]), checked when they were read,
//! and the certificate served made from it ([`Certificate`]): the
//! `transport::Https` the listener serves, with where its certificate
//! comes from ([`Source`]), which a reload reads again (`--tls-cert`) or
//! renews (`--tls-auto`, `auto.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use super::local_ca::LocalCa;
use super::state_dir::Claim;
use super::{TlsFiles, load};
use crate::transport::{Https, Served, TlsError, Validity};

/// What the flags chose to serve, checked when they were read.
#[derive(Debug, Clone)]
pub enum Setup {
    /// `--tls-cert` and `--tls-key`, and what they made.
    Files(TlsFiles, Served),
    /// `--tls-auto`: the directory (checked, made if missing, and claimed
    /// for the server's life); the CA and the certificate are read or made
    /// at start (`auto.rs`).
    Auto(PathBuf, Claim),
}

impl Setup {
    /// The validity of the certificate the files made (`--tls-auto`'s is
    /// made or checked at start).
    pub fn validity(&self) -> Option<Validity> {
        match self {
            Setup::Files(_, served) => served.validity,
            Setup::Auto(..) => None,
        }
    }
}

/// Where the certificate served comes from.
#[derive(Debug)]
pub enum Source {
    /// `--tls-cert` and `--tls-key`, read again on a reload.
    Files(TlsFiles),
    /// `--tls-auto`: the local CA, which renews it.
    Auto(LocalCa),
    /// `--acme-domain`: the `acme` thread serves each certificate it
    /// obtains; a reload has nothing to read.
    Acme,
}

/// The certificate served, and where it comes from.
#[derive(Debug, Clone)]
pub struct Certificate {
    https: Https,
    source: Arc<Source>,
}

impl Certificate {
    /// `https`, whose certificate comes from `source`.
    pub fn new(https: Https, source: Source) -> Certificate {
        Certificate {
            https,
            source: Arc::new(source),
        }
    }

    /// What the listener serves.
    pub fn https(&self) -> &Https {
        &self.https
    }

    /// Where the certificate comes from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The files it serves, with `--tls-cert`.
    pub fn files(&self) -> Option<&TlsFiles> {
        match self.source() {
            Source::Files(files) => Some(files),
            Source::Auto(_) | Source::Acme => None,
        }
    }

    /// Reads its files again and, if they can be served, serves them to
    /// connections accepted from now on; their validity, for a warning.
    /// On an error what is served stays. (`--tls-auto` renews instead:
    /// `Certificate::renew`; here it changes nothing.)
    pub fn reload(&self) -> Result<Option<Validity>, TlsError> {
        let served = match self.source() {
            Source::Files(files) => load(files)?,
            Source::Auto(_) | Source::Acme => return Ok(None),
        };
        self.https.serve(&served);
        Ok(served.validity)
    }
}
