//! A JSON array's text split into its elements' raw bytes, one element at
//! a time, with where each one starts.
//!
//! This is not a JSON parser: it finds where each element ends, and only
//! that. Outside a string, `{` and `[` go one level deeper and `}` and `]`
//! one back; inside one, a `\` escapes the next byte, so `\"` does not end
//! it. At depth 0 outside a string, a `,` or `]` ends the element. Whether
//! an element is valid JSON is for whoever parses it; the text between
//! them (the `[`, the commas, the `]` and nothing but whitespace after it)
//! is checked here.
//!
//! Whitespace at depth 0 outside a string can only follow a complete
//! value, so an element ends at its last byte that is not whitespace, and
//! anything after it but whitespace, a `,` or a `]` is refused. An element
//! is at most `most` bytes; a longer one is refused once its bytes pass
//! the bound, not read whole. The reader's bytes are scanned a buffer at a
//! time and copied out in one piece for each buffer an element spans.
//!
//! Positions are 1-based lines and columns, columns counting bytes.

use std::io::{self, BufRead};

/// Where the next byte of the text is.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cursor {
    pub(super) line: u64,
    pub(super) column: u64,
}

impl Cursor {
    /// Moves past `bytes`.
    pub(super) fn pass(&mut self, bytes: &[u8]) {
        match bytes.iter().rposition(|b| *b == b'\n') {
            Some(last) => {
                self.line += bytes.iter().filter(|b| **b == b'\n').count() as u64;
                self.column = (bytes.len() - last) as u64;
            }
            None => self.column += bytes.len() as u64,
        }
    }
}

/// Why the text could not be split.
#[derive(Debug)]
pub(super) enum Broken {
    /// The reader failed.
    Io(io::Error),
    /// The element that starts here is longer than the bound.
    TooLong { number: u64, start: Cursor },
    /// The text between elements is wrong here, for this reason.
    Syntax { at: Cursor, reason: &'static str },
}

impl From<io::Error> for Broken {
    fn from(e: io::Error) -> Broken {
        Broken::Io(e)
    }
}

/// One element: its number (1 for the first), where it starts, and its
/// bytes.
pub(super) struct Element<'a> {
    pub(super) number: u64,
    pub(super) start: Cursor,
    pub(super) text: &'a [u8],
}

/// JSON's whitespace.
pub(super) fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

const UNTERMINATED: &str = "unterminated array: the file ends before its `]`";

/// The array's elements, split off one at a time.
pub(super) struct Elements<R> {
    text: Text<R>,
    most: usize,
    /// Elements split off so far.
    number: u64,
    /// The last one's bytes.
    element: Vec<u8>,
    /// What followed it; `None` before the first.
    after: Option<After>,
}

impl<R: BufRead> Elements<R> {
    /// The array whose `[` is the next byte after whitespace, that `[`
    /// read; elements at most `most` bytes.
    pub(super) fn open(reader: R, most: usize) -> Result<Elements<R>, Broken> {
        let mut text = Text {
            reader,
            at: Cursor { line: 1, column: 1 },
        };
        match text.skip_space()? {
            Some(b'[') => text.advance(),
            _ => return Err(text.broken("expected `[`")),
        }
        Ok(Elements {
            text,
            most,
            number: 0,
            element: Vec::new(),
            after: None,
        })
    }

    /// The next element; `None` once the array is closed and nothing but
    /// whitespace follows it. An element is handed out before what follows
    /// it is checked (on the next call), so faults are met in file order.
    pub(super) fn next(&mut self) -> Result<Option<Element<'_>>, Broken> {
        let text = &mut self.text;
        match self.after {
            None | Some(After::Comma) => {}
            Some(After::Close) => return text.rest().map(|()| None),
            Some(After::End { .. }) => return Err(text.broken(UNTERMINATED)),
            Some(After::Other) => return Err(text.broken("expected `,` or `]` after a record")),
        }
        match text.skip_space()? {
            None => return Err(text.broken(UNTERMINATED)),
            Some(b']') if self.after.is_none() => {
                text.advance();
                return text.rest().map(|()| None);
            }
            Some(b']') => return Err(text.broken("trailing comma before `]`")),
            Some(b',') => return Err(text.broken("expected a record before `,`")),
            Some(_) => {}
        }
        self.number += 1;
        let start = text.at;
        self.element.clear();
        match text.element(&mut self.element, self.most)? {
            None => Err(Broken::TooLong {
                number: self.number,
                start,
            }),
            Some(After::End { closed: false }) => Err(text.broken(UNTERMINATED)),
            Some(after) => {
                self.after = Some(after);
                Ok(Some(Element {
                    number: self.number,
                    start,
                    text: &self.element,
                }))
            }
        }
    }
}

