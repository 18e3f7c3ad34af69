//! An answer's framing, read as it arrives, sans I/O: the head once its
//! blank line is in (interim `1xx` heads skipped), then a body of
//! `Content-Length`, chunks up to the last, or everything up to the
//! server's close. `answering.rs` feeds it what each read brings.
//!
//! Each byte is looked at a bounded number of times however the answer is
//! cut: the blank line is searched for in the new bytes only (a line end
//! among them looks back at the two bytes before it), the head parsed
//! once, and a chunked body decoded by a state machine that never goes
//! back. An answer in 1-byte pieces, which a server can send as 1-byte
//! TLS records, costs time in its size, not in its size squared.
//!
//! Two readers, so that a caller that wants only the status (a webhook's)
//! carries no body framing: [`HeadReader`], then [`BodyReader`]. Bounds:
//! the head at most `max_head` bytes, the body decoded and not yet taken
//! at most `max_body` (a caller that reads the body whole takes none of
//! it; a stream takes it as it comes and bounds what it keeps).

/// The most bytes of a chunk's size line, or of one trailer line.
const MAX_LINE: usize = 4 * 1024;

/// An answer's head: its status, and its fields, looked up as asked for
/// (a caller that wants only the status never collects them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    pub status: u16,
    /// The head's bytes, which parsed whole.
    head: Vec<u8>,
}

