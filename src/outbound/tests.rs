//! The client against hostile servers on loopback, over plain TCP (the
//! TLS ones are the seam's and the ACME client's tests): each would keep
//! a client without bounds reading, growing or spinning.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Instant;

use super::hostile::{self, read_request};
use super::*;

/// No TLS: these servers speak plain HTTP.
enum NoTls {}

impl Handshake for NoTls {
    type Stream = TcpStream;

    fn connect(&self, _: &str, _: Timed) -> io::Result<TcpStream> {
        match *self {}
    }

    fn socket(_: &mut TcpStream) -> &mut Timed {
        unreachable!("no stream is made")
    }
}

/// The bounds of these tests: small sizes, and times no loaded machine
/// comes near where time is not what a test is about.
const BOUNDS: Bounds = Bounds {
    connect: Duration::from_secs(10),
    io: Duration::from_secs(10),
    exchange: Duration::from_secs(10),
    head: 16 * 1024,
    body: 64 * 1024,
};

/// Short bounds: a read may wait far longer than the whole exchange, so
/// that only the exchange's deadline can end the drip early.
const SHORT: Bounds = Bounds {
    exchange: Duration::from_millis(500),
    ..BOUNDS
};

/// Far past `SHORT.exchange`, far short of what the bad servers take.
const GENEROUS: Duration = Duration::from_secs(2);

const GET: Outgoing<'static> = Outgoing {
    method: "GET",
    fields: &[],
    body: b"",
};

fn url(addr: SocketAddr, path: &str) -> Url {
    Url::parse(&format!("http://{addr}{path}"), false).unwrap()
}

/// One GET, its answer read whole.
fn fetch(addr: SocketAddr, bounds: &Bounds) -> io::Result<Fetched> {
    open(&url(addr, "/"), &GET, None::<&NoTls>, bounds)?.fetch()
}

/// A server that reads the request, answers `bytes`, then closes.
fn answering(bytes: &'static [u8]) -> SocketAddr {
    hostile::serve(move |mut socket| {
        if read_request(&mut socket).is_ok() {
            let _ = socket.write_all(bytes);
            let _ = socket.shutdown(std::net::Shutdown::Write);
            // Until the client has gone: no reset under its last read.
            let _ = socket.read(&mut [0]);
        }
    })
}

