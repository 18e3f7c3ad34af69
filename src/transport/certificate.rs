//! The certificate served ([`Https`]): one rustls configuration for the
//! server's life, whose resolver (`resolver.rs`) gives each handshake the
//! certificate in use, swapped by a reload of `--tls-cert` and
//! `--tls-key`, or by a renewal of `--tls-auto`'s (`auto.rs`); where it
//! comes from ([`Source`]), as the flags chose ([`Setup`]); and where
//! `/metrics` reads its expiry ([`Expiry`]).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

use rustls::ServerConfig;

use super::connection::ServerTls;
use super::local_ca::LocalCa;
use super::resolver::{AlpnChallenge, Resolver};
use super::served::{Served, config, load};
use super::{TlsError, TlsFiles, Validity};

/// What the flags chose to serve, checked when they were read.
#[derive(Debug, Clone)]
pub enum Setup {
    /// `--tls-cert` and `--tls-key`, and what they made.
    Files(TlsFiles, Served),
    /// `--tls-auto`: the directory (checked, made if missing, and claimed
    /// for the server's life); the CA and the certificate are read or made
    /// at start (`auto.rs`).
    Auto(std::path::PathBuf, super::Claim),
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
    #[cfg(feature = "acme")]
    Acme,
}

/// The certificate served to new connections, shared by the event loops,
/// `/metrics` and the reload: one configuration for the server's life,
/// whose resolver a reload or a renewal gives the new certificate (a
/// connection keeps the one it started with). With it, when its
/// certificate expires (Unix seconds; `i64::MIN`: not known).
#[derive(Clone)]
pub struct Https(Arc<Current>);

struct Current {
    source: Source,
    config: Arc<ServerConfig>,
    resolver: Arc<Resolver>,
    expires: AtomicI64,
    /// `--hsts`: the `Strict-Transport-Security` value answers carry.
    hsts: OnceLock<String>,
}

impl std::fmt::Debug for Https {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Https")
            .field("source", &self.0.source)
            .field("expires", &self.expires())
            .finish_non_exhaustive()
    }
}

impl Https {
    /// Serves what `files` made at start.
    pub fn new(files: &TlsFiles, served: &Served) -> Result<Https, TlsError> {
        Https::from_source(Source::Files(files.clone()), served, None)
    }

    /// Serves `served`, from `source`; with `challenge`, answers
    /// TLS-ALPN-01 challenges with it. An error only if rustls cannot
    /// make a configuration (its random numbers failed).
    pub fn from_source(
        source: Source,
        served: &Served,
        challenge: Option<Arc<dyn AlpnChallenge>>,
    ) -> Result<Https, TlsError> {
        let resolver = Arc::new(Resolver::new(Arc::clone(&served.key), challenge));
        let config = config(Arc::clone(&resolver)).map_err(|why| TlsError { file: None, why })?;
        Ok(Https(Arc::new(Current {
            source,
            config,
            resolver,
            expires: AtomicI64::new(expiry(served)),
            hsts: OnceLock::new(),
        })))
    }

    /// Makes every answer over TLS carry `Strict-Transport-Security` with
    /// `max-age` `seconds` (`--hsts`; set once, at start).
    pub fn set_hsts(&self, seconds: u64) {
        let _ = self.0.hsts.set(format!("max-age={seconds}"));
    }

    /// The `Strict-Transport-Security` value answers carry, with `--hsts`.
    pub fn hsts(&self) -> Option<&str> {
        self.0.hsts.get().map(String::as_str)
    }

    /// Where the certificate comes from.
    pub fn source(&self) -> &Source {
        &self.0.source
    }

    /// The files it serves, with `--tls-cert`.
    pub fn files(&self) -> Option<&TlsFiles> {
        match &self.0.source {
            Source::Files(files) => Some(files),
            Source::Auto(_) => None,
            #[cfg(feature = "acme")]
            Source::Acme => None,
        }
    }

    /// Serves `served` to connections accepted from now on.
    pub fn serve(&self, served: &Served) {
        self.0.resolver.serve(Arc::clone(&served.key));
        self.0.expires.store(expiry(served), Ordering::Relaxed);
    }

    /// Reads its files again and, if they can be served, serves them to
    /// connections accepted from now on; their validity, for a warning.
    /// On an error what is served stays. (`--tls-auto` renews instead:
    /// `Https::renew`; here it changes nothing.)
    pub fn reload(&self) -> Result<Option<Validity>, TlsError> {
        let served = match &self.0.source {
            Source::Files(files) => load(files)?,
            Source::Auto(_) => return Ok(None),
            #[cfg(feature = "acme")]
            Source::Acme => return Ok(None),
        };
        self.serve(&served);
        Ok(served.validity)
    }

    /// When the certificate served expires, in Unix seconds.
    pub fn expires(&self) -> Option<i64> {
        Some(self.0.expires.load(Ordering::Relaxed)).filter(|&at| at != i64::MIN)
    }

    /// A new connection's TLS state; its handshake gets the certificate
    /// served then. `None` if rustls cannot make one.
    pub(crate) fn accept(&self) -> Option<ServerTls> {
        ServerTls::new(Arc::clone(&self.0.config))
    }
}

/// When a served certificate expires, as `Https` keeps it.
fn expiry(served: &Served) -> i64 {
    served.validity.map_or(i64::MIN, |v| v.not_after)
}

/// Where `/metrics` reads the served certificate's expiry: empty until a
/// server serving HTTPS is bound with it.
#[derive(Clone, Default, Debug)]
pub struct Expiry(Arc<OnceLock<Https>>);

impl Expiry {
    /// Reads the expiry of what `https` serves from now on.
    pub fn watch(&self, https: &Https) {
        let _ = self.0.set(https.clone());
    }

    /// When the served certificate expires (Unix seconds).
    pub fn get(&self) -> Option<i64> {
        self.0.get().and_then(Https::expires)
    }
}