impl Heading {
    /// The first field named `name` (any case).
    pub fn field(&self, name: &str) -> Option<&[u8]> {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut answer = httparse::Response::new(&mut headers);
        answer.parse(&self.head).ok()?;
        let field = answer
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name));
        field.map(|h| h.value)
    }

    /// The values of every field named `name` (any case), in order.
    fn values(&self, name: &str) -> Vec<Vec<u8>> {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut answer = httparse::Response::new(&mut headers);
        if answer.parse(&self.head).is_err() {
            return Vec::new();
        }
        let named = answer.headers.iter();
        let named = named.filter(|h| h.name.eq_ignore_ascii_case(name));
        named.map(|h| h.value.to_vec()).collect()
    }

    /// Every field, its name in lowercase.
    pub fn fields(&self) -> Vec<(String, Vec<u8>)> {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut answer = httparse::Response::new(&mut headers);
        match answer.parse(&self.head) {
            Ok(_) => answer
                .headers
                .iter()
                .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// An answer's head being read.
pub struct HeadReader {
    /// The head so far.
    buf: Vec<u8>,
    /// How far the search for the head's end has looked.
    searched: usize,
    max_head: usize,
}

/// An answer's body being read, once its head is in.
pub struct BodyReader {
    ending: Ending,
    /// The body decoded and not yet taken.
    body: Vec<u8>,
    max_body: usize,
}

/// How the body ends.
enum Ending {
    /// With the head.
    Empty,
    /// After this many more bytes.
    Length(usize),
    Chunked(Chunks),
    /// At the server's close.
    Close,
}

/// A chunked body decoded as far as it has arrived.
struct Chunks {
    /// The size line, or the trailer line, so far.
    line: Vec<u8>,
    next: Next,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Next {
    /// A size line.
    Size,
    /// This many bytes of a chunk.
    Data(usize),
    /// The line end after a chunk's bytes (how much of it is in).
    DataEnd(u8),
    /// The trailers after the last chunk, up to an empty line.
    Trailers,
    Done,
}

impl HeadReader {
    pub fn new(max_head: usize) -> HeadReader {
        HeadReader {
            buf: Vec::new(),
            searched: 0,
            max_head,
        }
    }

    /// Takes what a read brought; once the head is in, it and how many
    /// of `bytes` it took (the rest are the body's).
    pub fn push(&mut self, bytes: &[u8]) -> Result<Option<(Heading, usize)>, &'static str> {
        let mut used = 0;
        loop {
            let Some(took) = self.head_end(&bytes[used..])? else {
                return Ok(None);
            };
            used += took;
            let heading = head(std::mem::take(&mut self.buf))?;
            self.searched = 0;
            // An interim answer is followed by the real one.
            if !(100..200).contains(&heading.status) {
                return Ok(Some((heading, used)));
            }
        }
    }

    /// Takes head bytes from `bytes` up to the blank line that ends the
    /// head (a line end is `\r\n` or, as httparse takes it, `\n`); how
    /// many, once it is in.
    fn head_end(&mut self, bytes: &[u8]) -> Result<Option<usize>, &'static str> {
        let room = (self.max_head + 1).saturating_sub(self.buf.len());
        let before = self.buf.len();
        self.buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
        if self.buf.len() >= 5 && !self.buf.starts_with(b"HTTP/") {
            return Err("not an HTTP answer");
        }
        // A line end already looked at had its bytes before it then.
        let from = self.searched;
        self.searched = self.buf.len();
        let buf = &self.buf;
        let end = (from.max(1)..buf.len()).find(|&i| {
            buf[i] == b'\n' && (buf[i - 1] == b'\n' || (i >= 2 && &buf[i - 2..i] == b"\n\r"))
        });
        match end {
            Some(end) if end < self.max_head => {
                self.buf.truncate(end + 1);
                Ok(Some(end + 1 - before))
            }
            _ if self.buf.len() > self.max_head => Err("the answer's head is over its bound"),
            _ => Ok(None),
        }
    }
}

impl BodyReader {
    /// The body of the answer `heading` begins (none for a `HEAD`
    /// request's, when `head_only`), at most `max_body` bytes.
    pub fn new(heading: &Heading, head_only: bool, max_body: usize) -> Result<BodyReader, String> {
        Ok(BodyReader {
            ending: ending(heading, head_only, max_body)?,
            body: Vec::new(),
            max_body,
        })
    }

    /// The body decoded since the last call.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.body)
    }

    /// Takes what a read brought; whether the answer is whole.
    pub fn push(&mut self, bytes: &[u8]) -> Result<bool, String> {
        let done = match &mut self.ending {
            Ending::Empty => true,
            Ending::Length(left) => {
                let take = bytes.len().min(*left);
                self.body.extend_from_slice(&bytes[..take]);
                *left -= take;
                *left == 0
            }
            Ending::Chunked(chunks) => chunks.take(bytes, &mut self.body)?,
            Ending::Close => {
                self.body.extend_from_slice(bytes);
                false
            }
        };
        if self.body.len() > self.max_body {
            return Err(format!("the answer's body is over {} bytes", self.max_body));
        }
        Ok(done)
    }

    /// The server has closed: fine if the answer's framing says it is
    /// whole (a body without a length ends here).
    pub fn close(&self) -> Result<(), String> {
        match self.ending {
            Ending::Close => Ok(()),
            _ => Err(CLOSED_EARLY.into()),
        }
    }
}

/// Why an answer cut by the server's close is refused.
pub const CLOSED_EARLY: &str = "the server closed before the answer was whole";

/// The head in `buf` (all of it, to its blank line), parsed.
fn head(buf: Vec<u8>) -> Result<Heading, &'static str> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut answer = httparse::Response::new(&mut headers);
    match answer.parse(&buf) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err("the answer's head is cut short"),
        Err(_) => return Err("not an HTTP answer"),
    }
    Ok(Heading {
        status: answer.code.unwrap_or(0),
        head: buf,
    })
}

