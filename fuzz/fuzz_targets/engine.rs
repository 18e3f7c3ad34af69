//! The HTTP engine fed arbitrary bytes on one connection.
//!
//! Input: one byte choosing the limits and how the rest is cut into reads,
//! then the bytes the client sends. Invariants checked, beyond "no panic":
//!
//! 1. How the bytes are cut into reads changes nothing: the requests the
//!    handler sees and the bytes written are the same as for one read.
//! 2. The output is a well-formed sequence of HTTP/1.1 responses, one per
//!    request handled plus at most one refusal, nothing after a response
//!    that announced `Connection: close`, and nothing trailing.
//! 3. A body read under `Content-Length` (no `Transfer-Encoding`) is exactly
//!    that many bytes.
//! 4. Every request the engine accepted, written out again canonically
//!    (`name: value` lines, `Content-Length` framing), is accepted again as
//!    the same request: method, target, version, headers and body.

#![no_main]

use libfuzzer_sys::fuzz_target;
use plantstore::http::Limits;
use plantstore::http::replay::{Seen, exchange};

mod reads;
use reads::cut;

fuzz_target!(|data: &[u8]| {
    let Some((&control, stream)) = data.split_first() else {
        return;
    };
    let limits = limits(control);
    let whole = exchange(&[stream], limits.clone());

    let reads = cut(stream, control);
    let split = exchange(&reads, limits.clone());
    assert_eq!(
        split.seen, whole.seen,
        "read boundaries changed the requests"
    );
    assert_eq!(
        split.output, whole.output,
        "read boundaries changed the output"
    );

    check_responses(&whole.output, &whole.seen);

    for seen in &whole.seen {
        check_length(seen);
        reserialise(seen, &limits);
    }
});

/// Small limits half of the time, so the 413/414/431 paths are reachable.
fn limits(control: u8) -> Limits {
    let mut limits = Limits::default();
    if control & 1 == 1 {
        limits.max_head = 256;
        limits.max_body = 64;
    }
    limits
}

fn check_responses(mut output: &[u8], seen: &[Seen]) {
    let mut finals = Vec::new();
    let mut closed = false;
    while !output.is_empty() {
        assert!(!closed, "bytes after a Connection: close response");
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut response = httparse::Response::new(&mut headers);
        let len = match response.parse(output) {
            Ok(httparse::Status::Complete(len)) => len,
            other => panic!("malformed response head: {other:?}"),
        };
        let code = response.code.expect("status code");
        let header = |name: &str| {
            response
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| std::str::from_utf8(h.value).expect("ascii header"))
        };
        if code == 100 {
            output = &output[len..];
            continue;
        }
        let body = if code == 204 {
            0
        } else {
            header("content-length")
                .expect("every final response has a Content-Length")
                .parse::<usize>()
                .expect("numeric Content-Length")
        };
        closed = header("connection") == Some("close");
        let index = finals.len();
        let head_only = seen.get(index).is_some_and(|s| s.method == "HEAD");
        let body = if head_only { 0 } else { body };
        assert!(output.len() >= len + body, "response body cut short");
        finals.push(code);
        output = &output[len + body..];
    }
    assert!(
        finals.len() == seen.len() || finals.len() == seen.len() + 1,
        "{} responses for {} requests",
        finals.len(),
        seen.len()
    );
    for (code, seen) in finals.iter().zip(seen) {
        let expected = if matches!(seen.body, Some(Err(_))) {
            400
        } else {
            200
        };
        assert_eq!(*code, expected, "response out of step with {seen:?}");
    }
    if let Some(code) = finals.get(seen.len()) {
        assert!(
            matches!(code, 400 | 408 | 413 | 414 | 431 | 501 | 505),
            "unexpected refusal status {code}"
        );
    }
}

fn check_length(seen: &Seen) {
    let values = |name: &'static [u8]| {
        seen.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    };
    if values(b"transfer-encoding").next().is_some() {
        return;
    }
    let Some(Ok(body)) = &seen.body else {
        return;
    };
    for value in values(b"content-length") {
        let declared = std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok());
        assert_eq!(
            declared,
            Some(body.len()),
            "body length differs from Content-Length"
        );
    }
}

fn reserialise(seen: &Seen, limits: &Limits) {
    if matches!(seen.body, Some(Err(_))) {
        return;
    }
    let framing = |name: &[u8]| {
        name.eq_ignore_ascii_case(b"content-length")
            || name.eq_ignore_ascii_case(b"transfer-encoding")
    };
    let mut headers: Vec<(Vec<u8>, Vec<u8>)> = seen
        .headers
        .iter()
        .filter(|(name, _)| !framing(name))
        .cloned()
        .collect();
    let body = match &seen.body {
        Some(Ok(body)) if !body.is_empty() => {
            headers.push((
                b"Content-Length".to_vec(),
                body.len().to_string().into_bytes(),
            ));
            body.clone()
        }
        _ => Vec::new(),
    };
    let mut text = format!(
        "{} {} HTTP/1.{}\r\n",
        seen.method, seen.target, seen.minor_version
    )
    .into_bytes();
    for (name, value) in &headers {
        text.extend_from_slice(name);
        text.extend_from_slice(b": ");
        text.extend_from_slice(value);
        text.extend_from_slice(b"\r\n");
    }
    text.extend_from_slice(b"\r\n");
    if text.len() > limits.max_head || headers.len() > 100 {
        return; // the canonical spelling may be longer than the original
    }
    text.extend_from_slice(&body);
    let again = exchange(&[&text], limits.clone());
    let expected = Seen {
        headers,
        body: seen.body.as_ref().map(|_| Ok(body)),
        ..seen.clone()
    };
    assert_eq!(again.seen, vec![expected], "re-serialised request differs");
}
