//! When a certificate is valid, read from its DER (`notBefore`,
//! `notAfter`), and what a client will think of it now: the start-up and
//! reload warnings and the expiry gauge of `/metrics`.
//!
//! A file of its own, apart from rustls: a few lines of DER and calendar
//! arithmetic instead of an X.509 parser, compiled in every build (in a
//! build without TLS nothing reaches it, and the linker leaves it out).

/// When a certificate is valid: `notBefore` and `notAfter`, in Unix
/// seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
}

/// The time now, in Unix seconds (0 for a clock before 1970): the one
/// clock certificates are weighed against, by the local CA, ACME and the
/// warnings.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Days before expiry from which start-up and reloads warn.
const EXPIRY_WARNING_DAYS: i64 = 14;

impl Validity {
    /// The validity of a DER certificate; `None` if it cannot be read
    /// (rustls has accepted the certificate by then: this only serves the
    /// warning and the gauge).
    pub fn of(der: &[u8]) -> Option<Validity> {
        // Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version
        // (optional), serialNumber, signature, issuer, validity, ... } }
        let (_, certificate, _) = tlv(der)?;
        let (_, mut tbs, _) = tlv(certificate)?;
        let (tag, _, rest) = tlv(tbs)?;
        if tag == 0xA0 {
            tbs = rest;
        }
        for _ in 0..3 {
            tbs = tlv(tbs)?.2; // serial number, signature algorithm, issuer
        }
        let (_, validity, _) = tlv(tbs)?;
        let (tag, before, rest) = tlv(validity)?;
        let not_before = time(tag, before)?;
        let (tag, after, _) = tlv(rest)?;
        Some(Validity {
            not_before,
            not_after: time(tag, after)?,
        })
    }

    /// A Unix time as `YYYY-MM-DD HH:MM:SS UTC`, for the log.
    pub fn moment(unix: i64) -> String {
        let second = unix.rem_euclid(86_400);
        format!(
            "{} {:02}:{:02}:{:02} UTC",
            date(unix),
            second / 3600,
            second / 60 % 60,
            second % 60
        )
    }

    /// What a client will think of the certificate at `now` (Unix
    /// seconds), when it is worth a warning.
    pub fn warning(&self, now: i64) -> Option<String> {
        let days = |s: i64| s.div_euclid(86_400);
        if now < self.not_before {
            Some(format!(
                "the certificate is not valid yet (from {}); clients will refuse it until then",
                date(self.not_before)
            ))
        } else if now >= self.not_after {
            Some(format!(
                "the certificate expired on {}; clients will refuse it",
                date(self.not_after)
            ))
        } else if days(self.not_after - now) < EXPIRY_WARNING_DAYS {
            Some(format!(
                "the certificate expires on {} (in {} day{}); renew it and reload (SIGHUP)",
                date(self.not_after),
                days(self.not_after - now),
                crate::model::plural(days(self.not_after - now) as u64)
            ))
        } else {
            None
        }
    }
}

/// One DER element at the start of `der`: its tag, its contents, and what
/// follows it.
pub fn tlv(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7F);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, after) = rest.split_at(count);
        rest = after;
        bytes.iter().fold(0usize, |n, &b| (n << 8) | usize::from(b))
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// A UTCTime (0x17, `YYMMDDHHMMSSZ`, years 1950-2049) or GeneralizedTime
/// (0x18, `YYYYMMDDHHMMSSZ`), in Unix seconds.
fn time(tag: u8, text: &[u8]) -> Option<i64> {
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.iter().try_fold(0i64, |n, &b| {
            b.is_ascii_digit().then(|| n * 10 + i64::from(b - b'0'))
        })
    };
    let (year, at) = match (tag, text.len()) {
        (0x17, 13) => {
            let yy = digits(0..2)?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, 2)
        }
        (0x18, 15) => (digits(0..4)?, 4),
        _ => return None,
    };
    if text.last() != Some(&b'Z') {
        return None;
    }
    let (month, day) = (digits(at..at + 2)?, digits(at + 2..at + 4)?);
    let (hour, minute, second) = (
        digits(at + 4..at + 6)?,
        digits(at + 6..at + 8)?,
        digits(at + 8..at + 10)?,
    );
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// A Unix time as `YYYY-MM-DD`.
pub fn date(unix: i64) -> String {
    let days = unix.div_euclid(86_400) + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_convert_both_ways() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(951_782_400), "2000-02-29");
        assert_eq!(date(4_102_444_800), "2100-01-01");
    }

    #[test]
    fn both_time_forms_read_and_bad_ones_do_not() {
        assert_eq!(time(0x17, b"200101000000Z"), Some(1_577_836_800));
        assert_eq!(time(0x17, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(time(0x17, b"500101000000Z"), Some(-631_152_000));
        assert_eq!(time(0x18, b"20500101000000Z"), Some(2_524_608_000));
        for (tag, bad) in [
            (0x17, &b"2001010000Z"[..]),
            (0x17, b"200101000000+"),
            (0x17, b"201301000000Z"),
            (0x18, b"200101000000Z"),
            (0x05, b"200101000000Z"),
        ] {
            assert_eq!(time(tag, bad), None, "{bad:?}");
        }
    }

    #[test]
    fn truncated_or_hostile_der_reads_as_none() {
        assert_eq!(Validity::of(&[]), None);
        assert_eq!(Validity::of(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(Validity::of(&[0x30, 0x03, 0x30, 0x01]), None);
        assert_eq!(Validity::of(&[0x30, 0x80, 0x00]), None);
    }

    #[test]
    fn warnings_say_what_a_client_will_think() {
        let v = Validity {
            not_before: 1_000 * 86_400,
            not_after: 2_000 * 86_400,
        };
        assert!(v.warning(999 * 86_400).unwrap().contains("not valid yet"));
        assert_eq!(v.warning(1_500 * 86_400), None);
        assert!(v.warning(1_990 * 86_400).unwrap().contains("in 10 days"));
        assert!(
            v.warning(2_000 * 86_400)
                .unwrap()
                .contains("expired on 1975-06-24")
        );
    }
}
