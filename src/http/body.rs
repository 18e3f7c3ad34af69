//! Reading a request body: `Content-Length` or chunked, within a size limit
//! and a silence timeout.
//!
//! Both framings read through the connection's `Input`, so bytes that follow
//! the body (a pipelined request) stay buffered for the next head. The limit
//! is enforced as bytes arrive, never by trusting a declared size; each read
//! may wait at most the silence timeout, so a client trickling a body is cut
//! off only when it goes quiet, as the spec asks.

use std::fmt;
use std::time::Duration;

use super::input::{Input, is_timeout};

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
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::TooLarge(max) => write!(f, "request body is larger than {max} bytes"),
            BodyError::Malformed(what) => write!(f, "malformed chunked body: {what}"),
            BodyError::Timeout => f.write_str("request body timed out"),
            BodyError::Closed => f.write_str("connection closed before the body was complete"),
        }
    }
}

impl std::error::Error for BodyError {}

/// Longest chunk-size line or trailer line accepted.
const MAX_LINE: usize = 4096;

/// Reads the body described by `framing`.
pub(crate) fn read(
    input: &mut Input,
    framing: Framing,
    max: usize,
    silence: Duration,
) -> Result<Vec<u8>, BodyError> {
    match framing {
        Framing::None => Ok(Vec::new()),
        Framing::Length(n) if n > max as u64 => Err(BodyError::TooLarge(max)),
        Framing::Length(n) => {
            let mut body = Vec::with_capacity(n as usize);
            copy(input, n as usize, &mut body, silence)?;
            Ok(body)
        }
        Framing::Chunked => chunked(input, max, silence),
    }
}

/// Waits for more input, mapping timeouts and end of stream to errors.
fn more(input: &mut Input, silence: Duration) -> Result<(), BodyError> {
    match input.fill(silence) {
        Ok(0) => Err(BodyError::Closed),
        Ok(_) => Ok(()),
        Err(e) if is_timeout(&e) => Err(BodyError::Timeout),
        Err(_) => Err(BodyError::Closed),
    }
}

/// Moves exactly `n` bytes from the input to `out`.
fn copy(
    input: &mut Input,
    mut n: usize,
    out: &mut Vec<u8>,
    silence: Duration,
) -> Result<(), BodyError> {
    while n > 0 {
        if input.buffered().is_empty() {
            more(input, silence)?;
        }
        let take = n.min(input.buffered().len());
        out.extend_from_slice(&input.buffered()[..take]);
        input.consume(take);
        n -= take;
    }
    Ok(())
}

/// Decodes a chunked body: `size[;ext] CRLF data CRLF ... 0 CRLF trailers CRLF`.
fn chunked(input: &mut Input, max: usize, silence: Duration) -> Result<Vec<u8>, BodyError> {
    let mut body = Vec::new();
    loop {
        let size = loop {
            match httparse::parse_chunk_size(input.buffered()) {
                Ok(httparse::Status::Complete((used, size))) => {
                    input.consume(used);
                    break size;
                }
                Ok(httparse::Status::Partial) if input.buffered().len() < MAX_LINE => {
                    more(input, silence)?
                }
                _ => return Err(BodyError::Malformed("bad chunk size line")),
            }
        };
        if size == 0 {
            trailers(input, silence)?;
            return Ok(body);
        }
        if size > (max - body.len()) as u64 {
            return Err(BodyError::TooLarge(max));
        }
        copy(input, size as usize, &mut body, silence)?;
        if line(input, silence)? != 0 {
            return Err(BodyError::Malformed("chunk data not followed by CRLF"));
        }
    }
}

/// Skips trailer fields up to and including the empty line that ends them.
fn trailers(input: &mut Input, silence: Duration) -> Result<(), BodyError> {
    let mut total = 0;
    loop {
        let len = line(input, silence)?;
        if len == 0 {
            return Ok(());
        }
        total += len;
        if total > MAX_LINE {
            return Err(BodyError::Malformed("trailers too long"));
        }
    }
}

/// Consumes one line and returns its length without the line ending.
fn line(input: &mut Input, silence: Duration) -> Result<usize, BodyError> {
    loop {
        if let Some(end) = input.buffered().iter().position(|&b| b == b'\n') {
            let len = if end > 0 && input.buffered()[end - 1] == b'\r' {
                end - 1
            } else {
                end
            };
            input.consume(end + 1);
            return Ok(len);
        }
        if input.buffered().len() >= MAX_LINE {
            return Err(BodyError::Malformed("line too long"));
        }
        more(input, silence)?;
    }
}
