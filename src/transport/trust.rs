//! TLS as a client, verifying the server: the CA certificates trusted
//! (the system's bundle, and a private CA given by a flag), the rustls
//! client configuration of https webhooks and of the ACME client, and the
//! outbound client's connection over it (`outbound::Handshake`). The
//! PostgreSQL store verifies against the same [`roots`]
//! (`dbconfig/sslmode.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::{fmt, io};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

use super::{TlsError, in_file};
use crate::outbound::{Handshake, Timed};

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
pub fn client_config(extra: Option<&Path>) -> Result<(ClientTls, Option<String>), TlsError> {
    let roots = roots(true, extra)?;
    let warning = roots.is_empty().then(|| {
        format!(
            "no CA certificates found ({}, or SSL_CERT_FILE): https webhooks will fail \
             verification; give --webhook-ca or install ca-certificates",
            SYSTEM_ROOTS[0]
        )
    });
    let client = ClientTls::new(roots).map_err(|why| TlsError { file: None, why })?;
    Ok((client, warning))
}

/// CA certificates to verify servers against: the system's (when
/// `system`: `SSL_CERT_FILE`, else the first bundle of `SYSTEM_ROOTS` that
/// exists; a certificate in it that does not parse is left out, as other
/// TLS clients do) and those in `extra` (PEM, at least one, each usable).
pub fn roots(system: bool, extra: Option<&Path>) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    let bundle = system
        .then(|| {
            std::env::var_os("SSL_CERT_FILE")
                .map(PathBuf::from)
                .or_else(|| SYSTEM_ROOTS.iter().map(PathBuf::from).find(|p| p.is_file()))
        })
        .flatten();
    if let Some(bundle) = &bundle {
        let text = crate::os::read_text(bundle).map_err(|e| in_file(bundle, e.to_string()))?;
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
    Ok(roots)
}

/// How https servers are verified (for webhooks, `--webhook-ca` and the
/// system's CA certificates): the client configuration every exchange
/// shares.
#[derive(Clone)]
pub struct ClientTls(Arc<rustls::ClientConfig>);

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ClientTls").field(&self.0).finish()
    }
}

impl ClientTls {
    /// Verifies servers against `roots`.
    pub fn new(roots: rustls::RootCertStore) -> Result<ClientTls, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(ClientTls(Arc::new(config)))
    }
}

impl Handshake for ClientTls {
    type Stream = rustls::StreamOwned<rustls::ClientConnection, Timed>;

    /// `socket`, connected to `host`, as a TLS client stream: the
    /// handshake happens as it is first written to or read, the
    /// certificate verified against the roots and `host`.
    fn connect(&self, host: &str, socket: Timed) -> io::Result<Self::Stream> {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not a TLS server name"))?;
        let conn =
            rustls::ClientConnection::new(Arc::clone(&self.0), name).map_err(io::Error::other)?;
        Ok(rustls::StreamOwned::new(conn, socket))
    }

    fn socket(stream: &mut Self::Stream) -> &mut Timed {
        &mut stream.sock
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::outbound::hostile::{drip_handshake, serve};
    use crate::outbound::{self, Bounds, Outgoing, Url};

    #[test]
    fn a_tls_handshake_dripped_a_byte_at_a_time_ends_at_the_exchange_deadline() {
        // A byte every 200 ms for 8 s: every read gets its byte well
        // within the 10 s a read may wait.
        let every = Duration::from_millis(200);
        let addr = serve(move |socket| drip_handshake(socket, every, 40));
        let bounds = Bounds {
            connect: Duration::from_secs(2),
            io: Duration::from_secs(10),
            exchange: Duration::from_millis(500),
            head: 1024,
            body: 1024,
        };
        let get = Outgoing {
            method: "GET",
            fields: &[],
            body: b"",
        };
        let url = Url::parse(&format!("https://{addr}/"), true).unwrap();
        let tls = ClientTls::new(rustls::RootCertStore::empty()).unwrap();
        let started = Instant::now();
        let failed = outbound::open(&url, &get, Some(&tls), &bounds);
        let took = started.elapsed();
        let why = failed
            .err()
            .expect("a handshake that never ends cannot succeed");
        assert_eq!(why.kind(), io::ErrorKind::TimedOut, "{why}");
        assert!(
            took < Duration::from_secs(2),
            "the exchange took {took:?}: {why}"
        );
    }
}
