//! The ACME client's HTTP: the protocol library's `HttpClient`, each
//! request one exchange of the outbound client (`outbound/`), over TLS
//! verified against the system's CA certificates and `--acme-ca`
//! (`trust.rs`). Only `https://` URLs are followed.
//!
//! Why our own: the library's default is hyper on tokio, far heavier than
//! the dozen requests an order makes. Every exchange is bounded
//! ([`LIMITS`]: the connect, each read and write, the whole exchange, the
//! answer's head and body); the answer is whole when the future is first
//! polled, so the executor (`executor.rs`) never waits.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use instant_acme::{BodyWrapper, BytesResponse, Error, HttpClient};

use crate::outbound::{self, Bounds, Outgoing, Url};
use crate::transport::ClientTls;

/// The bounds of every exchange with a CA.
pub const LIMITS: Bounds = Bounds {
    connect: Duration::from_secs(10),
    io: Duration::from_secs(20),
    exchange: Duration::from_secs(60),
    head: 64 * 1024,
    body: 1024 * 1024,
};

/// The client the protocol library sends its requests through.
#[derive(Clone)]
pub struct Client {
    tls: ClientTls,
    limits: Bounds,
}

impl Client {
    /// Verifies servers against `roots`, within [`LIMITS`].
    pub fn new(roots: rustls::RootCertStore) -> Result<Client, String> {
        Client::with_limits(roots, LIMITS)
    }

    /// Verifies servers against `roots`, within `limits` (the tests'
    /// are short).
    pub fn with_limits(roots: rustls::RootCertStore, limits: Bounds) -> Result<Client, String> {
        Ok(Client {
            tls: ClientTls::new(roots)?,
            limits,
        })
    }
}

type Pending = Pin<Box<dyn Future<Output = Result<BytesResponse, Error>> + Send>>;

impl HttpClient for Client {
    fn request(&self, request: http::Request<BodyWrapper<Bytes>>) -> Pending {
        let client = self.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let body = bytes_of(body);
            let answer = exchange(&client, &parts, &body)
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

/// An `https://` URL taken apart; nothing else is spoken.
fn target(uri: &http::Uri) -> io::Result<Url> {
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    if uri.scheme_str() != Some("https") {
        return Err(bad("only https:// URLs are followed".into()));
    }
    Url::parse(&uri.to_string(), true).map_err(|why| bad(format!("the URL {why}")))
}

/// One request and its answer, on a connection of its own.
fn exchange(
    client: &Client,
    parts: &http::request::Parts,
    body: &[u8],
) -> io::Result<BytesResponse> {
    let url = target(&parts.uri)?;
    let mut fields = Vec::new();
    for (name, value) in &parts.headers {
        if matches!(name.as_str(), "host" | "content-length" | "connection") {
            continue;
        }
        let value = value.to_str().map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "a header's value is not text")
        })?;
        fields.push((name.as_str(), value));
    }
    let request = Outgoing {
        method: parts.method.as_str(),
        fields: &fields,
        body,
    };
    let fetched = outbound::open(&url, &request, Some(&client.tls), &client.limits)?.fetch()?;
    let mut answer = http::Response::builder().status(fetched.status);
    for (name, value) in fetched.fields {
        answer = answer.header(name, value);
    }
    let (parts, ()) = answer
        .body(())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?
        .into_parts();
    Ok(BytesResponse {
        parts,
        body: Box::new(Bytes::from(fetched.body)),
    })
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
