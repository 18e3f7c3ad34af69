//! Search text folding: one rule for both stores.
//!
//! A search matches a plant whose name or tag contains the search text,
//! case-insensitively: both are folded by [`fold`] (Unicode lower-casing
//! character by character, as `char::to_lowercase`; the final sigma `ς`
//! as `σ`; NUL as U+FFFD, since PostgreSQL's `text` cannot hold NUL) and
//! the folded text must contain the folded search text. Character by
//! character, not as `str::to_lowercase`, whose Σ becomes ς at the end of
//! a word: then "ΑΣ" typed into a search box would not find "ΑΣΤΡΟ",
//! which contains it. The PostgreSQL store keeps the folded name and tag in columns
//! this function wrote, so its `LIKE` compares what the memory store
//! compares; `%`, `_` and `\` in a search are escaped there, so they are
//! taken literally.

/// Search text: 1 to this many bytes of UTF-8.
pub const MAX_SEARCH: usize = 256;

/// Folds text for searching.
pub fn fold(text: &str) -> String {
    let mut folded = String::with_capacity(text.len());
    for c in text.chars().flat_map(char::to_lowercase) {
        folded.push(match c {
            'ς' => 'σ',
            '\0' => '\u{FFFD}',
            c => c,
        });
    }
    folded
}

/// Whether `fold(text)` contains `folded` (a search text already folded),
/// without allocating when `text` is ASCII (and, if the search text is
/// not, holds no NUL).
pub fn contains_folded(text: &str, folded: &str) -> bool {
    contains_folded_bytes(text.as_bytes(), folded).unwrap_or_else(|| fold(text).contains(folded))
}

/// [`contains_folded`] for the bytes of a UTF-8 text, where they tell
/// without folding: `None` where they do not (text that is not ASCII, or
/// that holds NUL when the search text is not ASCII), and the caller
/// folds. A store scanning many plants skips the UTF-8 check this way.
pub fn contains_folded_bytes(text: &[u8], folded: &str) -> Option<bool> {
    let needle = folded.as_bytes();
    let Some((&first, rest)) = needle.split_first() else {
        return Some(true);
    };
    if !text.is_ascii() {
        return None;
    }
    if !folded.is_ascii() {
        // ASCII folds to ASCII, but for NUL, which folds to U+FFFD.
        return (!text.contains(&0)).then_some(false);
    }
    // Byte for byte, NUL matching nothing: it folds to U+FFFD, and no
    // folded text holds NUL. Where the first byte matches, the rest is
    // compared; a letter matches either case with one OR.
    if first == 0 || needle.len() > text.len() {
        return Some(false);
    }
    let fold = |b: u8| if b == 0 { 0xFF } else { b.to_ascii_lowercase() };
    let letter = first.is_ascii_lowercase();
    let mut starts = text[..=text.len() - needle.len()].iter().enumerate();
    let found = starts.any(|(at, &b)| {
        (if letter {
            b | 0x20 == first
        } else {
            fold(b) == first
        }) && text[at + 1..at + needle.len()]
            .iter()
            .zip(rest)
            .all(|(&b, &n)| fold(b) == n)
    });
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_is_unicode_lower_casing() {
        assert_eq!(fold("Ärger ΣΑΣ σας"), "ärger σασ σασ");
        // What a search box holds mid-word finds the whole word.
        assert!(fold("ΑΣΤΡΟ").contains(&fold("ΑΣ")));
        assert!(contains_folded("ΟΔΟΣ", &fold("Σ")));
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
                let want = fold(text).contains(&folded);
                assert_eq!(contains_folded(text, &folded), want, "{text:?} {search:?}");
                let bytes = contains_folded_bytes(text.as_bytes(), &folded);
                assert!(bytes.is_none_or(|b| b == want), "{text:?} {search:?}");
                assert_eq!(
                    bytes.is_none(),
                    !text.is_ascii() || (!folded.is_ascii() && text.contains('\0'))
                );
            }
        }
    }
}