/// What came after an element.
#[derive(Clone, Copy)]
enum After {
    /// A `,`: another element follows.
    Comma,
    /// The array's `]`.
    Close,
    /// The end of the file, with the element's text closed or not.
    End { closed: bool },
    /// A byte that cannot follow a complete element (not read).
    Other,
}

/// The text, read through a buffer, with where its next byte is.
struct Text<R> {
    reader: R,
    at: Cursor,
}

impl<R: BufRead> Text<R> {
    /// Skips whitespace; the next byte, still unread, or `None` at the
    /// end.
    fn skip_space(&mut self) -> io::Result<Option<u8>> {
        loop {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                return Ok(None);
            }
            let skipped = buf.iter().position(|b| !is_space(*b));
            let skipped = skipped.unwrap_or(buf.len());
            let next = buf.get(skipped).copied();
            self.at.pass(buf.get(..skipped).unwrap_or_default());
            self.reader.consume(skipped);
            if next.is_some() {
                return Ok(next);
            }
        }
    }

    /// Reads past the next byte, one that `skip_space` or `element` left
    /// unread (so it is in the buffer, and not a newline).
    fn advance(&mut self) {
        self.at.column += 1;
        self.reader.consume(1);
    }

    /// Reads the element that starts at the next byte into `out` (empty),
    /// and what follows it: a `,` or `]` is read, anything else left
    /// unread. `None` once it is longer than `most` bytes.
    fn element(&mut self, out: &mut Vec<u8>, most: usize) -> io::Result<Option<After>> {
        let mut scan = Scan::default();
        loop {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                let closed = scan.depth == 0 && !scan.string;
                return Ok(Some(After::End { closed }));
            }
            // Its bytes in this buffer are a prefix of it: after the first
            // whitespace nothing more is taken.
            let (mut taken, mut stop) = (0, None);
            for (i, &byte) in buf.iter().enumerate() {
                match scan.step(byte) {
                    Step::Take => taken = i + 1,
                    Step::Space => {}
                    Step::Stop => {
                        stop = Some((i, byte));
                        break;
                    }
                }
            }
            if out.len() + taken > most {
                return Ok(None);
            }
            out.extend_from_slice(buf.get(..taken).unwrap_or_default());
            let used = stop.map_or(buf.len(), |(i, _)| i);
            self.at.pass(buf.get(..used).unwrap_or_default());
            self.reader.consume(used);
            let after = match stop {
                None => continue,
                Some((_, b',')) => After::Comma,
                Some((_, b']')) => After::Close,
                Some(_) => return Ok(Some(After::Other)),
            };
            self.advance();
            return Ok(Some(after));
        }
    }

    /// Reads the whitespace after the array, refusing anything else.
    fn rest(&mut self) -> Result<(), Broken> {
        match self.skip_space()? {
            None => Ok(()),
            Some(_) => Err(self.broken("trailing characters after the array")),
        }
    }

    /// The text broken at the next byte.
    fn broken(&self, reason: &'static str) -> Broken {
        Broken::Syntax {
            at: self.at,
            reason,
        }
    }
}

/// What a byte is to the element being split off.
enum Step {
    /// Part of it.
    Take,
    /// Whitespace after it.
    Space,
    /// Not part of it: a `,` or `]` after it, or anything after a value
    /// that is complete.
    Stop,
}

/// How far into an element the split is.
#[derive(Default)]
struct Scan {
    depth: usize,
    string: bool,
    escape: bool,
    /// A whole value has been taken: only whitespace, `,` or `]` may
    /// follow.
    complete: bool,
}

