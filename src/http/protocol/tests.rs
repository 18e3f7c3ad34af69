//! The protocol core's unit tests: deadlines, idle buffers, pipelining
//! under unsent output, and streamed bodies (pulled as the client reads,
//! pending until woken, cut short when they fail or stall).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::http::response::{Fill, Stream};

fn protocol() -> (Protocol, Instant) {
    let now = Instant::now();
    let peer = SocketAddr::from(([127, 0, 0, 1], 1));
    (Protocol::new(Limits::default(), peer, now), now)
}

/// Answers every ready request with 204.
fn answer_all(p: &mut Protocol, now: Instant) -> usize {
    let mut n = 0;
    while p.poll(now) != Action::Wait {
        p.answer(Handled::Now(Response::no_content()), now);
        n += 1;
    }
    n
}

#[test]
fn an_idle_connection_holds_at_most_2_kib() {
    // A small request's buffers are kept for the next one...
    let (mut p, now) = protocol();
    p.received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(answer_all(&mut p, now), 1);
    let n = p.output().len();
    p.sent(n, now);
    assert!(p.buffered() > 0 && p.buffered() <= IDLE_KEEP);
    assert!(std::mem::size_of::<Protocol>() + p.buffered() <= 2048);
    // ...a large one's are given back.
    let big = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX-A: {}\r\n\r\n",
        "a".repeat(4000)
    );
    p.received(big.as_bytes(), now);
    assert_eq!(answer_all(&mut p, now), 1);
    let n = p.output().len();
    p.sent(n, now);
    assert_eq!(p.buffered(), 0);
}

#[test]
fn deadlines_head_then_idle_then_write() {
    let (mut p, now) = protocol();
    assert_eq!(p.deadline(), Some(now + Duration::from_secs(10)));
    p.received(b"GET / HTTP/1.1\r\n", now);
    let later = now + Duration::from_secs(11);
    assert_eq!(p.poll(later), Action::Wait);
    assert!(p.output().starts_with(b"HTTP/1.1 408 "));

    let (mut p, now) = protocol();
    p.received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", now);
    answer_all(&mut p, now);
    // Nothing sent yet: the write deadline runs, not the idle one.
    assert_eq!(p.deadline(), Some(now + Duration::from_secs(10)));
    assert_eq!(p.poll(now + Duration::from_secs(10)), Action::Wait);
    assert!(
        p.is_closed(),
        "the whole response must leave within the write timeout"
    );

    // The idle timeout runs from when the answer has left.
    let (mut p, now) = protocol();
    p.received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", now);
    answer_all(&mut p, now);
    let sent_at = now + Duration::from_secs(8);
    assert_eq!(p.poll(sent_at), Action::Wait);
    let n = p.output().len();
    p.sent(n, sent_at);
    assert_eq!(p.deadline(), Some(sent_at + Duration::from_secs(5)));
    assert_eq!(p.poll(sent_at + Duration::from_secs(4)), Action::Wait);
    assert!(!p.is_closed());
}

/// A stream of `pieces` pieces of `size` bytes each (then `end`),
/// counting the calls to `fill`.
struct Pieces {
    pieces: usize,
    size: usize,
    end: Fill,
    calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Stream for Pieces {
    fn fill(&mut self, out: &mut Vec<u8>, _want: usize) -> Fill {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.pieces == 0 {
            return self.end;
        }
        self.pieces -= 1;
        out.resize(out.len() + self.size, b'x');
        Fill::More
    }
}

fn pieces(
    pieces: usize,
    size: usize,
    end: Fill,
) -> (Response, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let calls = std::sync::Arc::default();
    let stream = Pieces {
        pieces,
        size,
        end,
        calls: std::sync::Arc::clone(&calls),
    };
    (Response::stream(200, "text/plain", stream), calls)
}

/// Sends everything the protocol offers, `step` bytes at a time.
fn send_all(p: &mut Protocol, step: usize, now: Instant) -> Vec<u8> {
    let mut wire = Vec::new();
    while !p.output().is_empty() {
        let n = p.output().len().min(step);
        wire.extend_from_slice(&p.output()[..n]);
        p.sent(n, now);
    }
    wire
}

#[test]
fn a_streamed_body_is_pulled_as_the_client_reads_then_the_next_request_goes_on() {
    let (mut p, now) = protocol();
    p.received(
        b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
        now,
    );
    assert_eq!(p.poll(now), Action::Request);
    let (response, calls) = pieces(100, 10_000, Fill::Done);
    p.answer(Handled::Now(response), now);
    // About a chunk is made, not the whole megabyte.
    let made = calls.load(std::sync::atomic::Ordering::Relaxed);
    assert!(made <= 5, "{made} pieces made before any was sent");
    assert!(p.output().len() < 2 * CHUNK);
    assert_eq!(
        p.poll(now),
        Action::Wait,
        "the next request waits for the body"
    );
    assert!(p.wants_input(), "read, to see the client's close");
    let wire = send_all(&mut p, 7_000, now);
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 101);
    // The wire holds the head, then chunks of 10,000 bytes, then the end.
    let head_end = wire.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(wire[..head_end].ends_with(b"Transfer-Encoding: chunked\r\n\r\n"));
    let mut chunk = b"2710\r\n".to_vec();
    chunk.resize(chunk.len() + 10_000, b'x');
    chunk.extend_from_slice(b"\r\n");
    let mut want = chunk.repeat(100);
    want.extend_from_slice(b"0\r\n\r\n");
    assert!(
        wire[head_end..] == want[..],
        "the body is 100 chunks and the end"
    );
    assert_eq!(p.poll(now), Action::Request, "then the pipelined request");
}

