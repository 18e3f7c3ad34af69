//! Which certificate a handshake gets: the one served now, held behind a
//! lock and replaced whole when a reload or a renewal makes a new one, so
//! the `ServerConfig` the event loops share (and its session ticketer)
//! stays for the process's life. A connection keeps the key it started
//! with (rustls holds its own `Arc` of it).
//!
//! A TLS-ALPN-01 challenge (RFC 8737) is a handshake whose client offers
//! exactly one ALPN protocol, `acme-tls/1`: when a hook is set
//! ([`AlpnChallenge`]) such a handshake gets the hook's answer instead (a
//! certificate made for the challenge), and one the hook cannot answer
//! gets none, so it fails. Without a hook `acme-tls/1` is not offered
//! (see `certificate.rs`) and such a handshake fails on ALPN.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The ALPN protocol of TLS-ALPN-01 challenges.
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// Answers TLS-ALPN-01 challenges: the certificate for `server_name`'s
/// pending challenge, if there is one.
pub trait AlpnChallenge: Send + Sync + Debug {
    fn answer(&self, server_name: Option<&str>) -> Option<Arc<CertifiedKey>>;
}

/// The certificate served to new connections, and the challenge hook.
#[derive(Debug)]
pub struct Resolver {
    current: Mutex<Arc<CertifiedKey>>,
    challenge: Option<Arc<dyn AlpnChallenge>>,
}

impl Resolver {
    /// Serves `key`, and answers challenges with `challenge` if given.
    pub fn new(key: Arc<CertifiedKey>, challenge: Option<Arc<dyn AlpnChallenge>>) -> Resolver {
        Resolver {
            current: Mutex::new(key),
            challenge,
        }
    }

    /// Serves `key` to the handshakes that start from now on.
    pub fn serve(&self, key: Arc<CertifiedKey>) {
        *crate::lock::lock(&self.current) = key;
    }

    /// The key served now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        Arc::clone(&crate::lock::lock(&self.current))
    }

    /// Whether a hook answers challenges (then `acme-tls/1` is offered).
    pub fn answers_challenges(&self) -> bool {
        self.challenge.is_some()
    }
}

/// Whether a ClientHello's ALPN list is exactly `acme-tls/1`.
fn is_challenge<'a>(alpn: Option<impl Iterator<Item = &'a [u8]>>) -> bool {
    let Some(mut protocols) = alpn else {
        return false;
    };
    protocols.next() == Some(ACME_TLS_ALPN) && protocols.next().is_none()
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if let Some(hook) = &self.challenge
            && is_challenge(hello.alpn())
        {
            return hook.answer(hello.server_name());
        }
        Some(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_lone_acme_tls_protocol_is_a_challenge() {
        let list = |l: &'static [&'static [u8]]| Some(l.iter().copied());
        assert!(is_challenge(list(&[ACME_TLS_ALPN])));
        assert!(!is_challenge(list(&[ACME_TLS_ALPN, b"http/1.1"])));
        assert!(!is_challenge(list(&[b"http/1.1", ACME_TLS_ALPN])));
        assert!(!is_challenge(list(&[b"http/1.1"])));
        assert!(!is_challenge(list(&[])));
        assert!(!is_challenge(
            None::<std::slice::Iter<'_, &[u8]>>.map(|i| i.copied())
        ));
    }
}
