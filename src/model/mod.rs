//! The plant types and the validation of request bodies into them.
//!
//! Validation follows JSON Schema (2020-12) meaning, as OpenAPI 3.1 does:
//! `id` is an integer (an integral number such as `7.0` counts, `7.5` does
//! not) within int64; `name` is a string; `tag`, when present, is a string
//! (`null` is refused). Unknown fields are accepted and ignored. Duplicate
//! keys at the top level are refused, because which one "wins" would be a
//! guess. `name` and `tag` are at most `TextLimits` long, counted in
//! characters (Unicode code points) as JSON Schema's `maxLength` counts.
//!
//! The body is parsed once, by a serde visitor that records which known
//! fields it saw (and whether one came twice) and skips everything else
//! without building it; the messages for wrong types are ours, so they name
//! the field. The `id` is kept as its raw JSON text and read exactly by
//! [`int64_text`] (the `decimal` module), the reader that paths and queries
//! use too: a float would round `2.0000000000000001` to an id of 2.

use std::borrow::Cow;
use std::fmt;

use serde::Serialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

mod change;
mod decimal;
mod page;
mod plural;
mod refusal;
mod reply;
mod search;
mod settings;
mod text;

pub use change::{ChangeHook, ChangeKind, ChangeLog, Edit, PlantChange};
pub use decimal::int64_text;
pub use page::{Budget, CURSOR_NAME, NameBound, Order, Page, Position, Query, name_hash};
pub use plural::plural;
pub use refusal::{NotDone, Refusal, Unavailable};
pub use reply::Reply;
pub use search::{MAX_SEARCH, contains_folded, contains_folded_bytes, fold};
pub use settings::{Capacity, Durability, SyncMode};
use text::Text;

/// A plant as stored and as answered by `POST /plants`: `name` and an
/// optional `tag`, never an `id` (the seed's Plant has none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plant {
    /// Name of the plant.
    pub name: String,
    /// Tag that specifies the type of the plant; omitted when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// The body of `POST /plants`: a Plant plus its client-chosen `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPlant {
    /// Identification number of the plant.
    pub id: i64,
    /// The plant itself.
    pub plant: Plant,
}

/// A stored plant and its version: the number of the change that made it
/// what it is, higher than any the store gave before, so never given
/// twice within the store's lineage (see docs/storage.md, "Versions").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedPlant {
    /// The plant.
    pub plant: Plant,
    /// Its version.
    pub version: u64,
}

/// A stored plant with its id, as listed and fetched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlantRecord<'a> {
    /// Identification number of the plant.
    pub id: i64,
    /// Name of the plant.
    pub name: &'a str,
    /// Tag of the plant; omitted when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<&'a str>,
}

impl<'a> PlantRecord<'a> {
    /// Pairs an id with a borrowed plant for serialisation.
    pub fn new(id: i64, plant: &'a Plant) -> Self {
        PlantRecord {
            id,
            name: &plant.name,
            tag: plant.tag.as_deref(),
        }
    }

    /// The length of this record as `serde_json` writes it (compact), found
    /// without writing it: a page's end is settled before it is encoded.
    pub fn json_len(&self) -> usize {
        let digits = self
            .id
            .unsigned_abs()
            .checked_ilog10()
            .map_or(1, |d| d as usize + 1);
        let sign = usize::from(self.id < 0);
        // {"id":N,"name":"..."} and ,"tag":"..."
        let tag = self.tag.map_or(0, |tag| 9 + escaped_len(tag));
        17 + sign + digits + escaped_len(self.name) + tag
    }
}

/// The length of `text` as a JSON string's contents, escaped as `serde_json`
/// escapes: `"` and `\` and the five short control escapes take two bytes,
/// other control characters six (`\u00XX`), everything else itself.
pub fn escaped_len(text: &str) -> usize {
    text.bytes()
        .map(|b| match b {
            b'"' | b'\\' | 0x08 | 0x09 | 0x0A | 0x0C | 0x0D => 2,
            0x00..=0x1F => 6,
            _ => 1,
        })
        .sum()
}

/// The most bytes a name and a tag together can ever take, whatever the
/// flags: `--max-body` is at most this, and a plant's texts fit in its
/// body. The journal's format leans on it to bound a record's length.
pub const MAX_TEXT_BYTES: usize = 16 << 20;

/// The longest `name` and `tag` accepted, in characters (Unicode code
/// points, as JSON Schema's `maxLength` counts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextLimits {
    /// Longest name.
    pub name: usize,
    /// Longest tag.
    pub tag: usize,
}

impl Default for TextLimits {
    /// 256 characters of name, 64 of tag: ample for a plant, and a page of
    /// 100 such plants stays well under the listing's byte cap.
    fn default() -> TextLimits {
        TextLimits { name: 256, tag: 64 }
    }
}

