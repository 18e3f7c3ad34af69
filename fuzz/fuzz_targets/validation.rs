//! Body validation fed arbitrary bytes, against the JSON Schema that the
//! server itself publishes in `/openapi.json`.
//!
//! The oracle is the `jsonschema` crate evaluating the `NewPlant` and
//! `Plant` schemas of the embedded OpenAPI document, plus the three rules
//! the schema cannot express and the module documents: int64 range for
//! `format: int64`, the id's exact value (read from its text, not from the
//! f64 serde_json rounds it to; the schema check is given that value) an
//! integer, and duplicate top-level keys refused. Validation must accept
//! exactly what the oracle accepts, and keep exactly the values sent. It
//! runs with the default name and tag limits, which are the `maxLength`
//! values the file declares.

#![no_main]

use std::collections::HashSet;
use std::sync::LazyLock;

use jsonschema::Validator;
use libfuzzer_sys::fuzz_target;
use plantstore::model::{NewPlant, Plant, TextLimits};
use serde_json::Value;
use serde_json::value::RawValue;

const OPENAPI: &str = include_str!("../../src/api/openapi.json");

static SCHEMAS: LazyLock<(Validator, Validator)> = LazyLock::new(|| {
    let document: Value = serde_json::from_str(OPENAPI).expect("openapi.json is JSON");
    let schema = |name: &str| {
        let mut root = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$ref": format!("#/components/schemas/{name}"),
        });
        root["components"] = document["components"].clone();
        jsonschema::draft202012::new(&root).expect("the schema compiles")
    };
    (schema("NewPlant"), schema("Plant"))
});

fuzz_target!(|data: &[u8]| {
    let (new_plant, plant) = &*SCHEMAS;
    // serde_json (with `raw_value`, which the server's build turns on)
    // reads an object whose first key is its private RawValue token as
    // the JSON text of that key's value, not as an object: the oracle
    // would judge another document (or refuse valid JSON). The server's
    // parser reads it as the object it is; this oracle cannot judge it.
    if has_raw_value_token(data) {
        return;
    }
    let value: Option<Value> = match serde_json::from_slice(data) {
        Ok(value) => Some(value),
        // Valid JSON (a number's size is not limited by the grammar) that
        // the oracle cannot hold as an f64: it cannot judge this input.
        Err(e) if e.to_string().starts_with("number out of range") => return,
        Err(_) => None,
    };
    let duplicates = value.is_some() && has_duplicate_top_level_key(data);

    // The schema sees the id as the exact integer its text is: serde_json
    // reads a long number's f64 with rounding (99000000004000.000…0 as
    // 99000000003999.98), which would make an integral id look fractional.
    let expected = value.as_ref().is_some_and(|v| {
        id_of(data).is_some_and(|id| {
            // (Only an object has an id to replace; the schema refuses
            // anything else.)
            let mut exact = v.clone();
            if let Some(object) = exact.as_object_mut() {
                object.insert("id".into(), Value::from(id));
            }
            new_plant.is_valid(&exact) && !duplicates
        })
    });
    match NewPlant::parse(data, TextLimits::default()) {
        Ok(parsed) => {
            assert!(
                expected,
                "NewPlant accepted what the schema refuses: {value:?}"
            );
            let v = value.as_ref().unwrap();
            assert_eq!(Some(parsed.id), id_of(data));
            same_plant(&parsed.plant, v);
        }
        Err(e) => assert!(
            !expected,
            "NewPlant refused what the schema allows ({e}): {value:?}"
        ),
    }

    let expected = value
        .as_ref()
        .is_some_and(|v| plant.is_valid(v) && !duplicates);
    match Plant::parse(data, TextLimits::default()) {
        Ok(parsed) => {
            assert!(
                expected,
                "Plant accepted what the schema refuses: {value:?}"
            );
            same_plant(&parsed, value.as_ref().unwrap());
        }
        Err(e) => assert!(
            !expected,
            "Plant refused what the schema allows ({e}): {value:?}"
        ),
    }
});

fn same_plant(plant: &Plant, value: &Value) {
    assert_eq!(Some(plant.name.as_str()), value["name"].as_str());
    assert_eq!(
        plant.tag.as_deref(),
        value.get("tag").and_then(Value::as_str)
    );
}

