//! The one outbound HTTP/1.1 client: a request sent on a connection of
//! its own (`Connection: close`), its answer read within bounds. The
//! webhook sender and the ACME client send through it, and an answer
//! streamed for as long as the server likes (server-sent events) is read
//! through it an event at a time. Three ways to read an answer: its
//! status only ([`status`], a webhook's, which carries no body framing
//! into the plain build), whole ([`open`], then [`Answering::fetch`]), or
//! as events ([`Answering::events`]).
//!
//! Bounds: the connect, each read and write, and the whole exchange have
//! timeouts ([`Bounds`]; the exchange's is a deadline every wait of the
//! socket, a TLS handshake's included, keeps within: `timed.rs`); the
//! head and the body have sizes, and the answer is read in time linear in
//! its size however the server cuts it up (`incoming.rs`, sans I/O).
//! Framing: `Content-Length`, chunked, or up to the server's close.
//! Redirects are never followed: a `3xx` is the answer, as any other
//! status. Only the name's lookup is not bounded here: it is the system
//! resolver's, with its own timeouts.
//!
//! TLS is the caller's [`Handshake`], which the TLS seam implements
//! (`transport::ClientTls`; in the plain build a type with no value, so an
//! `https://` branch compiles away): this module names no build option.
//! Files: `url.rs` (a URL taken apart), `timed.rs` (the socket),
//! `incoming.rs` (an answer's framing), `answering.rs` (an answer read
//! from its connection), `events.rs` (server-sent events); in tests,
//! `hostile.rs` (bad servers on loopback).

mod answering;
mod events;
#[cfg(test)]
pub mod hostile;
mod incoming;
mod timed;
mod url;

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

pub use answering::{Answering, Fetched};
pub use events::{Events, Message};
pub use timed::Timed;
pub use url::Url;

/// How long an exchange's steps may take and how large its answer may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// How long a connection may take to open.
    pub connect: Duration,
    /// How long one read or write may wait.
    pub io: Duration,
    /// How long a whole exchange may take (a stream's, until its head is
    /// in).
    pub exchange: Duration,
    /// The most bytes of an answer's head.
    pub head: usize,
    /// The most bytes of an answer's body read whole.
    pub body: usize,
}

/// TLS as a client: makes a connected socket a stream that verifies the
/// server as `host`, its handshake done as it is first written or read.
pub trait Handshake {
    type Stream: Read + Write;

    /// `socket`, connected to `host`, as a TLS client stream.
    fn connect(&self, host: &str, socket: Timed) -> io::Result<Self::Stream>;

    /// The socket under `stream`.
    fn socket(stream: &mut Self::Stream) -> &mut Timed;
}

/// A request: its method, the fields the caller adds (`Host`,
/// `Content-Length` and `Connection` are the client's), and its body.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    pub method: &'a str,
    pub fields: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
}

/// Sends `request` to `url` (over `tls` when it is `https://`) and reads
/// its answer's head: the answer, its body still to read.
pub fn open<H: Handshake>(
    url: &Url,
    request: &Outgoing<'_>,
    tls: Option<&H>,
    bounds: &Bounds,
) -> io::Result<Answering<H>> {
    let link = send(url, request, tls, bounds)?;
    Answering::read_head(link, request.method == "HEAD", bounds)
}

/// Sends `request` as [`open`] does and reads its answer's status only
/// (what a webhook's sender wants to know); the rest is left unread.
pub fn status<H: Handshake>(
    url: &Url,
    request: &Outgoing<'_>,
    tls: Option<&H>,
    bounds: &Bounds,
) -> io::Result<u16> {
    let mut link = send(url, request, tls, bounds)?;
    let mut chunk = [0u8; 1024];
    Ok(answering::read_heading(&mut link, bounds, &mut chunk)?
        .0
        .status)
}

/// A connection to `url` with `request` written on it, all by the
/// exchange's deadline.
fn send<H: Handshake>(
    url: &Url,
    request: &Outgoing<'_>,
    tls: Option<&H>,
    bounds: &Bounds,
) -> io::Result<Link<H>> {
    let deadline = Instant::now() + bounds.exchange;
    let socket = Timed::connect(url, bounds, deadline)?;
    let mut link = match (url.https, tls) {
        (false, _) => Link::Plain(socket),
        (true, Some(tls)) => Link::Tls(tls.connect(&url.host, socket)?),
        (true, None) => {
            let why = "no TLS client for an https:// URL";
            return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
        }
    };
    link.write_all(&bytes(url, request))?;
    link.flush()?;
    Ok(link)
}

/// The request's bytes, written at once: its line, `Host`, the caller's
/// fields, the body's length, `Connection: close`, the body.
fn bytes(url: &Url, request: &Outgoing<'_>) -> Vec<u8> {
    let mut head = Vec::new();
    for part in [
        request.method,
        " ",
        &url.path,
        " HTTP/1.1\r\nHost: ",
        &url.authority,
    ] {
        head.extend_from_slice(part.as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    for (name, value) in request.fields {
        for part in [*name, ": ", *value, "\r\n"] {
            head.extend_from_slice(part.as_bytes());
        }
    }
    if !request.body.is_empty() || request.method == "POST" {
        head.extend_from_slice(b"Content-Length: ");
        head.extend_from_slice(itoa::Buffer::new().format(request.body.len()).as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head.extend_from_slice(request.body);
    head
}

/// A connection: plain, or TLS over the socket.
pub(crate) enum Link<H: Handshake> {
    Plain(Timed),
    Tls(H::Stream),
}

impl<H: Handshake> Link<H> {
    fn socket(&mut self) -> &mut Timed {
        match self {
            Link::Plain(socket) => socket,
            Link::Tls(stream) => H::socket(stream),
        }
    }
}

impl<H: Handshake> Read for Link<H> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Link::Plain(socket) => socket.read(buf),
            Link::Tls(stream) => stream.read(buf),
        }
    }
}

impl<H: Handshake> Write for Link<H> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Link::Plain(socket) => socket.write(buf),
            Link::Tls(stream) => stream.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Link::Plain(socket) => socket.flush(),
            Link::Tls(stream) => stream.flush(),
        }
    }
}

#[cfg(test)]
mod tests;