/// Why a body is not a valid NewPlant or Plant. Each message names the
/// offending field or the syntax problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvalidBody {
    /// Not JSON at all (the text says where, as serde_json reports it).
    Syntax(String),
    /// JSON, but not an object.
    NotObject,
    /// The same top-level key appears twice.
    DuplicateKey(String),
    /// A required field is absent.
    Missing(&'static str),
    /// A field is present with a value of the wrong type or range.
    WrongType(&'static str, &'static str),
    /// A string field is longer than its limit (in characters).
    TooLong(&'static str, usize),
}

impl fmt::Display for InvalidBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidBody::Syntax(detail) => write!(f, "request body is not valid JSON: {detail}"),
            InvalidBody::NotObject => f.write_str("request body must be a JSON object"),
            InvalidBody::DuplicateKey(key) => write!(f, "duplicate key {key:?} in request body"),
            InvalidBody::Missing(field) => write!(f, "field {field:?} is required"),
            InvalidBody::WrongType(field, want) => write!(f, "field {field:?} must be {want}"),
            InvalidBody::TooLong(field, most) => {
                write!(f, "field {field:?} must be at most {most} characters long")
            }
        }
    }
}

impl std::error::Error for InvalidBody {}

impl NewPlant {
    /// Parses and validates a `POST /plants` body.
    pub fn parse(body: &[u8], limits: TextLimits) -> Result<NewPlant, InvalidBody> {
        let fields = Fields::parse(body)?;
        let id = match &fields.id {
            None => return Err(InvalidBody::Missing("id")),
            // The raw text, read exactly; a string or `null` fails the
            // number grammar.
            Some(value) => {
                int64_text(value.get()).ok_or(InvalidBody::WrongType("id", "an int64 integer"))?
            }
        };
        Ok(NewPlant {
            id,
            plant: fields.into_plant(limits)?,
        })
    }
}

impl Plant {
    /// Parses and validates a Plant body (`PUT /plants/{id}`); an `id`
    /// field, if any, is an unknown field here and ignored.
    pub fn parse(body: &[u8], limits: TextLimits) -> Result<Plant, InvalidBody> {
        Fields::parse(body)?.into_plant(limits)
    }

    /// The plant as `serde_json::to_vec` writes it (every create answers
    /// it): texts that need no escape, the common case, are copied as they
    /// are into one allocation of the final size; any other plant is
    /// written by serde_json.
    pub fn to_json(&self) -> Vec<u8> {
        let plain = |text: &str| !text.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\');
        let tag = self.tag.as_deref();
        if !plain(&self.name) || !tag.is_none_or(plain) {
            return serde_json::to_vec(self).unwrap_or_default();
        }
        // {"name":"..."} and ,"tag":"..."
        let len = 11 + self.name.len() + tag.map_or(0, |tag| 9 + tag.len());
        let mut json = Vec::with_capacity(len);
        json.extend_from_slice(b"{\"name\":\"");
        json.extend_from_slice(self.name.as_bytes());
        if let Some(tag) = tag {
            json.extend_from_slice(b"\",\"tag\":\"");
            json.extend_from_slice(tag.as_bytes());
        }
        json.extend_from_slice(b"\"}");
        json
    }
}

/// The known top-level fields of a body: `name` and `tag` as far as
/// [`Text`] reads them; the `id` as its text, borrowed from the body, so
/// that no digit of it is lost.
#[derive(Default)]
struct Fields<'de> {
    id: Option<&'de RawValue>,
    name: Option<Text>,
    tag: Option<Text>,
    duplicate: Option<String>,
}

