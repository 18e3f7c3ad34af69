//! Tells the crate the target triple it is built for, for
//! `plantstore_build_info` in `/metrics`; and packs the files the binary
//! serves into the build's output folder, for `assets` to compile in: the
//! OpenAPI document, `src/api/openapi.json` without the whitespace between
//! its tokens (the file is laid out for people; without its `/ca.pem` in
//! the plain build), and the built-in page's four files. The packer is `build/pack.rs`; why the files are packed at
//! all, and when that can stop, is in `src/assets/mod.rs`.

use std::path::Path;

/// The packed form, shared with the unpacker in `assets`.
#[path = "src/assets/format.rs"]
mod format;
#[path = "build/pack.rs"]
mod pack;

fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=PLANTSTORE_TARGET={target}");
    for source in ["build.rs", "build/pack.rs", "src/assets/format.rs"] {
        println!("cargo:rerun-if-changed={source}");
    }
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let write = |name: &str, bytes: &[u8]| {
        let path = Path::new(&out).join(format!("{name}.lz"));
        std::fs::write(path, pack::pack(bytes)).expect("OUT_DIR is writable");
    };

    let source = "src/api/openapi.json";
    println!("cargo:rerun-if-changed={source}");
    let mut document = std::fs::read_to_string(source).expect("src/api/openapi.json is readable");
    // `/ca.pem` is served, and described, with `--tls-auto` only, which
    // the plain build has not: it packs the document without that path
    // item, and a build with TLS packs it whole (the API cuts it where it
    // is not served, as it cuts the reset's route).
    if std::env::var_os("CARGO_FEATURE_TLS").is_none() {
        document = without_path(&document, "/ca.pem");
    }
    write("openapi.json", compact(&document).as_bytes());
    for name in ["index.html", "ui.css", "ui.js", "ui.svg"] {
        let source = format!("src/api/ui/{name}");
        println!("cargo:rerun-if-changed={source}");
        write(
            name,
            &std::fs::read(&source).expect("the page's files are readable"),
        );
    }
}

/// `document` without the member `path` of its `paths` object
/// (`"PATH": {...}`), found as the file lays it out: from the
/// line `    "PATH": {` to the first line `    }` after it. The build
/// fails if the file has no such member.
fn without_path(document: &str, path: &str) -> String {
    let opening = format!("\n    \"{path}\": {{\n");
    let start = document
        .find(&opening)
        .unwrap_or_else(|| panic!("src/api/openapi.json has no path {path} at its place"))
        + 1;
    let end = start
        + document[start..]
            .find("\n    }")
            .expect("a path item ends where it started")
        + "\n    }".len();
    // The comma that joined it to a neighbour goes with it.
    let (before, after) = match document[end..].strip_prefix(',') {
        Some(after) => (&document[..start], after),
        None => (
            document[..start - 1].trim_end_matches(','),
            &document[end..],
        ),
    };
    format!("{before}{after}")
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
