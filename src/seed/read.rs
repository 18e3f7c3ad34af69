//! Reading a seed file one record at a time, in either of its two formats,
//! with the position of each record.
//!
//! The format is the first byte that is not whitespace (after a UTF-8 byte
//! order mark, which is skipped): `[` is a JSON array of records, anything
//! else NDJSON, one record a line (blank lines skipped). A file of nothing
//! but whitespace holds no record.
//!
//! Neither format is read whole. NDJSON is read a line at a time, each
//! line at most `max_record` bytes. The array is read by serde_json from
//! a stream, through a seq visitor that takes each element as its raw text
//! (at most `max_record` bytes, enforced by the stream it reads) and
//! hands it on before the next is read; the stream counts lines and
//! columns, so that each element's start is known.
//!
//! Each record is validated by [`NewPlant::parse`], exactly as a `POST
//! /plants` body, so a seed holds nothing that the API would refuse.
//! Positions are 1-based; columns count bytes, not characters.

use std::cell::Cell;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use serde::de::{self, DeserializeSeed, Deserializer as _, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::Fault;
use crate::store::{NewPlant, TextLimits};

/// Where a record is in a seed file, or where its text broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// NDJSON: the record's line.
    Line(u64),
    /// A JSON array: the record's number and where it starts.
    Record {
        /// 1 for the first element of the array.
        number: u64,
        /// Line of its first byte.
        line: u64,
        /// Column of its first byte.
        column: u64,
    },
    /// A JSON array: where it stops being valid JSON.
    Text {
        /// Line.
        line: u64,
        /// Column.
        column: u64,
    },
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Line(line) => write!(f, "line {line}"),
            Position::Record {
                number,
                line,
                column,
            } => write!(f, "record {number} (line {line}, column {column})"),
            Position::Text { line, column } => write!(f, "line {line}, column {column}"),
        }
    }
}

/// A failure to read a seed, and where it happened (if anywhere in
/// particular).
#[derive(Debug)]
pub struct Failure {
    /// The record or text at fault; `None` for the file as a whole.
    pub at: Option<Position>,
    /// What is wrong.
    pub fault: Fault,
}

impl Failure {
    fn at(at: Position, fault: Fault) -> Failure {
        Failure {
            at: Some(at),
            fault,
        }
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure {
            at: None,
            fault: Fault::Io(e),
        }
    }
}

/// The longest record read, in bytes: room for a name and a tag at their
/// limits written entirely as escaped surrogate pairs (12 bytes a
/// character), plus 64 KiB for the rest of the object.
pub fn max_record(limits: TextLimits) -> usize {
    limits
        .name
        .saturating_add(limits.tag)
        .saturating_mul(12)
        .saturating_add(64 << 10)
}

const BOM: &[u8] = b"\xef\xbb\xbf";

/// Reads every record of the seed at `path`, calling `each` with its
/// position, in file order; stops at the first fault, or the first that
/// `each` returns. How many records were read.
pub fn read(
    path: &Path,
    limits: TextLimits,
    mut each: impl FnMut(Position, NewPlant) -> Result<(), Fault>,
) -> Result<u64, Failure> {
    // A FIFO would block here until written to, and could not be read
    // twice; a directory would fail later, less clearly.
    if !std::fs::metadata(path)?.is_file() {
        return Err(Failure {
            at: None,
            fault: Fault::NotAFile,
        });
    }
    let mut reader = BufReader::with_capacity(64 << 10, File::open(path)?);
    let array = starts_with_bracket(&mut reader)?;
    let mut reader = BufReader::with_capacity(64 << 10, File::open(path)?);
    if reader.fill_buf()?.starts_with(BOM) {
        reader.consume(BOM.len());
    }
    match array {
        Some(true) => read_array(reader, limits, &mut each),
        Some(false) => read_lines(reader, limits, &mut each),
        None => Ok(0),
    }
}

/// Whether the first byte after any byte order mark and whitespace is `[`;
/// `None` if there is no such byte.
fn starts_with_bracket(reader: &mut impl BufRead) -> io::Result<Option<bool>> {
    if reader.fill_buf()?.starts_with(BOM) {
        reader.consume(BOM.len());
    }
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(None);
        }
        if let Some(&first) = buf.iter().find(|b| !is_space(**b)) {
            return Ok(Some(first == b'['));
        }
        let len = buf.len();
        reader.consume(len);
    }
}

/// JSON's whitespace.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