#[test]
fn a_head_without_end_is_cut_at_its_bound() {
    let addr = hostile::serve(|mut socket| {
        if read_request(&mut socket).is_ok() && socket.write_all(b"HTTP/1.1 200 OK\r\n").is_ok() {
            hostile::endless(&mut socket, b"X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
    });
    let why = fetch(addr, &BOUNDS).expect_err("a head without end");
    assert!(why.to_string().contains("head is over its bound"), "{why}");
}

#[test]
fn a_body_without_end_is_cut_at_its_bound() {
    // Chunked, and without a length (up to the close that never comes).
    for chunked in [true, false] {
        let addr = hostile::serve(move |mut socket| {
            let (head, piece): (&[u8], &[u8]) = match chunked {
                true => (
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                    b"10\r\naaaaaaaaaaaaaaaa\r\n",
                ),
                false => (b"HTTP/1.1 200 OK\r\n\r\n", b"aaaaaaaaaaaaaaaa"),
            };
            if read_request(&mut socket).is_ok() && socket.write_all(head).is_ok() {
                hostile::endless(&mut socket, &piece.repeat(64));
            }
        });
        let why = fetch(addr, &BOUNDS).expect_err("a body without end");
        assert!(
            why.to_string().contains("body is over 65536 bytes"),
            "{why}"
        );
    }
}

#[test]
fn an_answer_dripped_a_byte_every_100_ms_ends_at_the_exchange_deadline() {
    // Each byte well within the 10 s a read may wait; 4 s for them all.
    let addr = hostile::serve(|mut socket| {
        if read_request(&mut socket).is_ok() {
            let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
            hostile::drip(&mut socket, answer, Duration::from_millis(100));
        }
    });
    let started = Instant::now();
    let failed = fetch(addr, &SHORT);
    let took = started.elapsed();
    let why = failed.expect_err("the answer is not whole by the deadline");
    assert_eq!(why.kind(), io::ErrorKind::TimedOut, "{why}");
    assert!(took < GENEROUS, "the exchange took {took:?}: {why}");
}

/// The chunks of the tiny-pieces answer: a body of this many 1-byte
/// chunks (6 bytes each on the wire), then as many again dripped.
const TINY_CHUNKS: usize = 20_000;

#[test]
fn an_answer_in_tiny_pieces_costs_time_linear_in_its_size() {
    let addr = hostile::serve(|mut socket| {
        let _ = socket.set_nodelay(true);
        let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        let chunks = b"1\r\nx\r\n".repeat(TINY_CHUNKS);
        if read_request(&mut socket).is_err()
            || socket.write_all(head).is_err()
            || socket.write_all(&chunks).is_err()
        {
            return;
        }
        // The rest a byte a write.
        let mut rest = b"1\r\ny\r\n".repeat(TINY_CHUNKS);
        rest.extend_from_slice(b"0\r\n\r\n");
        hostile::drip(&mut socket, &rest, Duration::ZERO);
    });
    let bounds = Bounds {
        exchange: Duration::from_secs(60),
        ..BOUNDS
    };
    let cpu = hostile::thread_cpu();
    let started = Instant::now();
    let answer = fetch(addr, &bounds).unwrap();
    let (cpu, took) = (
        hostile::thread_cpu().zip(cpu).map(|(b, a)| b - a),
        started.elapsed(),
    );
    assert_eq!(answer.body.len(), 2 * TINY_CHUNKS);
    assert!(answer.body.starts_with(b"xx") && answer.body.ends_with(b"yy"));
    if let Some(cpu) = cpu {
        assert!(cpu < Duration::from_secs(1), "{cpu:?} of CPU in {took:?}");
    }
}

#[test]
fn malformed_framing_is_an_error_never_a_panic() {
    for bad in [
        &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"[..],
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: five\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
        b"HTTP/1.1 OK\r\n\r\n",
        b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n",
        b"",
    ] {
        let shown = String::from_utf8_lossy(bad);
        let why = fetch(answering(bad), &BOUNDS).err();
        let why = why.unwrap_or_else(|| panic!("{shown:?} was taken"));
        assert_eq!(why.kind(), io::ErrorKind::InvalidData, "{shown:?}: {why}");
    }
    let fine = fetch(answering(b"HTTP/1.1 200 OK\r\n\r\nall of it"), &BOUNDS);
    assert_eq!(fine.unwrap().body, b"all of it");
}

#[test]
fn a_redirect_is_the_answer_never_followed() {
    // A loop: every answer sends the client back to the same place.
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    let at = Arc::new(Mutex::new(String::new()));
    let location = Arc::clone(&at);
    let addr = hostile::serve(move |mut socket| {
        counted.fetch_add(1, Ordering::SeqCst);
        if read_request(&mut socket).is_ok() {
            let to = location.lock().unwrap().clone();
            let answer =
                format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n");
            let _ = socket.write_all(answer.as_bytes());
        }
    });
    *at.lock().unwrap() = format!("http://{addr}/");
    let answer = fetch(addr, &BOUNDS).unwrap();
    assert_eq!(answer.status, 302);
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}

#[test]
fn a_webhook_like_post_reads_the_status_and_leaves_the_body() {
    let (sent, heard) = mpsc::channel();
    let addr = hostile::serve(move |mut socket| {
        if let Ok(request) = read_request(&mut socket) {
            let _ = sent.send(request);
            // A body that never ends: the status is all that is read.
            let head = b"HTTP/1.1 201 Created\r\nContent-Length: 999999999\r\n\r\n";
            if socket.write_all(head).is_ok() {
                hostile::endless(&mut socket, b"x");
            }
        }
    });
    let post = Outgoing {
        method: "POST",
        fields: &[("Content-Type", "application/json")],
        body: b"{}",
    };
    let status = status(&url(addr, "/hook?x=1"), &post, None::<&NoTls>, &BOUNDS);
    assert_eq!(status.unwrap(), 201);
    let (head, body) = heard.recv().unwrap();
    assert!(head.starts_with("POST /hook?x=1 HTTP/1.1\r\n"), "{head}");
    for line in [
        format!("Host: {addr}"),
        "Content-Type: application/json".into(),
        "Content-Length: 2".into(),
        "Connection: close".into(),
    ] {
        assert!(
            head.contains(&format!("\r\n{line}\r\n")),
            "{line} not in {head}"
        );
    }
    assert_eq!(body, b"{}");
}

/// A server of an event stream: `first`, then (once the test says so)
/// `rest`, in pieces of at most 3 bytes, each written on its own.
fn event_stream(first: &'static [u8], rest: &'static [u8]) -> (SocketAddr, mpsc::Sender<()>) {
    let (go, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(Some(wait));
    let addr = hostile::serve(move |mut socket| {
        let _ = socket.set_nodelay(true);
        let wait = wait.lock().unwrap().take();
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                     Transfer-Encoding: chunked\r\n\r\n";
        if read_request(&mut socket).is_err() || socket.write_all(head).is_err() {
            return;
        }
        let pieces = |socket: &mut TcpStream, bytes: &[u8]| {
            bytes.chunks(3).all(|piece| {
                let chunk = format!("{:x}\r\n", piece.len());
                socket
                    .write_all(chunk.as_bytes())
                    .and_then(|()| socket.write_all(piece))
                    .and_then(|()| socket.write_all(b"\r\n"))
                    .is_ok()
            })
        };
        if pieces(&mut socket, first)
            && wait.is_some_and(|w| w.recv().is_ok())
            && pieces(&mut socket, rest)
        {
            let _ = socket.write_all(b"0\r\n\r\n");
        }
    });
    (addr, go)
}

fn events_of(addr: SocketAddr, bounds: &Bounds, max_event: usize) -> Events<NoTls> {
    let answer = open(&url(addr, "/plants/changes"), &GET, None::<&NoTls>, bounds).unwrap();
    assert_eq!(
        answer.field("content-type"),
        Some(&b"text/event-stream"[..])
    );
    answer.events(max_event).unwrap()
}

#[test]
fn events_are_read_one_at_a_time_past_the_exchange_deadline() {
    let (addr, go) = event_stream(
        b": a comment, and a keep-alive without data\n\nretry: 10\n\n\
          id: 1\nevent: create\ndata: {\"name\":\"fern\"}\n\n",
        b"data: one\r\ndata: two\r\n\r\nid: 3\rdata: cr\r\rid:4\ndata\n\n",
    );
    let started = Instant::now();
    let mut events = events_of(addr, &SHORT, 256);
    let first = events.next_event().unwrap().unwrap();
    assert_eq!(
        first,
        Message {
            id: Some("1".into()),
            kind: Some("create".into()),
            data: "{\"name\":\"fern\"}".into(),
        }
    );
    // The stream outlives the exchange's deadline.
    let past = SHORT.exchange + Duration::from_millis(50);
    std::thread::sleep(past.saturating_sub(started.elapsed()));
    go.send(()).unwrap();
    let mut rest = Vec::new();
    while let Some(event) = events.next_event().unwrap() {
        rest.push((event.id, event.data));
    }
    assert_eq!(
        rest,
        [
            (None, "one\ntwo".to_string()),
            (Some("3".into()), "cr".into()),
            (Some("4".into()), String::new()),
        ]
    );
}

#[test]
fn an_event_over_its_bound_is_an_error_not_a_buffer_that_grows() {
    let long: &'static [u8] = Box::leak(
        format!("data: {}\n\n", "a".repeat(300))
            .into_bytes()
            .into_boxed_slice(),
    );
    let (addr, go) = event_stream(b"data: short\n\n", long);
    let mut events = events_of(addr, &BOUNDS, 256);
    assert_eq!(events.next_event().unwrap().unwrap().data, "short");
    go.send(()).unwrap();
    let why = events.next_event().expect_err("an event over its bound");
    assert!(why.to_string().contains("over 256 bytes"), "{why}");
}

#[test]
fn events_in_tiny_pieces_cost_time_linear_in_their_size() {
    // Events of 16 KiB, each line ended by a lone `\r`, in 3-byte chunks.
    let event: &'static [u8] = Box::leak(
        format!("data: {}\r\r", "e".repeat(16 * 1024))
            .into_bytes()
            .into_boxed_slice(),
    );
    let many: &'static [u8] = Box::leak(event.repeat(8).into_boxed_slice());
    let (addr, go) = event_stream(b"", many);
    go.send(()).unwrap();
    let cpu = hostile::thread_cpu();
    let mut events = events_of(addr, &BOUNDS, 32 * 1024);
    let mut seen = 0;
    while let Some(event) = events.next_event().unwrap() {
        assert_eq!(event.data.len(), 16 * 1024);
        seen += 1;
    }
    assert_eq!(seen, 8);
    if let Some(cpu) = hostile::thread_cpu().zip(cpu).map(|(b, a)| b - a) {
        assert!(cpu < Duration::from_secs(1), "{cpu:?} of CPU");
    }
}
