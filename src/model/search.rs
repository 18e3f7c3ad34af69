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
/// without allocating when `text` is ASCII.
pub fn contains_folded(text: &str, folded: &str) -> bool {
    if folded.is_empty() {
        return true;
    }
    if text.bytes().all(|b| b != 0 && b.is_ascii()) {
        // ASCII without NUL folds to ASCII, byte for byte: a folded
        // search text with anything else cannot be in it.
        let needle = folded.as_bytes();
        if !folded.is_ascii() || needle.len() > text.len() {
            return false;
        }
        return text.as_bytes().windows(needle.len()).any(|window| {
            window
                .iter()
                .zip(needle)
                .all(|(&b, &n)| b.to_ascii_lowercase() == n)
        });
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
