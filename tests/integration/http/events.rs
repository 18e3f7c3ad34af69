//! What the event-loop engine must do that the thread-per-connection one
//! did not: a deadline for a whole response, strict chunk lines, `Host`
//! rules, absolute-form targets, thousands of connections at once, and a
//! prompt SIGTERM whatever the clients and the webhook receiver are doing.
//!
//! Each test here failed on the thread-per-connection engine. The SIGTERM
//! test runs on each store (from the database, the pool is stopped before
//! the webhook's grace); the rest are the engine's, on the in-memory store.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::process::binary::{Running, create};
use crate::support::Kind;
use crate::support::{
    AUTH, Client, JSON, TestServer, allow_names_of, config, eventually, open_connections, request,
};

/// What one bounded read produced.
enum Got {
    Bytes(usize),
    /// The read timed out with nothing.
    Nothing,
    /// End of stream, or a reset: the server closed the connection.
    Closed,
}

fn read_some(stream: &mut TcpStream, buf: &mut [u8]) -> Got {
    match stream.read(buf) {
        Ok(0) => Got::Closed,
        Ok(n) => Got::Bytes(n),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
            ) =>
        {
            Got::Nothing
        }
        Err(_) => Got::Closed,
    }
}

/// `GET /healthz` on a fresh connection answers 200 within 2 s: it takes
/// milliseconds, and a loop held up by the slow reader would take its
/// write timeout (4 s).
fn healthz_is_prompt(server: &TestServer) {
    let asked = Instant::now();
    let reply = server.send("GET", "/healthz", &[], "");
    assert_eq!(reply.status, 200);
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "/healthz took {:?} while a slow reader was connected",
        asked.elapsed()
    );
}

