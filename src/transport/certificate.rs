//! The certificate served ([`Https`]): one rustls configuration for the
//! server's life, whose resolver (`resolver.rs`) gives each handshake the
//! certificate in use, swapped by whoever supplies it (`certs/`: a reload
//! of `--tls-cert` and `--tls-key`, a renewal of `--tls-auto`'s, ACME's
//! thread); and where `/metrics` reads its expiry ([`Expiry`]).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

use rustls::ServerConfig;

use super::connection::ServerTls;
use super::resolver::{AlpnChallenge, Resolver};
use super::served::{Served, config};
use super::{CaCert, TlsError};

/// The certificate served to new connections, shared by the event loops,
/// `/metrics` and the reload: one configuration for the server's life,
/// whose resolver a reload or a renewal gives the new certificate (a
/// connection keeps the one it started with). With it, when its
/// certificate expires (Unix seconds; `i64::MIN`: not known).
#[derive(Clone)]
pub struct Https(Arc<Current>);

struct Current {
    config: Arc<ServerConfig>,
    resolver: Arc<Resolver>,
    expires: AtomicI64,
    /// `--hsts`: the `Strict-Transport-Security` value answers carry.
    hsts: OnceLock<String>,
    /// With `--tls-auto`: the local CA's certificate, for `GET /ca.pem`.
    ca: OnceLock<CaCert>,
}

impl std::fmt::Debug for Https {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Https")
            .field("expires", &self.expires())
            .finish_non_exhaustive()
    }
}

impl Https {
    /// Serves `served`; with `challenge`, answers TLS-ALPN-01 challenges
    /// with it. An error only if rustls cannot make a configuration (its
    /// random numbers failed).
    pub fn new(
        served: &Served,
        challenge: Option<Arc<dyn AlpnChallenge>>,
    ) -> Result<Https, TlsError> {
        let resolver = Arc::new(Resolver::new(Arc::clone(&served.key), challenge));
        let config = config(Arc::clone(&resolver)).map_err(|why| TlsError { file: None, why })?;
        Ok(Https(Arc::new(Current {
            config,
            resolver,
            expires: AtomicI64::new(expiry(served)),
            hsts: OnceLock::new(),
            ca: OnceLock::new(),
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

    /// Offers `ca` at `GET /ca.pem` (`--tls-auto`; set once, at start).
    pub fn set_ca_cert(&self, ca: CaCert) {
        let _ = self.0.ca.set(ca);
    }

    /// With `--tls-auto`: the CA's certificate, for `GET /ca.pem`.
    pub fn ca_cert(&self) -> Option<CaCert> {
        self.0.ca.get().cloned()
    }

    /// Serves `served` to connections accepted from now on.
    pub fn serve(&self, served: &Served) {
        self.0.resolver.serve(Arc::clone(&served.key));
        self.0.expires.store(expiry(served), Ordering::Relaxed);
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

/// `--hsts`: the `max-age`, in seconds, of the `Strict-Transport-Security`
/// answers over HTTPS carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hsts(pub u64);

impl Hsts {
    /// The `max-age`.
    pub fn seconds(&self) -> u64 {
        self.0
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
