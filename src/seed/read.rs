//! Reading a seed file one record at a time, in either of its two formats,
//! with the position of each record.
//!
//! The format is the first byte that is not whitespace (after a UTF-8 byte
//! order mark, which is skipped): `[` is a JSON array of records, anything
//! else NDJSON, one record a line (blank lines skipped). A file of nothing
//! but whitespace holds no record.
//!
//! Neither format is read whole. NDJSON is read a line at a time, each
//! line at most `max_record` bytes. The array is split into its elements'
//! raw bytes by a small scanner over the buffered file (`array.rs`), which
//! follows strings, escapes and the nesting of `{}` and `[]` only as far as
//! to find where each element ends, checks the text between them (commas,
//! brackets, nothing after the `]` but whitespace) and refuses an element
//! longer than `max_record` bytes without reading it whole. Each element is
//! handed on before the next is read, with its number and the line and
//! column of its first byte.
//!
//! Each record is validated by [`NewPlant::parse`], exactly as a `POST
//! /plants` body, so a seed holds nothing that the API would refuse; an
//! element that is not valid JSON is refused there, and the place where
//! it breaks is given in the file's lines and columns, not the record's.
//! Positions are 1-based; columns count bytes, not characters.

mod array;

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use super::Fault;
use crate::model::{InvalidBody, NewPlant, TextLimits};
use crate::os::{self, FileError};
use array::{Broken, Cursor, Element, Elements, is_space};

/// Where a record is in a seed file, or where its text broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
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

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Line(line) => write!(f, "line {line}"),
            Place::Record {
                number,
                line,
                column,
            } => write!(f, "record {number} (line {line}, column {column})"),
            Place::Text { line, column } => write!(f, "line {line}, column {column}"),
        }
    }
}

/// A failure to read a seed, and where it happened (if anywhere in
/// particular).
#[derive(Debug)]
pub struct Failure {
    /// The record or text at fault; `None` for the file as a whole.
    pub at: Option<Place>,
    /// What is wrong.
    pub fault: Fault,
}

impl Failure {
    fn at(at: Place, fault: Fault) -> Failure {
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

/// Opening the seed (`os::open_regular`) can only fail to find or open
/// it, or find something other than a regular file.
impl From<FileError> for Failure {
    fn from(e: FileError) -> Failure {
        let fault = match e {
            FileError::NotAFile(kind) => Fault::NotAFile(kind),
            FileError::Io(e) => Fault::Io(e),
            other => Fault::Io(io::Error::other(other)),
        };
        Failure { at: None, fault }
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
    mut each: impl FnMut(Place, NewPlant) -> Result<(), Fault>,
) -> Result<u64, Failure> {
    // A FIFO would block the open until written to, and could not be read
    // twice; a directory would fail later, less clearly: refused, also when
    // swapped in after a look at the path.
    let file = os::open_regular(path)?;
    let mut reader = BufReader::with_capacity(64 << 10, file);
    let array = starts_with_bracket(&mut reader)?;
    // Read again from the start, through the same open file.
    reader.seek(SeekFrom::Start(0))?;
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

fn read_lines(
    mut reader: impl BufRead,
    limits: TextLimits,
    each: &mut impl FnMut(Place, NewPlant) -> Result<(), Fault>,
) -> Result<u64, Failure> {
    let most = max_record(limits);
    let mut line = Vec::new();
    let (mut number, mut records) = (0, 0);
    loop {
        line.clear();
        number += 1;
        let at = Place::Line(number);
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

/// `each` is called through a pointer: one copy of the splitter in the
/// binary rather than one for each caller of `read`.
fn read_array(
    reader: impl BufRead,
    limits: TextLimits,
    each: &mut dyn FnMut(Place, NewPlant) -> Result<(), Fault>,
) -> Result<u64, Failure> {
    let most = max_record(limits);
    let mut elements = Elements::open(reader, most).map_err(|e| broken(e, most))?;
    let mut records = 0;
    while let Some(element) = elements.next().map_err(|e| broken(e, most))? {
        let Element {
            number,
            start,
            text,
        } = element;
        let at = Place::Record {
            number,
            line: start.line,
            column: start.column,
        };
        let plant = NewPlant::parse(text, limits).map_err(|e| refused(text, start, at, e))?;
        each(at, plant).map_err(|fault| Failure::at(at, fault))?;
        records = number;
    }
    Ok(records)
}

/// The failure for text that the splitter refused.
fn broken(e: Broken, most: usize) -> Failure {
    match e {
        Broken::Io(e) => Failure::from(e),
        Broken::TooLong { number, start } => Failure::at(
            Place::Record {
                number,
                line: start.line,
                column: start.column,
            },
            Fault::TooLong(most),
        ),
        Broken::Syntax { at, reason } => {
            Failure::at(text_at(at), Fault::Syntax(reason.to_string()))
        }
    }
}

fn text_at(at: Cursor) -> Place {
    Place::Text {
        line: at.line,
        column: at.column,
    }
}

/// The failure for a record that `NewPlant::parse` refused: for broken
/// JSON, where in the file it breaks (the parser counts from the record's
/// first byte); for anything else, the record.
fn refused(record: &[u8], start: Cursor, at: Place, e: InvalidBody) -> Failure {
    let InvalidBody::Syntax(detail) = &e else {
        return Failure::at(at, Fault::Invalid(e));
    };
    if let Err(bad) = std::str::from_utf8(record) {
        let mut here = start;
        here.pass(record.get(..bad.valid_up_to()).unwrap_or_default());
        return Failure::at(text_at(here), Fault::Syntax("invalid UTF-8".to_string()));
    }
    let Some((reason, line, column)) = split_position(detail) else {
        return Failure::at(at, Fault::Invalid(e));
    };
    // serde_json's line 1 is the record's first line, which starts where
    // the record does; its later lines start at column 1.
    let here = match line {
        0 | 1 => Cursor {
            line: start.line,
            column: start.column.saturating_add(column).saturating_sub(1),
        },
        _ => Cursor {
            line: start.line.saturating_add(line - 1),
            column,
        },
    };
    Failure::at(text_at(here), Fault::Syntax(reason.to_string()))
}

/// serde_json's message split into its reason and the line and column it
/// appends (" at line L column C").
fn split_position(detail: &str) -> Option<(&str, u64, u64)> {
    let (reason, place) = detail.rsplit_once(" at line ")?;
    let (line, column) = place.split_once(" column ")?;
    Some((reason, line.parse().ok()?, column.parse().ok()?))
}
