//! The logger: every record is one line on stderr that starts with an
//! RFC 3339 UTC timestamp with milliseconds (`2026-11-23T08:17:22.123Z`).
//!
//! Two formats (`--log-format`):
//! - `text`: `TIME LEVEL [target] message`, the level padded to five.
//! - `json`: one object a line, `{"time","level","target","message"}`
//!   and for access lines (written through [`access`]) `method`, `path`,
//!   `status`, `duration_us`, `bytes` and `peer`, numbers as numbers.
//!
//! Invariants: one record is one line, and the log is ASCII. Text escapes
//! every byte outside printable ASCII (control bytes, non-ASCII UTF-8) and
//! the backslash as `\xNN`, so `\` always starts an escape; a quote is
//! kept (text is not quoted). JSON escapes `"` and `\`, and control and
//! non-ASCII characters as `\uXXXX` (UTF-16), so every line parses. A line
//! is built in a per-thread buffer and written with one `write_all` on the
//! locked stderr, so lines of different threads never interleave.
//!
//! Other crates' records (any target outside `plantstore` and `access`:
//! in this build only the PostgreSQL client's, since rustls and mio are
//! built without their logging) are written at [`OTHERS`], warn, and above
//! only, whatever the level. Below it the PostgreSQL client logs every
//! statement with its parameters (plant names and tags, as byte lists)
//! and every poll of its connections, so a log at `debug` or `trace` would
//! carry what requests sent, and an idle instance on PostgreSQL would write
//! about 40 lines a second at `debug` and 430 at `trace` (the follower's
//! poll, the heartbeat, the workers' pings). `debug` and `trace` add this
//! server's own detail only.
//!
//! It does not otherwise filter by target, colour, or rotate: stderr goes
//! to journald, a file or a container's log driver, which do that.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use log::{Level, LevelFilter, Log, Metadata, Record, SetLoggerError};

/// How lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// `TIME LEVEL [target] message`.
    #[default]
    Text,
    /// One JSON object a line.
    Json,
}

/// The process's logger: writes records at `level` or above to stderr.
#[derive(Debug)]
pub struct Logger {
    level: LevelFilter,
    format: Format,
}

/// The lowest level of another crate's records that is written.
pub const OTHERS: Level = Level::Warn;

/// A per-thread buffer larger than this is given back after its line.
const KEEP: usize = 4096;

/// The format of the installed `Logger`, for `access`; unset under any
/// other logger.
static FORMAT: OnceLock<Format> = OnceLock::new();

thread_local! {
    static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl Logger {
    /// Installs the logger for this process; fails if one already is.
    pub fn init(level: LevelFilter, format: Format) -> Result<(), SetLoggerError> {
        log::set_boxed_logger(Box::new(Logger { level, format }))?;
        log::set_max_level(level);
        let _ = FORMAT.set(format);
        Ok(())
    }
}

impl Log for Logger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= self.level && (metadata.level() <= OTHERS || ours(metadata.target()))
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        emit(|line| write_line(line, self.format, SystemTime::now(), record, None));
    }

    fn flush(&self) {
        let _ = io::stderr().flush();
    }
}

/// Whether `target` is this server's: its modules, its start-up lines,
/// its access lines.
fn ours(target: &str) -> bool {
    target == "access"
        || target
            .strip_prefix("plantstore")
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

/// One request's access line: what `--log-format json` carries as fields,
/// and, as `Display`, the text message (`GET /plants 200 10us 151B
/// 127.0.0.1:58192`). Never headers, query strings or bodies.
#[derive(Debug, Clone, Copy)]
pub struct AccessLine<'a> {
    /// The method, or `-` when the head was refused.
    pub method: &'a str,
    /// The target's path as received (not percent-decoded), or `-`.
    pub path: &'a str,
    /// The status answered.
    pub status: u16,
    /// Microseconds from the head to the response being queued.
    pub duration_us: u64,
    /// Bytes of the response queued with its head: head and body, or for
    /// a streamed body the head alone.
    pub bytes: usize,
    /// The client.
    pub peer: SocketAddr,
}

impl fmt::Display for AccessLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let AccessLine {
            method,
            path,
            status,
            duration_us,
            bytes,
            peer,
        } = self;
        write!(
            f,
            "{method} {path} {status} {duration_us}us {bytes}B {peer}"
        )
    }
}

/// Logs an access line (target `access`, level info) if that is enabled.
/// Under this module's logger, a JSON line carries the fields; under any
/// other, it is an ordinary record.
pub fn access(access: &AccessLine<'_>) {
    if !log::log_enabled!(target: "access", Level::Info) {
        return;
    }
    let log = |record: &Record<'_>| match FORMAT.get() {
        Some(&format) => {
            emit(|line| write_line(line, format, SystemTime::now(), record, Some(access)))
        }
        None => log::logger().log(record),
    };
    log(&Record::builder()
        .level(Level::Info)
        .target("access")
        .args(format_args!("{access}"))
        .build());
}

