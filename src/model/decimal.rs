//! Exact reading of a decimal number as an int64, the JSON Schema way.
//!
//! One reader for every integer the API takes: the `id` of a body, the id
//! in a path, `limit` and `after` in a query. The rule is the value, not
//! the spelling: the text is read exactly, digit by digit, never through a
//! float, and it is an int64 when its exact value is an integer within
//! int64. So `7`, `7.0`, `7e0`, `70e-1`, `0.7e1` and `-0` are all integers
//! (7, 7, 7, 7, 7, 0), `9223372036854775807.0` is `i64::MAX`, and
//! `2.0000000000000001` is not an integer however close to 2 it is.
//!
//! The grammar is JSON's number with leading zeros allowed: an optional
//! `-`, digits, optionally `.` and digits, optionally `e` or `E`, an
//! optional sign and digits. Nothing else: no `+` in front, no spaces, no
//! `.5` or `5.`, no hex, no `inf`.
//!
//! Cost is one pass over the text, whatever it holds: the exponent is read
//! saturating (`1e400` and `1e-99999999999999999999` are just out of range
//! or fractional), and only the at most 19 significant digits an int64 can
//! have are ever multiplied out. Nothing here allocates or can panic.
//! The common spelling, plain digits (`12345`, `-7`) of at most 18 of
//! them, takes a shorter road to the same value: every `POST /plants`
//! reads its `id` here.

/// Reads `text` as an exact int64 (see the module header for the rule);
/// `None` when it is not a number, not an integer, or outside int64.
pub fn int64_text(text: &str) -> Option<i64> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if let Some(value) = plain(unsigned) {
        return Some(if negative { -value } else { value });
    }
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (mantissa, None),
    };
    let fraction = fraction.map_or(Some(""), |f| digits(f))?;
    let exponent = exponent.map_or(Some(0), exponent_value)?;
    let magnitude = integer(digits(whole)?, fraction, exponent)?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// The value of `text` when it is 1 to 18 ASCII digits (below 10^18:
/// no overflow, either sign); `None` for anything else, which the general
/// reading then takes.
fn plain(text: &str) -> Option<i64> {
    if text.is_empty() || text.len() > 18 {
        return None;
    }
    text.bytes().try_fold(0i64, |value, b| {
        b.is_ascii_digit().then(|| value * 10 + i64::from(b - b'0'))
    })
}

/// `text` when it is one or more ASCII digits.
fn digits(text: &str) -> Option<&str> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())).then_some(text)
}

/// An exponent (optional sign, digits), saturated to the i64 range: past
/// that, every non-zero mantissa is out of range or fractional anyway.
fn exponent_value(text: &str) -> Option<i64> {
    let (negative, text) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let value = digits(text)?.bytes().fold(0i64, |value, b| {
        value.saturating_mul(10).saturating_add(i64::from(b - b'0'))
    });
    Some(if negative { -value } else { value })
}

