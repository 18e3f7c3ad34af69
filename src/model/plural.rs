//! Counts in English: "1 plant", "2 plants". A suffix, not a formatter:
//! the log lines keep their `format!` and cost the binary a comparison.

/// The `s` of a counted noun: `format!("{n} plant{}", plural(n))` reads
/// "1 plant", "0 plants", "2 plants".
pub fn plural(count: u64) -> &'static str {
    if count == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::plural;

    #[test]
    fn one_is_singular_every_other_count_plural() {
        let read = |n: u64| format!("{n} plant{}", plural(n));
        assert_eq!(read(0), "0 plants");
        assert_eq!(read(1), "1 plant");
        assert_eq!(read(2), "2 plants");
        assert_eq!(read(u64::MAX), format!("{} plants", u64::MAX));
    }
}
