//! The answer's framing: lengths, chunks, the server's close, the bounds;
//! and the same answers fed a byte at a time.

use super::*;

/// The bounds these tests read with.
const MAX_HEAD: usize = 64 * 1024;
const MAX_RESPONSE: usize = 1024 * 1024;

/// The status, headers and body of an answer.
type Parsed = (u16, Vec<(String, Vec<u8>)>, Vec<u8>);

/// An answer read whole: its body kept until it is.
struct Whole {
    head: HeadReader,
    read: Option<(Heading, BodyReader)>,
    head_only: bool,
}

impl Whole {
    fn new(head_only: bool) -> Whole {
        Whole {
            head: HeadReader::new(MAX_HEAD),
            read: None,
            head_only,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) -> Result<Option<Parsed>, String> {
        if self.read.is_none() {
            let Some((heading, used)) = self.head.push(bytes)? else {
                return Ok(None);
            };
            let body = BodyReader::new(&heading, self.head_only, MAX_RESPONSE)?;
            self.read = Some((heading, body));
            bytes = &bytes[used..];
        }
        let Some((_, body)) = &mut self.read else {
            return Ok(None);
        };
        Ok(body.push(bytes)?.then(|| self.parsed()))
    }

    fn close(&mut self) -> Result<Parsed, String> {
        match &self.read {
            Some((_, body)) => body.close()?,
            None => return Err(CLOSED_EARLY.into()),
        }
        Ok(self.parsed())
    }

    fn parsed(&mut self) -> Parsed {
        let (heading, mut body) = self.read.take().unwrap();
        (heading.status, heading.fields(), body.take())
    }
}

/// `buf` as one read, then the server's close if `closed`.
fn parse(buf: &[u8], head_only: bool, closed: bool) -> Result<Option<Parsed>, String> {
    let mut answer = Whole::new(head_only);
    match answer.push(buf)? {
        None if closed => answer.close().map(Some),
        parsed => Ok(parsed),
    }
}

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

/// RFC 9112, 6.3: Transfer-Encoding over Content-Length, lengths that
/// disagree or carry more than digits refused, a chunk size of hex digits
/// only.
#[test]
fn framing_is_read_as_the_standard_says_and_ambiguous_framing_is_refused() {
    let head = |fields: &str| format!("HTTP/1.1 200 OK\r\n{fields}\r\n");
    let chunked = "5\r\nhello\r\n0\r\n\r\n";
    for fields in [
        "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",
        "Transfer-Encoding: gzip\r\nTransfer-Encoding: Chunked\r\n",
    ] {
        let answer = head(fields) + chunked;
        assert_eq!(
            body_of(answer.as_bytes(), false).unwrap(),
            b"hello",
            "{fields}"
        );
    }
    let not_last = head("Transfer-Encoding: chunked, gzip\r\nContent-Length: 2\r\n") + "abc";
    assert_eq!(body_of(not_last.as_bytes(), false), None);
    assert_eq!(body_of(not_last.as_bytes(), true).unwrap(), b"abc");
    for fields in [
        "Content-Length: 5, 5\r\n",
        "Content-Length: 5\r\nContent-Length: 5\r\n",
    ] {
        let answer = head(fields) + "hello";
        assert_eq!(
            body_of(answer.as_bytes(), false).unwrap(),
            b"hello",
            "{fields}"
        );
    }
    for fields in [
        "Content-Length: 5\r\nContent-Length: 6\r\n",
        "Content-Length: 5, 6\r\n",
        "Content-Length: +5\r\n",
        "Content-Length: 0x5\r\n",
        "Content-Length: \r\n",
    ] {
        let answer = head(fields) + "hello!";
        assert!(parse(answer.as_bytes(), false, false).is_err(), "{fields}");
    }
    for size in ["+5", " 5", "-5", "5 5"] {
        let answer = head("Transfer-Encoding: chunked\r\n") + size + "\r\nhello\r\n0\r\n\r\n";
        assert!(parse(answer.as_bytes(), false, false).is_err(), "{size:?}");
    }
    let blank = head("Transfer-Encoding: chunked\r\n") + "5 ;x\r\nhello\r\n0\r\n\r\n";
    assert_eq!(body_of(blank.as_bytes(), false).unwrap(), b"hello");
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
}

#[test]
fn an_answer_fed_a_byte_at_a_time_reads_as_it_does_whole() {
    let answers: [&[u8]; 6] = [
        b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\nReplay-Nonce: abc\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n\r\n\r\r\n0\r\nX-T: 1\r\n\r\n",
        b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
        b"HTTP/1.1 200 OK\r\n\r\nuntil the close",
        b"HTTP/1.1 204 No Content\r\n\r\n",
    ];
    for whole in answers {
        let expected = parse(whole, false, true).unwrap().unwrap();
        let mut answer = Whole::new(false);
        let mut parsed = None;
        for (at, byte) in whole.iter().enumerate() {
            if let Some(done) = answer.push(&[*byte]).unwrap() {
                assert_eq!(at, whole.len() - 1, "{:?}", String::from_utf8_lossy(whole));
                parsed = Some(done);
                break;
            }
        }
        let parsed = parsed.map_or_else(|| answer.close(), Ok).unwrap();
        assert_eq!(parsed, expected, "{:?}", String::from_utf8_lossy(whole));
    }
    assert_eq!(
        parse(answers[2], false, false).unwrap().unwrap().2,
        b"\r\n\r"
    );
}

#[test]
fn a_close_before_the_answer_is_whole_is_an_error() {
    for cut in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhell"[..],
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
        b"HTTP/1.1 200 OK\r\n",
        b"",
    ] {
        let mut answer = Whole::new(false);
        assert_eq!(answer.push(cut).unwrap(), None);
        assert!(answer.close().is_err());
    }
}

#[test]
fn bytes_changed_at_random_and_cut_at_random_never_panic_and_read_alike() {
    let answers: [&[u8]; 3] = [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n",
        b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\nReplay-Nonce: abc\r\n\r\nhello",
        b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
    ];
    // A small linear congruential generator: the same cases every run.
    let mut seed: u64 = 0x5eed;
    let mut next = move |below: usize| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) as usize % below.max(1)
    };
    for round in 0..2_000 {
        let mut bytes = answers[round % answers.len()].to_vec();
        for _ in 0..1 + next(3) {
            let at = next(bytes.len());
            bytes[at] = b"\r\n0;:aZ \x00\xff"[next(10)];
        }
        let whole = parse(&bytes, false, true);
        let mut answer = Whole::new(false);
        let mut rest = &bytes[..];
        let cut = loop {
            if rest.is_empty() {
                break answer.close();
            }
            let (now, later) = rest.split_at(1 + next(rest.len()));
            rest = later;
            match answer.push(now) {
                Ok(None) => {}
                Ok(Some(parsed)) => break Ok(parsed),
                Err(e) => break Err(e),
            }
        };
        if let (Ok(Some(whole)), Ok(cut)) = (&whole, &cut) {
            assert_eq!(whole, cut, "{:?}", String::from_utf8_lossy(&bytes));
        }
    }
}
