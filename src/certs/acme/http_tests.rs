//! The exchange: which URLs are followed, and hostile servers on
//! loopback that drip or cut up what they send over TLS.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use super::*;

#[test]
fn only_https_urls_are_followed() {
    let url = |s: &str| target(&s.parse().unwrap());
    let at = url("https://127.0.0.1:14000/dir?x=1").unwrap();
    assert_eq!(
        (at.host.as_str(), at.port, at.path.as_str()),
        ("127.0.0.1", 14000, "/dir?x=1")
    );
    assert_eq!(url("https://[::1]/").unwrap().host, "::1");
    assert_eq!(url("https://acme.test").unwrap().path, "/");
    assert!(url("http://acme.test/").is_err());
}

// Hostile servers: each would keep an exchange without a deadline going.

use super::super::{executor, hostile};
use crate::outbound::hostile::{drip, drip_handshake, thread_cpu};

/// Short limits: a read may wait far longer than the whole exchange, so
/// that only the exchange's deadline can end these tests early.
const SHORT: Bounds = Bounds {
    connect: Duration::from_secs(2),
    io: Duration::from_secs(10),
    exchange: Duration::from_millis(500),
    ..LIMITS
};

/// Far past `SHORT.exchange`, far short of what the bad servers take.
const GENEROUS: Duration = Duration::from_secs(2);

fn client(roots: rustls::RootCertStore, limits: Bounds) -> Client {
    Client::with_limits(roots, limits).unwrap()
}

/// One GET through the client, as the protocol library sends it.
fn fetch(client: &Client, url: &str) -> Result<BytesResponse, Error> {
    let request = http::Request::get(url)
        .body(BodyWrapper::default())
        .unwrap();
    executor::block_on(client.request(request)).unwrap()
}

#[test]
fn a_tls_handshake_dripped_a_byte_at_a_time_ends_at_the_exchange_deadline() {
    // A byte every 200 ms for 8 s: every read gets its byte well within
    // the 10 s a read may wait.
    let every = Duration::from_millis(200);
    let base = hostile::serve(move |socket| drip_handshake(socket, every, 40));
    let started = Instant::now();
    let failed = fetch(
        &client(hostile::identity().roots, SHORT),
        &format!("{base}/dir"),
    );
    let took = started.elapsed();
    let why = failed
        .err()
        .expect("a handshake that never ends cannot succeed");
    assert!(took < GENEROUS, "the exchange took {took:?}: {why}");
}

#[test]
fn an_answer_dripped_a_byte_every_3_s_ends_at_the_exchange_deadline() {
    let identity = hostile::identity();
    let server = Arc::clone(&identity.server);
    let base = hostile::serve(move |socket| {
        let Some((mut tls, _, _)) = hostile::accept_tls(socket, &server) else {
            return;
        };
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n";
        if tls.write_all(head).and_then(|()| tls.flush()).is_ok() {
            drip(&mut tls, b"abc", Duration::from_secs(3));
        }
    });
    let started = Instant::now();
    let failed = fetch(&client(identity.roots, SHORT), &format!("{base}/dir"));
    let took = started.elapsed();
    let why = failed
        .err()
        .expect("the answer is not whole by the deadline");
    assert!(took < GENEROUS, "the exchange took {took:?}: {why}");
}

/// The chunks of the tiny-chunks answer: a body of this many 1-byte
/// chunks (6 bytes each on the wire), then as many again dripped.
const TINY_CHUNKS: usize = 20_000;

#[test]
fn an_answer_in_1_byte_records_costs_little_cpu() {
    let identity = hostile::identity();
    let server = Arc::clone(&identity.server);
    let base = hostile::serve(move |socket| {
        let Some((mut tls, _, _)) = hostile::accept_tls(socket, &server) else {
            return;
        };
        let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        let chunks = b"1\r\nx\r\n".repeat(TINY_CHUNKS);
        if tls
            .write_all(head)
            .and_then(|()| tls.write_all(&chunks))
            .is_err()
        {
            return;
        }
        // The rest a byte a record, each flushed on its own.
        let mut rest = b"1\r\ny\r\n".repeat(TINY_CHUNKS);
        rest.extend_from_slice(b"0\r\n\r\n");
        drip(&mut tls, &rest, Duration::ZERO);
    });
    let limits = Bounds {
        exchange: Duration::from_secs(60),
        ..SHORT
    };
    let cpu = thread_cpu();
    let started = Instant::now();
    let answer = fetch(&client(identity.roots, limits), &format!("{base}/dir"));
    let (cpu, took) = (thread_cpu().zip(cpu).map(|(b, a)| b - a), started.elapsed());
    let mut answer = answer.unwrap();
    let body = executor::block_on(answer.body.into_bytes())
        .unwrap()
        .unwrap();
    assert_eq!(body.len(), 2 * TINY_CHUNKS);
    eprintln!("tiny chunks: {cpu:?} of CPU in {took:?}");
    if let Some(cpu) = cpu {
        assert!(cpu < Duration::from_secs(1), "{cpu:?} of CPU in {took:?}");
    }
}
