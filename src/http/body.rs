//! Request bodies, decoded as bytes arrive: `Content-Length` or chunked,
//! within a size limit. Sans-I/O: the decoder is handed whatever input is
//! buffered and says how much of it belongs to the body, so bytes after the
//! body (a pipelined request) stay buffered for the next head, and how the
//! input was cut into reads never changes the outcome.
//!
//! The limit is enforced as bytes arrive, never by trusting a declared size.
//! Chunked framing follows RFC 9112 §7.1 exactly: a chunk-size line is hex
//! digits, then optional extensions (`;name`, `;name=token` or
//! `;name="quoted"`, with optional blanks around `;` and `=`), then CRLF.
//! A bare LF or CR, a control byte, or anything else off the grammar is
//! refused: a proxy that ends lines at LF would otherwise read a different
//! message than we do (request smuggling).
//!
//! What it does not do: hold the input or decide when a body is read (the
//! inbox does, once the handler asks), or encode chunks for responses
//! (`chunk` does).

use std::fmt;

/// How a request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// Larger than the limit (the limit in bytes).
    TooLarge(usize),
    /// The chunked framing is broken.
    Malformed(&'static str),
    /// The client went quiet for longer than the body timeout.
    Timeout,
    /// The connection closed or failed before the body was complete.
    Closed,
    /// Not all of the body has arrived yet. The engine reads the rest and
    /// then calls the handler again; the response to this call is dropped,
    /// so a handler must do nothing lasting before it reads the body.
    NotYet,
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::TooLarge(max) => write!(f, "request body is larger than {max} bytes"),
            BodyError::Malformed(what) => write!(f, "malformed chunked body: {what}"),
            BodyError::Timeout => f.write_str("request body timed out"),
            BodyError::Closed => f.write_str("connection closed before the body was complete"),
            BodyError::NotYet => f.write_str("request body not yet received"),
        }
    }
}

impl std::error::Error for BodyError {}

/// Longest chunk-size line, and longest trailer section, accepted.
const MAX_LINE: usize = 4096;

/// Where a chunked decoder stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside chunk data: this many bytes still to come.
    Data(u64),
    /// After chunk data: expecting its CRLF.
    DataEnd,
    /// After the last chunk: trailer lines, this many bytes of them so far.
    Trailers(usize),
}

/// An incremental body decoder.
#[derive(Debug)]
pub(crate) struct Decoder {
    /// Bytes of a `Content-Length` body still to come, or the chunk state.
    left: Result<u64, Chunk>,
    max: usize,
    body: Vec<u8>,
}

/// What one step of decoding found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DecodeStep {
    /// Needs more input.
    More,
    /// The body is complete.
    Done,
}

impl Decoder {
    /// A decoder for `framing` that refuses more than `max` bytes. A
    /// declared length over the limit is refused here, before any reading.
    pub(crate) fn new(framing: Framing, max: usize) -> Result<Decoder, BodyError> {
        let left = match framing {
            Framing::None => Ok(0),
            Framing::Length(n) if n > max as u64 => return Err(BodyError::TooLarge(max)),
            Framing::Length(n) => Ok(n),
            Framing::Chunked => Err(Chunk::Size),
        };
        let capacity = match left {
            Ok(n) => n as usize,
            Err(_) => 0,
        };
        Ok(Decoder {
            left,
            max,
            body: Vec::with_capacity(capacity),
        })
    }

    /// Decodes from `input`; returns how many bytes it consumed and whether
    /// the body is complete. Bytes after the body are never consumed.
    pub(crate) fn advance(&mut self, input: &[u8]) -> Result<(usize, DecodeStep), BodyError> {
        let mut used = 0;
        loop {
            let rest = &input[used..];
            let state = match self.left {
                Ok(0) => return Ok((used, DecodeStep::Done)),
                Ok(n) => {
                    let take = rest.len().min(n as usize);
                    self.body.extend_from_slice(&rest[..take]);
                    self.left = Ok(n - take as u64);
                    used += take;
                    if take == 0 {
                        return Ok((used, DecodeStep::More));
                    }
                    continue;
                }
                Err(state) => state,
            };
            match state {
                Chunk::Size => {
                    let Some((len, size)) = size_line(rest)? else {
                        return Ok((used, DecodeStep::More));
                    };
                    used += len;
                    if size > (self.max - self.body.len()) as u64 {
                        return Err(BodyError::TooLarge(self.max));
                    }
                    self.left = Err(if size == 0 {
                        Chunk::Trailers(0)
                    } else {
                        Chunk::Data(size)
                    });
                }
                Chunk::Data(n) => {
                    let take = rest.len().min(n as usize);
                    self.body.extend_from_slice(&rest[..take]);
                    used += take;
                    if take == 0 {
                        return Ok((used, DecodeStep::More));
                    }
                    let n = n - take as u64;
                    self.left = Err(if n == 0 {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(n)
                    });
                }
                Chunk::DataEnd => match rest {
                    [b'\r', b'\n', ..] => {
                        used += 2;
                        self.left = Err(Chunk::Size);
                    }
                    [] | [b'\r'] => return Ok((used, DecodeStep::More)),
                    _ => return Err(BodyError::Malformed("chunk data not followed by CRLF")),
                },
                Chunk::Trailers(total) => {
                    // The whole trailer section, CRLFs included, fits in
                    // MAX_LINE.
                    let Some(budget) = MAX_LINE.checked_sub(total) else {
                        return Err(BodyError::Malformed("trailers too long"));
                    };
                    let Some(len) = field_line(rest, budget)? else {
                        return Ok((used, DecodeStep::More));
                    };
                    used += len;
                    if len == 2 {
                        self.left = Ok(0);
                    } else if total + len > MAX_LINE {
                        return Err(BodyError::Malformed("trailers too long"));
                    } else {
                        self.left = Err(Chunk::Trailers(total + len));
                    }
                }
            }
        }
    }

