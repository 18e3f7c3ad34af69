//! An answer's framing, read as it arrives, sans I/O: the head once its
//! blank line is in, then a body of `Content-Length`, chunks up to the
//! last, or everything up to the server's close. `http.rs` feeds it what
//! each read brings.
//!
//! Each byte is looked at a bounded number of times however the answer is
//! cut: the blank line is searched for in the new bytes only (a line end
//! among them looks back at the two bytes before it), the head parsed once, and
//! a chunked body taken a chunk at a time from where the last read
//! stopped. An answer in 1-byte pieces, which a server can send as 1-byte
//! TLS records, costs time in its size, not in its size squared.
//!
//! Bounds: the head at most `MAX_HEAD` bytes, the answer at most
//! `MAX_RESPONSE` (the reader's caller counts what it reads).

/// The most bytes an answer (head and body) may have.
pub const MAX_RESPONSE: usize = 1024 * 1024;
/// The most bytes of an answer's head.
pub const MAX_HEAD: usize = 64 * 1024;

/// The status, headers and body of an answer.
pub type Parsed = (u16, Vec<(String, Vec<u8>)>, Vec<u8>);

/// An answer being read.
pub struct Answer {
    buf: Vec<u8>,
    /// A `HEAD` request's: no body, whatever the head says.
    head_only: bool,
    /// How far the search for the head's end has looked.
    searched: usize,
    head: Option<Head>,
}

/// The head, parsed, and how its body is framed.
struct Head {
    status: u16,
    fields: Vec<(String, Vec<u8>)>,
    /// Where the body starts in the buffer.
    len: usize,
    body: Framing,
}

enum Framing {
    Empty,
    Length(usize),
    Chunked(Chunks),
    UntilClose,
}

/// A chunked body taken as far as it has arrived.
struct Chunks {
    body: Vec<u8>,
    /// Where the next thing to read starts in the buffer.
    at: usize,
    /// How far the search for the next line end has looked.
    searched: usize,
    next: Next,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Next {
    /// A size line.
    Size,
    /// A chunk's bytes and the line end after them.
    Data(usize),
    /// The trailers after the last chunk, up to an empty line.
    Trailers,
}

impl Answer {
    pub fn new(head_only: bool) -> Answer {
        Answer {
            buf: Vec::with_capacity(8 * 1024),
            head_only,
            searched: 0,
            head: None,
        }
    }

    /// Takes what a read brought; the answer once whole.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Option<Parsed>, String> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() > MAX_RESPONSE {
            return Err(format!("the answer is over {MAX_RESPONSE} bytes"));
        }
        if self.head.is_none() {
            let Some(len) = self.head_end()? else {
                return Ok(None);
            };
            self.head = Some(head(&self.buf[..len], self.head_only)?);
        }
        let Some(head) = &mut self.head else {
            return Ok(None);
        };
        let done = match &mut head.body {
            Framing::Empty => true,
            Framing::Length(length) => self.buf.len() - head.len >= *length,
            Framing::Chunked(chunks) => chunks.take(&self.buf[head.len..])?,
            Framing::UntilClose => false,
        };
        Ok(done.then(|| self.finish()))
    }

    /// The server has closed: the answer, if its framing says it is whole
    /// (a body without a length ends here).
    pub fn close(&mut self) -> Result<Parsed, String> {
        match &self.head {
            Some(Head {
                body: Framing::UntilClose,
                ..
            }) => Ok(self.finish()),
            _ => Err("the server closed before the answer was whole".into()),
        }
    }

    /// Where the head ends, once its blank line is in (a line end is
    /// `\r\n` or, as httparse takes it, `\n`).
    fn head_end(&mut self) -> Result<Option<usize>, String> {
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
            Some(end) if end < MAX_HEAD => Ok(Some(end + 1)),
            _ if self.buf.len() > MAX_HEAD => {
                Err(format!("the answer's head is over {MAX_HEAD} bytes"))
            }
            _ => Ok(None),
        }
    }

    /// The whole answer, out of the buffer.
    fn finish(&mut self) -> Parsed {
        let buf = std::mem::take(&mut self.buf);
        let Some(head) = self.head.take() else {
            return (0, Vec::new(), Vec::new());
        };
        let body = match head.body {
            Framing::Empty => Vec::new(),
            Framing::Length(length) => buf[head.len..head.len + length].to_vec(),
            Framing::Chunked(chunks) => chunks.body,
            Framing::UntilClose => buf[head.len..].to_vec(),
        };
        (head.status, head.fields, body)
    }
}

