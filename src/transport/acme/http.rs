//! The ACME client's HTTP: one blocking HTTP/1.1 exchange per request,
//! over a std `TcpStream` and a rustls client connection verified against
//! the system's CA certificates and `--acme-ca` (`trust.rs`), implementing
//! the protocol library's `HttpClient`.
//!
//! Why our own: the library's default is hyper on tokio, far heavier than
//! the dozen requests an order makes. Every exchange is bounded: the
//! connect, each read and write, and the whole exchange have timeouts
//! ([`Limits`]; the whole exchange's is a deadline that every read and
//! write of the socket, the TLS handshake's included, waits within), and
//! the answer at most `answer::MAX_RESPONSE` bytes, read by `answer.rs` in
//! time linear in its size however the server cuts it up. Only the name's
//! lookup is not bounded here: it is the system resolver's, with its own
//! timeouts. Each request says `Connection: close`; the answer ends at its
//! `Content-Length`, its last chunk, or the server's close.

use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use instant_acme::{BodyWrapper, BytesResponse, Error, HttpClient};
use rustls::pki_types::ServerName;

use super::answer::{Answer, Parsed};

/// How long an exchange's steps may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a connection may take to open.
    pub connect: Duration,
    /// How long one read or write may wait.
    pub io: Duration,
    /// How long a whole exchange may take.
    pub exchange: Duration,
}

/// The limits of every exchange with a CA.
pub const LIMITS: Limits = Limits {
    connect: Duration::from_secs(10),
    io: Duration::from_secs(20),
    exchange: Duration::from_secs(60),
};

/// The client the protocol library sends its requests through.
#[derive(Clone)]
pub struct Client {
    tls: Arc<rustls::ClientConfig>,
    limits: Limits,
}

impl Client {
    /// Verifies servers against `roots`, within [`LIMITS`].
    pub fn new(roots: rustls::RootCertStore) -> Result<Client, String> {
        Client::with_limits(roots, LIMITS)
    }

    /// Verifies servers against `roots`, within `limits` (the tests'
    /// are short).
    pub fn with_limits(roots: rustls::RootCertStore, limits: Limits) -> Result<Client, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Client {
            tls: Arc::new(tls),
            limits,
        })
    }
}

type Pending = Pin<Box<dyn Future<Output = Result<BytesResponse, Error>> + Send>>;

impl HttpClient for Client {
    fn request(&self, request: http::Request<BodyWrapper<Bytes>>) -> Pending {
        let tls = Arc::clone(&self.tls);
        let limits = self.limits;
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let body = bytes_of(body);
            let answer = exchange(&tls, limits, &parts, &body)
                .map_err(|e| Error::Other(format!("{} {}: {e}", parts.method, parts.uri).into()))?;
            Ok(answer)
        })
    }
}

/// A request's body, whole: the library's body type holds it in one
/// piece, ready at once.
fn bytes_of(mut body: BodyWrapper<Bytes>) -> Vec<u8> {
    use http_body::Body;
    let mut out = Vec::new();
    let mut cx = Context::from_waker(Waker::noop());
    while let Poll::Ready(Some(Ok(frame))) = Pin::new(&mut body).poll_frame(&mut cx) {
        if let Ok(data) = frame.into_data() {
            out.extend_from_slice(&data);
        }
    }
    out
}

/// Where a request goes.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    host: String,
    port: u16,
    /// The path and query, at least `/`.
    path: String,
}