/// Builds a line in this thread's buffer and writes it to stderr at once.
fn emit(build: impl Fn(&mut Vec<u8>)) {
    let write = |line: &mut Vec<u8>| {
        line.clear();
        build(line);
        // Nowhere to report a failed write to stderr.
        let _ = io::stderr().lock().write_all(line);
    };
    // A record logged while formatting another (from a `Display`) finds
    // the buffer taken and uses its own.
    let _ = LINE.try_with(|cell| match cell.try_borrow_mut() {
        Ok(mut line) => {
            write(&mut line);
            if line.capacity() > KEEP {
                *line = Vec::new();
            }
        }
        Err(_) => write(&mut Vec::new()),
    });
}

/// Prints the token generated for this run to stderr, in the log's
/// `format` but never through the logger: a token is never a log record
/// (a log shipped elsewhere must not carry it).
pub fn print_generated_token(format: Format, token: &str) {
    let notice = format_args!("bearer token for this run: {token}");
    let record = Record::builder()
        .level(log::Level::Warn)
        .target("plantstore")
        .args(notice)
        .build();
    let mut line = Vec::new();
    write_line(&mut line, format, SystemTime::now(), &record, None);
    let _ = std::io::Write::write_all(&mut std::io::stderr(), &line);
}

/// Appends `record`, stamped `now`, as one line (ending in `\n`) to `line`;
/// in JSON, with `access`'s fields.
pub fn write_line(
    line: &mut Vec<u8>,
    format: Format,
    now: SystemTime,
    record: &Record<'_>,
    access: Option<&AccessLine<'_>>,
) {
    // Writing to a Vec fails only when a `Display` does; what it wrote
    // so far stays, and the line is still ended.
    match format {
        Format::Text => {
            timestamp(line, now);
            let _ = write!(
                Text(line),
                " {:<5} [{}] {}",
                record.level(),
                record.target(),
                record.args()
            );
        }
        Format::Json => {
            line.extend_from_slice(br#"{"time":""#);
            timestamp(line, now);
            line.extend_from_slice(br#"","level":""#);
            line.extend_from_slice(record.level().as_str().as_bytes());
            line.extend_from_slice(br#"","target":""#);
            let _ = Json(line).write_str(record.target());
            line.extend_from_slice(br#"","message":""#);
            let _ = write!(Json(line), "{}", record.args());
            line.push(b'"');
            if let Some(access) = access {
                fields(line, access);
            }
            line.push(b'}');
        }
    }
    line.push(b'\n');
}

/// Appends the access fields to a JSON object.
fn fields(line: &mut Vec<u8>, a: &AccessLine<'_>) {
    let mut number = itoa::Buffer::new();
    line.extend_from_slice(br#","method":""#);
    let _ = Json(line).write_str(a.method);
    line.extend_from_slice(br#"","path":""#);
    let _ = Json(line).write_str(a.path);
    line.extend_from_slice(br#"","status":"#);
    line.extend_from_slice(number.format(a.status).as_bytes());
    line.extend_from_slice(br#","duration_us":"#);
    line.extend_from_slice(number.format(a.duration_us).as_bytes());
    line.extend_from_slice(br#","bytes":"#);
    line.extend_from_slice(number.format(a.bytes).as_bytes());
    line.extend_from_slice(br#","peer":""#);
    let _ = write!(Json(line), "{}", a.peer);
    line.push(b'"');
}

/// Appends `now` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC); a clock before 1970
/// reads as the epoch.
fn timestamp(line: &mut Vec<u8>, now: SystemTime) {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (year, month, day) = civil_from_days(secs / 86_400);
    let of_day = secs % 86_400;
    for (n, width, then) in [
        (year, 4, b'-'),
        (month, 2, b'-'),
        (day, 2, b'T'),
        (of_day / 3600, 2, b':'),
        (of_day / 60 % 60, 2, b':'),
        (of_day % 60, 2, b'.'),
        (u64::from(since.subsec_millis()), 3, b'Z'),
    ] {
        let start = line.len();
        line.resize(start + width, b'0');
        let mut n = n;
        for digit in line[start..].iter_mut().rev() {
            *digit = b'0' + (n % 10) as u8;
            n /= 10;
        }
        line.push(then);
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, for days on or after the epoch).
pub(crate) fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March first
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Writes text with everything outside printable ASCII, and `\`, as `\xNN`.
struct Text<'a>(&'a mut Vec<u8>);

impl fmt::Write for Text<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            if (b' '..=b'~').contains(&b) && b != b'\\' {
                self.0.push(b);
            } else {
                self.0.extend_from_slice(&[
                    b'\\',
                    b'x',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 15)],
                ]);
            }
        }
        Ok(())
    }
}

/// Writes a JSON string's contents: `"` and `\\` escaped, control and
/// non-ASCII characters as `\uXXXX` (UTF-16 units).
struct Json<'a>(&'a mut Vec<u8>);

impl fmt::Write for Json<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            match c {
                '"' => self.0.extend_from_slice(b"\\\""),
                '\\' => self.0.extend_from_slice(b"\\\\"),
                ' '..='~' => self.0.push(c as u8),
                _ => {
                    for &unit in c.encode_utf16(&mut [0; 2]).iter() {
                        let u = usize::from(unit);
                        self.0.extend_from_slice(b"\\u");
                        for shift in [12, 8, 4, 0] {
                            self.0.push(HEX[(u >> shift) & 15]);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(secs: u64, millis: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(secs * 1000 + millis)
    }

    fn line(
        format: Format,
        now: SystemTime,
        message: &str,
        access: Option<&AccessLine<'_>>,
    ) -> String {
        let mut line = Vec::new();
        let args = format_args!("{message}");
        let record = Record::builder()
            .level(Level::Warn)
            .target("plantstore")
            .args(args)
            .build();
        write_line(&mut line, format, now, &record, access);
        String::from_utf8(line).expect("the log is ASCII")
    }

    #[test]
    fn other_crates_are_written_at_warn_and_above_whatever_the_level() {
        let logger = Logger {
            level: LevelFilter::Trace,
            format: Format::Text,
        };
        let at = |level, target| {
            logger.enabled(&Metadata::builder().level(level).target(target).build())
        };
        for ours in ["plantstore", "plantstore::database::follow", "access"] {
            assert!(at(Level::Trace, ours), "{ours}");
        }
        for other in [
            "tokio_postgres::query",
            "postgres",
            "rustls::conn",
            "mio::poll",
            "plantstores",
        ] {
            assert!(
                !at(Level::Info, other) && !at(Level::Debug, other),
                "{other}"
            );
            assert!(at(Level::Warn, other) && at(Level::Error, other), "{other}");
        }
        let quiet = Logger {
            level: LevelFilter::Error,
            format: Format::Text,
        };
        let warn = Metadata::builder()
            .level(Level::Warn)
            .target("rustls")
            .build();
        assert!(!quiet.enabled(&warn), "never above the level asked for");
    }

    #[test]
    fn civil_from_days_knows_epochs_and_leap_years() {
        for (days, date) in [
            (0, (1970, 1, 1)),
            (59, (1970, 3, 1)),
            (365, (1971, 1, 1)),
            (11_016, (2000, 2, 29)),
            (11_017, (2000, 3, 1)),
            (19_782, (2024, 2, 29)),
            (47_540, (2100, 2, 28)), // 2100 is no leap year
            (47_541, (2100, 3, 1)),
            (2_932_896, (9999, 12, 31)),
        ] {
            assert_eq!(civil_from_days(days), date, "day {days}");
        }
    }

    #[test]
    fn the_timestamp_is_rfc_3339_utc_with_milliseconds() {
        let mut out = Vec::new();
        timestamp(&mut out, at(1_795_421_842, 123));
        assert_eq!(out, b"2026-11-23T08:17:22.123Z");
        out.clear();
        timestamp(&mut out, at(951_782_400 - 1, 5));
        assert_eq!(out, b"2000-02-28T23:59:59.005Z");
        out.clear();
        timestamp(&mut out, UNIX_EPOCH - Duration::from_secs(1));
        assert_eq!(out, b"1970-01-01T00:00:00.000Z", "a clock before 1970");
    }

    #[test]
    fn text_is_one_ascii_line_with_controls_non_ascii_and_backslash_escaped() {
        let text = line(Format::Text, at(0, 7), "a\nb\u{85}\\\"é\u{1b}[2J", None);
        assert_eq!(
            text,
            "1970-01-01T00:00:00.007Z WARN  [plantstore] a\\x0ab\\xc2\\x85\\x5c\"\\xc3\\xa9\\x1b[2J\n"
        );
    }

    #[test]
    fn json_is_one_object_a_line_that_parses_whatever_the_message() {
        let message = "quote \" backslash \\ newline \n nel \u{85} ls \u{2028} cactus \u{1F335}";
        let json = line(Format::Json, at(0, 0), message, None);
        assert!(json.is_ascii() && json.ends_with("}\n"), "{json}");
        assert_eq!(json.lines().count(), 1);
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["time"], "1970-01-01T00:00:00.000Z");
        assert_eq!(value["level"], "WARN");
        assert_eq!(value["target"], "plantstore");
        assert_eq!(value["message"], message);
        assert!(json.contains(r"\ud83c\udf35"), "UTF-16 surrogates: {json}");
    }

    #[test]
    fn json_access_lines_carry_the_fields_with_the_path_escaped() {
        let access = AccessLine {
            method: "GET",
            path: "/a\u{85}\"\\",
            status: 404,
            duration_us: 12,
            bytes: 151,
            peer: SocketAddr::from(([127, 0, 0, 1], 58192)),
        };
        let json = line(Format::Json, at(0, 0), &access.to_string(), Some(&access));
        assert!(json.is_ascii(), "{json}");
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["path"], "/a\u{85}\"\\");
        assert_eq!(value["method"], "GET");
        assert_eq!(value["status"], 404);
        assert_eq!(value["duration_us"], 12);
        assert_eq!(value["bytes"], 151);
        assert_eq!(value["peer"], "127.0.0.1:58192");
        let text = line(Format::Text, at(0, 0), &access.to_string(), None);
        assert!(
            text.ends_with("] GET /a\\xc2\\x85\"\\x5c 404 12us 151B 127.0.0.1:58192\n"),
            "{text}"
        );
    }
}