#[test]
fn each_piece_of_a_stream_has_the_write_timeout_and_a_stalled_client_is_closed() {
    let (mut p, now) = protocol();
    p.received(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    let (response, _) = pieces(1000, 10_000, Fill::Done);
    p.answer(Handled::Now(response), now);
    // A client taking a chunk every 8 s outlives the 10 s timeout...
    let mut at = now;
    for _ in 0..5 {
        at += Duration::from_secs(8);
        assert_eq!(p.poll(at), Action::Wait);
        assert!(!p.is_closed());
        let n = p.output().len();
        p.sent(n, at);
    }
    // ...one that stops reading does not.
    assert_eq!(p.deadline(), Some(at + Duration::from_secs(10)));
    assert_eq!(p.poll(at + Duration::from_secs(10)), Action::Wait);
    assert!(p.is_closed() && p.cut_short());
}

#[test]
fn a_failed_stream_is_cut_short_and_closed() {
    let (mut p, now) = protocol();
    p.received(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    let (response, _) = pieces(3, 100, Fill::Failed);
    p.answer(Handled::Now(response), now);
    assert!(p.is_closed());
    assert!(p.cut_short(), "reset, so the client sees an error");
    assert!(!p.output().ends_with(b"0\r\n\r\n"), "no final chunk");
}

#[test]
fn an_http_1_0_client_gets_the_stream_up_to_the_close() {
    let (mut p, now) = protocol();
    p.received(b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    let (response, _) = pieces(4, 10_000, Fill::Done);
    p.answer(Handled::Now(response), now);
    let wire = send_all(&mut p, 4096, now);
    let head_end = wire.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = std::str::from_utf8(&wire[..head_end]).unwrap();
    assert!(head.contains("Connection: close\r\n"), "{head}");
    assert!(!head.contains("Transfer-Encoding") && !head.contains("Content-Length"));
    assert_eq!(wire.len() - head_end, 40_000);
    assert!(
        p.is_closed() && !p.cut_short(),
        "a complete body ends with a close"
    );
    // HEAD has no body to delimit: the connection stays.
    let (mut p, now) = protocol();
    p.received(b"HEAD /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    p.answer(Handled::Now(pieces(4, 10, Fill::Done).0), now);
    let head = String::from_utf8(send_all(&mut p, 4096, now)).unwrap();
    assert!(head.contains("Connection: keep-alive\r\n"), "{head}");
    assert!(
        !head.contains("Transfer-Encoding"),
        "no chunked coding to HTTP/1.0"
    );
    assert!(!p.is_closed());
}

#[test]
fn unsent_output_stops_pipelined_requests() {
    let (mut p, now) = protocol();
    let big = Response::bytes(200, "text/plain", vec![b'a'; OUT_HIGH]);
    p.received(
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
        now,
    );
    assert_eq!(p.poll(now), Action::Request);
    p.answer(Handled::Now(big), now);
    assert_eq!(
        p.poll(now),
        Action::Wait,
        "the second waits for the first to drain"
    );
    assert!(!p.wants_input());
    let n = p.output().len();
    p.sent(n, now);
    assert_eq!(p.poll(now), Action::Request);
}

/// A stream that gives `steps` in order, one a call (then fails),
/// counting the calls: pieces a producer thread hands over.
struct Script {
    steps: &'static [(&'static [u8], Fill)],
    calls: Arc<AtomicUsize>,
}

impl Stream for Script {
    fn fill(&mut self, out: &mut Vec<u8>, _want: usize) -> Fill {
        let at = self.calls.fetch_add(1, Ordering::Relaxed);
        let (bytes, fill) = self.steps.get(at).copied().unwrap_or((b"", Fill::Failed));
        out.extend_from_slice(bytes);
        fill
    }
}

fn script(steps: &'static [(&'static [u8], Fill)]) -> (Response, Arc<AtomicUsize>) {
    let calls = Arc::default();
    let stream = Script {
        steps,
        calls: Arc::clone(&calls),
    };
    (Response::stream(200, "text/plain", stream), calls)
}