/// Whether any object in `data` has serde_json's private RawValue token
/// (however escaped) as its first key. Read with a visitor of its own,
/// which serde_json does not treat specially.
fn has_raw_value_token(data: &[u8]) -> bool {
    use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
    use std::borrow::Cow;
    const TOKEN: &str = "$serde_json::private::RawValue";

    struct Found(bool);
    impl<'de> Deserialize<'de> for Found {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Found, D::Error> {
            deserializer.deserialize_any(Walk)
        }
    }
    struct Walk;
    impl<'de> Visitor<'de> for Walk {
        type Value = Found;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
            let mut found = false;
            let mut first = true;
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                found |= first && key == TOKEN;
                first = false;
                found |= map.next_value::<Found>()?.0;
            }
            Ok(Found(found))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Found, A::Error> {
            let mut found = false;
            while let Some(item) = seq.next_element::<Found>()? {
                found |= item.0;
            }
            Ok(Found(found))
        }
        fn visit_bool<E>(self, _: bool) -> Result<Found, E> {
            Ok(Found(false))
        }
        fn visit_i64<E>(self, _: i64) -> Result<Found, E> {
            Ok(Found(false))
        }
        fn visit_u64<E>(self, _: u64) -> Result<Found, E> {
            Ok(Found(false))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Found, E> {
            Ok(Found(false))
        }
        fn visit_str<E>(self, _: &str) -> Result<Found, E> {
            Ok(Found(false))
        }
        fn visit_unit<E>(self) -> Result<Found, E> {
            Ok(Found(false))
        }
    }
    serde_json::from_slice::<Found>(data).is_ok_and(|found| found.0)
}

/// The top-level `id` as an int64, read from its text: `None` when there
/// is none, or its exact value is not an integer within int64.
fn id_of(data: &[u8]) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct Id<'a> {
        #[serde(borrow)]
        id: &'a RawValue,
    }
    let Id { id } = serde_json::from_slice(data).ok()?;
    exact_int64(id.get())
}

/// A JSON number's text as an exact int64, by moving the decimal point
/// over the digits as a string and parsing what is left of it.
fn exact_int64(text: &str) -> Option<i64> {
    let (sign, rest) = text
        .strip_prefix('-')
        .map_or(("", text), |rest| ("-", rest));
    let (mantissa, exponent) = rest.split_once(['e', 'E']).unwrap_or((rest, "0"));
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{whole}{fraction}");
    if whole.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None; // not a number: a string, true, null, ...
    }
    let significant = digits.trim_start_matches('0');
    if significant.is_empty() {
        return Some(0);
    }
    // An exponent too large for i64 makes a non-zero value far out of
    // range or far below 1.
    let exponent: i64 = exponent.parse().ok()?;
    // The value is 0.<significant> × 10^point: from 10^(point-1) to 10^point.
    let point =
        whole.len() as i128 - (digits.len() - significant.len()) as i128 + i128::from(exponent);
    if !(1..=19).contains(&point) {
        return None;
    }
    let point = point as usize;
    let (int, frac) = significant.split_at(point.min(significant.len()));
    if frac.bytes().any(|b| b != b'0') {
        return None;
    }
    let zeros = "0".repeat(point - int.len());
    format!("{sign}{int}{zeros}").parse().ok()
}

/// Whether the body is an object with a key that appears twice.
fn has_duplicate_top_level_key(data: &[u8]) -> bool {
    let Ok(Value::Object(_)) = serde_json::from_slice::<Value>(data) else {
        return false;
    };
    // Keys in order, as written: a map into a list of pairs keeps them all.
    #[derive(serde::Deserialize)]
    struct Pairs(#[serde(with = "pairs")] Vec<(String, serde::de::IgnoredAny)>);
    mod pairs {
        use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Vec<(String, IgnoredAny)>, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Vec<(String, IgnoredAny)>;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                    let mut out = Vec::new();
                    while let Some(entry) = m.next_entry()? {
                        out.push(entry);
                    }
                    Ok(out)
                }
            }
            d.deserialize_map(V)
        }
    }
    let Ok(Pairs(pairs)) = serde_json::from_slice::<Pairs>(data) else {
        return false;
    };
    let mut keys = HashSet::new();
    pairs.iter().any(|(key, _)| !keys.insert(key.as_str()))
}
