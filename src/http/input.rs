//! The read side of one connection: the socket and a fixed-size buffer.
//!
//! Every read goes through `fill`, which takes the timeout for that one read;
//! the socket option is only changed when the timeout does, so a busy
//! keep-alive connection costs one `read` syscall per request. The buffer
//! never grows: its size is the request-head limit, which is what bounds a
//! head, and bodies are copied out of it as they arrive.
//!
//! The connection is a `Transport`: a `TcpStream` when serving, or a
//! scripted sequence of reads when the engine is driven without a socket
//! (the fuzz targets and the engine's unit tests).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

/// What the engine needs of a connection.
pub(crate) trait Transport: Read + Write {
    /// Bounds the next reads; a read that waits longer fails as a timeout.
    fn set_read_timeout(&mut self, timeout: Duration) -> io::Result<()>;
    /// Closes our sending side (the peer reads end of stream).
    fn shutdown_write(&mut self);
}

impl Transport for TcpStream {
    fn set_read_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        TcpStream::set_read_timeout(self, Some(timeout))
    }

    fn shutdown_write(&mut self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

/// Buffered input of one connection.
pub(crate) struct Input {
    stream: Box<dyn Transport>,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    timeout: Option<Duration>,
}

impl Input {
    /// Wraps a stream with a buffer of `capacity` bytes.
    pub(crate) fn new(stream: Box<dyn Transport>, capacity: usize) -> Input {
        Input {
            stream,
            buf: vec![0; capacity].into_boxed_slice(),
            start: 0,
            end: 0,
            timeout: None,
        }
    }

    /// The bytes read but not yet consumed.
    pub(crate) fn buffered(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Marks `n` buffered bytes as consumed.
    pub(crate) fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Reads more bytes into the buffer, waiting at most `timeout` (never
    /// zero, which the socket would take as "forever"). `Ok(0)` is end of
    /// stream; a timeout is an error of kind `WouldBlock` or `TimedOut`.
    pub(crate) fn fill(&mut self, timeout: Duration) -> io::Result<usize> {
        if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            return Err(io::Error::other("input buffer full"));
        }
        let timeout = timeout.max(Duration::from_millis(1));
        if self.timeout != Some(timeout) {
            self.stream.set_read_timeout(timeout)?;
            self.timeout = Some(timeout);
        }
        let n = self.stream.read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// The underlying stream, for writing and shutting down.
    pub(crate) fn stream(&mut self) -> &mut dyn Transport {
        &mut *self.stream
    }
}

/// Whether an I/O error is a read or write timeout.
pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}
