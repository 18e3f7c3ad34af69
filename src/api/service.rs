//! The service endpoints: the OpenAPI document, health, metrics and the
//! local CA's certificate.
//!
//! The OpenAPI 3.1 document is a file written by hand for this server
//! (`openapi.json`, compiled in without the whitespace between its tokens
//! and packed: `assets`) and checked against the running server by the
//! conformance script; `/openapi.json`, `/healthz` and `/ca.pem` need no
//! token.
//! The file declares the default name and tag limits; the document served
//! is unpacked for each request and given the configured ones
//! (`document`). It describes exactly the running server: a route that
//! only a flag serves (`POST /plants/reset`, `--allow-reset`; `/ca.pem`,
//! `--tls-auto`) is left out without its flag (`without_path`), so that a
//! client generated from the document, or a fuzzer reading it, meets no
//! route that is a 404.
//!
//! With `--tls-auto`, over TLS, `/ca.pem` serves the local CA's
//! certificate, and `/healthz` names it by its fingerprint in
//! `X-CA-Fingerprint`: the page reads it there, from a path that answers
//! whatever the mode (its `/ca.pem` would be a 404, an error in the
//! browser's console, without `--tls-auto`). In the plain build the CA's
//! holder (`transport::Https`) has no value, so what serves it is
//! compiled away.

use super::Call;
use super::{ApiError, App};
use crate::assets::{OPENAPI_JSON, unpack};
use crate::http::{Request, Response};
use crate::metrics::Exposition;
use crate::model::TextLimits;
use crate::transport::CaCert;

/// The document with the `maxLength` of every name and tag set to
/// `limits` (unchanged for the default limits).
///
/// The file is patched as text, so the document keeps its order and
/// layout: in one pass, the `maxLength` of each `name` and `tag` property
/// (written `"name":{"type":"string","maxLength":N`) becomes the limit.
/// Other lengths, such as the search text's 256 bytes, stay as written (a
/// unit test checks which are patched).
pub fn document(limits: TextLimits) -> Vec<u8> {
    const PROPERTY: &str = "\":{\"type\":\"string\",\"maxLength\":";
    let document = unpack(OPENAPI_JSON);
    if limits == TextLimits::default() {
        return document;
    }
    // The file is UTF-8 (build.rs read it as a string).
    let Ok(document) = std::str::from_utf8(&document) else {
        return document;
    };
    let mut out = String::with_capacity(document.len() + 64);
    let mut rest = document;
    while let Some(at) = rest.find(PROPERTY) {
        let (before, after) = rest.split_at(at + PROPERTY.len());
        out.push_str(before);
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let (number, tail) = after.split_at(digits);
        let key = &rest[..at];
        if key.ends_with("\"name") {
            out.push_str(&limits.name.to_string());
        } else if key.ends_with("\"tag") {
            out.push_str(&limits.tag.to_string());
        } else {
            out.push_str(number);
        }
        rest = tail;
    }
    out.push_str(rest);
    out.into_bytes()
}

/// `GET /openapi.json`, without the paths `unserved` (routes whose flag is
/// off).
pub(super) fn openapi(app: &App, unserved: &[&str]) -> Response {
    let mut document = document(app.text_limits);
    for path in unserved {
        document = without_path(document, path);
    }
    Response::bytes(200, "application/json", document)
}

