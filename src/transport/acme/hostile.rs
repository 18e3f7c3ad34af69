//! Bad servers for the ACME client's tests: a real `TcpListener` on
//! 127.0.0.1 that answers the way a hostile or broken CA would (a TLS
//! handshake dripped a byte at a time, an answer dripped or cut into
//! 1-byte TLS records), and a trusted test identity for the ones that
//! speak TLS. Test code only: what any client of ours must survive, so
//! that the tests stay when the client is replaced.
//!
//! A server runs on a thread of its own and stops on its own: when its
//! script ends, or when the client has gone (a write fails).

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

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

/// Serves each connection to a new listener on 127.0.0.1 with `script`,
/// on a thread of its own, for as long as the process runs; the listener's
/// `https://` base URL.
pub fn serve(script: impl Fn(TcpStream) + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("https://{}", listener.local_addr().unwrap());
    let script = Arc::new(script);
    std::thread::spawn(move || {
        for socket in listener.incoming().flatten() {
            let script = Arc::clone(&script);
            std::thread::spawn(move || script(socket));
        }
    });
    base
}

/// Writes `bytes` one at a time, `every` apart, until they are all sent
/// or the client has gone.
pub fn drip(socket: &mut impl Write, bytes: &[u8], every: Duration) {
    for byte in bytes {
        if socket
            .write_all(&[*byte])
            .and_then(|()| socket.flush())
            .is_err()
        {
            return;
        }
        std::thread::sleep(every);
    }
}

/// A TLS server record's header, then its body a byte every `every`: the
/// client's handshake never gets a whole record before `bytes` run out.
pub fn drip_handshake(mut socket: TcpStream, every: Duration, bytes: usize) {
    let _ = socket.set_nodelay(true);
    let mut record = vec![0x16, 0x03, 0x03, 0x40, 0x00];
    record.resize(bytes, 0);
    drip(&mut socket, &record, every);
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
    let (head, body) = read_request(&mut tls).ok()?;
    Some((tls, head, body))
}

/// A request's head and as much of its body as its `Content-Length` says
/// (`Connection: close` is the client's, so one request a connection).
fn read_request(stream: &mut impl Read) -> io::Result<(String, Vec<u8>)> {
    let head = read_head(stream)?;
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; length];
    stream.read_exact(&mut body)?;
    Ok((head, body))
}

/// Reads up to the blank line that ends a request's head, a byte at a time
/// (a test's requests are small).
fn read_head(stream: &mut impl Read) -> io::Result<String> {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte)?;
        head.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// The CPU time this thread has used, from `/proc/thread-self/schedstat`
/// (Linux); `None` where it cannot be read.
pub fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}
