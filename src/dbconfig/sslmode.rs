//! TLS to PostgreSQL as the `--database` URL asks for it, on the rustls
//! and ring that serve HTTPS: the rustls client configuration, checked
//! when the URL is (a bad `sslrootcert` is a flag error); the connector the
//! client library calls is the database's (`database/tls_connector.rs`).
//!
//! The client library knows `sslmode=disable|prefer|require` and refuses
//! `sslrootcert`, so plantstore takes both out of the URL itself
//! ([`SslSettings::take`]) and hands the library `require` for the
//! verifying modes, with a certificate verifier that verifies as libpq
//! does:
//!
//! - `disable`: no TLS. `prefer` (the default) and `require`: TLS without
//!   verifying the certificate (encryption only, as libpq does without a
//!   root certificate; `prefer` falls back to plain TCP when the server has
//!   no TLS).
//! - `verify-ca`: the chain must lead to `sslrootcert` (or the system's CA
//!   certificates); any host name.
//! - `verify-full`: that, and the certificate must name the host.
//!
//! `require` with `sslrootcert` verifies the chain, as libpq does. Channel
//! binding is not offered (SCRAM without `-PLUS`).

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};

/// How much of the server's certificate is verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// Nothing (`prefer`, `require`): encryption only.
    Nothing,
    /// The chain (`verify-ca`).
    Chain,
    /// The chain and the host name (`verify-full`).
    Full,
}

/// `sslmode` and `sslrootcert` as plantstore reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SslSettings {
    pub verify: Verify,
    pub root_cert: Option<std::path::PathBuf>,
}

impl SslSettings {
    /// Takes `sslmode=verify-ca|verify-full` and `sslrootcert` out of a
    /// `postgres://` URL's query (the URL the client library gets has
    /// `sslmode=require` instead, and no `sslrootcert`). Other forms and
    /// other modes are left to the library.
    pub fn take(url: &str) -> Result<(String, SslSettings), String> {
        let mut settings = SslSettings {
            verify: Verify::Nothing,
            root_cert: None,
        };
        let Some((base, query)) = url.split_once('?') else {
            return Ok((url.to_string(), settings));
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match (key, value) {
                ("sslmode", "verify-ca") => {
                    settings.verify = Verify::Chain;
                    kept.push("sslmode=require".to_string());
                }
                ("sslmode", "verify-full") => {
                    settings.verify = Verify::Full;
                    kept.push("sslmode=require".to_string());
                }
                ("sslrootcert", path) => {
                    let path = crate::percent::decode(path, false)
                        .ok_or("sslrootcert is not a path (bad %-escape)")?;
                    settings.root_cert = Some(path.into());
                }
                _ => kept.push(pair.to_string()),
            }
        }
        if settings.verify == Verify::Nothing && settings.root_cert.is_some() {
            // libpq: a root certificate makes `require` verify the chain.
            settings.verify = Verify::Chain;
        }
        let url = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        Ok((url, settings))
    }

    /// The rustls client configuration these settings make.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| e.to_string())?;
        let chain = match self.verify {
            Verify::Nothing => None,
            Verify::Chain | Verify::Full => {
                // sslrootcert alone when given (as libpq), else the system's.
                let roots =
                    crate::transport::roots(self.root_cert.is_none(), self.root_cert.as_deref())
                        .map_err(|e| format!("sslrootcert {e}"))?;
                let verifier = WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots),
                    Arc::clone(&provider),
                )
                .build()
                .map_err(|e| e.to_string())?;
                Some(verifier)
            }
        };
        let verifier = Verifier {
            chain,
            any_name: self.verify == Verify::Chain,
            provider,
        };
        let config = builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(Arc::new(config))
    }
}

/// How the server's certificate is checked: `chain` (`verify-ca`,
/// `verify-full`) or nothing (`prefer`, `require`: any certificate), with
/// any name when `any_name` (`verify-ca`). The handshake's signatures are
/// always checked, against the key the certificate holds.
#[derive(Debug)]
struct Verifier {
    chain: Option<Arc<WebPkiServerVerifier>>,
    any_name: bool,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.any_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(url: &str) -> (String, Verify, Option<String>) {
        let (url, settings) = SslSettings::take(url).unwrap();
        let root = settings.root_cert.map(|p| p.display().to_string());
        (url, settings.verify, root)
    }

    #[test]
    fn verifying_modes_and_the_root_certificate_are_taken_out_of_the_url() {
        let base = "postgres://u:p@db.example:5432/plants";
        assert_eq!(take(base), (base.into(), Verify::Nothing, None));
        assert_eq!(
            take(&format!(
                "{base}?sslmode=verify-full&sslrootcert=/etc/ca%20x.pem&application_name=a"
            )),
            (
                format!("{base}?sslmode=require&application_name=a"),
                Verify::Full,
                Some("/etc/ca x.pem".into())
            )
        );
        assert_eq!(
            take(&format!("{base}?sslmode=verify-ca")),
            (format!("{base}?sslmode=require"), Verify::Chain, None)
        );
        // As libpq: a root certificate makes require verify the chain.
        assert_eq!(
            take(&format!("{base}?sslrootcert=/ca.pem&sslmode=require")),
            (
                format!("{base}?sslmode=require"),
                Verify::Chain,
                Some("/ca.pem".into())
            )
        );
        // Left to the client library.
        assert_eq!(
            take(&format!("{base}?sslmode=disable")),
            (format!("{base}?sslmode=disable"), Verify::Nothing, None)
        );
        assert!(SslSettings::take(&format!("{base}?sslrootcert=%zz")).is_err());
    }
}
