//! Bad CAs for the ACME client's tests: the outbound client's bad servers
//! on loopback (`outbound/hostile.rs`), speaking TLS with a trusted test
//! identity, so that a hostile or broken CA can drip or cut up what it
//! sends in TLS records. Test code only.

use std::net::TcpStream;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::outbound::hostile as outbound;

/// A server certificate for 127.0.0.1 and the roots that trust it.
pub struct Identity {
    pub server: Arc<rustls::ServerConfig>,
    pub roots: rustls::RootCertStore,
}

/// A fresh self-signed identity for 127.0.0.1.
pub fn identity() -> Identity {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let der = CertificateDer::from(made.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![der], key)
        .unwrap();
    Identity {
        server: Arc::new(server),
        roots,
    }
}

/// Serves each connection to a new listener on 127.0.0.1 with `script`
/// (the outbound client's bad servers); the listener's `https://` base
/// URL.
pub fn serve(script: impl Fn(TcpStream) + Send + Sync + 'static) -> String {
    format!("https://{}", outbound::serve(script))
}

/// A server's side of a TLS connection.
pub type Tls = rustls::StreamOwned<rustls::ServerConnection, TcpStream>;

/// The TLS side of a connection as the server, the handshake done, with
/// the request read (its head and body); `None` when the client went
/// away.
pub fn accept_tls(
    socket: TcpStream,
    identity: &Arc<rustls::ServerConfig>,
) -> Option<(Tls, String, Vec<u8>)> {
    let _ = socket.set_nodelay(true);
    let conn = rustls::ServerConnection::new(Arc::clone(identity)).ok()?;
    let mut tls = rustls::StreamOwned::new(conn, socket);
    let (head, body) = outbound::read_request(&mut tls).ok()?;
    Some((tls, head, body))
}
