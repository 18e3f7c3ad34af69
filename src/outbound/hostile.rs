//! Bad servers for the client's tests: a real `TcpListener` on 127.0.0.1
//! that answers the way a hostile or broken server would (a head without
//! end, a body without end, a TLS handshake or an answer dripped a byte
//! at a time, an answer cut into tiny pieces). Test code only: what any
//! client of ours must survive (the ACME client's tests serve TLS over
//! them too).
//!
//! A server runs on a thread of its own and stops on its own: when its
//! script ends, or when the client has gone (a write fails).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// Serves each connection to a new listener on 127.0.0.1 with `script`,
/// on a thread of its own, for as long as the process runs; the
/// listener's address.
pub fn serve(script: impl Fn(TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let script = Arc::new(script);
    std::thread::spawn(move || {
        for socket in listener.incoming().flatten() {
            let script = Arc::clone(&script);
            std::thread::spawn(move || script(socket));
        }
    });
    addr
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

/// Writes `bytes` again and again until the client has gone.
pub fn endless(socket: &mut impl Write, bytes: &[u8]) {
    while socket.write_all(bytes).is_ok() {}
}

/// A request's head and as much of its body as its `Content-Length` says
/// (`Connection: close` is the client's, so one request a connection).
pub fn read_request(stream: &mut impl Read) -> io::Result<(String, Vec<u8>)> {
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
