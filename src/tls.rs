//! HTTPS certificates: `--tls-cert` and `--tls-key` read and made into the
//! configuration the event loops serve (`http::Https`), at start and again
//! on SIGHUP.
//!
//! Both files are read as every file taken at start or on a reload
//! ([`os::read_text`](crate::os::read_text): a regular file, symlinks
//! followed, since certbot's `live/` files are links; at most 16 MiB; never
//! a FIFO or a device). PEM: the certificate file holds the chain, the
//! server's certificate first; the key file one private key, PKCS#8, RSA
//! (PKCS#1) or EC (SEC1); RSA, ECDSA P-256/P-384 and Ed25519 keys work. A
//! key that does not match the certificate is refused.
//!
//! Served: TLS 1.3 and 1.2 with rustls' default cipher suites, on the ring
//! provider (it builds for every release target with the cross gcc and zig
//! the release already uses; aws-lc-rs would need CMake and bindgen for
//! 32-bit ARM); ALPN `http/1.1`; one certificate whatever the SNI;
//! session resumption by rustls' in-memory cache (stateful, 256 sessions).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The two files that make the served certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `--tls-cert`: the chain, PEM.
    pub cert: PathBuf,
    /// `--tls-key`: its private key, PEM.
    pub key: PathBuf,
}

/// Why the certificate files cannot be served: the file at fault (if one
/// is), and why, in words that never quote the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError {
    pub file: Option<PathBuf>,
    pub why: String,
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}: {}", file.display(), self.why),
            None => f.write_str(&self.why),
        }
    }
}

impl std::error::Error for TlsError {}

fn in_file(file: &Path, why: impl Into<String>) -> TlsError {
    TlsError {
        file: Some(file.to_path_buf()),
        why: why.into(),
    }
}

/// Reads both files and makes the configuration to serve.
pub fn load(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let cert_text =
        crate::os::read_text(&files.cert).map_err(|e| in_file(&files.cert, e.to_string()))?;
    let key_text =
        crate::os::read_text(&files.key).map_err(|e| in_file(&files.key, e.to_string()))?;
    let chain = CertificateDer::pem_slice_iter(cert_text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| in_file(&files.cert, format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err(in_file(
            &files.cert,
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
        ));
    }
    // The error of a key that does not parse never shows the key's bytes.
    let key = PrivateKeyDer::from_pem_slice(key_text.as_bytes()).map_err(|e| {
        let why = match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "holds no PEM private key (PKCS#8, RSA or EC)".to_string()
            }
            _ => "not a readable PEM private key".to_string(),
        };
        in_file(&files.key, why)
    })?;
    config(chain, key).map_err(|why| TlsError {
        file: None,
        why: format!(
            "{} with {}: {why}",
            files.cert.display(),
            files.key.display()
        ),
    })
}

/// The rustls configuration serving `chain` with `key`.
fn config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("cannot serve this certificate and key: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Where the system's CA certificates are, by distribution; the first
/// that exists is read (`SSL_CERT_FILE`, when set, instead).
const SYSTEM_ROOTS: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt", // Debian, Raspberry Pi OS, Ubuntu, Alpine
    "/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
    "/etc/ssl/ca-bundle.pem",             // openSUSE
    "/etc/ssl/cert.pem",                  // Alpine, others
];

/// The client side, for https webhooks: server certificates verified
/// (chain and host name) against the system's CA certificates and those
/// in `extra` (`--webhook-ca`, a private CA). With none at all, every
/// delivery fails verification: the warning returned says so. There is no
/// way to turn verification off.
pub fn client_config(
    extra: Option<&Path>,
) -> Result<(Arc<rustls::ClientConfig>, Option<String>), TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    let system = std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .or_else(|| SYSTEM_ROOTS.iter().map(PathBuf::from).find(|p| p.is_file()));
    let mut warning = None;
    if let Some(bundle) = &system {
        let text = crate::os::read_text(bundle).map_err(|e| in_file(bundle, e.to_string()))?;
        // A certificate the bundle holds that does not parse is left out,
        // as other TLS clients do.
        let certs = CertificateDer::pem_slice_iter(text.as_bytes()).filter_map(Result::ok);
        roots.add_parsable_certificates(certs);
    }
    if let Some(ca) = extra {
        let text = crate::os::read_text(ca).map_err(|e| in_file(ca, e.to_string()))?;
        let certs = CertificateDer::pem_slice_iter(text.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| in_file(ca, format!("not PEM certificates: {e}")))?;
        if certs.is_empty() {
            return Err(in_file(
                ca,
                "holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            ));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| {
                in_file(ca, format!("holds a certificate that cannot be used: {e}"))
            })?;
        }
    }
    if roots.is_empty() {
        warning = Some(format!(
            "no CA certificates found ({}, or SSL_CERT_FILE): https webhooks will fail \
             verification; give --webhook-ca or install ca-certificates",
            SYSTEM_ROOTS[0]
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError {
            file: None,
            why: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok((Arc::new(config), warning))
}
