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
//! Bounds: the head at most `max_head` bytes, the body decoded and not
//! yet taken at most `max_body` (a caller that reads the body whole takes
//! none of it; a stream takes it as it comes and bounds what it keeps).

/// The most bytes of a chunk's size line, or of one trailer line.
const MAX_LINE: usize = 4 * 1024;

/// An answer's status and fields (names in lowercase).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    pub status: u16,
    pub fields: Vec<(String, Vec<u8>)>,
}

impl Heading {
    /// The first field named `name` (lowercase).
    pub fn field(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
}

/// An answer being read.
pub struct Incoming {
    /// The head so far.
    buf: Vec<u8>,
    /// A `HEAD` request's: no body, whatever the head says.
    head_only: bool,
    /// How far the search for the head's end has looked.
    searched: usize,
    max_head: usize,
    max_body: usize,
    heading: Option<Heading>,
    ending: Ending,
    /// The body decoded and not yet taken.
    body: Vec<u8>,
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

impl Incoming {
    pub fn new(head_only: bool, max_head: usize, max_body: usize) -> Incoming {
        Incoming {
            buf: Vec::with_capacity(1024),
            head_only,
            searched: 0,
            max_head,
            max_body,
            heading: None,
            ending: Ending::Empty,
            body: Vec::new(),
        }
    }

    /// The head, once it is in.
    pub fn heading(&self) -> Option<&Heading> {
        self.heading.as_ref()
    }

    /// The body decoded since the last call.
    pub fn take_body(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.body)
    }

    /// Takes what a read brought; whether the answer is whole.
    pub fn push(&mut self, mut bytes: &[u8]) -> Result<bool, String> {
        while self.heading.is_none() {
            let Some(used) = self.head_end(bytes)? else {
                return Ok(false);
            };
            bytes = &bytes[used..];
            let (heading, ending) = head(&self.buf, self.head_only, self.max_body)?;
            self.buf.clear();
            self.searched = 0;
            // An interim answer is followed by the real one.
            if !(100..200).contains(&heading.status) {
                self.heading = Some(heading);
                self.ending = ending;
            }
        }
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
        match (&self.heading, &self.ending) {
            (Some(_), Ending::Close) => Ok(()),
            _ => Err("the server closed before the answer was whole".into()),
        }
    }

    /// Takes head bytes from `bytes` up to the blank line that ends the
    /// head (a line end is `\r\n` or, as httparse takes it, `\n`); how
    /// many, once it is in.
    fn head_end(&mut self, bytes: &[u8]) -> Result<Option<usize>, String> {
        let room = (self.max_head + 1).saturating_sub(self.buf.len());
        self.buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
        if self.buf.len() >= 5 && !self.buf.starts_with(b"HTTP/") {
            return Err("not an HTTP answer".into());
        }
        // A line end already looked at had its bytes before it then.
        let from = self.searched;
        self.searched = self.buf.len();
        let end = self.buf[from..]
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'\n')
            .map(|(i, _)| from + i)
            .find(|&i| {
                let before = &self.buf[..i];
                before.ends_with(b"\n") || before.ends_with(b"\n\r")
            });
        match end {
            Some(end) if end < self.max_head => {
                let before = self.buf.len() - bytes.len().min(room);
                self.buf.truncate(end + 1);
                Ok(Some(end + 1 - before))
            }
            _ if self.buf.len() > self.max_head => {
                Err(format!("the answer's head is over {} bytes", self.max_head))
            }
            _ => Ok(None),
        }
    }
}

/// The head in `buf` (all of it, to its blank line), parsed, and how its
/// body ends.
fn head(buf: &[u8], head_only: bool, max_body: usize) -> Result<(Heading, Ending), String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut answer = httparse::Response::new(&mut headers);
    match answer.parse(buf) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err("the answer's head is cut short".into()),
        Err(e) => return Err(format!("not an HTTP answer: {e}")),
    }
    let heading = Heading {
        status: answer.code.unwrap_or(0),
        fields: answer
            .headers
            .iter()
            .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
            .collect(),
    };
    let status = heading.status;
    let no_body = head_only || status == 204 || status == 304 || (100..200).contains(&status);
    let ending = if no_body {
        Ending::Empty
    } else if heading
        .field("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case(b"chunked"))
    {
        Ending::Chunked(Chunks {
            line: Vec::new(),
            next: Next::Size,
        })
    } else if let Some(length) = heading.field("content-length") {
        let length: usize = std::str::from_utf8(length)
            .ok()
            .and_then(|l| l.trim().parse().ok())
            .ok_or("the answer's Content-Length is not a number")?;
        if length > max_body {
            return Err(format!("the answer's body is over {max_body} bytes"));
        }
        match length {
            0 => Ending::Empty,
            _ => Ending::Length(length),
        }
    } else {
        Ending::Close
    };
    Ok((heading, ending))
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
    let line = std::str::from_utf8(line).map_err(|_| "a chunk's size is not text")?;
    let size = line.split(';').next().unwrap_or("").trim();
    usize::from_str_radix(size, 16).map_err(|_| "a chunk's size is not hex".into())
}

#[cfg(test)]
#[path = "incoming_tests.rs"]
mod tests;
