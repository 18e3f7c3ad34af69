//! A fake ACME CA for the renewal's tests: HTTPS on loopback (`hostile.rs`'s
//! identity), a directory, nonces, an account and an order granted without
//! question (no signature is checked: nothing here is trusted), the
//! authorization already valid, and at the end a certificate for the
//! order's key whose validity the test chooses: one already expired, or
//! not valid yet, is what a broken CA (or a clock far off) hands in.
//! Test code only.

use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rcgen::{CertificateParams, IsCa, Issuer, KeyPair, PublicKeyData, SignatureAlgorithm};
use time::OffsetDateTime;

use super::hostile::{self, Identity};
use crate::transport::tlv;

/// What the fake CA issues.
#[derive(Debug, Clone, Copy)]
pub struct Issue {
    /// `notBefore` and `notAfter`, in Unix seconds.
    pub not_before: i64,
    pub not_after: i64,
}

/// Starts a fake CA certifying `domain`; its directory's URL.
pub fn start(identity: &Identity, domain: &str, issue: Issue) -> String {
    let server = Arc::clone(&identity.server);
    let ca_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_pem = params.self_signed(&ca_key).unwrap().pem();
    let ca = Arc::new(Ca {
        base: OnceLock::new(),
        domain: domain.to_string(),
        issue,
        issuer: Issuer::new(params, ca_key),
        ca_pem,
        csr: Mutex::new(None),
    });
    let serving = Arc::clone(&ca);
    let url = hostile::serve(move |socket| serving.answer(socket, &server));
    let _ = ca.base.set(url.clone());
    format!("{url}/dir")
}

struct Ca {
    /// Its URL, once it listens.
    base: OnceLock<String>,
    domain: String,
    issue: Issue,
    issuer: Issuer<'static, KeyPair>,
    ca_pem: String,
    /// The public key of the last finalized order's CSR.
    csr: Mutex<Option<CsrKey>>,
}

impl Ca {
    /// Answers the one request of a connection.
    fn answer(&self, socket: TcpStream, server: &Arc<rustls::ServerConfig>) {
        let Some(b) = self.base.get() else { return };
        let Some((mut tls, head, body)) = hostile::accept_tls(socket, server) else {
            return;
        };
        let line = head.lines().next().unwrap_or("");
        let path = line.split(' ').nth(1).unwrap_or("");
        let order = |status: &str| {
            format!(
                r#"{{"status":"{status}","identifiers":[{{"type":"dns","value":"{}"}}],"authorizations":["{b}/authz/1"],"finalize":"{b}/finalize/1","certificate":"{b}/cert/1"}}"#,
                self.domain
            )
        };
        let (status, kind, answer, extra) = match path {
            "/dir" => (
                200,
                "application/json",
                format!(
                    r#"{{"newNonce":"{b}/nonce","newAccount":"{b}/account","newOrder":"{b}/order"}}"#
                ),
                String::new(),
            ),
            "/nonce" => (200, "text/plain", String::new(), String::new()),
            "/account" => (
                201,
                "application/json",
                r#"{"status":"valid"}"#.to_string(),
                format!("Location: {b}/account/1\r\n"),
            ),
            "/order" => (
                201,
                "application/json",
                order("pending"),
                format!("Location: {b}/order/1\r\n"),
            ),
            "/authz/1" => (
                200,
                "application/json",
                format!(
                    r#"{{"identifier":{{"type":"dns","value":"{}"}},"status":"valid","challenges":[]}}"#,
                    self.domain
                ),
                String::new(),
            ),
            "/order/1" => (200, "application/json", order("ready"), String::new()),
            "/finalize/1" => (200, "application/json", order("valid"), String::new()),
            "/cert/1" => match self.certificate() {
                Some(chain) => (
                    200,
                    "application/pem-certificate-chain",
                    chain,
                    String::new(),
                ),
                None => (400, "text/plain", "no CSR seen".into(), String::new()),
            },
            _ => (404, "text/plain", String::new(), String::new()),
        };
        let _ = write!(
            tls,
            "HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
             Replay-Nonce: n{}\r\n{extra}Connection: close\r\n\r\n{answer}",
            answer.len(),
            crate::os::random_hex(8).unwrap_or_default(),
        );
        let _ = tls.flush();
        if path == "/finalize/1"
            && let Ok(mut csr) = self.csr.lock()
        {
            *csr = csr_key(&body);
        }
    }

    /// The chain for the key of the last CSR.
    fn certificate(&self) -> Option<String> {
        let key = self.csr.lock().ok()?.clone()?;
        let mut params = CertificateParams::new(vec![self.domain.to_string()]).ok()?;
        params.not_before = OffsetDateTime::from_unix_timestamp(self.issue.not_before).ok()?;
        params.not_after = OffsetDateTime::from_unix_timestamp(self.issue.not_after).ok()?;
        let leaf = params.signed_by(&key, &self.issuer).ok()?;
        Some(format!("{}{}", leaf.pem(), self.ca_pem))
    }
}

/// A CSR's P-256 public key (the protocol library makes that kind).
#[derive(Clone)]
struct CsrKey(Vec<u8>);

impl PublicKeyData for CsrKey {
    fn der_bytes(&self) -> &[u8] {
        &self.0
    }

    fn algorithm(&self) -> &'static SignatureAlgorithm {
        &rcgen::PKCS_ECDSA_P256_SHA256
    }
}

/// The public key of the CSR in a finalize request's JWS: the payload's
/// `csr`, DER, its `subjectPKInfo`'s bit string.
fn csr_key(jws: &[u8]) -> Option<CsrKey> {
    let jws: serde_json::Value = serde_json::from_slice(jws).ok()?;
    let payload = URL_SAFE_NO_PAD.decode(jws["payload"].as_str()?).ok()?;
    let payload: serde_json::Value = serde_json::from_slice(&payload).ok()?;
    let csr = URL_SAFE_NO_PAD.decode(payload["csr"].as_str()?).ok()?;
    // CertificationRequest { info { version, subject, spki, .. }, .. }
    let (_, request, _) = tlv(&csr)?;
    let (_, info, _) = tlv(request)?;
    let after_version = tlv(info)?.2;
    let after_subject = tlv(after_version)?.2;
    let (_, spki, _) = tlv(after_subject)?;
    let after_algorithm = tlv(spki)?.2;
    let (_, bits, _) = tlv(after_algorithm)?;
    // The bit string's first byte counts its unused bits (none).
    Some(CsrKey(bits.get(1..)?.to_vec()))
}
