//! Two limits of the engine found only by hostile testing: the trailer
//! section's size, and when the idle timeout starts. On each store: from
//! the database the body is read before the request is handed to a worker,
//! and the answer is completed later from that worker.

use std::thread;
use std::time::Duration;

use crate::support::{AUTH, JSON, Kind, TestServer, allow_names_of, config, request};

/// A trailer section is bounded as a whole: a 4096-byte field line followed
/// by an endless one is refused, never buffered (an unchecked budget once
/// underflowed here: a panic on the event loop in a debug build, unbounded
/// buffering in a release build).
fn a_trailer_section_over_its_limit_is_refused_not_buffered(kind: Kind) {
    let server = TestServer::on(kind);
    let mut client = server.client();
    client.send(
        b"POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token\r\n\
          Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\
          Expect: 100-continue\r\n\r\n",
    );
    // The 100 Continue says the handler has asked for the body: the loop
    // decodes the rest.
    assert_eq!(client.reply().status, 100);
    let mut body = b"2\r\n{}\r\n0\r\nX:".to_vec();
    body.extend(std::iter::repeat_n(b'a', 4094)); // a 4096-byte field line
    body.extend_from_slice(b"\r\n");
    body.extend(std::iter::repeat_n(b'b', 64 * 1024)); // and a line that never ends
    client.send(&body);
    let reply = client.reply();
    assert_eq!(reply.status, 400, "{}", reply.text());
    assert!(client.closed());
    assert_eq!(server.send("GET", "/healthz", &[], "").status, 200);
}

/// The idle timeout of a keep-alive connection starts when its response is
/// queued (`Protocol::respond`), not when the response has left. A response
/// that takes longer than the idle timeout to reach the client (a large
/// page, a slow link) is followed by a close the moment its last byte is
/// handed to the kernel, although it said nothing of closing: the client's
/// next request on that connection gets no answer.
fn the_idle_timeout_runs_from_when_the_response_has_left(kind: Kind) {
    let mut config = config();
    config.limits.idle_timeout = Duration::from_secs(2);
    // The write timeout is not what is tested: room for a loaded machine
    // to deliver the page after the late start.
    config.limits.write_timeout = Duration::from_secs(60);
    // One plant with a 6 MB name: a page of it is a 6 MB response.
    allow_names_of(&mut config, 6_000_000);
    let server = TestServer::on_with(kind, config);
    let name = "x".repeat(6_000_000);
    let mut loader = server.client();
    let body = format!(r#"{{"id":0,"name":"{name}"}}"#);
    loader.send(&request("POST", "/plants", &[AUTH, JSON], &body));
    assert_eq!(loader.reply().status, 200);
    let mut client = server.client();
    client.send(&request("GET", "/plants?limit=100", &[AUTH], ""));
    // The client takes 3 s to start reading (a slow link would spread it):
    // part of what is tested, longer than the idle timeout.
    thread::sleep(Duration::from_secs(3));
    let reply = client.reply();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("connection"), None, "the connection is kept");
    // At once: within the idle timeout of the response having left.
    client.send(&request("GET", "/healthz", &[], ""));
    assert_eq!(
        client.reply().status,
        200,
        "a kept connection must serve the next request"
    );
}

crate::on_each_store!(
    a_trailer_section_over_its_limit_is_refused_not_buffered,
    the_idle_timeout_runs_from_when_the_response_has_left,
);