fn body_of(wire: &[u8]) -> &[u8] {
    let head_end = wire.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    &wire[head_end..]
}

#[test]
fn a_pending_stream_is_pulled_again_only_when_woken_then_the_next_request_goes_on() {
    let (mut p, now) = protocol();
    p.received(
        b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
        now,
    );
    assert_eq!(p.poll(now), Action::Request);
    let (response, calls) = script(&[
        (b"", Fill::Pending),
        (b"ab", Fill::More),
        (b"cd", Fill::Pending),
        (b"ef", Fill::Done),
    ]);
    let calls = move || calls.load(Ordering::Relaxed);
    p.answer(Handled::Now(response), now);
    let mut wire = send_all(&mut p, 5, now);
    assert!(wire.ends_with(b"Transfer-Encoding: chunked\r\n\r\n"));
    // Pending: no pull as output leaves or the driver polls, the
    // connection stays, and the next request waits for the body.
    assert_eq!(p.poll(now), Action::Wait);
    assert_eq!(calls(), 1);
    // Input is still read (a head's worth), to see the client's close.
    assert!(!p.is_closed() && p.wants_input());
    p.resume(0, now);
    assert_eq!(calls(), 1, "a wake for another request does nothing");
    p.resume(1, now);
    assert_eq!(calls(), 3, "pulled until pending again");
    wire.extend(send_all(&mut p, 5, now));
    p.resume(1, now);
    wire.extend(send_all(&mut p, 5, now));
    assert_eq!(calls(), 4);
    assert_eq!(
        body_of(&wire),
        b"2\r\nab\r\n2\r\ncd\r\n2\r\nef\r\n0\r\n\r\n"
    );
    assert_eq!(p.poll(now), Action::Request, "then the pipelined request");
    p.resume(1, now);
    assert_eq!(calls(), 4, "a late wake does nothing");
}

#[test]
fn a_pending_stream_never_woken_is_cut_short_at_its_last_pieces_write_timeout() {
    let (mut p, now) = protocol();
    p.received(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    let (response, calls) = script(&[(b"ab", Fill::Pending), (b"", Fill::Pending)]);
    p.answer(Handled::Now(response), now);
    // All of it has left, and the piece's deadline still runs...
    send_all(&mut p, 4096, now + Duration::from_secs(1));
    let due = now + Duration::from_secs(10);
    assert_eq!(p.deadline(), Some(due));
    // ...past a wake that brought nothing.
    p.resume(1, now + Duration::from_secs(5));
    assert_eq!(calls.load(Ordering::Relaxed), 2);
    assert_eq!(p.deadline(), Some(due));
    assert_eq!(p.poll(due - Duration::from_secs(1)), Action::Wait);
    assert!(!p.is_closed());
    assert_eq!(p.poll(due), Action::Wait);
    assert!(
        p.is_closed() && p.cut_short(),
        "reset: the body never ended"
    );
}

#[test]
fn an_http_1_0_client_gets_a_pending_stream_up_to_the_close() {
    let (mut p, now) = protocol();
    p.received(b"GET /a HTTP/1.0\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    let (response, _) = script(&[
        (b"ab", Fill::Pending),
        (b"cd", Fill::Pending),
        (b"", Fill::Done),
    ]);
    p.answer(Handled::Now(response), now);
    let mut wire = send_all(&mut p, 4096, now);
    assert_eq!(body_of(&wire), b"ab");
    assert!(!p.is_closed(), "the close would end the body");
    p.resume(1, now);
    wire.extend(send_all(&mut p, 4096, now));
    assert_eq!(body_of(&wire), b"abcd");
    assert!(!p.is_closed());
    p.resume(1, now);
    assert!(p.output().is_empty());
    assert!(
        p.is_closed() && !p.cut_short(),
        "a complete body ends with a close"
    );
}

