//! A certificate to serve ([`Served`]): a chain and key in PEM (the text
//! of `--tls-cert` and `--tls-key`, which `certs/files.rs` reads, or
//! ACME's) or in DER (the local CA's), checked and made ready for
//! handshakes; and the configuration the event loops serve them with
//! (`Https`, in `certificate.rs`).
//!
//! PEM: the certificate text holds the chain, the server's certificate
//! first; the key text one private key, PKCS#8, RSA (PKCS#1) or EC (SEC1);
//! RSA, ECDSA P-256/P-384 and Ed25519 keys work. A key that does not match
//! the certificate is refused, and so is a chain of more than 8
//! certificates or 32 KiB (each handshake sends it whole).
//!
//! Served: TLS 1.3 and 1.2 with rustls' default cipher suites, on the ring
//! provider (it builds for every release target with the cross gcc and zig
//! the release already uses; aws-lc-rs would need CMake and bindgen for
//! 32-bit ARM); ALPN `http/1.1`; one certificate whatever the SNI, given
//! each handshake by the resolver (`resolver.rs`), so that a reload or a
//! renewal swaps the certificate and keeps the configuration; session
//! resumption by stateless tickets (see `config`).

use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use super::Validity;
use super::resolver::{ACME_TLS_ALPN, Resolver};

/// A certificate to serve: its chain and key, checked to match and ready
/// for a handshake, and the validity of the server's certificate (when it
/// can be read).
#[derive(Debug, Clone)]
pub struct Served {
    pub key: Arc<CertifiedKey>,
    pub validity: Option<Validity>,
}

/// Which of the two texts an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Cert,
    Key,
    /// The pair: a key that does not match the certificate.
    Both,
}

/// The most certificates a served chain may hold: the server's and its
/// intermediates (a real chain has two to four).
const MAX_CHAIN_CERTS: usize = 8;
/// The most bytes (DER) a served chain may hold. Every handshake sends the
/// whole chain, and rustls queues it whatever the connection's 64 KiB
/// output bound (`connection.rs`), so a chain of thousands would let each
/// client that stops reading hold megabytes.
const MAX_CHAIN_BYTES: usize = 32 * 1024;

/// The configuration to serve a PEM certificate chain with a PEM key;
/// an error names the text at fault and never quotes the key.
pub fn from_pem(cert: &str, key: &str) -> Result<Served, (Part, String)> {
    let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| (Part::Cert, format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err((
            Part::Cert,
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    check_chain(&chain)?;
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| {
        let why = match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "holds no PEM private key (PKCS#8, RSA or EC)"
            }
            _ => "not a readable PEM private key",
        };
        (Part::Key, why.to_string())
    })?;
    Served::from_der(chain, key)
}

/// A chain that holds a certificate and fits the bounds.
fn check_chain(chain: &[CertificateDer<'static>]) -> Result<(), (Part, String)> {
    if chain.is_empty() {
        return Err((Part::Cert, "holds no certificate".into()));
    }
    let bytes: usize = chain.iter().map(|c| c.len()).sum();
    if chain.len() > MAX_CHAIN_CERTS || bytes > MAX_CHAIN_BYTES {
        return Err((
            Part::Cert,
            format!(
                "holds a chain of {} certificates ({bytes} bytes); at most {MAX_CHAIN_CERTS} \
                 and {} KiB are served (the server's certificate and its intermediates: \
                 every handshake sends them all)",
                chain.len(),
                MAX_CHAIN_BYTES / 1024
            ),
        ));
    }
    Ok(())
}

impl Served {
    /// A chain (the server's certificate first) and its key, in DER, made
    /// ready to serve: within the chain's bounds, a key ring can sign
    /// with, matching the certificate. An error names the part at fault
    /// and never quotes the key.
    pub fn from_der(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<Served, (Part, String)> {
        check_chain(&chain)?;
        let validity = Validity::of(&chain[0]);
        let key = CertifiedKey::from_der(chain, key, &provider()).map_err(|e| {
            (
                Part::Both,
                format!("cannot serve this certificate and key: {e}"),
            )
        })?;
        Ok(Served {
            key: Arc::new(key),
            validity,
        })
    }

    /// When the server's certificate is valid, if that can be read.
    pub fn validity(&self) -> Option<Validity> {
        self.validity
    }

    /// A configuration serving this certificate alone (the replay harness
    /// and the fuzz target drive a connection with it).
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, String> {
        config(Arc::new(Resolver::new(Arc::clone(&self.key), None)))
    }
}

/// The crypto provider: ring's.
fn provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// The rustls configuration whose handshakes `resolver` gives a
/// certificate.
pub(super) fn config(resolver: Arc<Resolver>) -> Result<Arc<ServerConfig>, String> {
    let challenges = resolver.answers_challenges();
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    if challenges {
        config.alpn_protocols.push(ACME_TLS_ALPN.to_vec());
    }
    // Stateless tickets (ChaCha20-Poly1305, random keys rotated every 6
    // hours, in memory only): a client resumes with any ticket it holds,
    // as many times as it likes within its life, and the server keeps no
    // state per session. (rustls' stateful cache honours each TLS 1.3
    // ticket once.) The configuration lives as long as the server: a
    // certificate replaced by a reload or a renewal keeps the sessions.
    config.ticketer = rustls::crypto::ring::Ticketer::new()
        .map_err(|e| format!("cannot make session tickets: {e}"))?;
    Ok(Arc::new(config))
}
