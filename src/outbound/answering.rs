//! An answer read from its connection: the head first ([`Answering`]),
//! then the body whole ([`Fetched`]) or as a stream (`events.rs`). Each
//! read is the socket's, within its bounds; what it brings goes to the
//! framing (`incoming.rs`), the body's only once the caller asks for it.

use std::io::{self, Read};

use super::incoming::{BodyReader, CLOSED_EARLY, HeadReader, Heading};
use super::{Bounds, Handshake, Link};

/// The bytes one read may bring.
const READ: usize = 16 * 1024;

/// An answer whose head is in, its body still on the connection.
pub struct Answering<H: Handshake> {
    link: Link<H>,
    heading: Heading,
    /// A `HEAD` request's answer: no body, whatever the head says.
    head_only: bool,
    /// What the read that ended the head brought of the body.
    early: Vec<u8>,
    max_body: usize,
}

/// An answer read whole: its status, fields (names in lowercase) and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub status: u16,
    pub fields: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

/// A body being read from its connection.
pub(super) struct Flow<H: Handshake> {
    link: Link<H>,
    reader: BodyReader,
    /// Whether the answer is whole (by its framing, or at the close).
    whole: bool,
}

impl<H: Handshake> Answering<H> {
    /// Reads from `link` until the answer's head is in.
    pub(super) fn read_head(
        mut link: Link<H>,
        head_only: bool,
        bounds: &Bounds,
    ) -> io::Result<Answering<H>> {
        let mut chunk = [0u8; READ];
        let (heading, used, read) = read_heading(&mut link, bounds, &mut chunk)?;
        Ok(Answering {
            link,
            heading,
            head_only,
            early: chunk[used..read].to_vec(),
            max_body: bounds.body,
        })
    }

    /// The answer's status.
    pub fn status(&self) -> u16 {
        self.heading.status
    }

    /// The first field named `name` (in any case).
    pub fn field(&self, name: &str) -> Option<&[u8]> {
        self.heading.field(name)
    }

    /// The rest of the answer, whole, within the exchange's bounds.
    pub fn fetch(self) -> io::Result<Fetched> {
        let (heading, mut flow) = self.flow()?;
        while !flow.whole {
            flow.read_more()?;
        }
        Ok(Fetched {
            status: heading.status,
            fields: heading.fields(),
            body: flow.take(),
        })
    }

    /// The head, and the body to read.
    pub(super) fn flow(self) -> io::Result<(Heading, Flow<H>)> {
        let mut reader =
            BodyReader::new(&self.heading, self.head_only, self.max_body).map_err(invalid)?;
        let whole = reader.push(&self.early).map_err(invalid)?;
        let flow = Flow {
            link: self.link,
            reader,
            whole,
        };
        Ok((self.heading, flow))
    }
}

impl<H: Handshake> Flow<H> {
    /// Whether the answer is whole.
    pub(super) fn is_whole(&self) -> bool {
        self.whole
    }

    /// The body decoded since the last call.
    pub(super) fn take(&mut self) -> Vec<u8> {
        self.reader.take()
    }

    /// From now on reads wait only for their own bound.
    pub(super) fn lift_deadline(&mut self) {
        self.link.socket().lift_deadline();
    }

    /// One read, given to the framing; an error once the server has closed
    /// before the answer was whole.
    pub(super) fn read_more(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; READ];
        let read = read(&mut self.link, &mut chunk)?;
        self.whole = match read {
            0 => self.reader.close().map(|()| true),
            _ => self.reader.push(&chunk[..read]),
        }
        .map_err(invalid)?;
        Ok(())
    }
}

/// Reads from `link` into `chunk` until the answer's head is in: it, how
/// much of the last read it took, and how much that read brought.
pub(super) fn read_heading(
    link: &mut impl Read,
    bounds: &Bounds,
    chunk: &mut [u8],
) -> io::Result<(Heading, usize, usize)> {
    let mut reader = HeadReader::new(bounds.head);
    loop {
        let read = read(link, chunk)?;
        if read == 0 {
            return Err(invalid(CLOSED_EARLY));
        }
        if let Some((heading, used)) = reader.push(&chunk[..read]).map_err(invalid)? {
            return Ok((heading, used, read));
        }
    }
}

/// One read; 0 at the server's close.
fn read(link: &mut impl Read, chunk: &mut [u8]) -> io::Result<usize> {
    loop {
        match link.read(chunk) {
            Ok(n) => return Ok(n),
            // A server that closes without TLS's close_notify: the end of
            // the answer, if its framing says it is whole.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn invalid(why: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}