#[test]
fn an_idle_stream_waits_without_a_deadline_once_its_output_has_left() {
    let (mut p, now) = protocol();
    p.received(b"GET /feed HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    let (response, calls) = script(&[(b"ab", Fill::Idle), (b"cd", Fill::Idle), (b"", Fill::Idle)]);
    p.answer(Handled::Now(response), now);
    // While its bytes wait for the client, the write timeout runs...
    assert_eq!(p.deadline(), Some(now + Duration::from_secs(10)));
    let mut wire = send_all(&mut p, 4096, now);
    // ...and once they have left, nothing does: no idle, no write timeout.
    assert_eq!(p.deadline(), None);
    let later = now + Duration::from_secs(3600);
    assert_eq!(p.poll(later), Action::Wait);
    assert!(!p.is_closed() && p.wants_input());
    p.resume(1, later);
    wire.extend(send_all(&mut p, 4096, later));
    p.resume(1, later);
    assert_eq!(calls.load(Ordering::Relaxed), 3);
    assert_eq!(p.deadline(), None, "a wake that brought nothing");
    assert_eq!(body_of(&wire), b"2\r\nab\r\n2\r\ncd\r\n");
    assert!(!p.is_closed());
}

/// A connection answering `GET /feed` with a stream of `steps`, what it
/// gave first sent: the protocol, the time, and the wire so far.
fn feed_sent(steps: &'static [(&'static [u8], Fill)]) -> (Protocol, Instant, Vec<u8>) {
    let (mut p, now) = protocol();
    p.received(b"GET /feed HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    let (response, _) = script(steps);
    p.answer(Handled::Now(response), now);
    let wire = send_all(&mut p, 4096, now);
    (p, now, wire)
}

#[test]
fn an_idle_stream_ends_cleanly_when_the_server_stops_and_a_pending_one_does_not() {
    for (fill, ends) in [(Fill::Idle, true), (Fill::Pending, false)] {
        let steps: &'static [(&'static [u8], Fill)] = match fill {
            Fill::Idle => &[(b"ab", Fill::Idle)],
            _ => &[(b"ab", Fill::Pending)],
        };
        let (mut p, now, mut wire) = feed_sent(steps);
        p.stop(now);
        wire.extend(send_all(&mut p, 4096, now));
        if ends {
            assert_eq!(body_of(&wire), b"2\r\nab\r\n0\r\n\r\n");
            assert!(p.is_closed() && !p.cut_short(), "{fill:?}");
        } else {
            assert_eq!(body_of(&wire), b"2\r\nab\r\n", "{fill:?}");
            assert!(!p.is_closed(), "a pending stream is still owed");
        }
    }
}

/// Regression: a stream never read its client's close, so a feed whose
/// client had gone held its connection until a heartbeat failed.
#[test]
fn an_idle_stream_ends_when_its_client_closes_and_a_pending_one_goes_on() {
    for (fill, ends) in [(Fill::Idle, true), (Fill::Pending, false)] {
        let steps: &'static [(&'static [u8], Fill)] = match fill {
            Fill::Idle => &[(b"ab", Fill::Idle)],
            _ => &[(b"ab", Fill::Pending), (b"", Fill::Done)],
        };
        let (mut p, now, mut wire) = feed_sent(steps);
        assert!(p.wants_input(), "{fill:?}");
        p.closed_by_peer();
        assert!(!p.wants_input());
        assert_eq!(p.poll(now), Action::Wait);
        wire.extend(send_all(&mut p, 4096, now));
        if ends {
            assert_eq!(body_of(&wire), b"2\r\nab\r\n0\r\n\r\n");
            assert!(p.is_closed() && !p.cut_short());
        } else {
            // Still owed: it ends when complete, then the connection closes.
            assert!(!p.is_closed());
            p.resume(1, now);
            wire.extend(send_all(&mut p, 4096, now));
            assert_eq!(body_of(&wire), b"2\r\nab\r\n0\r\n\r\n");
            assert_eq!(p.poll(now), Action::Wait);
            assert!(p.is_closed() && !p.cut_short());
        }
    }
}

#[test]
fn a_request_pipelined_during_a_stream_is_held_then_served() {
    let (mut p, now) = protocol();
    p.received(b"GET /feed HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    let (response, _) = script(&[(b"ab", Fill::Pending), (b"", Fill::Done)]);
    p.answer(Handled::Now(response), now);
    send_all(&mut p, 4096, now);
    p.received(b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(
        p.poll(now),
        Action::Wait,
        "not parsed while the body streams"
    );
    // A head's worth at most is held.
    p.received(&vec![b'x'; Limits::default().max_head], now);
    assert!(!p.wants_input());
    p.resume(1, now);
    send_all(&mut p, 4096, now);
    assert_eq!(p.poll(now), Action::Request, "then it is served");
}