/// How the body of the answer `heading` begins ends (RFC 9112, 6.3): with
/// `Transfer-Encoding`, at the last chunk if `chunked` is its last coding,
/// else at the close, whatever `Content-Length` says; with
/// `Content-Length`, after that many bytes, every such field (and every
/// item of a list in one) the same number of digits only; else at the
/// close.
fn ending(heading: &Heading, head_only: bool, max_body: usize) -> Result<Ending, String> {
    let status = heading.status;
    let no_body = head_only || status == 204 || status == 304 || (100..200).contains(&status);
    if no_body {
        return Ok(Ending::Empty);
    }
    let codings = heading.values("transfer-encoding");
    if !codings.is_empty() {
        let last = codings.iter().flat_map(|v| v.split(|&b| b == b',')).last();
        let chunked = last.is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        return Ok(match chunked {
            true => Ending::Chunked(Chunks {
                line: Vec::new(),
                next: Next::Size,
            }),
            false => Ending::Close,
        });
    }
    let lengths = heading.values("content-length");
    Ok(if lengths.is_empty() {
        Ending::Close
    } else {
        let mut items = lengths.iter().flat_map(|v| v.split(|&b| b == b','));
        let first = items.next().map(<[u8]>::trim_ascii).unwrap_or_default();
        let length = digits(first)
            .filter(|_| items.all(|item| item.trim_ascii() == first))
            .ok_or("the answer's Content-Length is not one number")?;
        if length > max_body {
            return Err(format!("the answer's body is over {max_body} bytes"));
        }
        match length {
            0 => Ending::Empty,
            _ => Ending::Length(length),
        }
    })
}

/// `text` as a number of decimal digits only (no sign, no space).
fn digits(text: &[u8]) -> Option<usize> {
    match text.iter().all(u8::is_ascii_digit) {
        true => std::str::from_utf8(text).ok()?.parse().ok(),
        false => None,
    }
}

impl Chunks {
    /// Decodes the chunks in `bytes` (what a read brought of the body)
    /// onto `body`; whether the last one and its trailers are in.
    fn take(&mut self, mut bytes: &[u8], body: &mut Vec<u8>) -> Result<bool, String> {
        while let Some((&byte, rest)) = bytes.split_first() {
            match self.next {
                Next::Size | Next::Trailers => {
                    bytes = rest;
                    self.line.push(byte);
                    if self.line.len() > MAX_LINE {
                        return Err(format!("a chunk's line is over {MAX_LINE} bytes"));
                    }
                    if self.line.ends_with(b"\r\n") {
                        self.next = self.line_done()?;
                        self.line.clear();
                    }
                }
                Next::Data(size) => {
                    let take = size.min(bytes.len());
                    body.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    self.next = match size - take {
                        0 => Next::DataEnd(0),
                        left => Next::Data(left),
                    };
                }
                Next::DataEnd(seen) => {
                    bytes = rest;
                    if byte != b"\r\n"[usize::from(seen)] {
                        return Err("a chunk does not end where its size says".into());
                    }
                    self.next = match seen {
                        0 => Next::DataEnd(1),
                        _ => Next::Size,
                    };
                }
                Next::Done => break,
            }
        }
        Ok(self.next == Next::Done)
    }

    /// What follows a whole line (its `\r\n` included).
    fn line_done(&self) -> Result<Next, String> {
        let line = &self.line[..self.line.len() - 2];
        Ok(match self.next {
            Next::Size => match chunk_size(line)? {
                0 => Next::Trailers,
                size => Next::Data(size),
            },
            _ if line.is_empty() => Next::Done,
            _ => Next::Trailers,
        })
    }
}

/// A chunk's size line, without its line end.
fn chunk_size(line: &[u8]) -> Result<usize, String> {
    // Hex digits only, then maybe blanks before an extension (`;...`).
    let size = line.split(|&b| b == b';').next().unwrap_or_default();
    let size = size.trim_ascii_end();
    let hex = !size.is_empty() && size.iter().all(u8::is_ascii_hexdigit);
    std::str::from_utf8(size)
        .ok()
        .filter(|_| hex)
        .and_then(|size| usize::from_str_radix(size, 16).ok())
        .ok_or_else(|| "a chunk's size is not hex".into())
}

#[cfg(test)]
#[path = "incoming_tests.rs"]
mod tests;
