//! The answer's framing: lengths, chunks, the server's close, the bounds.

use super::*;

fn body_of(buf: &[u8], closed: bool) -> Option<Vec<u8>> {
    parse(buf, false, closed).unwrap().map(|(_, _, body)| body)
}

#[test]
fn a_body_of_content_length_ends_there() {
    let answer = b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\nReplay-Nonce: abc\r\n\r\nhello";
    let (status, headers, whole) = parse(answer, false, false).unwrap().unwrap();
    assert_eq!(status, 201);
    assert_eq!(whole, b"hello");
    assert!(
        headers
            .iter()
            .any(|(n, v)| n == "replay-nonce" && v == b"abc")
    );
    assert_eq!(body_of(&answer[..answer.len() - 1], false), None);
}

#[test]
fn a_chunked_body_is_joined_once_its_last_chunk_is_in() {
    let answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n";
    assert_eq!(body_of(answer, false).unwrap(), b"hello world");
    for cut in [50, 60, answer.len() - 2] {
        assert_eq!(body_of(&answer[..cut], false), None, "cut at {cut}");
    }
    let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n";
    assert!(parse(bad, false, false).is_err());
    let not_hex = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
    assert!(parse(not_hex, false, false).is_err());
}

#[test]
fn a_body_without_a_length_ends_at_the_close() {
    let answer = b"HTTP/1.1 200 OK\r\n\r\nall of it";
    assert_eq!(body_of(answer, false), None);
    assert_eq!(body_of(answer, true).unwrap(), b"all of it");
}

#[test]
fn a_head_answer_and_a_204_have_no_body() {
    let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\nReplay-Nonce: n\r\n\r\n";
    assert_eq!(parse(answer, true, false).unwrap().unwrap().2, b"");
    let answer = b"HTTP/1.1 204 No Content\r\n\r\n";
    assert_eq!(body_of(answer, false).unwrap(), b"");
}

#[test]
fn answers_over_the_bounds_are_refused() {
    let long = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
        MAX_RESPONSE + 1
    );
    assert!(parse(long.as_bytes(), false, false).is_err());
    let mut head = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
    head.resize(MAX_HEAD + 1, b'a');
    assert!(parse(&head, false, false).is_err());
    assert!(parse(b"SSH-2.0-OpenSSH\r\n\r\n", false, false).is_err());
    // A reader that never stops is cut at the bound.
    let mut endless = io::repeat(b'a');
    let mut framed = b"HTTP/1.1 200 OK\r\n\r\n".chain(&mut endless);
    assert!(read_answer(&mut framed, false).is_err());
}

#[test]
fn only_https_urls_are_followed() {
    let url = |s: &str| target(&s.parse().unwrap());
    assert_eq!(
        url("https://127.0.0.1:14000/dir?x=1").unwrap(),
        Target {
            host: "127.0.0.1".into(),
            port: 14000,
            path: "/dir?x=1".into()
        }
    );
    assert_eq!(url("https://[::1]/").unwrap().host, "::1");
    assert_eq!(url("https://acme.test").unwrap().path, "/");
    assert!(url("http://acme.test/").is_err());
}

// Hostile servers: each would keep an exchange without a deadline going.

use super::super::{executor, hostile};

/// Short limits: a read may wait far longer than the whole exchange, so
/// that only the exchange's deadline can end these tests early.
const SHORT: Limits = Limits {
    connect: Duration::from_secs(2),
    io: Duration::from_secs(10),
    exchange: Duration::from_millis(500),
};

/// Far past `SHORT.exchange`, far short of what the bad servers take.
const GENEROUS: Duration = Duration::from_secs(2);

fn client(roots: rustls::RootCertStore, limits: Limits) -> Client {
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
    let base = hostile::serve(move |socket| hostile::drip_handshake(socket, every, 40));
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
        let Some(mut tls) = hostile::accept_tls(socket, &server) else {
            return;
        };
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n";
        if tls.write_all(head).and_then(|()| tls.flush()).is_ok() {
            hostile::drip(&mut tls, b"abc", Duration::from_secs(3));
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