fn read_lines(
    mut reader: impl BufRead,
    limits: TextLimits,
    each: &mut impl FnMut(Position, NewPlant) -> Result<(), Fault>,
) -> Result<u64, Failure> {
    let most = max_record(limits);
    let mut line = Vec::new();
    let (mut number, mut records) = (0, 0);
    loop {
        line.clear();
        number += 1;
        let at = Position::Line(number);
        // One byte past the limit tells a line at the limit from a longer
        // one.
        let read = (&mut reader)
            .take(most as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| Failure::at(at, Fault::Io(e)))?;
        if read == 0 {
            return Ok(records);
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if line.len() > most {
            return Err(Failure::at(at, Fault::TooLong(most)));
        }
        if line.iter().all(|b| is_space(*b)) {
            continue;
        }
        let plant =
            NewPlant::parse(&line, limits).map_err(|e| Failure::at(at, Fault::Invalid(e)))?;
        each(at, plant).map_err(|fault| Failure::at(at, fault))?;
        records += 1;
    }
}

/// Where the array's stream is: the line and column of the last byte
/// handed to serde_json, and the byte past which it is refused (the end of
/// the record being read).
#[derive(Default)]
struct Tally {
    line: Cell<u64>,
    column: Cell<u64>,
    offset: Cell<u64>,
    limit: Cell<Option<u64>>,
    /// Set when a record ran past `limit`.
    over: Cell<bool>,
}

/// The seed file as serde_json reads it: a byte at a time (serde_json's
/// `IoRead` asks for one), so each is counted into the tally as it goes.
struct Counted<'t, R> {
    inner: R,
    tally: &'t Tally,
}

impl<R: BufRead> Read for Counted<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let buf = self.inner.fill_buf()?;
        let n = buf.len().min(out.len());
        let tally = self.tally;
        let offset = tally.offset.get() + n as u64;
        if tally.limit.get().is_some_and(|limit| offset > limit) {
            tally.over.set(true);
            return Err(io::Error::other("record too long"));
        }
        for &byte in &buf[..n] {
            if byte == b'\n' {
                tally.line.set(tally.line.get() + 1);
                tally.column.set(0);
            } else {
                tally.column.set(tally.column.get() + 1);
            }
        }
        out[..n].copy_from_slice(&buf[..n]);
        self.inner.consume(n);
        tally.offset.set(offset);
        Ok(n)
    }
}

fn read_array(
    reader: impl BufRead,
    limits: TextLimits,
    each: &mut impl FnMut(Position, NewPlant) -> Result<(), Fault>,
) -> Result<u64, Failure> {
    let tally = Tally::default();
    tally.line.set(1);
    let counted = Counted {
        inner: reader,
        tally: &tally,
    };
    let mut de = serde_json::Deserializer::from_reader(counted);
    let mut records = Records {
        tally: &tally,
        limits,
        most: max_record(limits),
        each,
        number: 0,
        stopped: None,
    };
    let parsed = de.deserialize_seq(&mut records).and_then(|()| de.end());
    if let Some(failure) = records.stopped {
        return Err(failure);
    }
    match parsed {
        Ok(()) => Ok(records.number),
        Err(e) if e.is_io() => Err(Failure::from(io::Error::from(e))),
        Err(e) => {
            let at = Position::Text {
                line: e.line() as u64,
                column: e.column() as u64,
            };
            Err(Failure::at(at, Fault::Syntax(without_position(&e))))
        }
    }
}

/// serde_json's message without the " at line L column C" it appends.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    text.strip_suffix(&suffix).unwrap_or(&text).to_string()
}

/// The array's elements, visited in order; the first failure is kept in
/// `stopped` (serde_json is stopped with an error of its own, which is
/// then ignored).
struct Records<'t, 'e, F> {
    tally: &'t Tally,
    limits: TextLimits,
    most: usize,
    each: &'e mut F,
    number: u64,
    stopped: Option<Failure>,
}

impl<'de, F> Visitor<'de> for &mut Records<'_, '_, F>
where
    F: FnMut(Position, NewPlant) -> Result<(), Fault>,
{
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of plants")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(&mut *self)?.is_some() {}
        Ok(())
    }
}

impl<'de, F> DeserializeSeed<'de> for &mut Records<'_, '_, F>
where
    F: FnMut(Position, NewPlant) -> Result<(), Fault>,
{
    type Value = ();

    /// Called once serde_json has read the element's first byte (to see
    /// that the array goes on), so the tally is at that byte.
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        let tally = self.tally;
        self.number += 1;
        let at = Position::Record {
            number: self.number,
            line: tally.line.get(),
            column: tally.column.get(),
        };
        tally.limit.set(Some(
            tally.offset.get().saturating_sub(1) + self.most as u64,
        ));
        let raw = <Box<RawValue> as de::Deserialize>::deserialize(deserializer);
        tally.limit.set(None);
        let raw = raw.inspect_err(|_| {
            if tally.over.get() {
                self.stopped = Some(Failure::at(at, Fault::TooLong(self.most)));
            }
        })?;
        let result = NewPlant::parse(raw.get().as_bytes(), self.limits)
            .map_err(Fault::Invalid)
            .and_then(|plant| (self.each)(at, plant));
        match result {
            Ok(()) => Ok(()),
            Err(fault) => {
                self.stopped = Some(Failure::at(at, fault));
                Err(de::Error::custom("stopped"))
            }
        }
    }
}
