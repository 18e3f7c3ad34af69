//! Held responses (`Response::held_for`): parked until their time, in
//! order with what is pipelined behind them, deferred ones alike, and
//! written at once when the server stops.

use super::*;
use std::sync::Arc;

fn protocol() -> (Protocol, Instant) {
    let now = Instant::now();
    let peer = SocketAddr::from(([127, 0, 0, 1], 1));
    (Protocol::new(Limits::default(), peer, now), now)
}

const MS: Duration = Duration::from_millis(1);

fn held(ms: u32) -> Response {
    Response::no_content().held_for(MS * ms)
}

#[test]
fn a_held_answer_is_written_when_due_and_what_follows_waits_for_it() {
    let (mut p, now) = protocol();
    p.received(
        b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
        now,
    );
    assert_eq!(p.poll(now), Action::Request);
    p.answer(Handled::Now(held(100)), now);
    assert!(p.output().is_empty());
    assert_eq!(p.deadline(), Some(now + MS * 100));
    assert_eq!(p.take_timer(), Some(now + MS * 100));
    assert_eq!(p.take_timer(), None, "the timer is told once");
    // The pipelined request is not parsed while the first answer is held.
    assert_eq!(p.poll(now + MS * 99), Action::Wait);
    assert!(p.output().is_empty());
    assert_eq!(p.poll(now + MS * 100), Action::Wait);
    assert!(p.output().starts_with(b"HTTP/1.1 204 "));
    let n = p.output().len();
    p.sent(n, now + MS * 100);
    assert_eq!(p.poll(now + MS * 100), Action::Request);
    p.answer(Handled::Now(Response::no_content()), now + MS * 100);
    assert!(p.output().starts_with(b"HTTP/1.1 204 "));
}

#[test]
fn a_deferred_answer_is_held_from_its_request_and_not_past_it() {
    let (mut p, now) = protocol();
    p.received(b"POST /a HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    p.answer(Handled::Later(50), now);
    p.complete(1, Response::no_content(), now + MS * 10);
    assert!(p.output().is_empty());
    assert_eq!(p.take_timer(), Some(now + MS * 50));
    // A second completion while one is held changes nothing.
    p.complete(1, Response::error(500, "late"), now + MS * 20);
    assert_eq!(p.poll(now + MS * 50), Action::Wait);
    assert!(p.output().starts_with(b"HTTP/1.1 204 "));

    // Completed after its hold has run out: written at once.
    let (mut p, now) = protocol();
    p.received(b"POST /a HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    p.answer(Handled::Later(50), now);
    p.complete(1, Response::no_content(), now + MS * 60);
    assert!(p.output().starts_with(b"HTTP/1.1 204 "));
    assert_eq!(p.take_timer(), None);
}

#[test]
fn stopping_writes_a_held_answer_at_once_and_closes() {
    let (mut p, now) = protocol();
    p.received(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    p.answer(Handled::Now(held(60_000)), now);
    assert!(p.output().is_empty());
    p.stop(now + MS);
    let text = String::from_utf8_lossy(p.output()).into_owned();
    assert!(text.starts_with("HTTP/1.1 204 "), "{text}");
    assert!(text.contains("Connection: close"), "{text}");
}

#[test]
fn a_deferred_answer_frees_the_body_at_once_and_the_next_request_follows_it() {
    let (mut p, now) = protocol();
    p.received(
        b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
        now,
    );
    assert_eq!(p.poll(now), Action::Request);
    let (_, inbox, _) = p.request_parts();
    assert_eq!(inbox.body(false), Ok(&b"hello"[..]));
    p.answer(Handled::Later(0), now);
    let (_, inbox, _) = p.request_parts();
    assert_eq!(inbox.body(false), Ok(&b""[..]), "freed, and still read");
    p.complete(1, Response::no_content(), now);
    assert!(p.output().starts_with(b"HTTP/1.1 204 "));
    let n = p.output().len();
    p.sent(n, now);
    assert_eq!(p.poll(now), Action::Request);
    assert_eq!(p.request_parts().0.method(), "GET");
}

#[test]
fn a_client_gone_while_its_answer_is_held_frees_the_connection_at_once() {
    let (mut p, now) = protocol();
    p.received(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert!(p.wants_input());
    assert_eq!(p.poll(now), Action::Request);
    p.answer(Handled::Now(held(60_000)), now);
    // Read while held, so that the close is seen.
    assert!(p.wants_input());
    p.closed_by_peer();
    assert!(!p.wants_input());
    assert_eq!(p.poll(now + MS), Action::Wait);
    assert!(p.is_closed(), "closed at once, not when due");
    assert!(p.output().is_empty(), "nothing written to a client gone");

    // A deferred answer (not held) whose client half-closes: the answer
    // is told no one may wait, and written if it comes all the same.
    let (mut p, now) = protocol();
    p.received(b"POST /a HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    let (_, _, notes) = p.request_parts();
    let left = Arc::clone(notes.left.get_or_insert_with(Default::default));
    p.answer(Handled::Later(0), now);
    p.closed_by_peer();
    assert_eq!(p.poll(now + MS), Action::Wait);
    assert_eq!(left.load(std::sync::atomic::Ordering::Relaxed), 1, "told");
    assert!(!p.is_closed());
    p.complete(1, Response::no_content(), now + MS * 2);
    let text = String::from_utf8_lossy(p.output()).into_owned();
    assert!(text.starts_with("HTTP/1.1 204 "), "{text}");
    assert!(text.contains("Connection: close"), "{text}");
    // One that answers it is gone (a search not run) is not written.
    let (mut p, now) = protocol();
    p.received(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    p.answer(Handled::Later(0), now);
    p.closed_by_peer();
    assert_eq!(p.poll(now + MS), Action::Wait);
    p.complete(1, Response::gone(), now + MS * 2);
    assert!(p.is_closed());
    assert!(p.output().is_empty());

    // A deferred answer to be held, whose client leaves before it comes.
    let (mut p, now) = protocol();
    p.received(b"POST /a HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    p.answer(Handled::Later(60_000), now);
    assert!(p.wants_input());
    p.closed_by_peer();
    assert_eq!(p.poll(now + MS), Action::Wait);
    p.complete(1, Response::no_content(), now + MS * 2);
    assert!(p.is_closed());
    assert!(p.output().is_empty());
}

#[test]
fn a_pipelined_request_read_while_an_answer_is_held_follows_it() {
    let (mut p, now) = protocol();
    p.received(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert_eq!(p.poll(now), Action::Request);
    p.answer(Handled::Now(held(100)), now);
    p.received(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n", now + MS);
    assert_eq!(p.poll(now + MS * 2), Action::Wait);
    assert_eq!(p.poll(now + MS * 100), Action::Wait);
    assert!(p.output().starts_with(b"HTTP/1.1 204 "));
    let n = p.output().len();
    p.sent(n, now + MS * 100);
    assert_eq!(p.poll(now + MS * 100), Action::Request);
    assert_eq!(p.request_parts().0.target(), "/b");
}
