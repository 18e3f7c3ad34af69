//! Server-sent events read from a streamed answer (`text/event-stream`),
//! an event at a time: lines end in `\n`, `\r\n` or `\r`; a line
//! `field: value` adds to the event (`data` lines joined by `\n`, `id`,
//! `event`; others, and comments starting `:`, ignored); an empty line
//! ends it. An event with no data is not one (a keep-alive).
//!
//! Bounds: an event's lines together at most `max_event` bytes (a longer
//! one is an error, never a buffer that grows); each read within the
//! connection's `io` bound, so a silent server ends the stream, while the
//! exchange's deadline is lifted once the head is in (the stream lasts
//! as long as the server keeps talking).

use std::io;

use super::answering::Flow;
use super::{Answering, Handshake};

/// One event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// Its `id`, if it had one.
    pub id: Option<String>,
    /// Its `event` (type), if it had one.
    pub kind: Option<String>,
    /// Its `data` lines, joined by `\n`.
    pub data: String,
}

/// The events of a streamed answer.
pub struct Events<H: Handshake> {
    flow: Flow<H>,
    /// Body bytes not yet split into lines (from `at`).
    pending: Vec<u8>,
    at: usize,
    /// How far the search for a line end has looked (a line cut into many
    /// reads is searched once, not once a read).
    searched: usize,
    /// The last line ended in `\r`: a `\n` first in what follows is its end.
    after_cr: bool,
    /// The event so far, and how many bytes its lines took.
    event: Message,
    has_data: bool,
    size: usize,
    max_event: usize,
}

impl<H: Handshake> Answering<H> {
    /// The rest of the answer as events of at most `max_event` bytes.
    pub fn events(self, max_event: usize) -> io::Result<Events<H>> {
        let (_, mut flow) = self.flow()?;
        flow.lift_deadline();
        let pending = flow.take();
        Ok(Events {
            flow,
            pending,
            at: 0,
            searched: 0,
            after_cr: false,
            event: Message::default(),
            has_data: false,
            size: 0,
            max_event,
        })
    }
}

impl<H: Handshake> Events<H> {
    /// The next event; `None` once the stream has ended.
    pub fn next_event(&mut self) -> io::Result<Option<Message>> {
        loop {
            while let Some(line) = self.line()? {
                if let Some(event) = self.take(&line) {
                    return Ok(Some(event));
                }
            }
            if self.flow.is_whole() {
                return Ok(None);
            }
            self.flow.read_more()?;
            // Moved once at least as many bytes have been taken: each byte
            // is moved a bounded number of times.
            if self.at > 0 && self.at * 2 >= self.pending.len() {
                self.pending.drain(..self.at);
                self.searched = self.searched.saturating_sub(self.at);
                self.at = 0;
            }
            self.pending.extend(self.flow.take());
        }
    }

    /// The next whole line of what has arrived, without its end.
    fn line(&mut self) -> io::Result<Option<Vec<u8>>> {
        if self.after_cr && self.pending.get(self.at) == Some(&b'\n') {
            self.at += 1;
            self.size += 1;
            self.after_cr = false;
        }
        let from = self.searched.max(self.at);
        let rest = &self.pending[self.at..];
        let found = self.pending[from..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r');
        let Some(end) = found.map(|i| from - self.at + i) else {
            self.after_cr = self.after_cr && rest.is_empty();
            self.searched = self.pending.len();
            if self.size + rest.len() > self.max_event {
                return Err(self.too_long());
            }
            return Ok(None);
        };
        self.after_cr = rest[end] == b'\r';
        let line = rest[..end].to_vec();
        self.at += end + 1;
        self.searched = self.at;
        self.size += end + 1;
        if self.size > self.max_event {
            return Err(self.too_long());
        }
        Ok(Some(line))
    }

    fn too_long(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("an event is over {} bytes", self.max_event),
        )
    }

    /// Takes one line into the event; the event, when the line ends it.
    fn take(&mut self, line: &[u8]) -> Option<Message> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            self.size = 0;
            return std::mem::take(&mut self.has_data).then_some(event);
        }
        let line = String::from_utf8_lossy(line);
        let (name, value) = match line.split_once(':') {
            Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
            None => (&*line, ""),
        };
        match name {
            "data" => {
                if self.has_data {
                    self.event.data.push('\n');
                }
                self.event.data.push_str(value);
                self.has_data = true;
            }
            "id" => self.event.id = Some(value.to_string()),
            "event" => self.event.kind = Some(value.to_string()),
            _ => {}
        }
        None
    }
}
