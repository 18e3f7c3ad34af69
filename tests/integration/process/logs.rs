//! The binary's log: a timestamp on every line, `--log-format json`, and
//! request paths escaped in both formats.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::process::binary::Running;
use crate::support::{Client, PATIENCE};

const TOKEN: &str = "logs-token";

/// A request whose path holds what httparse lets through but a terminal
/// or a log reader must not get raw: C1 controls (NEL, CSI) and a line
/// separator in UTF-8, a quote and a backslash.
const HOSTILE: &[u8] = b"GET /a\xc2\x85b\xc2\x9b2J\xe2\x80\xa8\"\\ HTTP/1.1\r\nHost: x\r\n\r\n";

/// Starts the binary with `args`, sends `GET /plants`, the hostile path
/// and a target with a raw control byte (refused), stops it and returns
/// its whole log.
fn log_of(args: &[&str]) -> Vec<String> {
    let mut server = Running::start(args, Some(TOKEN));
    let mut client = Client::connect(server.addr);
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    client.send(format!("GET /plants HTTP/1.1\r\nHost: x\r\n{auth}\r\n").as_bytes());
    assert_eq!(client.reply().status, 200);
    client.send(HOSTILE);
    assert_eq!(client.reply().status, 404);
    let mut refused = Client::connect(server.addr);
    refused.send(b"GET /a\x01b HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(refused.reply().status, 400);
    server.signal("TERM");
    assert!(server.wait(PATIENCE).success());
    server.log()
}

/// Days from 1970-01-01 to a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let doy = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The milliseconds since the epoch that `stamp` names, if it is RFC 3339
/// UTC with milliseconds: `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn parse_stamp(stamp: &str) -> Option<i64> {
    let b = stamp.as_bytes();
    let shape = b"dddd-dd-ddTdd:dd:dd.dddZ";
    if b.len() != shape.len()
        || !b.iter().zip(shape).all(|(c, s)| match s {
            b'd' => c.is_ascii_digit(),
            s => c == s,
        })
    {
        return None;
    }
    let n = |at: usize, len: usize| stamp[at..at + len].parse::<i64>().ok();
    let days = days_from_civil(n(0, 4)?, n(5, 2)?, n(8, 2)?);
    let secs = days * 86_400 + n(11, 2)? * 3600 + n(14, 2)? * 60 + n(17, 2)?;
    Some(secs * 1000 + n(20, 3)?)
}

fn assert_recent(stamp: &str, line: &str) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let millis = parse_stamp(stamp).unwrap_or_else(|| panic!("no timestamp: {line}"));
    let age = i64::try_from(now.as_millis()).unwrap() - millis;
    assert!((0..30_000).contains(&age), "{age} ms old: {line}");
}

#[test]
fn the_day_count_agrees_with_known_dates() {
    assert_eq!(days_from_civil(1970, 1, 1), 0);
    assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    assert_eq!(
        parse_stamp("2026-11-23T08:17:22.123Z"),
        Some(1_795_421_842_123)
    );
    assert_eq!(parse_stamp("2026-11-23 08:17:22.123Z"), None);
}

#[test]
fn every_text_line_starts_with_a_recent_utc_timestamp_with_milliseconds() {
    let log = log_of(&[]);
    assert!(log.len() >= 5, "{log:?}");
    for line in &log {
        let (stamp, rest) = line.split_at_checked(24).expect(line);
        assert_recent(stamp, line);
        assert!(rest.starts_with(' '), "{line}");
    }
    assert!(
        log.iter()
            .any(|l| l.contains(" INFO  [access] GET /plants 200 ")),
        "{log:?}"
    );
}

#[test]
fn every_json_line_parses_and_access_lines_carry_their_fields() {
    let log = log_of(&["--log-format", "json"]);
    let lines: Vec<serde_json::Value> = log
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for (value, line) in lines.iter().zip(&log) {
        for key in ["time", "level", "target", "message"] {
            assert!(value[key].is_string(), "{key}: {line}");
        }
        assert_recent(value["time"].as_str().unwrap(), line);
    }
    let access = lines
        .iter()
        .find(|v| v["target"] == "access" && v["path"] == "/plants")
        .unwrap_or_else(|| panic!("access line: {log:?}"));
    assert_eq!(access["method"], "GET");
    assert_eq!(access["status"], 200);
    assert!(access["duration_us"].is_u64(), "{access}");
    // `[]` and the head: well over 50 bytes, well under 500.
    assert!(
        (50..500).contains(&access["bytes"].as_u64().unwrap()),
        "{access}"
    );
    assert!(
        access["peer"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{access}"
    );
    assert_eq!(access["level"], "INFO");
}

/// Regression: the raw bytes of a request path went into the log, so a
/// client could write terminal escapes and line breaks into it.
#[test]
fn a_path_with_control_characters_is_escaped_in_both_formats() {
    let text = log_of(&[]);
    for line in &text {
        assert!(line.is_ascii(), "{line:?}");
    }
    assert!(
        text.iter()
            .any(|l| l.contains(r#"] GET /a\xc2\x85b\xc2\x9b2J\xe2\x80\xa8"\x5c 404 "#)),
        "{text:?}"
    );
    // A raw control byte is refused by the parser: logged without a path.
    assert!(
        text.iter().any(|l| l.contains("[access] - - 400 ")),
        "{text:?}"
    );

    let json = log_of(&["--log-format", "json"]);
    let path = "/a\u{85}b\u{9b}2J\u{2028}\"\\";
    let hostile = json
        .iter()
        .find(|l| l.contains(r#""path":"/a\u0085b"#))
        .unwrap_or_else(|| panic!("{json:?}"));
    assert!(hostile.is_ascii(), "{hostile}");
    let value: serde_json::Value = serde_json::from_str(hostile).unwrap();
    assert_eq!(value["path"], path, "the path as received, once decoded");
    assert_eq!(value["status"], 404);
}

#[test]
fn a_refused_cors_origin_is_logged_once_and_the_pages_own_origin_never() {
    let mut server = Running::start(&["--cors-origin", "http://allowed.example"], Some(TOKEN));
    let own = format!("http://{}", server.addr);
    let host = server.addr.to_string();
    let mut client = Client::connect(server.addr);
    for origin in [
        "http://elsewhere.example:3000",
        "http://allowed.example",
        "http://elsewhere.example:3000",
        own.as_str(),
        "http://elsewhere.example:3000",
        "http://other.example",
    ] {
        client.send(
            format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\n\r\n").as_bytes(),
        );
        assert_eq!(client.reply().status, 200);
    }
    server.signal("TERM");
    assert!(server.wait(PATIENCE).success());
    let refused: Vec<String> = server
        .log()
        .into_iter()
        .filter(|l| l.contains("CORS: refused origin"))
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused[0].contains("\"http://elsewhere.example:3000\""),
        "{refused:?}"
    );
    assert!(refused[0].contains("--cors-origin http://elsewhere.example:3000"));
    assert!(
        refused[1].contains("\"http://other.example\""),
        "{refused:?}"
    );
}
