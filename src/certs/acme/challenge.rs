//! The answers to the CA's challenges while an order is open, set by the
//! `acme` thread and read by the listeners: HTTP-01's key authorization
//! per token (served at `/.well-known/acme-challenge/TOKEN` by the plain
//! listener of `--acme-http-addr`), and TLS-ALPN-01's certificate (served
//! to a handshake that offers only the `acme-tls/1` protocol, RFC 8737).
//!
//! Bounded: an order for one name has one authorization, so at most a
//! few answers are held, and every one is cleared when the order ends.

use std::sync::{Arc, Mutex};

use rcgen::{CertificateParams, CustomExtension, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;

use super::super::source::{Certificate, Source};
use crate::transport::{AlpnChallenge, Https, Served};

/// The most answers of each kind held at once.
const MAX_ANSWERS: usize = 8;

/// The answers, shared.
#[derive(Clone, Default)]
pub struct Challenges(Arc<Mutex<Answers>>);

#[derive(Default)]
struct Answers {
    /// HTTP-01: (token, key authorization).
    http: Vec<(String, String)>,
    /// TLS-ALPN-01: (name, certificate).
    alpn: Vec<(String, Arc<CertifiedKey>)>,
}

impl std::fmt::Debug for Challenges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let answers = crate::lock::lock(&self.0);
        f.debug_struct("Challenges")
            .field("http", &answers.http.len())
            .field("alpn", &answers.alpn.len())
            .finish()
    }
}

impl Challenges {
    /// HTTP-01's answer for `token`, if an order awaits it.
    pub fn http01(&self, token: &str) -> Option<String> {
        let answers = crate::lock::lock(&self.0);
        answers
            .http
            .iter()
            .find(|(t, _)| t == token)
            .map(|(_, answer)| answer.clone())
    }

    /// TLS-ALPN-01's certificate for `name` (the handshake's SNI), if an
    /// order awaits it.
    pub fn alpn(&self, name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let name = name?;
        let answers = crate::lock::lock(&self.0);
        answers
            .alpn
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, key)| Arc::clone(key))
    }

    /// Answers HTTP-01's `token` with `key_authorization`.
    pub fn answer_http01(&self, token: &str, key_authorization: &str) {
        let mut answers = crate::lock::lock(&self.0);
        if answers.http.len() >= MAX_ANSWERS {
            answers.http.remove(0);
        }
        answers
            .http
            .push((token.to_string(), key_authorization.to_string()));
    }

    /// Answers TLS-ALPN-01 for `name` with a certificate carrying
    /// `digest` (the SHA-256 of the key authorization).
    pub fn answer_alpn(&self, name: &str, digest: &[u8]) -> Result<(), String> {
        let key = alpn_certificate(name, digest)?;
        let mut answers = crate::lock::lock(&self.0);
        if answers.alpn.len() >= MAX_ANSWERS {
            answers.alpn.remove(0);
        }
        answers.alpn.push((name.to_string(), key));
        Ok(())
    }

    /// Forgets every answer (the order is over).
    pub fn clear(&self) {
        let mut answers = crate::lock::lock(&self.0);
        answers.http.clear();
        answers.alpn.clear();
    }
}

impl AlpnChallenge for Challenges {
    fn answer(&self, server_name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        self.alpn(server_name)
    }
}

/// What HTTPS serves before the first certificate: self-signed, for
/// `name`, which no client trusts (the API answers 503 over it anyway);
/// chain and key in DER.
pub fn placeholder(name: &str) -> Result<(Vec<u8>, Vec<u8>), String> {
    let why = |e: rcgen::Error| format!("cannot make the placeholder certificate: {e}");
    let params = CertificateParams::new(vec![name.to_string()]).map_err(why)?;
    let key = KeyPair::generate().map_err(why)?;
    let cert = params.self_signed(&key).map_err(why)?;
    Ok((cert.der().to_vec(), key.serialize_der()))
}