impl Scan {
    fn step(&mut self, byte: u8) -> Step {
        if self.string {
            match byte {
                _ if self.escape => self.escape = false,
                b'\\' => self.escape = true,
                b'"' => {
                    self.string = false;
                    self.complete = self.depth == 0;
                }
                _ => {}
            }
            return Step::Take;
        }
        match byte {
            b',' | b']' if self.depth == 0 => return Step::Stop,
            _ if is_space(byte) && self.depth == 0 => {
                self.complete = true;
                return Step::Space;
            }
            _ if self.complete => return Step::Stop,
            b'"' => self.string = true,
            b'{' | b'[' => self.depth += 1,
            // A stray closer is left for the parser to refuse.
            b'}' | b']' if self.depth > 0 => {
                self.depth -= 1;
                self.complete = self.depth == 0;
            }
            _ => {}
        }
        Step::Take
    }
}

#[cfg(test)]
mod tests {
    use std::io::BufReader;

    use super::*;

    /// Each element's text, or where and why the split broke, read through
    /// a buffer of `capacity` bytes.
    fn split_with(text: &[u8], most: usize, capacity: usize) -> Result<Vec<String>, String> {
        let reader = BufReader::with_capacity(capacity, text);
        let show = |e: Broken| match e {
            Broken::Io(e) => format!("io: {e}"),
            Broken::TooLong { number, start } => {
                format!("{}:{}: record {number} too long", start.line, start.column)
            }
            Broken::Syntax { at, reason } => format!("{}:{}: {reason}", at.line, at.column),
        };
        let mut elements = Elements::open(reader, most).map_err(show)?;
        let mut seen = Vec::new();
        while let Some(element) = elements.next().map_err(show)? {
            assert_eq!(element.number, seen.len() as u64 + 1);
            seen.push(String::from_utf8_lossy(element.text).into_owned());
        }
        Ok(seen)
    }

    /// The split, the same through every small buffer as through a large
    /// one: an element, a string or an escape cut by a buffer's end is
    /// split as if it were not.
    fn split(text: &str) -> Result<Vec<String>, String> {
        let whole = split_with(text.as_bytes(), 1 << 20, 1 << 16);
        for capacity in 1..=9 {
            assert_eq!(
                split_with(text.as_bytes(), 1 << 20, capacity),
                whole,
                "{text:?} through {capacity} bytes"
            );
        }
        whole
    }

    #[test]
    fn strings_hide_brackets_commas_and_escaped_quotes() {
        let text = r#"[{"n":"a]b"},{"n":"c,d"},{"n":"{e"},{"n":"say \"hi\", ok]"},{"n":"back\\"},"\\\"",{"n":"\\\\\\"}]"#;
        assert_eq!(
            split(text).unwrap(),
            [
                r#"{"n":"a]b"}"#,
                r#"{"n":"c,d"}"#,
                r#"{"n":"{e"}"#,
                r#"{"n":"say \"hi\", ok]"}"#,
                r#"{"n":"back\\"}"#,
                r#""\\\"""#,
                r#"{"n":"\\\\\\"}"#,
            ]
        );
    }

    #[test]
    fn nested_objects_and_arrays_are_one_element() {
        let text = r#"[{"x":{"a":[1,{"b":"]"}],"c":{}},"y":[[],[[]]]},[1,[2,{"z":[]}]],{}]"#;
        assert_eq!(
            split(text).unwrap(),
            [
                r#"{"x":{"a":[1,{"b":"]"}],"c":{}},"y":[[],[[]]]}"#,
                r#"[1,[2,{"z":[]}]]"#,
                "{}",
            ]
        );
    }