/// The head in `buf` (all of it, to its blank line), parsed.
fn head(buf: &[u8], head_only: bool) -> Result<Head, String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut answer = httparse::Response::new(&mut headers);
    match answer.parse(buf) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err("the answer's head is cut short".into()),
        Err(e) => return Err(format!("not an HTTP answer: {e}")),
    }
    let status = answer.code.unwrap_or(0);
    let fields: Vec<(String, Vec<u8>)> = answer
        .headers
        .iter()
        .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
        .collect();
    let field = |name: &str| fields.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let no_body = head_only || status == 204 || status == 304 || (100..200).contains(&status);
    let body = if no_body {
        Framing::Empty
    } else if field("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case(b"chunked")) {
        Framing::Chunked(Chunks {
            body: Vec::new(),
            at: 0,
            searched: 0,
            next: Next::Size,
        })
    } else if let Some(length) = field("content-length") {
        let length: usize = std::str::from_utf8(length)
            .ok()
            .and_then(|l| l.trim().parse().ok())
            .ok_or("the answer's Content-Length is not a number")?;
        if length > MAX_RESPONSE {
            return Err(format!("the answer's body is over {MAX_RESPONSE} bytes"));
        }
        Framing::Length(length)
    } else {
        Framing::UntilClose
    };
    Ok(Head {
        status,
        fields,
        len: buf.len(),
        body,
    })
}

impl Chunks {
    /// Takes the chunks that have arrived in `buf` (the body so far);
    /// whether the last one and its trailers are in.
    fn take(&mut self, buf: &[u8]) -> Result<bool, String> {
        loop {
            match self.next {
                Next::Size => {
                    let Some(end) = self.line_end(buf, 2) else {
                        return Ok(false);
                    };
                    let size = chunk_size(&buf[self.at..end])?;
                    self.at = end + 2;
                    self.searched = self.at;
                    self.next = if size == 0 {
                        Next::Trailers
                    } else {
                        Next::Data(size)
                    };
                }
                Next::Data(size) => {
                    if buf.len() - self.at < size + 2 {
                        return Ok(false);
                    }
                    if &buf[self.at + size..self.at + size + 2] != b"\r\n" {
                        return Err("a chunk does not end where its size says".into());
                    }
                    self.body.extend_from_slice(&buf[self.at..self.at + size]);
                    self.at += size + 2;
                    self.searched = self.at;
                    self.next = Next::Size;
                }
                Next::Trailers => {
                    // Trailers, each a line, then an empty line.
                    if buf[self.at..].starts_with(b"\r\n") {
                        return Ok(true);
                    }
                    return Ok(self.line_end(buf, 4).is_some());
                }
            }
        }
    }

    /// Where `\r\n` (`width` 2) or `\r\n\r\n` (4) first ends at or after
    /// `at`, searching only what the last search did not look at.
    fn line_end(&mut self, buf: &[u8], width: usize) -> Option<usize> {
        let from = self.searched.saturating_sub(width - 1).max(self.at);
        self.searched = buf.len();
        let mark: &[u8] = if width == 2 { b"\r\n" } else { b"\r\n\r\n" };
        buf[from..]
            .windows(width)
            .position(|w| w == mark)
            .map(|i| from + i)
    }
}

/// A chunk's size line, without its line end.
fn chunk_size(line: &[u8]) -> Result<usize, String> {
    let line = std::str::from_utf8(line).map_err(|_| "a chunk's size is not text")?;
    let size = line.split(';').next().unwrap_or("").trim();
    let size = usize::from_str_radix(size, 16).map_err(|_| "a chunk's size is not hex")?;
    if size > MAX_RESPONSE {
        return Err(format!("a chunk is over {MAX_RESPONSE} bytes"));
    }
    Ok(size)
}

#[cfg(test)]
#[path = "answer_tests.rs"]
mod tests;