/// HTTPS before the first certificate: the placeholder for the name
/// `settings` certify, served with the hook that answers TLS-ALPN-01
/// challenges. It has no expiry for `/metrics` until a real certificate is
/// served: the placeholder's would read as one valid for centuries.
pub fn first_certificate(settings: &super::Settings) -> Result<Certificate, String> {
    let (cert, key) = placeholder(&settings.domain)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key));
    let mut served = Served::from_der(vec![cert.into()], key).map_err(|(_, why)| why)?;
    served.validity = None;
    let hook: Arc<dyn AlpnChallenge> = Arc::new(settings.challenges.clone());
    let https = Https::new(&served, Some(hook)).map_err(|e| e.to_string())?;
    Ok(Certificate::new(https, Source::Acme))
}

/// RFC 8737's certificate: self-signed, for `name` alone, with the
/// critical `acmeIdentifier` extension holding `digest`.
fn alpn_certificate(name: &str, digest: &[u8]) -> Result<Arc<CertifiedKey>, String> {
    let why = |e: rcgen::Error| format!("cannot make the TLS-ALPN-01 certificate: {e}");
    let mut params = CertificateParams::new(vec![name.to_string()]).map_err(why)?;
    params.custom_extensions = vec![CustomExtension::new_acme_identifier(digest)];
    let key = KeyPair::generate().map_err(why)?;
    let cert = params.self_signed(&key).map_err(why)?;
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let signer = rustls::crypto::ring::sign::any_supported_type(&der)
        .map_err(|e| format!("cannot use the TLS-ALPN-01 key: {e}"))?;
    Ok(Arc::new(CertifiedKey::new(
        vec![cert.der().clone()],
        signer,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_found_by_token_and_name_until_cleared() {
        let challenges = Challenges::default();
        challenges.answer_http01("tok", "tok.thumb");
        challenges.answer_alpn("Shop.Example", &[7; 32]).unwrap();
        assert_eq!(challenges.http01("tok").as_deref(), Some("tok.thumb"));
        assert_eq!(challenges.http01("other"), None);
        assert!(challenges.alpn(Some("shop.example")).is_some());
        assert!(challenges.alpn(Some("elsewhere.example")).is_none());
        assert!(challenges.alpn(None).is_none());
        challenges.clear();
        assert_eq!(challenges.http01("tok"), None);
        assert!(challenges.alpn(Some("shop.example")).is_none());
    }

    #[test]
    fn the_alpn_certificate_carries_the_digest_in_a_critical_extension() {
        let key = alpn_certificate("shop.example", &[0xAB; 32]).unwrap();
        let der = key.cert[0].as_ref();
        // id-pe-acmeIdentifier (1.3.6.1.5.5.7.1.31), critical (BOOLEAN
        // TRUE), then an OCTET STRING holding the OCTET STRING digest.
        let oid = [0x06, 0x08, 0x2B, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x1F];
        let at = der.windows(oid.len()).position(|w| w == oid).unwrap();
        let rest = &der[at + oid.len()..];
        assert_eq!(&rest[..3], &[0x01, 0x01, 0xFF]);
        assert_eq!(&rest[3..7], &[0x04, 0x22, 0x04, 0x20]);
        assert_eq!(&rest[7..39], &[0xAB; 32]);
    }

    #[test]
    fn the_placeholder_is_a_key_and_its_certificate_new_each_time() {
        use crate::transport::Served;
        let (cert, key) = placeholder("shop.example").unwrap();
        let served = Served::from_der(
            vec![cert.clone().into()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
        );
        assert!(served.is_ok(), "the key is not the certificate's");
        let name = b"shop.example";
        assert!(cert.windows(name.len()).any(|w| w == name));
        assert_ne!(placeholder("shop.example").unwrap().0, cert);
    }

    #[test]
    fn answers_are_bounded() {
        let challenges = Challenges::default();
        for i in 0..20 {
            challenges.answer_http01(&format!("t{i}"), "a");
        }
        assert_eq!(challenges.http01("t0"), None);
        assert!(challenges.http01("t19").is_some());
    }
}