impl<'de> Fields<'de> {
    fn parse(body: &'de [u8]) -> Result<Fields<'de>, InvalidBody> {
        // JSON text is UTF-8. serde_json checks the strings it decodes, but
        // not those it skips (values of unknown fields), so check it all.
        let body = std::str::from_utf8(body).map_err(|e| {
            InvalidBody::Syntax(format!("invalid UTF-8 at byte {}", e.valid_up_to()))
        })?;
        let mut de = serde_json::Deserializer::from_str(body);
        let parsed = de.deserialize_any(FieldsVisitor);
        let fields = match parsed {
            Ok(Some(fields)) => fields,
            Ok(None) => {
                de.end().map_err(|e| InvalidBody::Syntax(e.to_string()))?;
                return Err(InvalidBody::NotObject);
            }
            Err(e) => return Err(InvalidBody::Syntax(e.to_string())),
        };
        de.end().map_err(|e| InvalidBody::Syntax(e.to_string()))?;
        if let Some(key) = fields.duplicate {
            return Err(InvalidBody::DuplicateKey(key));
        }
        Ok(fields)
    }

    fn into_plant(self, limits: TextLimits) -> Result<Plant, InvalidBody> {
        let name = match self.name {
            None => return Err(InvalidBody::Missing("name")),
            Some(Text::String(s)) => within("name", s, limits.name)?,
            Some(_) => return Err(InvalidBody::WrongType("name", "a string")),
        };
        let tag = match self.tag {
            None => None,
            Some(Text::String(s)) => Some(within("tag", s, limits.tag)?),
            Some(_) => return Err(InvalidBody::WrongType("tag", "a string when present")),
        };
        Ok(Plant { name, tag })
    }
}

/// `text` if it has at most `most` characters (Unicode code points).
fn within(field: &'static str, text: String, most: usize) -> Result<String, InvalidBody> {
    // A character takes at least one byte: short texts need no count.
    if text.len() <= most || text.chars().count() <= most {
        Ok(text)
    } else {
        Err(InvalidBody::TooLong(field, most))
    }
}

/// An object key: borrowed from the body when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(key)))
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key.to_owned())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Visits any JSON value: an object yields `Some(Fields)`, anything else
/// `None` (after consuming it, so trailing garbage is still reported).
struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Option<Fields<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Fields::default();
        // Every key, borrowed from the body unless it had escapes; checked
        // for duplicates once the object has been read (sorting, so that a
        // body of many keys costs n log n, not n^2, and nothing is hashed).
        let mut keys: Vec<Cow<'de, str>> = Vec::new();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            match &*key {
                "id" if fields.id.is_none() => fields.id = Some(map.next_value()?),
                "name" if fields.name.is_none() => fields.name = Some(map.next_value()?),
                "tag" if fields.tag.is_none() => fields.tag = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            keys.push(key);
        }
        // Parsing went on past a duplicate, so that a syntax error later
        // in the body is still the error reported.
        keys.sort_unstable();
        fields.duplicate = keys
            .windows(2)
            .find(|pair| pair[0] == pair[1])
            .map(|pair| pair[0].to_string());
        Ok(Some(fields))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: TextLimits = TextLimits { name: 256, tag: 64 };

    fn id(text: &str) -> Result<i64, InvalidBody> {
        NewPlant::parse(
            format!(r#"{{"id": {text}, "name": "n"}}"#).as_bytes(),
            LIMITS,
        )
        .map(|p| p.id)
    }

    /// Every ASCII character in one text.
    fn every_ascii() -> String {
        (0u8..0x80).map(char::from).collect()
    }

    /// Names and tags that take each of JSON's roads: none escaped, the
    /// short escapes, multibyte characters, controls, and characters
    /// JSON leaves as they are though JavaScript once did not.
    fn texts(every_ascii: &str) -> [&str; 6] {
        [
            "",
            "plant 7",
            "\"\\/",
            "é漢🌱",
            every_ascii,
            "\u{7f}\u{80}\u{2028}",
        ]
    }

    #[test]
    fn a_records_length_is_what_serde_json_writes() {
        let every_ascii = every_ascii();
        let texts = texts(&every_ascii);
        for id in [0, 7, 10, -1, -10, 99, 100, i64::MAX, i64::MIN] {
            for name in texts {
                for tag in [None, Some(""), Some("t"), Some(every_ascii.as_str())] {
                    let record = PlantRecord { id, name, tag };
                    let written = serde_json::to_vec(&record).unwrap().len();
                    assert_eq!(record.json_len(), written, "{id} {name:?} {tag:?}");
                }
            }
        }
    }

    #[test]
    fn a_plants_json_is_what_serde_json_writes() {
        let every_ascii = every_ascii();
        let texts = texts(&every_ascii);
        for name in texts {
            for tag in [None, Some(""), Some("t"), Some(every_ascii.as_str())] {
                let plant = Plant {
                    name: name.to_owned(),
                    tag: tag.map(str::to_owned),
                };
                let json = plant.to_json();
                assert_eq!(
                    json,
                    serde_json::to_vec(&plant).unwrap(),
                    "{name:?} {tag:?}"
                );
            }
        }
    }

    #[test]
    fn ids_follow_json_schema_integer_meaning() {
        assert_eq!(id("7"), Ok(7));
        assert_eq!(id("7.0"), Ok(7));
        assert_eq!(id("-7e0"), Ok(-7));
        assert_eq!(id("1.5e1"), Ok(15));
        assert_eq!(id("9223372036854775807"), Ok(i64::MAX));
        assert_eq!(id("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(id("9007199254740992.0"), Ok(1 << 53));
        assert_eq!(id("9007199254740994.0"), Ok((1 << 53) + 2));
        assert_eq!(id("9223372036854775807.0"), Ok(i64::MAX));
        assert_eq!(id("-9223372036854775808e0"), Ok(i64::MIN));
        // The exact value, not serde_json's f64 of it (99000000003999.98):
        // the fuzz regression fuzz/regressions/validation/crash-f23cb206...
        let long = format!("99000000004000.{}", "0".repeat(70));
        assert_eq!(id(&long), Ok(99_000_000_004_000));
        assert!(id(&format!("{long}1")).is_err());
        for bad in [
            "7.5",
            "9223372036854775808",
            "-9223372036854775809",
            "9223372036854775808.0",
            "1e19",
            "\"7\"",
            "true",
            "null",
            "[7]",
            "{\"a\": 7}",
        ] {
            assert!(id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ids_that_a_float_would_round_are_refused() {
        // Read through an f64, each of these became an integer: 2, -2^53,
        // 0 and 1. Their exact values are not integers.
        for bad in [
            "2.0000000000000001",
            "-9007199254740992.5",
            "1e-400",
            "0.99999999999999999",
        ] {
            assert_eq!(
                id(bad),
                Err(InvalidBody::WrongType("id", "an int64 integer")),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_id_text_is_read_without_the_whitespace_around_it() {
        let body = "{\"id\" :\n\t 70e-1 \r\n, \"name\": \"n\"}";
        assert_eq!(
            NewPlant::parse(body.as_bytes(), LIMITS).map(|p| p.id),
            Ok(7)
        );
    }

    #[test]
    fn plant_ignores_an_id_and_unknown_fields() {
        let plant = Plant::parse(
            br#"{"id": "x", "name": "a", "tag": "b", "more": [1]}"#,
            LIMITS,
        )
        .unwrap();
        assert_eq!(
            plant,
            Plant {
                name: "a".into(),
                tag: Some("b".into())
            }
        );
    }

    #[test]
    fn invalid_utf8_is_refused_even_where_skipped() {
        // Found by the validation fuzz target: bytes inside an unknown
        // field's value were skipped without a UTF-8 check.
        let body = b"{\"name\": \"a\", \"more\": [0, {\"\xbf\xbf\": null}]}";
        assert!(matches!(
            Plant::parse(body, LIMITS),
            Err(InvalidBody::Syntax(_))
        ));
        assert!(matches!(
            NewPlant::parse(b"{\"id\": 1, \"name\": \"a\", \"x\": \"\xff\"}", LIMITS),
            Err(InvalidBody::Syntax(_))
        ));
    }

    #[test]
    fn duplicates_are_found_among_unknown_and_escaped_keys() {
        for body in [
            r#"{"name": "a", "x": 1, "y": 2, "x": 3}"#,
            r#"{"name": "a", "t\u0061g": "b", "tag": "c"}"#,
        ] {
            assert!(
                matches!(
                    Plant::parse(body.as_bytes(), LIMITS),
                    Err(InvalidBody::DuplicateKey(_))
                ),
                "{body}"
            );
        }
        assert!(Plant::parse(br#"{"name": "a", "x": 1, "y": 2}"#, LIMITS).is_ok());
    }

    #[test]
    fn duplicate_keys_are_reported_after_syntax() {
        assert_eq!(
            Plant::parse(br#"{"name": "a", "name": "b"}"#, LIMITS),
            Err(InvalidBody::DuplicateKey("name".into()))
        );
        assert!(matches!(
            Plant::parse(br#"{"name": "a", "name": "b"} x"#, LIMITS),
            Err(InvalidBody::Syntax(_))
        ));
    }

    #[test]
    fn lengths_are_counted_in_code_points() {
        let body = |name: &str, tag: &str| format!(r#"{{"name": "{name}", "tag": "{tag}"}}"#);
        let cactus = "\u{1F335}"; // four bytes of UTF-8, one character
        let longest = body(&cactus.repeat(256), &cactus.repeat(64));
        let plant = Plant::parse(longest.as_bytes(), LIMITS).unwrap();
        assert_eq!(plant.name.chars().count(), 256);
        // An escaped surrogate pair is one character too.
        let escaped = body(&r"\ud83c\udf35".repeat(256), "t");
        assert!(Plant::parse(escaped.as_bytes(), LIMITS).is_ok());
        assert_eq!(
            Plant::parse(body(&"e".repeat(257), "t").as_bytes(), LIMITS),
            Err(InvalidBody::TooLong("name", 256))
        );
        assert_eq!(
            NewPlant::parse(
                format!(
                    r#"{{"id": 1, "name": "n", "tag": "{}"}}"#,
                    cactus.repeat(65)
                )
                .as_bytes(),
                LIMITS
            ),
            Err(InvalidBody::TooLong("tag", 64))
        );
        let message = InvalidBody::TooLong("name", 256).to_string();
        assert_eq!(
            message,
            r#"field "name" must be at most 256 characters long"#
        );
    }
}
