//! A raw HTTP/1.1 client that can send malformed bytes and read pipelined
//! replies (bodies by length, chunked or up to the close), and the
//! requests and metrics read that tests make with it.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};

use super::PATIENCE;

/// One request on a fresh connection to any server (a running binary).
pub fn send_to(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut client = Client::connect(addr);
    client.send(&request(method, path, headers, body));
    client.reply()
}

/// `plantstore_connections_open` from the server's `/metrics`, which
/// counts the connection that asks: 1 when no other client is connected.
pub fn open_connections(addr: SocketAddr, token: &str) -> u64 {
    let auth = format!("Bearer {token}");
    let reply = send_to(addr, "GET", "/metrics", &[("Authorization", &auth)], "");
    assert_eq!(reply.status, 200, "{}", reply.text());
    let text = reply.text();
    text.lines()
        .find_map(|l| l.strip_prefix("plantstore_connections_open "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no plantstore_connections_open in {text}"))
}

/// The bytes of a request with a Content-Length body.
pub fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        text.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    text.push_str("\r\n");
    text.push_str(body);
    text.into_bytes()
}

/// A parsed response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Chunks of a chunked body (0 for any other).
    pub chunks: usize,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Asserts an Error body: `error` repeats the status, `message` is text
    /// that mentions `needle`.
    pub fn assert_error(&self, status: u16, needle: &str) {
        assert_eq!(self.status, status, "body: {}", self.text());
        assert_eq!(self.header("content-type"), Some("application/json"));
        let body = self.json();
        assert_eq!(body["error"], status, "{body}");
        let message = body["message"].as_str().expect("message is a string");
        assert!(
            message.contains(needle),
            "{message:?} should mention {needle:?}"
        );
    }
}

/// A raw connection that keeps unread bytes between replies.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    /// Reads wait up to `PATIENCE`: a test that expects nothing to come
    /// sets a shorter timeout of its own.
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// A client on a connection the caller made (with its own timeouts).
    pub fn from_stream(stream: TcpStream) -> Client {
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// `send`, for a server that may be gone.
    pub fn try_send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// `reply`, or `None` where the connection failed or the read timed
    /// out (a server that may be gone).
    pub fn try_reply(&mut self) -> Option<Reply> {
        let read = std::panic::AssertUnwindSafe(|| self.read_reply(true));
        std::panic::catch_unwind(read).ok()
    }

    /// Reads one response with a body.
    pub fn reply(&mut self) -> Reply {
        self.read_reply(true)
    }

    /// Reads one response to HEAD: headers only.
    pub fn reply_head(&mut self) -> Reply {
        self.read_reply(false)
    }

    fn read_reply(&mut self, with_body: bool) -> Reply {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut parsed = httparse::Response::new(&mut headers);
            if let Ok(httparse::Status::Complete(len)) = parsed.parse(&self.buf) {
                let status = parsed.code.unwrap();
                let headers: Vec<(String, String)> = parsed
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_string(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect();
                let length = headers
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                    .map(|(_, v)| v.parse::<usize>().unwrap())
                    .unwrap_or(0);
                let has = |name: &str, value: &str| {
                    headers
                        .iter()
                        .any(|(n, v)| n.eq_ignore_ascii_case(name) && v.eq_ignore_ascii_case(value))
                };
                let chunked = has("transfer-encoding", "chunked");
                let until_close = !chunked
                    && has("connection", "close")
                    && !headers
                        .iter()
                        .any(|(n, _)| n.eq_ignore_ascii_case("content-length"));
                let with_body = with_body && status >= 200 && status != 204 && status != 304;
                self.buf.drain(..len);
                let (body, chunks) = if !with_body {
                    (Vec::new(), 0)
                } else if chunked {
                    self.chunked_body()
                } else if until_close {
                    while self.more() > 0 {}
                    (std::mem::take(&mut self.buf), 0)
                } else {
                    self.fill_to(length);
                    (self.buf.drain(..length).collect(), 0)
                };
                return Reply {
                    status,
                    headers,
                    body,
                    chunks,
                };
            }
            assert!(self.more() > 0, "connection closed before a full response");
        }
    }

    /// Decodes a chunked body (no trailers) at the front of the buffer:
    /// the body and how many chunks it came in.
    fn chunked_body(&mut self) -> (Vec<u8>, usize) {
        let mut body = Vec::new();
        let mut chunks = 0;
        // A stream (the change feed) never ends its body: a test that
        // reads one as a reply fails here instead of waiting forever.
        let until = std::time::Instant::now() + 2 * PATIENCE;
        loop {
            assert!(
                std::time::Instant::now() < until,
                "a chunked body still going after {:?}",
                2 * PATIENCE
            );
            let line = loop {
                if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                    break at;
                }
                assert!(self.more() > 0, "connection closed inside a chunk size");
            };
            let size = std::str::from_utf8(&self.buf[..line]).expect("a chunk size");
            let size = usize::from_str_radix(size, 16).expect("a hexadecimal chunk size");
            self.fill_to(line + 2 + size + 2);
            assert_eq!(&self.buf[line + 2 + size..line + 4 + size], b"\r\n");
            body.extend_from_slice(&self.buf[line + 2..line + 2 + size]);
            self.buf.drain(..line + 4 + size);
            if size == 0 {
                return (body, chunks);
            }
            chunks += 1;
        }
    }

    fn fill_to(&mut self, n: usize) {
        while self.buf.len() < n {
            assert!(self.more() > 0, "connection closed inside a body");
        }
    }

    fn more(&mut self) -> usize {
        let mut chunk = [0u8; 8192];
        let n = loop {
            match self.stream.read(&mut chunk) {
                // A signal arrived during the read: not the server's doing.
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                read => break read.expect("read"),
            }
        };
        self.buf.extend_from_slice(&chunk[..n]);
        n
    }

    /// Whether the server closed the connection (EOF, or a reset) with no
    /// further bytes.
    pub fn closed(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe),
        }
    }
}
