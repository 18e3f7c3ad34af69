//! An answer read from its connection: the head first ([`Answering`]),
//! then the body whole ([`Fetched`]) or as a stream (`events.rs`). Each
//! read is the socket's, within its bounds; what it brings goes to the
//! framing (`incoming.rs`).

use std::io::{self, Read};

use super::incoming::{Heading, Incoming};
use super::{Bounds, Handshake, Link};

/// The bytes one read may bring.
const READ: usize = 16 * 1024;

/// An answer whose head is in, its body still on the connection.
pub struct Answering<H: Handshake> {
    link: Link<H>,
    incoming: Incoming,
    /// Whether the framing says the answer is whole.
    whole: bool,
    /// Whether the server has closed.
    closed: bool,
}

/// An answer read whole: its status, fields (names in lowercase) and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub status: u16,
    pub fields: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl<H: Handshake> Answering<H> {
    /// Reads from `link` until the answer's head is in.
    pub(super) fn read_head(
        link: Link<H>,
        head_only: bool,
        bounds: &Bounds,
    ) -> io::Result<Answering<H>> {
        let mut answer = Answering {
            link,
            incoming: Incoming::new(head_only, bounds.head, bounds.body),
            whole: false,
            closed: false,
        };
        while answer.incoming.heading().is_none() {
            answer.read_more()?;
        }
        Ok(answer)
    }

    /// The answer's status.
    pub fn status(&self) -> u16 {
        self.heading().status
    }

    /// The first field named `name` (lowercase).
    pub fn field(&self, name: &str) -> Option<&[u8]> {
        self.heading().field(name)
    }

    /// The rest of the answer, whole, within the exchange's bounds.
    pub fn fetch(mut self) -> io::Result<Fetched> {
        while !self.whole {
            self.read_more()?;
        }
        let body = self.incoming.take_body();
        let Heading { status, fields } = self.heading().clone();
        Ok(Fetched {
            status,
            fields,
            body,
        })
    }

    fn heading(&self) -> &Heading {
        // `read_head` returns only once the head is in.
        const NONE: &Heading = &Heading {
            status: 0,
            fields: Vec::new(),
        };
        self.incoming.heading().unwrap_or(NONE)
    }

    /// Whether the answer is whole (once its framing says so, or at the
    /// server's close).
    pub(super) fn is_whole(&self) -> bool {
        self.whole
    }

    /// The body decoded since the last call.
    pub(super) fn take_body(&mut self) -> Vec<u8> {
        self.incoming.take_body()
    }

    /// From now on reads wait only for their own bound.
    pub(super) fn lift_deadline(&mut self) {
        self.link.socket().lift_deadline();
    }

    /// One read, given to the framing; an error once the server has closed
    /// before the answer was whole.
    pub(super) fn read_more(&mut self) -> io::Result<()> {
        if self.closed {
            return self.incoming.close().map_err(invalid);
        }
        let mut chunk = [0u8; READ];
        let read = loop {
            match self.link.read(&mut chunk) {
                Ok(n) => break n,
                // A server that closes without TLS's close_notify: the end
                // of the answer, if its framing says it is whole.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break 0,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        if read == 0 {
            self.closed = true;
            self.incoming.close().map_err(invalid)?;
            self.whole = true;
            return Ok(());
        }
        self.whole = self.incoming.push(&chunk[..read]).map_err(invalid)?;
        Ok(())
    }
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}
