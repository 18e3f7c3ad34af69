//! The HTTP engine's protocol behaviour: persistence, pipelining, chunked
//! bodies, `Expect: 100-continue`, HEAD, a panicking handler, a
//! streamed body made on another thread, and a deferred answer's errand
//! finished on the loop that owns its request.

use std::io::Read;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use plantstore::http::{
    Deferred, Errand, Fill, Handler, Limits, Request, Response, Server, Stream, StreamWaker,
};

use crate::support::{AUTH, Client, JSON, TestServer, allow_names_of, config, eventually, request};

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let server = TestServer::start();
    let mut client = server.client();
    for id in 1..=3 {
        client.send(&request(
            "POST",
            "/plants",
            &[AUTH, JSON],
            &format!(r#"{{"id":{id},"name":"a"}}"#),
        ));
        let reply = client.reply();
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("connection"), None);
    }
}

#[test]
fn two_pipelined_requests_in_one_write_get_two_replies_in_order() {
    let server = TestServer::start();
    let mut client = server.client();
    let mut bytes = request(
        "POST",
        "/plants",
        &[AUTH, JSON],
        r#"{"id":1,"name":"first"}"#,
    );
    bytes.extend(request(
        "POST",
        "/plants",
        &[AUTH, JSON],
        r#"{"id":2,"name":"second"}"#,
    ));
    bytes.extend(request(
        "POST",
        "/plants",
        &[AUTH, JSON],
        r#"{"id":1,"name":"third"}"#,
    ));
    client.send(&bytes);
    assert_eq!(client.reply().json()["name"], "first");
    assert_eq!(client.reply().json()["name"], "second");
    assert_eq!(client.reply().status, 409);
}

#[test]
fn connection_close_and_http_1_0_close_after_the_reply() {
    let server = TestServer::start();
    let mut client = server.client();
    client.send(&request(
        "POST",
        "/plants",
        &[AUTH, JSON, ("Connection", "close")],
        r#"{"id":1,"name":"a"}"#,
    ));
    let reply = client.reply();
    assert_eq!(
        (reply.status, reply.header("connection")),
        (200, Some("close"))
    );
    assert!(client.closed());

    let mut client = server.client();
    client.send(b"POST /plants HTTP/1.0\r\nAuthorization: Bearer test-token\r\nContent-Type: application/json\r\nContent-Length: 19\r\n\r\n{\"id\":2,\"name\":\"b\"}");
    assert_eq!(client.reply().status, 200);
    assert!(client.closed());
}

#[test]
fn http_1_0_keep_alive_is_honoured() {
    let server = TestServer::start();
    let mut client = server.client();
    for _ in 0..2 {
        client.send(b"GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        let reply = client.reply();
        // An HTTP/1.0 client keeps the connection only when told so.
        assert_eq!(
            (reply.status, reply.header("connection")),
            (404, Some("keep-alive"))
        );
    }
}

#[test]
fn chunked_body_with_extensions_and_trailers() {
    let server = TestServer::start();
    let mut client = server.client();
    client.send(
        b"POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token\r\nContent-Type: application/json\r\n\
          Transfer-Encoding: chunked\r\n\r\n\
          5\r\n{\"id\"\r\n7;ext=1\r\n:4,\"nam\r\nA\r\ne\":\"chunk\"\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n",
    );
    let reply = client.reply();
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["name"], "chunk");
    // The connection is still in step: a second request works.
    client.send(&request(
        "POST",
        "/plants",
        &[AUTH, JSON],
        r#"{"id":4,"name":"x"}"#,
    ));
    assert_eq!(client.reply().status, 409);
}

#[test]
fn chunked_body_over_the_limit_is_413_and_closes() {
    let mut config = crate::support::config();
    config.limits.max_body = 64;
    let server = TestServer::with(config);
    let mut client = server.client();
    let chunk = "a".repeat(40);
    client.send(format!(
        "POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n28\r\n{chunk}\r\n28\r\n{chunk}\r\n0\r\n\r\n"
    ).as_bytes());
    client.reply().assert_error(413, "64 bytes");
    assert!(client.closed());
}

#[test]
fn malformed_chunk_size_is_400() {
    let server = TestServer::start();
    let mut client = server.client();
    client.send(b"POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    client.reply().assert_error(400, "chunk");
    assert!(client.closed());
}

#[test]
fn expect_continue_with_valid_token_gets_100_then_200() {
    let server = TestServer::start();
    let mut client = server.client();
    let body = r#"{"id":1,"name":"patient"}"#;
    client.send(format!(
        "POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token\r\nContent-Type: application/json\r\n\
         Expect: 100-continue\r\nContent-Length: {}\r\n\r\n", body.len()
    ).as_bytes());
    // The body is not sent until the server says so.
    assert_eq!(client.reply().status, 100);
    client.send(body.as_bytes());
    let reply = client.reply();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["name"], "patient");
}