/// Where `needle` first starts in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Just after the brace that closes the one at `open` in `document`,
/// braces inside strings not counted; `None` if none does.
fn closed(document: &[u8], open: usize) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (at, &byte) in document.iter().enumerate().skip(open) {
        match byte {
            _ if escaped => escaped = false,
            b'\\' if in_string => escaped = true,
            b'"' => in_string = !in_string,
            b'{' if !in_string => depth += 1,
            b'}' if !in_string => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(at + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The compact document without the member `path` of its `paths` object
/// (and the comma that joined it to a neighbour); unchanged if it has
/// none. The member is found as `"PATH":{` and ends at the brace that
/// closes it, braces inside strings not counted.
fn without_path(document: Vec<u8>, path: &str) -> Vec<u8> {
    let key = format!("\"{path}\":{{");
    let Some(mut start) = find(&document, key.as_bytes()) else {
        return document;
    };
    let Some(mut end) = closed(&document, start + key.len() - 1) else {
        return document;
    };
    if document.get(end) == Some(&b',') {
        end += 1;
    } else if start > 0 && document[start - 1] == b',' {
        start -= 1;
    }
    let mut out = document;
    out.drain(start..end);
    out
}

/// `GET /healthz`: `ok`, or 503 `failing` with the reason once the journal
/// has failed (reads still work, changes are refused), or while no
/// connection to the database is up; over TLS with `--tls-auto`, with the
/// local CA's fingerprint in `X-CA-Fingerprint`.
pub(super) fn health(app: &App, request: &Request<'_>) -> Response {
    let response = health_of(app);
    match local_ca(app, request) {
        Some(ca) => response.with_header("X-CA-Fingerprint", ca.fingerprint),
        None => response,
    }
}

/// `/healthz`'s answer, whatever the connection.
fn health_of(app: &App) -> Response {
    match app.plants.failure() {
        None => Response::bytes(200, "application/json", br#"{"status":"ok"}"#.to_vec()),
        Some(reason) => Response::json(
            503,
            &Failing {
                reason: &reason,
                status: "failing",
            },
        ),
    }
}

/// `GET /ca.pem` over TLS with `--tls-auto`: the local CA's certificate,
/// with its SHA-256 fingerprint in `X-CA-Fingerprint`; `None` otherwise
/// (a 404).
pub(super) fn ca_pem(app: &App, request: &Request<'_>) -> Option<Response> {
    let ca = local_ca(app, request)?;
    Some(
        Response::bytes(200, "application/x-pem-file", ca.pem.into_bytes())
            .with_header("X-CA-Fingerprint", ca.fingerprint)
            .with_header("Cache-Control", "no-cache")
            .with_header("X-Content-Type-Options", "nosniff"),
    )
}

/// The local CA's certificate, for a request that came over TLS to a
/// server with `--tls-auto`.
fn local_ca(app: &App, request: &Request<'_>) -> Option<CaCert> {
    match &app.local_ca {
        Some(https) if request.scheme() == "https" => https.ca_cert(),
        _ => None,
    }
}

/// The body of a failing `/healthz`: `{"reason":...,"status":"failing"}`,
/// the keys in the order `json!` gave them (it sorted them).
#[derive(serde::Serialize)]
struct Failing<'a> {
    reason: &'a str,
    status: &'static str,
}

/// `GET /metrics` (bearer auth): Prometheus text exposition.
pub(super) fn metrics(app: &App, _: &mut Request<'_>, _: Call) -> Result<Response, ApiError> {
    let mut text = Exposition::new();
    app.metrics.render(&mut text);
    app.webhooks.render(&mut text);
    app.plants.render(&mut text);
    app.changes.render(&mut text);
    app.throttle.render(&mut text);
    let text = text.into_text();
    Ok(Response::bytes(
        200,
        "text/plain; version=0.0.4; charset=utf-8",
        text.into_bytes(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// Every `maxLength` in a document, by JSON pointer.
    fn max_lengths(value: &Value, at: String, out: &mut Vec<(String, u64)>) {
        match value {
            Value::Object(map) => {
                for (key, v) in map {
                    if key == "maxLength" {
                        out.push((at.clone(), v.as_u64().expect("a count")));
                    }
                    max_lengths(v, format!("{at}/{key}"), out);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    max_lengths(v, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    fn limits_in(document: &[u8]) -> Vec<(String, u64)> {
        let value: Value = serde_json::from_slice(document).expect("the document is JSON");
        let mut out = Vec::new();
        max_lengths(&value, String::new(), &mut out);
        out.sort();
        out
    }

    #[test]
    fn the_document_declares_the_configured_lengths_for_every_name_and_tag() {
        let at =
            |schema: &str, field: &str| format!("/components/schemas/{schema}/properties/{field}");
        // Swapped on purpose: a second replacement must not undo the first.
        for (name, tag) in [(256, 64), (64, 256), (1000, 7)] {
            let document = document(TextLimits { name, tag });
            let want = vec![
                // The search text's bytes: not a name's length.
                ("/components/parameters/ListQ/schema".into(), 256),
                (at("ListedPlant", "name"), name as u64),
                (at("ListedPlant", "tag"), tag as u64),
                (at("Plant", "name"), name as u64),
                (at("Plant", "tag"), tag as u64),
                (at("PlantRecord", "name"), name as u64),
                (at("PlantRecord", "tag"), tag as u64),
            ];
            assert_eq!(limits_in(&document), want);
        }
        assert_eq!(document(TextLimits::default()), unpack(OPENAPI_JSON));
    }

    #[test]
    fn only_the_limits_change() {
        let mut patched: Value =
            serde_json::from_slice(&document(TextLimits { name: 9, tag: 8 })).unwrap();
        let original: Value = serde_json::from_slice(&unpack(OPENAPI_JSON)).unwrap();
        for (schema, field, value) in [
            ("ListedPlant", "name", 256),
            ("ListedPlant", "tag", 64),
            ("Plant", "name", 256),
            ("Plant", "tag", 64),
            ("PlantRecord", "name", 256),
            ("PlantRecord", "tag", 64),
        ] {
            patched["components"]["schemas"][schema]["properties"][field]["maxLength"] =
                value.into();
        }
        assert_eq!(patched, original);
    }

    #[test]
    fn a_path_left_out_is_gone_whole_and_the_rest_unchanged() {
        let full: Value = serde_json::from_slice(&unpack(OPENAPI_JSON)).unwrap();
        let cut = without_path(unpack(OPENAPI_JSON), "/plants/reset");
        let mut cut: Value = serde_json::from_slice(&cut).expect("still JSON");
        assert!(full["paths"].get("/plants/reset").is_some());
        assert!(cut["paths"].get("/plants/reset").is_none());
        cut["paths"]["/plants/reset"] = full["paths"]["/plants/reset"].clone();
        assert_eq!(cut, full, "nothing else changed");
        // The first and the last member of an object, and one absent.
        for (text, want) in [
            (
                r#"{"paths":{"/a":{"x":"}{"},"/b":{}}}"#,
                r#"{"paths":{"/b":{}}}"#,
            ),
            (
                r#"{"paths":{"/b":{},"/a":{"x":"\"}"}}}"#,
                r#"{"paths":{"/b":{}}}"#,
            ),
            (r#"{"paths":{"/b":{}}}"#, r#"{"paths":{"/b":{}}}"#),
        ] {
            let cut = without_path(text.as_bytes().to_vec(), "/a");
            assert_eq!(String::from_utf8(cut).unwrap(), want);
        }
    }

    #[test]
    fn each_flagged_path_is_left_out_whole() {
        let whole = unpack(OPENAPI_JSON);
        let full: Value = serde_json::from_slice(&whole).unwrap();
        // The plain build's document has no `/ca.pem` to leave out.
        let flagged = match crate::transport::WITH_TLS {
            true => &["/plants/reset", "/ca.pem"][..],
            false => &["/plants/reset"][..],
        };
        for unserved in [&flagged[..1], &flagged[1..], flagged] {
            let mut cut = whole.clone();
            for path in unserved {
                cut = without_path(cut, path);
            }
            let mut cut: Value = serde_json::from_slice(&cut).expect("still JSON");
            for path in unserved {
                assert!(full["paths"].get(path).is_some(), "{path}");
                assert!(cut["paths"].get(path).is_none(), "{path}");
                cut["paths"][path] = full["paths"][path].clone();
            }
            assert_eq!(cut, full, "{unserved:?}: nothing else changed");
        }
    }

    #[test]
    fn the_compiled_document_is_the_file_without_its_layout() {
        let mut file: Value = serde_json::from_str(include_str!("openapi.json")).unwrap();
        if !crate::transport::WITH_TLS {
            file["paths"].as_object_mut().unwrap().remove("/ca.pem");
        }
        let compiled = unpack(OPENAPI_JSON);
        assert_eq!(serde_json::from_slice::<Value>(&compiled).unwrap(), file);
        assert!(!compiled.contains(&b'\n'));
        assert!(compiled.len() < include_str!("openapi.json").len() * 2 / 3);
    }

    #[test]
    fn a_failing_health_body_is_what_json_made() {
        let reason = "the journal cannot be written: \"disk\" full";
        let body = Failing {
            reason,
            status: "failing",
        };
        assert_eq!(
            serde_json::to_vec(&body).unwrap(),
            serde_json::to_vec(&serde_json::json!({ "status": "failing", "reason": reason }))
                .unwrap()
        );
    }
}
