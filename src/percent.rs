//! Percent-escapes (RFC 3986): decoding a query component or a part of a
//! URL, encoding a query component. A leaf: the API's query parameters
//! and the database URL's `sslrootcert` both decode through it, so the
//! two read an escape by one rule.
//!
//! An escape is `%` and exactly two hex digits. Anything else after a `%`
//! (one digit, a sign: `%+a` is not 0x0a) makes the text malformed, never
//! a byte: the caller refuses it.

/// Decodes `text`; `+` is a space when `plus_is_space` (a query
/// component, as HTML forms write it). `None` if an escape is malformed
/// or the result is not UTF-8.
pub(crate) fn decode(text: &str, plus_is_space: bool) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' if plus_is_space => out.push(b' '),
            b'%' => {
                out.push(escape_at(bytes, i)?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Whether every `%` in `text` starts a well-formed escape.
#[cfg(any(feature = "postgres", test))]
pub(crate) fn well_formed(text: &str) -> bool {
    let bytes = text.as_bytes();
    (0..bytes.len()).all(|i| bytes[i] != b'%' || escape_at(bytes, i).is_some())
}

/// The byte that the escape starting at `bytes[at]` (a `%`) stands for.
fn escape_at(bytes: &[u8], at: usize) -> Option<u8> {
    let high = hex_digit(*bytes.get(at + 1)?)?;
    let low = hex_digit(*bytes.get(at + 2)?)?;
    Some(high << 4 | low)
}

/// Encodes a query component: everything but RFC 3986's unreserved
/// characters.
pub(crate) fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 0xf)] as char);
        }
    }
    out
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The value of one hex digit (`u8::from_str_radix` would also take a
/// leading sign, which is how `%+a` once decoded as a line feed).
fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_escape_is_exactly_two_hex_digits() {
        assert_eq!(decode("a%20b%2Fc%2f", false).as_deref(), Some("a b/c/"));
        assert_eq!(decode("a+b", true).as_deref(), Some("a b"));
        assert_eq!(decode("a+b", false).as_deref(), Some("a+b"));
        // Regression: a sign is not a digit (`%+a` was a line feed).
        for bad in ["%+a", "%+0", "%-1", "% a", "%a", "%", "%g0", "%0g", "a%2"] {
            assert_eq!(decode(bad, true), None, "{bad}");
            assert!(!well_formed(bad), "{bad}");
        }
        assert_eq!(decode("%ff", true), None, "not UTF-8");
        assert!(well_formed("postgres://u:p%40ss@h/db?x=%2B"));
    }

    #[test]
    fn encode_round_trips_through_decode() {
        let text = "a b/ç+%&=~.-_";
        assert_eq!(decode(&encode(text), true).as_deref(), Some(text));
        assert_eq!(encode("a b"), "a%20b");
    }
}
