//! Tests of seed reading (both formats, positions, limits). Loading into
//! a store is the door's (`plants/seed_tests.rs`).

use super::read::{Failure, max_record, read};
use super::*;
use crate::model::Plant;
use crate::os::temp::TempFile;

const LIMITS: TextLimits = TextLimits { name: 256, tag: 64 };

/// Every record of `contents` with its position, or the failure.
fn records(contents: &[u8]) -> Result<Vec<(Place, NewPlant)>, Failure> {
    let file = TempFile::with("read", contents);
    let mut seen = Vec::new();
    let count = read(&file.0, LIMITS, |at, plant| {
        seen.push((at, plant));
        Ok(())
    })?;
    assert_eq!(count, seen.len() as u64);
    Ok(seen)
}

fn positions(contents: &[u8]) -> Vec<(Place, i64)> {
    let seen = records(contents).unwrap_or_else(|e| panic!("{e:?}"));
    seen.into_iter().map(|(at, p)| (at, p.id)).collect()
}

/// The failure's position and message.
fn failure(contents: &[u8]) -> (Option<Place>, String) {
    let e = records(contents).expect_err("refused");
    (e.at, e.fault.to_string())
}

fn record(number: u64, line: u64, column: u64) -> Place {
    Place::Record {
        number,
        line,
        column,
    }
}

#[test]
fn an_array_gives_each_record_with_where_it_starts() {
    let text = b"[{\"id\":1,\"name\":\"a\"},\n  {\"id\": 2, \"name\": \"b\", \"tag\": \"t\"} ,{\"id\":3,\n\"name\":\"c\"}\n]\n";
    assert_eq!(
        positions(text),
        [
            (record(1, 1, 2), 1),
            (record(2, 2, 3), 2),
            (record(3, 2, 39), 3)
        ]
    );
    let seen = records(text).unwrap();
    assert_eq!(
        seen[1].1.plant,
        Plant {
            name: "b".into(),
            tag: Some("t".into())
        }
    );
}

#[test]
fn ndjson_gives_each_record_with_its_line() {
    let text = b"{\"id\":1,\"name\":\"a\"}\n\n   \n{\"id\":2,\"name\":\"b\"}\r\n\t{\"id\":3,\"name\":\"c\"}";
    assert_eq!(
        positions(text),
        [
            (Place::Line(1), 1),
            (Place::Line(4), 2),
            (Place::Line(5), 3)
        ]
    );
}

#[test]
fn a_byte_order_mark_is_skipped_in_both_formats() {
    let ndjson = b"\xef\xbb\xbf{\"id\":1,\"name\":\"a\"}\n{\"id\":2,\"name\":\"b\"}\n";
    assert_eq!(
        positions(ndjson),
        [(Place::Line(1), 1), (Place::Line(2), 2)]
    );
    let array = b"\xef\xbb\xbf\n [{\"id\":1,\"name\":\"a\"}]";
    assert_eq!(positions(array), [(record(1, 2, 3), 1)]);
    // Only at the start: elsewhere it is not JSON.
    let (at, message) =
        failure(b"{\"id\":1,\"name\":\"a\"}\n\xef\xbb\xbf{\"id\":2,\"name\":\"b\"}");
    assert_eq!(at, Some(Place::Line(2)), "{message}");
}

#[test]
fn an_empty_seed_holds_no_record() {
    for empty in [
        &b""[..],
        b"\n\n  \r\n",
        b"\xef\xbb\xbf",
        b"[]",
        b" \n[ \n ] \n",
        b"\xef\xbb\xbf[]",
    ] {
        assert_eq!(positions(empty), [], "{empty:?}");
    }
}