#[test]
fn expect_continue_without_valid_token_gets_final_401_and_close() {
    let server = TestServer::start();
    let mut client = server.client();
    client.send(b"POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 20\r\n\r\n");
    let reply = client.reply();
    reply.assert_error(401, "invalid");
    assert_eq!(reply.header("connection"), Some("close"));
    assert!(client.closed());
}

#[test]
fn expect_continue_over_the_size_limit_gets_413_without_100() {
    let server = TestServer::start();
    let mut client = server.client();
    client.send(b"POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 100000\r\n\r\n");
    client.reply().assert_error(413, "65536");
    assert!(client.closed());
}

#[test]
fn head_reply_has_length_but_no_body_and_keeps_the_connection() {
    let server = TestServer::start();
    let mut client = server.client();
    client.send(b"HEAD /nowhere HTTP/1.1\r\nHost: x\r\n\r\n");
    let reply = client.reply_head();
    assert_eq!(reply.status, 404);
    let length: usize = reply.header("content-length").unwrap().parse().unwrap();
    assert!(length > 0);
    // If a body had been sent, this next reply would be misread.
    client.send(b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n");
    let reply = client.reply();
    assert_eq!(reply.body.len(), length);
    reply.assert_error(404, "no such");
}

struct Panicky;

impl Handler for Panicky {
    fn handle(&self, request: &mut Request<'_>) -> Response {
        if request.path() == "/panic" {
            panic!("handler bug");
        }
        Response::no_content()
    }
}

#[test]
fn a_panicking_handler_is_a_500_and_the_server_lives_on() {
    let (addr, stopper, thread) = serve(Panicky, Limits::default().threads);
    let mut client = Client::connect(addr);
    client.send(b"GET /panic HTTP/1.1\r\nHost: x\r\n\r\n");
    client.reply().assert_error(500, "internal");
    let mut client = Client::connect(addr);
    client.send(b"GET /fine HTTP/1.1\r\nHost: x\r\n\r\n");
    let reply = client.reply_head();
    assert_eq!((reply.status, reply.header("content-length")), (204, None));
    stopper.stop();
    assert_eq!(thread.join().unwrap(), 0);
}

#[test]
fn pipelined_requests_behind_a_response_larger_than_the_socket_buffers_are_answered() {
    // The first answer (about 6 MB: a page of one large plant) fills the
    // socket buffers, so the server must stop, wait for the client to
    // read, and then go on with the requests it already holds, without new
    // input to wake it.
    let mut config = config();
    allow_names_of(&mut config, 6_000_000);
    let server = TestServer::with(config);
    let name = "n".repeat(6_000_000);
    let reply = server.create(&format!(r#"{{"id":1,"name":"{name}"}}"#));
    assert_eq!(reply.status, 200);
    let mut client = server.client();
    let mut bytes = request("GET", "/plants?limit=100", &[AUTH], "");
    bytes.extend(request("GET", "/plants?limit=100", &[AUTH], ""));
    bytes.extend(request("GET", "/healthz", &[], ""));
    client.send(&bytes);
    // The client reads late (part of what is tested): by then the server
    // has filled the buffers and waits on them.
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..2 {
        let reply = client.reply();
        assert_eq!(reply.status, 200);
        assert!(reply.body.len() > 6_000_000, "{}", reply.body.len());
    }
    let health = client.reply();
    assert_eq!(
        (health.status, health.text()),
        (200, r#"{"status":"ok"}"#.into())
    );
}

/// What a request to `Fed` hands the test: where to send the body's pieces,
/// the waker to call after each, and for `/deferred` the promise and the
/// streamed response to complete it with.
struct Feed {
    pieces: Sender<Vec<u8>>,
    waker: StreamWaker,
    deferred: Option<(Deferred, Response)>,
}

/// Streams, on `/now` and `/deferred`, what the test sends through the
/// `Feed` it gets; answers anything else 204 at once.
struct Fed {
    feeds: Mutex<Sender<Feed>>,
}

impl Handler for Fed {
    fn handle(&self, request: &mut Request<'_>) -> Response {
        let path = request.path().to_owned();
        if path != "/now" && path != "/deferred" {
            return Response::no_content();
        }
        let Some(waker) = request.waker() else {
            return Response::error(500, "no waker");
        };
        let (pieces, received) = mpsc::channel();
        let response = Response::stream(200, "text/plain", Pieces(received));
        let deferred = if path == "/deferred" {
            request.defer()
        } else {
            None
        };
        let (response, deferred) = match deferred {
            Some(deferred) => (Response::deferred(), Some((deferred, response))),
            None => (response, None),
        };
        let feed = Feed {
            pieces,
            waker,
            deferred,
        };
        let _ = self.feeds.lock().unwrap().send(feed);
        response
    }
}

/// A body whose pieces arrive from another thread: pending until they do,
/// done when the sender is dropped.
struct Pieces(Receiver<Vec<u8>>);

impl Stream for Pieces {
    fn fill(&mut self, out: &mut Vec<u8>, _want: usize) -> Fill {
        loop {
            match self.0.try_recv() {
                Ok(piece) => out.extend_from_slice(&piece),
                Err(TryRecvError::Empty) => return Fill::Pending,
                Err(TryRecvError::Disconnected) => return Fill::Done,
            }
        }
    }
}

/// Reads from `client` until what it has read ends with `end`.
fn read_until(client: &mut Client, wire: &mut Vec<u8>, end: &[u8]) {
    let mut buf = [0u8; 4096];
    while !wire.ends_with(end) {
        let n = match client.stream.read(&mut buf) {
            // A signal to this process (another test's): read again.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            read => read.expect("read"),
        };
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(wire));
        wire.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn a_body_made_on_another_thread_arrives_piece_by_piece_while_the_loop_serves_others() {
    let (feeds, fed) = mpsc::channel();
    let handler = Fed {
        feeds: Mutex::new(feeds),
    };
    let (addr, stopper, thread) = serve(handler, 1);
    let mut other = Client::connect(addr);
    for path in ["/now", "/deferred"] {
        let mut client = Client::connect(addr);
        client.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        let mut feed = fed.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(feed.deferred.is_some(), path == "/deferred");
        if let Some((deferred, response)) = feed.deferred.take() {
            deferred.complete(response);
        }
        let mut wire = Vec::new();
        read_until(
            &mut client,
            &mut wire,
            b"Transfer-Encoding: chunked\r\n\r\n",
        );
        for piece in ["one", "two", "three"] {
            // The one loop answers another connection while the stream waits.
            other.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
            assert_eq!(other.reply().status, 204);
            feed.pieces.send(piece.as_bytes().to_vec()).unwrap();
            feed.waker.wake();
            read_until(&mut client, &mut wire, format!("{piece}\r\n").as_bytes());
        }
        drop(feed.pieces);
        feed.waker.wake();
        read_until(&mut client, &mut wire, b"0\r\n\r\n");
        let head_end = wire.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert_eq!(
            String::from_utf8_lossy(&wire[head_end..]),
            "3\r\none\r\n3\r\ntwo\r\n5\r\nthree\r\n0\r\n\r\n",
            "{path}"
        );
        // The connection goes on, and a late wake does nothing to it.
        feed.waker.wake();
        client.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(client.reply().status, 204);
    }
    // A producer racing the loop: no piece is lost to a coalesced wake.
    let mut client = Client::connect(addr);
    client.send(b"GET /now HTTP/1.1\r\nHost: x\r\n\r\n");
    let Feed { pieces, waker, .. } = fed.recv_timeout(Duration::from_secs(10)).unwrap();
    let producer = std::thread::spawn(move || {
        for i in 0..2000 {
            pieces.send(format!("{i},").into_bytes()).unwrap();
            waker.wake();
        }
        drop(pieces);
        waker.wake();
    });
    let reply = client.reply();
    producer.join().unwrap();
    let want: String = (0..2000).map(|i| format!("{i},")).collect();
    assert!(reply.text() == want, "{} bytes", reply.body.len());
    stopper.stop();
    assert_eq!(thread.join().unwrap(), 0);
}

/// Defers every request, telling the test on which thread it ran.
struct Deferring {
    deferred: Mutex<Sender<(Deferred, std::thread::ThreadId)>>,
}

impl Handler for Deferring {
    fn handle(&self, request: &mut Request<'_>) -> Response {
        match request.defer() {
            Some(later) => {
                let here = std::thread::current().id();
                let _ = self.deferred.lock().unwrap().send((later, here));
                Response::deferred()
            }
            None => Response::error(500, "cannot defer"),
        }
    }
}

/// Answers with its body on whichever thread finishes it, and says which;
/// or panics there.
struct Noting {
    body: &'static str,
    finished_on: Sender<std::thread::ThreadId>,
}

impl Errand for Noting {
    fn finish(self: Box<Self>) -> Response {
        let _ = self.finished_on.send(std::thread::current().id());
        if self.body == "panic" {
            panic!("an errand that panics");
        }
        Response::bytes(200, "text/plain", self.body.as_bytes().to_vec())
    }
}

#[test]
fn an_errand_sent_from_another_thread_is_finished_on_the_loop_that_owns_its_request() {
    let (deferred, taken) = mpsc::channel();
    let handler = Deferring {
        deferred: Mutex::new(deferred),
    };
    let (addr, stopper, thread) = serve(handler, 2);
    let mut client = Client::connect(addr);
    for body in ["first", "panic", "second"] {
        client.send(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
        let (mut later, loop_thread) = taken.recv_timeout(Duration::from_secs(10)).unwrap();
        let (finished_on, finished) = mpsc::channel();
        // Sent from a thread of its own, as the committer does.
        std::thread::spawn(move || {
            let address = later.take_address().expect("not answered yet");
            assert!(later.take_address().is_none(), "one address");
            // Disarmed: dropping it sends no 500 ahead of the errand.
            drop(later);
            address.send(Box::new(Noting { body, finished_on }));
        })
        .join()
        .unwrap();
        let reply = client.reply();
        let on = finished.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(on, loop_thread, "{body}: finished on another thread");
        if body == "panic" {
            assert_eq!(reply.status, 500);
        } else {
            assert_eq!((reply.status, reply.text()), (200, body.to_owned()));
        }
    }
    // One still waiting when the server stops: its loop is gone, and the
    // errand is finished all the same, on the thread that sends it (its
    // work, such as a create's announcement, was promised).
    client.send(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
    let (mut later, _) = taken.recv_timeout(Duration::from_secs(10)).unwrap();
    stopper.stop();
    assert_eq!(thread.join().unwrap(), 1, "the waiting connection, cut");
    let (finished_on, finished) = mpsc::channel();
    let address = later.take_address().unwrap();
    address.send(Box::new(Noting {
        body: "late",
        finished_on,
    }));
    assert_eq!(
        finished.try_recv(),
        Ok(std::thread::current().id()),
        "finished when sent"
    );
}

/// A client that half-closes after a change made durable later (`--data`:
/// a deferred answer) is still answered: it may read.
#[test]
fn a_half_closed_client_gets_its_deferred_answer() {
    let file = crate::support::TempFile::new("half-closed");
    let server = TestServer::with(crate::support::durable_config(&file.0));
    let mut client = server.client();
    client.send(&request(
        "POST",
        "/plants",
        &[AUTH, JSON],
        r#"{"id":1,"name":"a"}"#,
    ));
    client.stream.shutdown(std::net::Shutdown::Write).unwrap();
    let reply = client.reply();
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("connection"), Some("close"));
}

#[test]
fn a_deferred_answer_is_no_longer_wanted_once_its_client_has_gone() {
    let (deferred, taken) = mpsc::channel();
    let handler = Deferring {
        deferred: Mutex::new(deferred),
    };
    let (addr, stopper, thread) = serve(handler, 1);
    // Sent with its close at once (the request and the FIN in one edge),
    // closed later, and reset: each way the loop sees the client go.
    for (at_once, reset) in [(true, false), (false, false), (false, true)] {
        let mut client = Client::connect(addr);
        client.send(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
        if at_once {
            client.stream.shutdown(std::net::Shutdown::Write).unwrap();
        }
        let (later, _) = taken.recv_timeout(Duration::from_secs(10)).unwrap();
        if !at_once {
            std::thread::sleep(Duration::from_millis(50));
            assert!(later.wanted(), "the client still waits");
            if reset {
                socket2::SockRef::from(&client.stream)
                    .set_linger(Some(Duration::ZERO))
                    .unwrap();
            }
            drop(client);
        }
        assert!(eventually(|| !later.wanted()), "still wanted, client gone");
        // Its connection is gone too: a late answer is dropped.
        later.complete(Response::no_content());
    }
    stopper.stop();
    assert_eq!(thread.join().unwrap(), 0, "no connection left");
}

/// A server of `handler` alone on `threads` event loops, on a free
/// loopback port: its address, its stopper, and the thread running it
/// (which returns the connections still open when it stopped).
fn serve(
    handler: impl Handler + 'static,
    threads: usize,
) -> (
    std::net::SocketAddr,
    plantstore::http::Stopper,
    std::thread::JoinHandle<usize>,
) {
    let limits = Limits {
        threads,
        ..Limits::default()
    };
    let gauge = plantstore::http::Gauge::new();
    let server = Server::bind(
        "127.0.0.1:0".parse().unwrap(),
        limits,
        Arc::new(handler),
        &gauge,
    )
    .unwrap();
    let (addr, stopper) = (server.local_addr(), server.stopper());
    (
        addr,
        stopper,
        std::thread::spawn(move || server.run(Duration::from_secs(1))),
    )
}