/// `limits.write_timeout` bounds a whole response, not each write call: a
/// client that reads a large listing more slowly than that allows is cut
/// off, and meanwhile other clients are answered at once.
///
/// The slow client asks for three ~18 MB listings (pipelined) and reads
/// 2 KiB a second for 6 s, then reads as fast as it can. Bytes the server
/// wrote before closing still sit in the socket buffers, so the close is
/// seen only once they are drained: by 12 s, and before all three listings
/// arrived.
#[test]
fn slow_reader_is_cut_off_at_the_response_deadline_while_others_are_served() {
    let mut config = config();
    config.limits.write_timeout = Duration::from_secs(4);
    // One plant of 18 MB: a listing page holds its first plant whole.
    allow_names_of(&mut config, 18_000_000);
    let server = TestServer::with(config);
    let name = "n".repeat(18_000_000);
    let mut loader = server.client();
    let body = format!(r#"{{"id":1,"name":"{name}"}}"#);
    loader.send(&request("POST", "/plants", &[AUTH, JSON], &body));
    // Only the status: the answer repeats the 18 MB, under the 4 s limit.
    assert_eq!(loader.reply_head().status, 200);
    drop(loader);
    let list = request("GET", "/plants?limit=300", &[AUTH], "");
    // Less than the three listings' bodies, each of which holds the name.
    // (Not measured by reading one: on a loaded machine even a fast reader
    // may take longer than the write timeout for 18 MB.)
    let everything = 3 * name.len();

    let mut slow = server.client();
    slow.stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    slow.send(&list.repeat(3));
    let mut received = 0;
    let mut closed_at = None;
    let mut buf = vec![0u8; 2048];
    // The clock starts with the first bytes: a debug build beside the
    // rest of the suite may take seconds to make the first 18 MB page.
    let asked = Instant::now();
    while received == 0 && asked.elapsed() < Duration::from_secs(60) {
        match read_some(&mut slow.stream, &mut buf) {
            Got::Bytes(n) => received += n,
            Got::Nothing => {}
            Got::Closed => panic!("closed before any byte of the first listing"),
        }
    }
    assert!(received > 0, "no byte of the first listing within 60 s");
    let started = Instant::now();
    while closed_at.is_none() && started.elapsed() < Duration::from_secs(6) {
        let tick = Instant::now();
        match read_some(&mut slow.stream, &mut buf) {
            Got::Bytes(n) => received += n,
            Got::Nothing => {}
            Got::Closed => closed_at = Some(started.elapsed()),
        }
        healthz_is_prompt(&server);
        thread::sleep(Duration::from_secs(1).saturating_sub(tick.elapsed()));
    }
    let mut buf = vec![0u8; 1 << 20];
    while closed_at.is_none() && started.elapsed() < Duration::from_secs(12) {
        match read_some(&mut slow.stream, &mut buf) {
            Got::Bytes(n) => received += n,
            Got::Nothing => {}
            Got::Closed => closed_at = Some(started.elapsed()),
        }
    }
    let Some(closed_at) = closed_at else {
        panic!(
            "slow reader still connected 12 s after its first bytes; it read {received} bytes \
             of the more than {everything} in the three listings' bodies"
        );
    };
    assert!(
        received < everything,
        "all three listings were delivered ({received} bytes) before the close at {closed_at:?}: \
         the slow reader was never cut off"
    );
    healthz_is_prompt(&server);
}

/// The head of an authorised chunked `POST /plants`, then `chunks`.
fn chunked_post(chunks: &str) -> Vec<u8> {
    let mut bytes = b"POST /plants HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer test-token\r\n\
        Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        .to_vec();
    bytes.extend_from_slice(chunks.as_bytes());
    bytes
}

/// Chunks carrying a plant body (`n` bytes of `json`).
type Frame = fn(n: usize, json: &str) -> String;

/// RFC 9112 §7.1: a chunk-size line ends with CRLF and its extensions are
/// tokens and quoted strings. A bare LF or a control byte there is 400 and
/// the connection is closed, since a proxy may have split the stream
/// differently (request smuggling). Every refused case would decode, if
/// accepted leniently, to a valid plant, so a JSON error cannot pass for a
/// framing one; and a valid extension is still accepted.
#[test]
fn chunk_lines_with_a_bare_lf_or_a_control_byte_are_400_and_closed() {
    let server = TestServer::start();
    let json = r#"{"id":10,"name":"ext"}"#;
    let mut client = server.client();
    client.send(&chunked_post(&format!(
        "3;name=value;q=\"x y\"\r\n{}\r\n{:x}\r\n{}\r\n0\r\n\r\n",
        &json[..3],
        json.len() - 3,
        &json[3..]
    )));
    let reply = client.reply();
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["name"], "ext");

    let cases: [(&str, i64, Frame); 5] = [
        // A proxy ending lines at LF sees the size line `N;` and then data.
        ("bare LF inside an extension", 11, |n, json| {
            format!("{n:x};\nxx\r\n{json}\r\n0\r\n\r\n")
        }),
        ("control byte in an extension", 12, |n, json| {
            format!("{n:x};a\x01b\r\n{json}\r\n0\r\n\r\n")
        }),
        ("control byte in a quoted extension value", 13, |n, json| {
            format!("{n:x};q=\"a\x01\"\r\n{json}\r\n0\r\n\r\n")
        }),
        ("control byte in the size", 14, |n, json| {
            format!("{n:x}\x01\r\n{json}\r\n0\r\n\r\n")
        }),
        ("size line ended by a bare LF", 15, |n, json| {
            format!("{n:x}\n{json}\r\n0\r\n\r\n")
        }),
    ];
    let mut wrong = Vec::new();
    for (what, id, frame) in cases {
        let json = format!(r#"{{"id":{id},"name":"lenient"}}"#);
        let mut client = server.client();
        client.send(&chunked_post(&frame(json.len(), &json)));
        let reply = client.reply();
        // A server that kept the connection must not cost the whole
        // patience per case; one that closes does so in milliseconds.
        client
            .stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let (text, closed) = (reply.text(), client.closed());
        if reply.status != 400 || !text.contains("chunk") || !closed {
            wrong.push(format!(
                "{what}: {} {text} (closed: {closed})",
                reply.status
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "each should be 400 naming the chunk, then closed:\n{}",
        wrong.join("\n")
    );
    assert_eq!(
        server.send("GET", "/plants?limit=10", &[AUTH], "").json(),
        serde_json::json!([{"id": 10, "name": "ext"}]),
        "no refused body was stored"
    );
}

/// RFC 9112 §3.2: an HTTP/1.1 request without `Host`, or with two, is 400.
/// HTTP/1.0 has no such rule.
#[test]
fn http_1_1_needs_exactly_one_host_and_http_1_0_none() {
    let server = TestServer::start();
    let mut client = server.client();
    client.send(b"GET /healthz HTTP/1.1\r\n\r\n");
    client.reply().assert_error(400, "Host");

    let mut client = server.client();
    client.send(b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
    client.reply().assert_error(400, "Host");

    let mut client = server.client();
    client.send(b"GET /healthz HTTP/1.0\r\n\r\n");
    let reply = client.reply();
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json(), serde_json::json!({"status": "ok"}));
}

/// RFC 9112 §3.2.2: a server accepts the absolute form of a target and
/// routes on its path and query.
#[test]
fn absolute_form_targets_are_served_by_their_path() {
    let server = TestServer::start();
    assert_eq!(server.create(r#"{"id":1,"name":"a"}"#).status, 200);
    let mut client = server.client();
    client.send(b"GET http://test/healthz HTTP/1.1\r\nHost: test\r\n\r\n");
    let reply = client.reply();
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json(), serde_json::json!({"status": "ok"}));

    client.send(
        b"GET http://test/plants?limit=1 HTTP/1.1\r\nHost: test\r\n\
          Authorization: Bearer test-token\r\n\r\n",
    );
    let reply = client.reply();
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json(), serde_json::json!([{"id": 1, "name": "a"}]));
}

/// RFC 9112 §6.1: `Transfer-Encoding` in an HTTP/1.0 request means faulty
/// framing (1.0 has no chunked coding; a 1.0 proxy would not decode it):
/// 400, the body is never acted on, and the connection is closed.
#[test]
fn chunked_http_1_0_request_is_400_and_closed() {
    let server = TestServer::start();
    let json = r#"{"id":7,"name":"old"}"#;
    let mut client = server.client();
    client.send(
        format!(
            "POST /plants HTTP/1.0\r\nAuthorization: Bearer test-token\r\n\
             Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\
             {:x}\r\n{json}\r\n0\r\n\r\n",
            json.len()
        )
        .as_bytes(),
    );
    client.reply().assert_error(400, "Transfer-Encoding");
    assert!(client.closed());
    assert_eq!(server.send("GET", "/plants/7", &[AUTH], "").status, 404);
}

/// Reads a status line's code, or says why there is none.
fn status_of(client: &mut Client) -> Result<u16, String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        match client.stream.read(&mut byte) {
            Ok(0) => return Err("closed without a reply".into()),
            Ok(_) => line.push(byte[0]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    let text = String::from_utf8_lossy(&line);
    text.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("bad status line {text:?}"))
}

/// With the default connection cap (10,000), 1,500 connections are served
/// at once: each asks for `/healthz` and stays open, and every one gets
/// 200, none 503.
///
/// Only the timeouts are raised: when the listen backlog overflows, a
/// connect waits out a 1 s SYN retry, so opening 1,500 can take several
/// seconds here, and no connection may be closed as idle meanwhile.
#[test]
fn fifteen_hundred_connections_are_served_at_once_by_default() {
    const CONNECTIONS: usize = 1500;
    // Both ends of every connection live in this process, and other tests
    // run beside this one.
    let needed = 2 * CONNECTIONS + 1000;
    // What the server does at start-up anyway (soft limit up to the hard
    // one), done first so the check below sees it.
    plantstore::http::raise_open_file_limit();
    let soft = plantstore::os::open_file_limit();
    assert!(
        soft.is_none_or(|soft| soft >= needed),
        "this test needs an open-file limit of at least {needed} (soft limit is {soft:?}); \
         raise it with `ulimit -n {needed}`"
    );
    let mut config = config();
    config.limits.head_timeout = Duration::from_secs(60);
    config.limits.idle_timeout = Duration::from_secs(60);
    let server = TestServer::with(config);
    let mut clients: Vec<Client> = (0..CONNECTIONS).map(|_| server.client()).collect();
    for client in &mut clients {
        // A connection refused at once may already be reset.
        let _ = client
            .stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n");
    }
    let mut ok = 0;
    let mut other = Vec::new();
    for (i, client) in clients.iter_mut().enumerate() {
        match status_of(client) {
            Ok(200) => ok += 1,
            outcome => other.push((i, outcome)),
        }
    }
    let refused = other.iter().filter(|(_, o)| *o == Ok(503)).count();
    assert!(
        other.is_empty(),
        "{ok} of {CONNECTIONS} got 200, {refused} got 503; the first others: {:?}",
        &other[..other.len().min(5)]
    );
}

/// A thread that runs until its flag is set, then is joined; both happen
/// when it is dropped.
struct Background {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    fn spawn(work: impl FnOnce(&AtomicBool) + Send + 'static) -> Background {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = thread::spawn(move || work(&flag));
        Background {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A webhook receiver that accepts connections and never answers; it
/// holds what it accepted until dropped.
struct Stalled {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    _thread: Background,
}

impl Stalled {
    fn start() -> Stalled {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        let thread = Background::spawn(move |stop| {
            let mut held = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        held.push(stream);
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Stalled {
            addr,
            accepted,
            _thread: thread,
        }
    }
}

/// A client sending a request head one byte every 200 ms, never finishing
/// it; stops when a write fails or when dropped.
fn trickle(addr: SocketAddr) -> Background {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    Background::spawn(move |stop| {
        let head = format!(
            "POST /plants HTTP/1.1\r\nHost: slow\r\nX-Pad: {}",
            "a".repeat(200)
        );
        for &byte in head.as_bytes() {
            if stop.load(Ordering::Relaxed) || stream.write_all(&[byte]).is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(200));
        }
    })
}

/// SIGTERM exits 0 within 7 s even while a webhook delivery waits on a
/// receiver that never answers and a client is trickling a request head:
/// an unfinished head is no request in flight, and the webhook grace bounds
/// the delivery.
fn sigterm_with_a_stalled_webhook_and_a_slow_client_exits_0_within_7_s(kind: Kind) {
    let hook = Stalled::start();
    let url = format!("http://{}/hook", hook.addr);
    let mut server = Running::on(kind, &["--webhook", &url], Some("t0k3n"));
    assert_eq!(create(server.addr, "t0k3n", 1), 200);
    assert!(
        eventually(|| hook.accepted.load(Ordering::Relaxed) > 0),
        "the webhook delivery never reached the receiver"
    );
    // The slow client is connected and under way once the server counts
    // it beside the one asking.
    let addr = server.addr;
    assert!(eventually(|| open_connections(addr, "t0k3n") == 1));
    let slow = trickle(addr);
    assert!(eventually(|| open_connections(addr, "t0k3n") == 2));

    let signalled = Instant::now();
    server.signal("TERM");
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(7),
            "still running 7 s after SIGTERM"
        );
        thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        status.code(),
        Some(0),
        "exit after {:?}",
        signalled.elapsed()
    );
    drop(slow);
    drop(hook);
}

crate::on_each_store!(sigterm_with_a_stalled_webhook_and_a_slow_client_exits_0_within_7_s);
