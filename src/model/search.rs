//! Search text folding: one rule for both stores.
//!
//! A search matches a plant whose name or tag contains the search text,
//! case-insensitively: both are folded by [`fold`] (Unicode lower-casing,
//! as `str::to_lowercase`, and NUL as U+FFFD, since PostgreSQL's `text`
//! cannot hold NUL) and the folded text must contain the folded search
//! text. The PostgreSQL store keeps the folded name and tag in columns
//! this function wrote, so its `LIKE` compares what the memory store
//! compares; `%`, `_` and `\` in a search are escaped there, so they are
//! taken literally.

/// Search text: 1 to this many bytes of UTF-8.
pub const MAX_SEARCH: usize = 256;

/// Folds text for searching.
pub fn fold(text: &str) -> String {
    let mut folded = text.to_lowercase();
    if folded.contains('\0') {
        folded = folded.replace('\0', "\u{FFFD}");
    }
    folded
}

/// Whether `fold(text)` contains `folded` (a search text already folded),
/// without allocating when `text` is ASCII (and, if the search text is
/// not, holds no NUL).
pub fn contains_folded(text: &str, folded: &str) -> bool {
    if folded.is_empty() {
        return true;
    }
    let (bytes, needle) = (text.as_bytes(), folded.as_bytes());
    if text.is_ascii() && folded.is_ascii() {
        // ASCII folds to ASCII byte for byte, but for NUL, which folds to
        // U+FFFD and so is in no ASCII search text.
        if needle.len() > bytes.len() {
            return false;
        }
        // Where the first byte matches, the rest is compared.
        let (first, rest) = (needle[0], &needle[1..]);
        let fold_byte = |b: u8| if b == 0 { 0xFF } else { b.to_ascii_lowercase() };
        let starts = bytes[..=bytes.len() - needle.len()].iter().enumerate();
        return starts
            .filter(|&(_, &b)| fold_byte(b) == first)
            .any(|(at, _)| {
                let after = &bytes[at + 1..at + needle.len()];
                after.iter().zip(rest).all(|(&b, &n)| fold_byte(b) == n)
            });
    }
    if text.is_ascii() && !bytes.contains(&0) {
        // It folds to ASCII: a search text with anything else is not in
        // it.
        return false;
    }
    fold(text).contains(folded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_is_unicode_lower_casing() {
        assert_eq!(fold("Ärger ΣΑΣ"), "ärger σας");
        assert_eq!(fold("a\0b"), "a\u{FFFD}b");
        // The Kelvin sign folds to an ASCII k.
        assert_eq!(fold("\u{212A}"), "k");
    }

    #[test]
    fn contains_folded_agrees_with_folding_first() {
        let texts = [
            "Monstera",
            "MONSTERA deliciosa",
            "Ärger",
            "a\0b",
            "",
            "k",
            "İstanbul",
            "50%_off",
        ];
        let searches = [
            "mon", "sterA", "ä", "ärg", "\u{FFFD}", "a", "k", "\u{212A}", "i̇", "%_", "x",
        ];
        for text in texts {
            for search in searches {
                let folded = fold(search);
                assert_eq!(
                    contains_folded(text, &folded),
                    fold(text).contains(&folded),
                    "{text:?} {search:?}"
                );
            }
        }
    }
}
