//! One delivery attempt: a blocking HTTP/1.1 POST over a fresh connection,
//! its response status read with `httparse`, all within one deadline.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::Target;

/// Largest response head read; the body is never read.
const MAX_HEAD: usize = 16 * 1024;

/// POSTs `body` with `headers` (name, value) to `target`; the response
/// status, or why there is none. Everything (connect, write, read) must fit
/// in `timeout`. Name resolution uses the system resolver and is not
/// bounded by it.
pub(super) fn post(
    target: &Target,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> io::Result<u16> {
    let deadline = Instant::now() + timeout;
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "timed out"))
    };
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
    let mut stream = stream.ok_or(last_error)?;
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
    stream.set_write_timeout(Some(left()?))?;
    stream.write_all(&bytes)?;

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
        stream.set_read_timeout(Some(left()?))?;
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
