//! ACME (RFC 8555): a certificate for a public name (`--acme-domain`)
//! from a CA such as Let's Encrypt, obtained and renewed by the `acme`
//! thread while the server serves.
//!
//! The protocol is instant-acme's (on ring), over the outbound HTTP
//! client (`http.rs` puts it under the library), driven by a minimal
//! executor (`executor.rs`) on the thread [`start`] spawns. Files:
//! `store.rs` (the state directory: the account, the certificate and its
//! key, reused across restarts),
//! `order.rs` (one order), `renew.rs` (when to order: at start only when
//! what is kept is missing, for another name, or past two thirds of its
//! life; then at two thirds; with a backoff from a minute to a day after a
//! failure, the certificate in use kept), `challenge.rs` (the answers the
//! listeners serve while an order is open); in tests, `hostile.rs` (bad
//! CAs on loopback, speaking TLS).

mod challenge;
mod executor;
#[cfg(test)]
mod hostile;
#[cfg(test)]
mod hostile_ca;
mod http;
mod order;
mod renew;
mod store;

use std::net::SocketAddr;
use std::path::PathBuf;

pub use challenge::{Challenges, first_certificate, placeholder};
pub use renew::{Deliver, RenewNow, Renewer};
pub use store::StateDir;

use crate::transport::{AcmeStatus, Https, Served, now};

/// Let's Encrypt's production directory: `--acme-directory`'s default.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";
/// Let's Encrypt's staging directory: `--acme-staging`.
pub const LETS_ENCRYPT_STAGING: &str = "https://acme-staging-v02.api.letsencrypt.org/directory";

/// Which challenge proves the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Challenge {
    /// HTTP-01, on the plain listener of `--acme-http-addr` (port 80).
    Http01,
    /// TLS-ALPN-01, on the TLS listener (port 443).
    TlsAlpn01,
}

/// What the `acme` thread works with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The name certified.
    pub domain: String,
    /// The ACME directory's URL.
    pub directory: String,
    /// The account's contact, if given.
    pub email: Option<String>,
    /// Where the account and certificate are kept.
    pub dir: StateDir,
    /// `--acme-ca`: a PEM root trusted for the directory, besides the
    /// system's.
    pub ca: Option<PathBuf>,
    pub challenge: Challenge,
    /// The answers the listeners serve.
    pub challenges: Challenges,
    /// `--acme-http-addr`: HTTP-01's listener (usually port 80); without
    /// it TLS-ALPN-01 on the TLS listener.
    pub http_addr: Option<SocketAddr>,
}

impl Settings {
    /// The answers the listeners serve.
    pub fn challenges(&self) -> &Challenges {
        &self.challenges
    }

    /// HTTP-01's listener, with `--acme-http-addr`.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Starts the `acme` thread, which serves each certificate it has on
    /// `https` (the kept one, then each new one) and then calls
    /// `delivered`; `on_stop` is called when it is stopped (HTTP-01's
    /// listener stopped with it).
    pub fn start(
        &self,
        status: AcmeStatus,
        https: &Https,
        delivered: Box<dyn Fn() + Send>,
        on_stop: Box<dyn FnOnce() + Send>,
    ) -> std::io::Result<Running> {
        let serving = https.clone();
        let deliver: Deliver = Box::new(move |served: &Served| {
            serving.serve(served);
            delivered();
        });
        let renewer = Renewer::start(self.clone(), status, deliver)?;
        Ok(Running { renewer, on_stop })
    }
}

/// The `acme` thread started, and what stops with it.
pub struct Running {
    renewer: Renewer,
    on_stop: Box<dyn FnOnce() + Send>,
}

impl Running {
    /// Wakes the thread (SIGHUP).
    pub fn waker(&self) -> RenewNow {
        self.renewer.waker()
    }

    /// Stops what stops with it; the thread stops as it drops.
    pub fn stop(self) {
        (self.on_stop)();
    }
}