#[test]
fn a_record_the_api_would_refuse_is_named_with_the_reason() {
    let long = format!(
        "{{\"id\":1,\"name\":\"a\"}}\n{{\"id\":2,\"name\":\"{}\"}}\n",
        "n".repeat(257)
    );
    let cases: [(&[u8], Place, &str); 9] = [
        (
            long.as_bytes(),
            Place::Line(2),
            "name: longer than 256 characters (--max-name)",
        ),
        (
            b"[{\"id\":1,\"name\":\"a\",\"tag\":\"\xf0\x9f\x8c\xb5\xf0\x9f\x8c\xb5\"},\n{\"id\":2,\"name\":\"b\",\"tag\":null}]",
            record(2, 2, 1),
            "tag: must be a string when present",
        ),
        (
            b"{\"name\":\"a\"}",
            Place::Line(1),
            "id: missing",
        ),
        (
            b"[{\"id\":1}]",
            record(1, 1, 2),
            "name: missing",
        ),
        (
            b"[{\"id\":1.5,\"name\":\"a\"}]",
            record(1, 1, 2),
            "id: must be an int64 integer",
        ),
        (b"[[1]]", record(1, 1, 2), "not a JSON object"),
        (b"7\n", Place::Line(1), "not a JSON object"),
        (
            b"{\"id\":1,\"name\":\"a\",\"name\":\"b\"}",
            Place::Line(1),
            "duplicate key \"name\"",
        ),
        (
            b"\n{\"id\":1,\"name\":\"a\"} {\"id\":2,\"name\":\"b\"}",
            Place::Line(2),
            "not valid JSON: trailing characters at column 21",
        ),
    ];
    for (text, at, message) in cases {
        assert_eq!(
            failure(text),
            (Some(at), message.to_string()),
            "{}",
            String::from_utf8_lossy(text)
        );
    }
    // The tag limit is the one named.
    let tag = format!(r#"[{{"id":1,"name":"a","tag":"{}"}}]"#, "t".repeat(65));
    assert_eq!(
        failure(tag.as_bytes()).1,
        "tag: longer than 64 characters (--max-tag)"
    );
}

#[test]
fn broken_array_text_is_named_where_it_breaks() {
    let cases: [(&[u8], u64, u64, &str); 6] = [
        (
            b"[{\"id\":1,\"name\":\"a\"},\n {\"id\":2 \"name\":\"b\"}]",
            2,
            10,
            "expected `,` or `}`",
        ),
        (b"[{\"id\":1,\"name\":\"a\"},]", 1, 22, "trailing comma"),
        (
            b"[{\"id\":1,\"name\":\"a\"}] x",
            1,
            23,
            "trailing characters",
        ),
        (
            b"[{\"id\":1,\"name\":\"a\"}\n{\"id\":2,\"name\":\"b\"}]",
            2,
            1,
            "expected `,` or `]`",
        ),
        (b"[", 1, 2, "unterminated array"),
        (b"[{\"id\":1,\"name\":\"a\xff\"}]", 1, 19, ""),
    ];
    for (text, line, column, message) in cases {
        let (at, got) = failure(text);
        assert_eq!(
            at,
            Some(Place::Text { line, column }),
            "{}: {got}",
            String::from_utf8_lossy(text)
        );
        assert!(got.starts_with("not valid JSON: "), "{got}");
        assert!(got.contains(message), "{got}");
    }
}

#[test]
fn array_strings_may_hold_brackets_commas_and_escapes() {
    let text = b"[{\"id\":1,\"name\":\"a]\\\"b,{\"},\n\t{\"id\":2,\"name\":\"\\\\\",\"x\":{\"y\":[\"]\"]}} ]";
    let seen = records(text).unwrap();
    let got: Vec<_> = seen
        .iter()
        .map(|(at, p)| (*at, p.plant.name.as_str()))
        .collect();
    assert_eq!(got, [(record(1, 1, 2), "a]\"b,{"), (record(2, 2, 2), "\\")]);
}

/// The parser counts from a record's first byte; the message counts from
/// the file's.
#[test]
fn a_record_that_is_not_json_is_named_where_it_breaks_in_the_file() {
    let cases: [(&[u8], u64, u64, &str); 4] = [
        (
            b"[\n  {\n    \"id\": 1,\n    \"name\": \"a\"\n    \"tag\": \"t\"\n  }\n]",
            5,
            5,
            "expected `,` or `}`",
        ),
        (b"[{\"id\":1,\"name\":\"a\",}]", 1, 21, "trailing comma"),
        (b"[ tx ]", 1, 4, "expected ident"),
        (b"[1}]", 1, 3, "trailing characters"),
    ];
    for (text, line, column, message) in cases {
        assert_eq!(
            failure(text),
            (
                Some(Place::Text { line, column }),
                format!("not valid JSON: {message}")
            ),
            "{}",
            String::from_utf8_lossy(text)
        );
    }
}

#[test]
fn records_before_a_missing_bracket_or_trailing_text_are_read_first() {
    for (text, at, reason) in [
        (
            &b"[{\"id\":1,\"name\":\"a\"},\n{\"id\":2,\"name\":\"b\"}\n"[..],
            (3, 1),
            "unterminated array",
        ),
        (
            b"[{\"id\":1,\"name\":\"a\"},\n{\"id\":2,\"name\":\"b\"}] []",
            (2, 22),
            "trailing characters after the array",
        ),
        (
            b"[{\"id\":1,\"name\":\"a\"},\n{\"id\":2,\"name\":\"b\"} 3]",
            (2, 21),
            "expected `,` or `]` after a record",
        ),
    ] {
        let file = TempFile::with("order", text);
        let mut seen = Vec::new();
        let e = read(&file.0, LIMITS, |_, plant| {
            seen.push(plant.id);
            Ok(())
        })
        .unwrap_err();
        assert_eq!(seen, [1, 2]);
        let (line, column) = at;
        assert_eq!(e.at, Some(Place::Text { line, column }));
        assert!(e.fault.to_string().contains(reason), "{}", e.fault);
    }
}

#[test]
fn a_record_past_the_length_bound_is_refused_without_being_read_whole() {
    let most = max_record(LIMITS);
    // Padding in an unknown field, so that only the length is wrong.
    let padded = |bytes: usize| {
        let frame = r#"{"id":1,"name":"a","x":""}"#.len();
        format!(
            r#"{{"id":1,"name":"a","x":"{}"}}"#,
            "p".repeat(bytes - frame)
        )
    };
    assert_eq!(padded(most).len(), most);
    let at_limit = format!("{}\n", padded(most));
    assert_eq!(positions(at_limit.as_bytes()).len(), 1);
    let over = format!("{{\"id\":0,\"name\":\"a\"}}\n{}\n", padded(most + 1));
    assert_eq!(
        failure(over.as_bytes()),
        (
            Some(Place::Line(2)),
            format!("record longer than {most} bytes")
        )
    );
    let array = format!("[{}, {}]", padded(most), padded(most + 1));
    let seen = format!("[{}]", padded(most));
    assert_eq!(positions(seen.as_bytes()).len(), 1);
    assert_eq!(
        failure(array.as_bytes()),
        (
            Some(record(2, 1, most as u64 + 4)),
            format!("record longer than {most} bytes")
        )
    );
}

#[test]
fn a_fault_from_the_caller_stops_reading_at_that_record() {
    let file = TempFile::with(
        "stop",
        b"[{\"id\":1,\"name\":\"a\"},{\"id\":2,\"name\":\"b\"},{\"id\":3,\"name\":\"c\"}",
    );
    let mut seen = Vec::new();
    let e = read(&file.0, LIMITS, |_, plant| {
        seen.push(plant.id);
        match plant.id {
            2 => Err(Fault::TooMany(1)),
            _ => Ok(()),
        }
    })
    .unwrap_err();
    assert_eq!(seen, [1, 2], "nothing read past the fault");
    assert_eq!(e.at, Some(record(2, 1, 22)));
    assert!(matches!(e.fault, Fault::TooMany(1)));
}

#[test]
fn arbitrary_bytes_never_panic() {
    // A small fixed-seed generator: bytes drawn from JSON's alphabet and
    // a few others, in both formats.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let alphabet = b"[]{},:\"\\ \n\r\t0123456789-+.eE idnametgu\xef\xbb\xbf\xff";
    for round in 0..2000 {
        let len = (round % 97) + 1;
        let mut text = Vec::with_capacity(len + 1);
        if round % 2 == 0 {
            text.push(b'[');
        }
        for _ in 0..len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            text.push(alphabet[(state % alphabet.len() as u64) as usize]);
        }
        let _ = records(&text);
    }
}