    #[test]
    fn whitespace_around_elements_is_not_theirs_and_inside_them_is() {
        let text = "\r\n\t[ \n {\"a\" :\n 1 }\r\n\t,\n\n\"s t\"  ,7\n]\n \t";
        assert_eq!(split(text).unwrap(), ["{\"a\" :\n 1 }", "\"s t\"", "7"]);
        assert_eq!(split(" [ ] ").unwrap(), Vec::<String>::new());
        assert_eq!(split("[\n\n]").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn broken_text_between_elements_is_named_where_it_breaks() {
        let cases = [
            ("x", "1:1: expected `[`"),
            ("", "1:1: expected `[`"),
            ("[", "1:2: unterminated array: the file ends before its `]`"),
            (
                "[{}, ",
                "1:6: unterminated array: the file ends before its `]`",
            ),
            (
                "[{\"a\":\n[1",
                "2:3: unterminated array: the file ends before its `]`",
            ),
            (
                "[\"a]",
                "1:5: unterminated array: the file ends before its `]`",
            ),
            (
                "[\"a\\\"]",
                "1:7: unterminated array: the file ends before its `]`",
            ),
            ("[,1]", "1:2: expected a record before `,`"),
            ("[1,,2]", "1:4: expected a record before `,`"),
            ("[1,\n]", "2:1: trailing comma before `]`"),
            ("[{} {}]", "1:5: expected `,` or `]` after a record"),
            ("[{}\n\"a\"]", "2:1: expected `,` or `]` after a record"),
            ("[\"a\"\"b\"]", "1:5: expected `,` or `]` after a record"),
            ("[1 2]", "1:4: expected `,` or `]` after a record"),
            ("[{}] x", "1:6: trailing characters after the array"),
            ("[]]", "1:3: trailing characters after the array"),
            ("[1]\n\n[]", "3:1: trailing characters after the array"),
        ];
        for (text, want) in cases {
            assert_eq!(split(text), Err(want.to_string()), "{text:?}");
        }
    }

    #[test]
    fn an_element_is_handed_out_before_what_follows_it_is_refused() {
        assert_eq!(
            split_with(b"[1,{}", 99, 99),
            Err("1:6: unterminated array: the file ends before its `]`".into())
        );
        let mut elements = Elements::open(&b"[1,{} x]"[..], 99).unwrap();
        assert_eq!(elements.next().unwrap().unwrap().text, b"1");
        assert_eq!(elements.next().unwrap().unwrap().text, b"{}");
        assert!(matches!(
            elements.next(),
            Err(Broken::Syntax {
                at: Cursor { line: 1, column: 7 },
                ..
            })
        ));
        // A scalar cut off by the end of the file is for the parser.
        let mut elements = Elements::open(&b"[tru"[..], 99).unwrap();
        assert_eq!(elements.next().unwrap().unwrap().text, b"tru");
        assert!(elements.next().is_err());
    }

    #[test]
    fn an_element_past_the_bound_is_refused_and_whitespace_after_it_does_not_count() {
        let at_bound = format!(
            "[ {}, \"{}\" {}]",
            "7".repeat(10),
            "s".repeat(8),
            " \n".repeat(50)
        );
        for capacity in [1, 3, 16, 1 << 16] {
            let got = split_with(at_bound.as_bytes(), 10, capacity);
            assert_eq!(got.unwrap().len(), 2, "through {capacity} bytes");
            let over = split_with(b"[1,\n 12345678901]", 10, capacity);
            assert_eq!(over, Err("2:2: record 2 too long".into()));
        }
    }

    /// A small fixed-seed generator.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// Valid arrays with strings full of the bytes that matter and
    /// whitespace everywhere: split as serde_json splits them.
    #[test]
    fn valid_arrays_are_split_as_serde_json_splits_them() {
        let pieces = [
            "a",
            "]",
            "[",
            "{",
            "}",
            ",",
            "\"",
            "\\",
            "\n",
            " ",
            "\u{1f335}",
        ];
        let spaces = ["", " ", "\n", "\t", "\r\n"];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..300 {
            let mut text = String::from(spaces[rng.below(5)]) + "[";
            for n in 0..rng.below(6) {
                if n > 0 {
                    text.push_str(spaces[rng.below(5)]);
                    text.push(',');
                }
                text.push_str(spaces[rng.below(5)]);
                let name: String = (0..rng.below(8))
                    .map(|_| pieces[rng.below(pieces.len())])
                    .collect();
                let name = serde_json::to_string(&name).unwrap();
                let element = match rng.below(4) {
                    0 => name,
                    1 => format!("{{\"n\":{name},\"x\":[{name},{{\"y\":{name}}}]}}"),
                    2 => format!("[ {name} ,\n[] ]"),
                    _ => format!("{}", rng.below(1000)),
                };
                text.push_str(&element);
                text.push_str(spaces[rng.below(5)]);
            }
            text.push(']');
            text.push_str(spaces[rng.below(5)]);
            let raw: Vec<Box<serde_json::value::RawValue>> = serde_json::from_str(&text).unwrap();
            let want: Vec<String> = raw.iter().map(|r| r.get().to_string()).collect();
            assert_eq!(split(&text).unwrap(), want, "{text:?}");
        }
    }
}
