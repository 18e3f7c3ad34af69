//! The value of a `name` or `tag` field as validation needs it: its text
//! when it is a JSON string, or only that it was something else.
//!
//! Any other value is still read through to its end exactly as
//! `serde_json::Value` would read it (every nested key, string and number
//! decoded and checked, so a broken body gets the same error), but nothing
//! of it is kept: building a `Value` tree cost several kilobytes of binary
//! for an answer of "not a string".

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A field's value: a string's text, or anything else.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Text {
    /// A JSON string, decoded.
    String(String),
    /// A number, `true`, `false`, `null`, an array or an object.
    Other,
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Text, D::Error> {
        deserializer.deserialize_any(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Text, E> {
        Ok(Text::String(text.to_owned()))
    }
    fn visit_string<E: de::Error>(self, text: String) -> Result<Text, E> {
        Ok(Text::String(text))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Text, E> {
        Ok(Text::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Text, E> {
        Ok(Text::Other)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Text, E> {
        Ok(Text::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Text, E> {
        Ok(Text::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Text, E> {
        Ok(Text::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Text, A::Error> {
        while seq.next_element::<Text>()?.is_some() {}
        Ok(Text::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Text, A::Error> {
        while map.next_key::<Text>()?.is_some() {
            map.next_value::<Text>()?;
        }
        Ok(Text::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<Text, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    /// What `serde_json::Value` makes of the same text: its error, or
    /// whether it is a string.
    fn as_value(json: &str) -> Result<Text, String> {
        match serde_json::from_str::<serde_json::Value>(json) {
            Ok(serde_json::Value::String(s)) => Ok(Text::String(s)),
            Ok(_) => Ok(Text::Other),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn reads_as_value_reads() {
        for json in [
            r#""fern""#,
            r#""f\u00e9rn\n""#,
            "7",
            "-7.5e3",
            "true",
            "null",
            "[]",
            r#"[1, "two", {"three": [3]}]"#,
            r#"{"a": {"b": [null, false]}, "a": 1}"#,
            // Errors inside a value that is not a string.
            "1e400",
            "[1, 1e400]",
            r#"{"a": "\ud800"}"#,
            r#"{"\ud800": 1}"#,
            r#"["\x"]"#,
            "[1,]",
            r#"{"a" 1}"#,
            &"[".repeat(200),
            &format!("{}{}", "[".repeat(127), "]".repeat(127)),
        ] {
            assert_eq!(read(json), as_value(json), "{json}");
        }
    }
}