    /// The decoded body.
    pub(crate) fn into_body(self) -> Vec<u8> {
        self.body
    }
}

/// A complete chunk-size line at the start of `input`: its length with the
/// CRLF and the size; `None` while incomplete.
fn size_line(input: &[u8]) -> Result<Option<(usize, u64)>, BodyError> {
    const BAD: BodyError = BodyError::Malformed("bad chunk size line");
    let digits = input.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits > 16 {
        return Err(BodyError::Malformed("chunk size too large"));
    }
    let Some(end) = line_end(input, MAX_LINE)? else {
        return Ok(None);
    };
    if digits == 0 {
        return Err(BAD);
    }
    let size = input[..digits]
        .iter()
        .fold(0u64, |n, &b| (n << 4) | u64::from(hex_value(b)));
    if !extensions(&input[digits..end]) {
        return Err(BAD);
    }
    Ok(Some((end + 2, size)))
}

fn hex_value(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}

/// Where the CRLF that ends the line at the start of `input` lies (the
/// index of its CR); `None` while incomplete. A bare LF, a CR not followed
/// by LF, or a line longer than `max` is an error.
fn line_end(input: &[u8], max: usize) -> Result<Option<usize>, BodyError> {
    match input.iter().position(|&b| b == b'\r' || b == b'\n') {
        Some(i) if i > max => Err(BodyError::Malformed("line too long")),
        Some(i) if input[i] == b'\n' => Err(BodyError::Malformed("line ended by a bare LF")),
        Some(i) => match input.get(i + 1) {
            Some(b'\n') => Ok(Some(i)),
            Some(_) => Err(BodyError::Malformed("bare CR in a line")),
            None => Ok(None),
        },
        None if input.len() > max => Err(BodyError::Malformed("line too long")),
        None => Ok(None),
    }
}

/// Whether `ext` is a valid `*( BWS ";" BWS name [ BWS "=" BWS value ] )`.
fn extensions(mut ext: &[u8]) -> bool {
    loop {
        ext = blanks(ext);
        let Some(rest) = ext.strip_prefix(b";") else {
            return ext.is_empty();
        };
        let rest = blanks(rest);
        let name = token_len(rest);
        if name == 0 {
            return false;
        }
        ext = &rest[name..];
        let after = blanks(ext);
        if let Some(value) = after.strip_prefix(b"=") {
            let value = blanks(value);
            let len = match value.first() {
                Some(b'"') => quoted_len(value),
                _ => Some(token_len(value)).filter(|&n| n > 0),
            };
            let Some(len) = len else {
                return false;
            };
            ext = &value[len..];
        }
    }
}

fn blanks(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    &s[n..]
}

/// Length of the RFC 9110 token at the start of `s`.
fn token_len(s: &[u8]) -> usize {
    s.iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        .count()
}

/// Length of the quoted-string at the start of `s` (which starts with `"`).
fn quoted_len(s: &[u8]) -> Option<usize> {
    let text = |b: u8| b == b'\t' || b == b' ' || (0x21..=0x7E).contains(&b) || b >= 0x80;
    let mut i = 1;
    while i < s.len() {
        match s[i] {
            b'"' => return Some(i + 1),
            b'\\' if s.get(i + 1).is_some_and(|&b| text(b)) => i += 2,
            b if b != b'\\' && text(b) => i += 1,
            _ => return None,
        }
    }
    None
}

