//! The `Date` header of every answer (RFC 9110 §6.6.1: an origin server
//! with a clock must send one), as IMF-fixdate:
//! `Date: Sun, 06 Nov 1994 08:49:37 GMT`.
//!
//! Each event loop keeps the line in a thread-local, made again only when
//! its second has passed: `tick`, once per turn of the loop, compares one
//! `Instant` while the second lasts, and reads the wall clock and formats
//! the line at most once a second, never per request. `write` copies the
//! line into an answer's head. A thread that never ticks (the replay
//! harness, unit tests of the protocol) writes none.
//!
//! A board without a real-time clock starts in 1970 until NTP sets it:
//! while the clock is before [`CLOCK_FLOOR`] (the floor the local CA signs
//! nothing before), no `Date` is sent, as the RFC asks of a server without
//! a reliable clock, and the log says so once. The build's date is no
//! floor: builds are reproducible.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::os::CLOCK_FLOOR;

/// `Date: ` + 29 bytes of IMF-fixdate + CRLF.
const LINE: usize = 37;

/// One loop's line and when it next changes.
struct Clock {
    line: [u8; LINE],
    /// 0 while there is none to send.
    len: usize,
    /// When the second of `line` ends; `None` before the first tick.
    until: Option<Instant>,
}

thread_local! {
    static CLOCK: RefCell<Clock> = const {
        RefCell::new(Clock { line: [0; LINE], len: 0, until: None })
    };
}

/// Whether the clock's being before the floor has been logged.
static SAID: AtomicBool = AtomicBool::new(false);

/// Brings this thread's line up to `now` (the loop's time of this turn).
pub(super) fn tick(now: Instant) {
    CLOCK.with_borrow_mut(|clock| {
        if clock.until.is_some_and(|until| now < until) {
            return;
        }
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        // The rest of this second of the wall clock.
        let rest = Duration::from_secs(1) - Duration::from_nanos(since.subsec_nanos().into());
        clock.until = Some(now + rest);
        match line(since.as_secs()) {
            Some(line) => {
                clock.line = line;
                clock.len = LINE;
            }
            None => {
                clock.len = 0;
                if !SAID.swap(true, Relaxed) {
                    log::warn!(
                        "the clock is before 2026 (not yet set by NTP?): answers carry no Date header until it is"
                    );
                }
            }
        }
    });
}

/// Appends this thread's `Date` line, if it has one, to a head.
pub(super) fn write(out: &mut Vec<u8>) {
    CLOCK.with_borrow(|clock| out.extend_from_slice(&clock.line[..clock.len]));
}

/// The header line for `secs` since the epoch; `None` before the floor.
fn line(secs: u64) -> Option<[u8; LINE]> {
    if secs < CLOCK_FLOOR {
        return None;
    }
    let mut line = [0; LINE];
    line[..6].copy_from_slice(b"Date: ");
    line[6..35].copy_from_slice(&imf_fixdate(secs));
    line[35..].copy_from_slice(b"\r\n");
    Some(line)
}

/// `secs` since the epoch as IMF-fixdate (years up to 9999).
fn imf_fixdate(secs: u64) -> [u8; 29] {
    const DAYS: &[u8; 21] = b"ThuFriSatSunMonTueWed";
    const MONTHS: &[u8; 36] = b"JanFebMarAprMayJunJulAugSepOctNovDec";
    let days = secs / 86_400;
    let of_day = secs % 86_400;
    let (year, month, day) = crate::logging::civil_from_days(days);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    let weekday = (days % 7) as usize * 3;
    out[..3].copy_from_slice(&DAYS[weekday..weekday + 3]);
    let month = (month as usize - 1) * 3;
    out[8..11].copy_from_slice(&MONTHS[month..month + 3]);
    for (at, width, n) in [
        (5, 2, day),
        (12, 4, year),
        (17, 2, of_day / 3600),
        (20, 2, of_day / 60 % 60),
        (23, 2, of_day % 60),
    ] {
        let mut n = n;
        for digit in out[at..at + width].iter_mut().rev() {
            *digit = b'0' + (n % 10) as u8;
            n /= 10;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(secs: u64) -> String {
        String::from_utf8(imf_fixdate(secs).to_vec()).unwrap()
    }

    #[test]
    fn dates_are_imf_fixdate() {
        // RFC 9110's own example, and days around leap years and ends of
        // months and years.
        assert_eq!(text(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(text(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(text(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(text(1_767_225_599), "Wed, 31 Dec 2025 23:59:59 GMT");
        assert_eq!(text(1_796_083_200), "Tue, 01 Dec 2026 00:00:00 GMT");
        assert_eq!(text(3_981_398_399), "Wed, 29 Feb 2096 23:59:59 GMT");
        assert_eq!(text(4_107_542_400), "Mon, 01 Mar 2100 00:00:00 GMT");
    }

    #[test]
    fn a_clock_before_the_floor_sends_no_date() {
        assert_eq!(line(0), None);
        assert_eq!(line(CLOCK_FLOOR - 1), None);
        let line = line(CLOCK_FLOOR).unwrap();
        assert_eq!(&line[..], b"Date: Thu, 01 Jan 2026 00:00:00 GMT\r\n");
    }

    #[test]
    fn a_loop_formats_once_a_second_and_writes_its_line() {
        let mut out = Vec::new();
        write(&mut out);
        assert!(out.is_empty(), "a thread that never ticked writes none");
        let now = Instant::now();
        tick(now);
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        if secs < CLOCK_FLOOR {
            // A host whose clock is not set: no line, as on such a board.
            write(&mut out);
            assert!(out.is_empty(), "no Date from a clock before the floor");
            return;
        }
        let until = CLOCK.with_borrow(|c| c.until).unwrap();
        assert!(until > now && until <= now + Duration::from_secs(1));
        // Within the second the line is kept as it is: marked, it stays.
        CLOCK.with_borrow_mut(|c| c.line[6] = b'X');
        tick(until - Duration::from_nanos(1));
        write(&mut out);
        assert_eq!(out[6], b'X');
        assert!(out.starts_with(b"Date: ") && out.ends_with(b" GMT\r\n"));
        // Once it has passed, the clock is read again.
        tick(until);
        out.clear();
        write(&mut out);
        assert_ne!(out[6], b'X');
    }
}
