//! Connections that are not a well-behaved TLS client: plain HTTP on the
//! TLS port, garbage bytes, a stalled handshake, one past the connection
//! cap; and readers that are slow or stop reading a large response.

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{Certs, TOKEN, curl, healthz, metric, until_closed};
use crate::http::date::assert_dated;
use crate::process::binary::Running;
use crate::process::reload::logged;
use crate::support::{PATIENCE, Reply, TempDir};

#[test]
fn plain_http_on_the_tls_port_is_told_to_use_https_and_garbage_is_closed() {
    let certs = Certs::new("tls-plain", "ec");
    let server = certs.start(&[]);
    let mut plain = TcpStream::connect(server.addr).unwrap();
    plain
        .write_all(b"GET /plants HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let answer = String::from_utf8(until_closed(&mut plain, PATIENCE)).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    assert!(answer.contains("Connection: close"), "{answer}");
    assert!(answer.contains("\r\nDate: "), "{answer}");
    assert!(answer.ends_with("use an https:// address.\r\n"), "{answer}");

    // Bytes that are neither TLS nor HTTP: closed, nothing but an alert.
    for garbage in [
        &[0x01u8, 0x02, 0x03, 0xff, 0x00][..],
        &[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5],
    ] {
        let mut stream = TcpStream::connect(server.addr).unwrap();
        stream.write_all(garbage).unwrap();
        let got = until_closed(&mut stream, PATIENCE);
        assert!(
            got.len() < 64 && got.first().is_none_or(|&b| b == 0x15),
            "{got:?}"
        );
    }
    // The server still serves.
    assert_eq!(healthz(&certs, &server), "200");
}

#[test]
fn answers_over_tls_carry_the_date() {
    let before = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let certs = Certs::new("tls-date", "ec");
    let server = certs.start(&[]);
    for path in ["/healthz", "/plants/1", "/export"] {
        let (code, _, text) = curl(&certs, server.addr, path, &["-D", "-"]);
        assert_eq!(code, 0, "{text}");
        let head = text.split("\r\n\r\n").next().unwrap();
        let reply = Reply {
            status: 0,
            headers: head
                .lines()
                .filter_map(|l| l.split_once(": "))
                .map(|(n, v)| (n.to_string(), v.trim_end().to_string()))
                .collect(),
            body: Vec::new(),
            chunks: 0,
        };
        assert_dated(&reply, before, path);
    }
}

#[test]
fn a_stalled_handshake_is_closed_by_the_head_deadline() {
    let certs = Certs::new("tls-stall", "ec");
    let server = certs.start(&["--head-timeout", "1"]);
    let mut stream = TcpStream::connect(server.addr).unwrap();
    // The start of a ClientHello record, and then nothing.
    stream
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .unwrap();
    let started = Instant::now();
    until_closed(&mut stream, PATIENCE);
    // Goal: 1 s (the deadline) plus a sweep; bound: several times that.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "closed after {took:?}");
    assert!(took >= Duration::from_millis(900), "closed after {took:?}");
    // Logged and counted as a failed handshake.
    assert!(
        logged(&server, "not done within the head timeout"),
        "{:?}",
        server.log()
    );
    let (_, _, metrics) = curl(&certs, server.addr, "/metrics", &[] as &[&str]);
    assert_eq!(
        metric(&metrics, "plantstore_tls_handshake_failures_total"),
        1,
        "{metrics}"
    );
}

#[test]
fn past_the_connection_cap_a_tls_connection_is_closed_without_a_plain_answer() {
    let certs = Certs::new("tls-cap", "ec");
    let server = certs.start(&["--max-connections", "1"]);
    // The one connection allowed, held open mid-handshake.
    let mut held = TcpStream::connect(server.addr).unwrap();
    held.write_all(&[0x16, 0x03, 0x01]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut refused = TcpStream::connect(server.addr).unwrap();
    let _ = refused.write_all(include_bytes!("../../../data/tls/client_hello_tls13.bin"));
    let got = until_closed(&mut refused, PATIENCE);
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    drop(held);
}

/// Python's ssl client: `GET /export` over HTTPS with `Connection: close`
/// and a small receive buffer; `slow` waits before reading and then reads
/// in small pieces, 10 ms apart: the server is always ahead, and the
/// socket full, to the end. Prints the bytes of the whole response and whether it
/// ended with close_notify (`clean`) or a bare TCP close (`ragged`).
const EXPORT_READER: &str = r#"
import socket, ssl, sys, time
port, ca, token, slow = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == "slow"
context = ssl.create_default_context(cafile=ca)
raw = socket.socket()
raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
raw.connect(("127.0.0.1", port))
conn = context.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False)
conn.sendall(f"GET /export HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n".encode())
if slow:
    time.sleep(0.5)
got, end = 0, "clean"
while True:
    try:
        piece = conn.recv(4096 if slow else 65536)
    except ssl.SSLEOFError:
        end = "ragged"
        break
    if not piece:
        break
    got += len(piece)
    if slow:
        time.sleep(0.01)
print(got, end)
"#;

/// A seed file of `n` plants (NDJSON), in `dir`.
fn seed_file(dir: &TempDir, n: usize) -> String {
    let path = dir.join("seed.ndjson");
    let lines: String = (1..=n)
        .map(|id| {
            format!(
                "{{\"id\":{id},\"name\":\"{}{id}\",\"tag\":\"t{}\"}}\n",
                "n".repeat(200),
                id % 7
            )
        })
        .collect();
    std::fs::write(&path, lines).unwrap();
    path.display().to_string()
}

fn read_export(certs: &Certs, server: &Running, how: &str) -> String {
    let out = Command::new("python3")
        .args(["-c", EXPORT_READER, &server.addr.port().to_string()])
        .arg(&certs.ca)
        .args([TOKEN, how])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_slow_reader_gets_the_whole_response_and_a_close_notify() {
    let certs = Certs::new("tls-slow-reader", "ec");
    let seed = seed_file(&certs.dir, 2_000);
    let server = certs.start(&["--seed", &seed, "--threads", "1"]);
    let fast = read_export(&certs, &server, "fast");
    assert!(fast.ends_with(" clean"), "{fast}");
    let bytes: usize = fast.split(' ').next().unwrap().parse().unwrap();
    assert!(bytes > 400_000, "{fast}");
    // The socket fills while the client waits; what rustls holds then must
    // still leave before the close, and the close must say so.
    for _ in 0..3 {
        assert_eq!(read_export(&certs, &server, "slow"), fast);
    }
}

#[test]
fn a_reader_that_stops_is_closed_within_the_write_timeout() {
    let certs = Certs::new("tls-stalled-reader", "ec");
    let seed = seed_file(&certs.dir, 40_000);
    let server = certs.start(&[
        "--seed",
        &seed,
        "--write-timeout",
        "2",
        "--idle-timeout",
        "1",
    ]);
    // A client that asks for the export and never reads.
    let script = r#"
import socket, ssl, sys, time
context = ssl.create_default_context(cafile=sys.argv[2])
raw = socket.socket()
raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
raw.connect(("127.0.0.1", int(sys.argv[1])))
conn = context.wrap_socket(raw, server_hostname="localhost")
conn.sendall(f"GET /export HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {sys.argv[3]}\r\n\r\n".encode())
print("sent", flush=True)
time.sleep(60)
"#;
    let mut stalled = Command::new("python3")
        .args(["-c", script, &server.addr.port().to_string()])
        .arg(&certs.ca)
        .arg(TOKEN)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let open = |server: &Running| {
        let (_, _, text) = curl(&certs, server.addr, "/metrics", &[] as &[&str]);
        metric(&text, "plantstore_connections_open")
    };
    let started = Instant::now();
    // The stalled client is held open at first (the curl is the other).
    std::thread::sleep(Duration::from_millis(500));
    let mut closed = false;
    while started.elapsed() < Duration::from_secs(20) {
        if open(&server) == 1 {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let took = started.elapsed();
    let _ = stalled.kill();
    let _ = stalled.wait();
    // Goal: the write timeout (2 s) for the protocol, then 2 s for what
    // rustls holds; bound: several times that.
    assert!(closed, "the stalled reader was still open after {took:?}");
}