/// A complete trailer field line (or the empty line ending the trailers)
/// at the start of `input`: its length with the CRLF. Field lines are
/// skipped, but must be CRLF-ended and free of control bytes.
fn field_line(input: &[u8], max: usize) -> Result<Option<usize>, BodyError> {
    let Some(end) = line_end(input, max)? else {
        return Ok(None);
    };
    let line = &input[..end];
    if line.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7F) {
        return Err(BodyError::Malformed("control byte in a trailer"));
    }
    if !line.is_empty() && !line.contains(&b':') {
        return Err(BodyError::Malformed("trailer line without a colon"));
    }
    Ok(Some(end + 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `input` whole; then again one byte at a time.
    fn decode(framing: Framing, input: &[u8]) -> Result<(Vec<u8>, usize), BodyError> {
        let mut whole = Decoder::new(framing, 64)?;
        let result = match whole.advance(input)? {
            (used, DecodeStep::Done) => Ok((whole.into_body(), used)),
            (_, DecodeStep::More) => Err(BodyError::NotYet),
        };
        let mut bytewise = Decoder::new(framing, 64)?;
        let mut buf = Vec::new();
        let mut consumed = 0;
        let mut outcome = Err(BodyError::NotYet);
        for &b in input {
            buf.push(b);
            match bytewise.advance(&buf) {
                Ok((used, step)) => {
                    buf.drain(..used);
                    consumed += used;
                    if step == DecodeStep::Done {
                        outcome = Ok(consumed);
                        break;
                    }
                }
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        match (&result, outcome) {
            (Ok((body, used)), Ok(n)) => {
                assert_eq!(*used, n);
                assert_eq!(&bytewise.into_body(), body);
            }
            (Err(a), Err(b)) => assert_eq!(*a, b),
            (a, b) => panic!("whole {a:?}, byte by byte {b:?}"),
        }
        result
    }

    fn chunked(input: &str) -> Result<(Vec<u8>, usize), BodyError> {
        decode(Framing::Chunked, input.as_bytes())
    }

    #[test]
    fn chunks_extensions_and_trailers_decode_and_stop_at_the_body_end() {
        let text = "3;a=b ; c = \"d\\\"e\" ;f\r\nabc\r\n1\r\nd\r\n0\r\nX-T: 1\r\n\r\nGET";
        let (body, used) = chunked(text).unwrap();
        assert_eq!(body, b"abcd");
        assert_eq!(used, text.len() - 3);
        assert_eq!(
            decode(Framing::Length(3), b"abcdef").unwrap(),
            (b"abc".to_vec(), 3)
        );
    }

    fn all_malformed(inputs: &[&str]) {
        for bad in inputs {
            assert!(
                matches!(chunked(bad), Err(BodyError::Malformed(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn lines_end_with_crlf_only() {
        all_malformed(&[
            "2;\nxx\r\n0\r\n\r\n",
            "2\nab\r\n0\r\n\r\n",
            "2\r\nab\n0\r\n\r\n",
            "2\rab\r\n0\r\n\r\n",
            "2\r\nab\r\n0\r\nX: 1\n\r\n",
        ]);
    }

    #[test]
    fn control_bytes_and_off_grammar_extensions_are_refused() {
        all_malformed(&[
            "2;a\x01b\r\nab\r\n0\r\n\r\n",
            "2 ;a\x00\r\nab\r\n0\r\n\r\n",
            "2;\r\nab\r\n0\r\n\r\n",
            "2;a=\r\nab\r\n0\r\n\r\n",
            "2;a=\"b\r\nab\r\n0\r\n\r\n",
            "2x\r\nab\r\n0\r\n\r\n",
            "\r\nab\r\n0\r\n\r\n",
            "+2\r\nab\r\n0\r\n\r\n",
            "2\r\nab\r\n0\r\nX\x01: 1\r\n\r\n",
            "10000000000000000\r\n",
        ]);
    }

    #[test]
    fn the_trailer_section_is_bounded_as_a_whole() {
        let trailers = |lines: &[usize]| {
            let lines: String = lines
                .iter()
                .map(|&n| format!("X:{}\r\n", "a".repeat(n - 2)))
                .collect();
            chunked(&format!("1\r\na\r\n0\r\n{lines}\r\n")).map(|(body, _)| body)
        };
        assert_eq!(trailers(&[MAX_LINE - 2]), Ok(b"a".to_vec()));
        for too_many in [&[MAX_LINE][..], &[MAX_LINE - 2, 1000], &[2000, 2000, 2000]] {
            assert!(
                matches!(trailers(too_many), Err(BodyError::Malformed(_))),
                "{too_many:?}"
            );
        }
    }

    #[test]
    fn the_limit_holds_for_declared_and_chunked_sizes() {
        assert_eq!(
            Decoder::new(Framing::Length(65), 64).err(),
            Some(BodyError::TooLarge(64))
        );
        let big = format!("40\r\n{}\r\n1\r\n", "a".repeat(64));
        assert_eq!(chunked(&big), Err(BodyError::TooLarge(64)));
    }
}