/// An `https://` URL taken apart; nothing else is spoken.
fn target(uri: &http::Uri) -> io::Result<Target> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, why.to_string());
    if uri.scheme_str() != Some("https") {
        return Err(bad("only https:// URLs are followed"));
    }
    let host = uri.host().ok_or_else(|| bad("the URL has no host"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    Ok(Target {
        host: host.to_string(),
        port: uri.port_u16().unwrap_or(443),
        path: if path.is_empty() { "/" } else { path }.to_string(),
    })
}

/// One request and its answer, on a connection of its own.
fn exchange(
    tls: &Arc<rustls::ClientConfig>,
    limits: Limits,
    parts: &http::request::Parts,
    body: &[u8],
) -> io::Result<BytesResponse> {
    let deadline = Instant::now() + limits.exchange;
    let target = target(&parts.uri)?;
    let socket = connect(&target, limits, deadline)?;
    let name = ServerName::try_from(target.host.clone())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not a TLS server name"))?;
    let socket = Bounded {
        socket,
        limits,
        deadline,
    };
    let conn = rustls::ClientConnection::new(Arc::clone(tls), name).map_err(io::Error::other)?;
    let mut stream = rustls::StreamOwned::new(conn, socket);
    stream.write_all(&head(parts, &target, body.len()))?;
    stream.write_all(body)?;
    stream.flush()?;
    let head_only = parts.method == http::Method::HEAD;
    let (status, headers, body) = read_answer(&mut stream, head_only)?;
    let mut answer = http::Response::builder().status(status);
    for (name, value) in headers {
        answer = answer.header(name, value);
    }
    let (parts, ()) = answer
        .body(())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?
        .into_parts();
    Ok(BytesResponse {
        parts,
        body: Box::new(Bytes::from(body)),
    })
}

/// A socket to `target`, opened by `deadline`.
fn connect(target: &Target, limits: Limits, deadline: Instant) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
    for addr in (target.host.as_str(), target.port).to_socket_addrs()? {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(over(limits));
        }
        match TcpStream::connect_timeout(&addr, left.min(limits.connect)) {
            Ok(socket) => {
                socket.set_nodelay(true)?;
                return Ok(socket);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The socket of one exchange: a read or write waits at most
/// `limits.io`, and never past the exchange's deadline, so that a server
/// that drips a byte now and then, in the TLS handshake or in its answer,
/// cannot stretch the exchange past `limits.exchange`.
struct Bounded {
    socket: TcpStream,
    limits: Limits,
    deadline: Instant,
}

impl Bounded {
    /// How long the next read or write may wait; an error once the
    /// deadline has passed.
    fn wait(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(over(self.limits));
        }
        Ok(left.min(self.limits.io))
    }

    /// A wait that ended without a byte, in words.
    fn timed_out(&self, e: io::Error) -> io::Error {
        if !matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            e
        } else if Instant::now() >= self.deadline {
            over(self.limits)
        } else {
            let io = self.limits.io;
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the server was silent for {io:?}"),
            )
        }
    }
}

/// The exchange's deadline has passed.
fn over(limits: Limits) -> io::Error {
    let exchange = limits.exchange;
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("the exchange took over {exchange:?}"),
    )
}

impl Read for Bounded {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.socket.set_read_timeout(Some(self.wait()?))?;
        self.socket.read(buf).map_err(|e| self.timed_out(e))
    }
}

impl Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.socket.set_write_timeout(Some(self.wait()?))?;
        self.socket.write(buf).map_err(|e| self.timed_out(e))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.socket.flush()
    }
}

/// The request's head: its line, `Host`, the library's headers, the
/// body's length, `Connection: close`.
fn head(parts: &http::request::Parts, target: &Target, body: usize) -> Vec<u8> {
    let mut head = format!("{} {} HTTP/1.1\r\nHost: ", parts.method, target.path);
    match (target.host.contains(':'), target.port) {
        (true, 443) => head.push_str(&format!("[{}]", target.host)),
        (true, port) => head.push_str(&format!("[{}]:{port}", target.host)),
        (false, 443) => head.push_str(&target.host),
        (false, port) => head.push_str(&format!("{}:{port}", target.host)),
    }
    head.push_str("\r\n");
    let mut head = head.into_bytes();
    for (name, value) in &parts.headers {
        if matches!(name.as_str(), "host" | "content-length" | "connection") {
            continue;
        }
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    if body > 0 || parts.method == http::Method::POST {
        head.extend_from_slice(format!("Content-Length: {body}\r\n").as_bytes());
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head
}

/// Reads until the answer is whole, within the bounds (the deadline is
/// the stream's).
fn read_answer(stream: &mut impl Read, head_only: bool) -> io::Result<Parsed> {
    let mut answer = Answer::new(head_only);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let read = match stream.read(&mut chunk) {
            Ok(n) => n,
            // A server that closes without TLS's close_notify: the end of
            // the answer, if its framing says it is whole.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let whole = match read {
            0 => answer.close().map(Some),
            _ => answer.push(&chunk[..read]),
        };
        if let Some(parsed) = whole.map_err(invalid)? {
            return Ok(parsed);
        }
    }
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
