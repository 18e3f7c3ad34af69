//! One delivery attempt: a blocking HTTP/1.1 POST over a fresh connection
//! (TLS for an `https://` target, the certificate and host name verified,
//! by `transport::ClientTls`: in a build without TLS no target is https
//! and that branch compiles away), its response status read with
//! `httparse`, all within one deadline.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::{Target, WebhookConfig};
use crate::transport;

/// Largest response head read; the body is never read.
const MAX_HEAD: usize = 16 * 1024;

/// POSTs `body` with `headers` (name, value) to `target`; the response
/// status, or why there is none. Everything (connect, the TLS handshake,
/// write, read) must fit in `timeout`. Name resolution uses the system
/// resolver and is not bounded by it.
pub(super) fn post(
    target: &Target,
    config: &WebhookConfig,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> io::Result<u16> {
    let deadline = Instant::now() + timeout;
    let left = || time_left(deadline);
    let mut last_error = io::Error::new(io::ErrorKind::NotFound, "host has no address");
    let mut stream = None;
    for addr in (target.host.as_str(), target.port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, left()?) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last_error = e,
        }
    }
    let mut stream = Timed {
        socket: stream.ok_or(last_error)?,
        deadline,
    };
    let request = request(target, headers, body);
    if transport::WITH_TLS && target.https {
        let tls = config
            .tls
            .as_ref()
            .ok_or_else(|| io::Error::other("no TLS client configuration"))?;
        return exchange(&mut tls.connect(&target.host, stream)?, &request);
    }
    exchange(&mut stream, &request)
}

/// A socket timeout reads as `WouldBlock` ("Resource temporarily
/// unavailable"): said as what it is.
fn timed_out(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock => io::Error::new(io::ErrorKind::TimedOut, "timed out"),
        _ => e,
    }
}

fn time_left(deadline: Instant) -> io::Result<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "timed out"))
}

/// The connection, each read and write of it limited to what is left of
/// the attempt's time: a receiver that sends a byte now and then (within
/// a handshake, or a response head) cannot stretch the attempt.
struct Timed {
    socket: TcpStream,
    deadline: Instant,
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.socket
            .set_read_timeout(Some(time_left(self.deadline)?))?;
        self.socket.read(buf).map_err(timed_out)
    }
}

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.socket
            .set_write_timeout(Some(time_left(self.deadline)?))?;
        self.socket.write(buf).map_err(timed_out)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.socket.flush()
    }
}

/// The request's bytes: head and body.
fn request(target: &Target, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut request = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        target.path,
        target.authority,
        body.len()
    );
    for (name, value) in headers {
        request.push_str(name);
        request.push_str(": ");
        request.push_str(value);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Sends `request` on `stream` and reads the response's status.
fn exchange(stream: &mut (impl Read + Write), request: &[u8]) -> io::Result<u16> {
    stream.write_all(request)?;
    stream.flush()?;

    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let mut response = httparse::Response::new(&mut fields);
        match response.parse(&head) {
            Ok(httparse::Status::Complete(len)) => match response.code {
                // An interim 1xx is followed by the real response.
                Some(100..=199) => {
                    head.drain(..len);
                    continue;
                }
                Some(status) => return Ok(status),
                None => return Err(io::Error::new(io::ErrorKind::InvalidData, "no status")),
            },
            Ok(httparse::Status::Partial) if head.len() < MAX_HEAD => {}
            Ok(httparse::Status::Partial) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "response head too large",
                ));
            }
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before a response",
            ));
        }
        head.extend_from_slice(&chunk[..n]);
    }
}