/// The exact value of `whole.fraction × 10^exponent` when it is an integer
/// that fits a u64; `None` when it has a fractional part or is larger.
fn integer(whole: &str, fraction: &str, exponent: i64) -> Option<u64> {
    let all = || whole.bytes().chain(fraction.bytes());
    let count = whole.len() + fraction.len();
    let leading = all().take_while(|&b| b == b'0').count();
    if leading == count {
        return Some(0); // zero, whatever the exponent
    }
    let trailing = all().rev().take_while(|&b| b == b'0').count();
    let significant = count - leading - trailing;
    // The value is (the significant digits) × 10^scale, and those digits
    // do not end in 0, so a negative scale always leaves a fraction.
    let scale = i128::from(exponent) - fraction.len() as i128 + trailing as i128;
    if scale < 0 || significant as i128 + scale > 19 {
        return None; // fractional, or at least 10^19
    }
    let mut value = all()
        .skip(leading)
        .take(significant)
        .try_fold(0u64, |value, b| {
            value.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        })?;
    for _ in 0..scale {
        value = value.checked_mul(10)?;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integral_spellings_are_exact() {
        for (text, want) in [
            ("7", 7),
            ("007", 7),
            ("7.0", 7),
            ("7e0", 7),
            ("7E+0", 7),
            ("70e-1", 7),
            ("0.7e1", 7),
            ("700e-2", 7),
            ("0.00000000000000000000007e23", 7),
            ("1.000000000000000000000000e2", 100),
            ("-0", 0),
            ("-0.0e-5", 0),
            ("0e400", 0),
            ("0e-99999999999999999999999", 0),
            ("-12e3", -12_000),
            ("9223372036854775807", i64::MAX),
            ("9223372036854775807.0", i64::MAX),
            ("922337203685477580.7e1", i64::MAX),
            ("-9223372036854775808", i64::MIN),
            ("-9223372036854775808e0", i64::MIN),
            ("-0.9223372036854775808e19", i64::MIN),
            ("9007199254740993", (1 << 53) + 1),
            ("9007199254740993.0", (1 << 53) + 1),
            ("1e18", 1_000_000_000_000_000_000),
        ] {
            assert_eq!(int64_text(text), Some(want), "{text}");
        }
    }

    #[test]
    fn fractions_are_refused_however_small() {
        for text in [
            "7.5",
            "2.0000000000000001",
            "-9007199254740992.5",
            "0.99999999999999999",
            "1e-400",
            "-1e-400",
            "1e-99999999999999999999999",
            "70e-2",
            "9223372036854775806.5",
        ] {
            assert_eq!(int64_text(text), None, "{text}");
        }
    }

    #[test]
    fn out_of_range_is_refused() {
        for text in [
            "9223372036854775808",
            "9223372036854775808.0",
            "-9223372036854775809",
            "-9223372036854775808.5e0",
            "18446744073709551616",
            "1e19",
            "1e20",
            "1e400",
            "1e99999999999999999999999",
            "-1e400",
            "100000000000000000000e-1",
        ] {
            assert_eq!(int64_text(text), None, "{text}");
        }
    }

    #[test]
    fn only_the_number_grammar_is_read() {
        for text in [
            "", "-", "+7", " 7", "7 ", ".5", "5.", "-.5", "1e", "1e+", "1e-", "1e5.0", "1.2.3",
            "0x10", "inf", "NaN", "--1", "1-", "1e+-1", "7\0", "٣", "\"7\"",
        ] {
            assert_eq!(int64_text(text), None, "{text:?}");
        }
    }

    #[test]
    fn plain_digits_read_as_the_general_rule_reads_them() {
        for n in [
            0,
            1,
            7,
            42,
            999_999_999_999_999_999,
            1_000_000_000_000_000_000,
            i64::MAX,
        ] {
            for text in [
                n.to_string(),
                format!("-{n}"),
                format!("00{n}"),
                format!("{n}.0"),
            ] {
                let want = text.trim_end_matches(".0").parse::<i128>().ok();
                let want = want.and_then(|v| i64::try_from(v).ok());
                assert_eq!(int64_text(&text), want, "{text}");
            }
        }
        assert_eq!(int64_text("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(int64_text("000000000000000000007"), Some(7));
    }

    #[test]
    fn long_texts_are_read_in_one_pass() {
        // Ten thousand digits: exact, and no overflow in counting them.
        let one = format!("1.{}", "0".repeat(10_000));
        assert_eq!(int64_text(&one), Some(1));
        let almost = format!("1.{}1", "0".repeat(10_000));
        assert_eq!(int64_text(&almost), None);
        let shifted = format!("{}e-10000", "1".to_string() + &"0".repeat(10_000));
        assert_eq!(int64_text(&shifted), Some(1));
        let huge = "9".repeat(10_000);
        assert_eq!(int64_text(&huge), None);
        let tiny = format!("0.{}1e10000", "0".repeat(9_999));
        assert_eq!(int64_text(&tiny), Some(1));
        let exponent = format!("1e{}", "9".repeat(10_000));
        assert_eq!(int64_text(&exponent), None);
    }
}
