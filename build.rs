//! Tells the crate the target triple it is built for, for
//! `plantstore_build_info` in `/metrics`; and writes the OpenAPI document
//! the binary serves: `src/api/openapi.json` without the whitespace
//! between its tokens (the file is laid out for people; compact, the
//! binary carries 40% less of it).

use std::path::Path;

fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=PLANTSTORE_TARGET={target}");
    println!("cargo:rerun-if-changed=build.rs");

    let source = "src/api/openapi.json";
    println!("cargo:rerun-if-changed={source}");
    let document = std::fs::read_to_string(source).expect("src/api/openapi.json is readable");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(Path::new(&out).join("openapi.json"), compact(&document))
        .expect("OUT_DIR is writable");
}

/// `json` without whitespace outside its strings; strings (escapes and
/// all) are copied as they are.
fn compact(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            in_string = c == '"';
            out.push(c);
        }
    }
    out
}
