//! Bearer authentication: RFC 6750 answers, several tokens, check order,
//! and the start-up checks that keep a token that could never match out.
//! The answers to requests are checked on each store; the token files'
//! start-up checks through the binary, on the in-memory store.

use std::time::Duration;

use crate::process::binary::{Running, create, run_to_exit};
use crate::support::{JSON, Kind, TempFile, TestServer};

const BODY: &str = r#"{"id": 1, "name": "a"}"#;

fn missing_token_is_401_with_challenge(kind: Kind) {
    let server = TestServer::on(kind);
    let reply = server.send("POST", "/plants", &[JSON], BODY);
    reply.assert_error(401, "missing");
    assert_eq!(
        reply.header("www-authenticate"),
        Some(r#"Bearer realm="plantstore""#)
    );
}

fn wrong_scheme_is_401_without_invalid_token(kind: Kind) {
    let server = TestServer::on(kind);
    let basic = [("Authorization", "Basic dGVzdC10b2tlbg=="), JSON];
    let reply = server.send("POST", "/plants", &basic, BODY);
    reply.assert_error(401, "scheme must be Bearer");
    assert_eq!(
        reply.header("www-authenticate"),
        Some(r#"Bearer realm="plantstore""#)
    );
}

fn wrong_token_is_401_invalid_token(kind: Kind) {
    let server = TestServer::on(kind);
    let wrong = [("Authorization", "Bearer test-tokem"), JSON];
    let reply = server.send("POST", "/plants", &wrong, BODY);
    reply.assert_error(401, "invalid");
    assert_eq!(
        reply.header("www-authenticate"),
        Some(r#"Bearer realm="plantstore", error="invalid_token""#)
    );
    assert!(!reply.text().contains("test-token"), "no token in the body");
}

fn failed_auth_never_parses_the_body(kind: Kind) {
    let server = TestServer::on(kind);
    let reply = server.send("POST", "/plants", &[JSON], "{not json");
    reply.assert_error(401, "missing");
    let reply = server.send("POST", "/plants", &[("Content-Type", "text/plain")], BODY);
    reply.assert_error(401, "missing");
}

fn several_tokens_from_a_file_all_work(kind: Kind) {
    // A file of its own: each store's variant runs beside the other.
    let file = token_file(
        "tokens",
        b"# rotation\n\nold-token\n  new-token  \n# retired-token\n",
    );
    let args = plantstore::config::Args {
        token_file: Some(file.0.clone()),
        ..argh::FromArgs::from_args(&["plantstore"], &[]).unwrap()
    };
    let mut config = plantstore::config::Config::from_args(args, None).unwrap();
    config.addr = "127.0.0.1:0".parse().unwrap();
    let tokens: Vec<&str> = config.tokens.iter().map(|g| g.token.as_str()).collect();
    assert_eq!(tokens, ["old-token", "new-token"]);
    let server = TestServer::on_with(kind, config);
    for (id, token, status) in [
        (1, "old-token", 200),
        (2, "new-token", 200),
        (3, "retired-token", 401),
    ] {
        let auth = format!("Bearer {token}");
        let body = format!(r#"{{"id": {id}, "name": "a"}}"#);
        let reply = server.send("POST", "/plants", &[("Authorization", &auth), JSON], &body);
        assert_eq!(reply.status, status, "{token}");
    }
}

/// A token file in the temp directory, removed when dropped.
fn token_file(name: &str, contents: &[u8]) -> TempFile {
    let file = TempFile::new(name);
    std::fs::write(&file.0, contents).unwrap();
    file
}

/// Runs the binary until it exits, or for 5 s and then stops it: its exit
/// code (`None`: it was still serving) and what it wrote to stderr.
fn exit_of(args: &[&str], env_token: Option<&str>) -> (Option<i32>, String) {
    run_to_exit(args, env_token, Duration::from_secs(5))
}

#[test]
fn a_token_file_starting_with_a_byte_order_mark_authorizes_its_first_token() {
    // Regression: the BOM became part of the first token, which then never
    // matched.
    let file = token_file("bom-tokens", b"\xef\xbb\xbffirst-token\nsecond-token\n");
    let server = Running::start(&["--token-file", file.0.to_str().unwrap()], None);
    assert_eq!(create(server.addr, "first-token", 1), 200);
    assert_eq!(create(server.addr, "second-token", 2), 200);
    assert_eq!(create(server.addr, "third-token", 3), 401);
}

#[test]
fn a_token_file_line_that_could_never_match_stops_start_up_with_exit_2() {
    // Regression: control bytes and over-long tokens were accepted, and a
    // token with a space inside was refused without saying where.
    let long = format!("ok-token\n{}\n", "a".repeat(4097));
    for (name, contents, line) in [
        ("ctl-tokens", "ok-token\n# next\nbad\x01token\n", 3),
        ("space-tokens", "inner space\n", 1),
        ("long-tokens", &long, 2),
    ] {
        let file = token_file(name, contents.as_bytes());
        let (code, stderr) = exit_of(&["--token-file", file.0.to_str().unwrap()], None);
        assert_eq!(code, Some(2), "{name}: {stderr}");
        let place = format!("token file {} line {line}: ", file.0.display());
        assert!(stderr.contains(&place), "{name}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{name}: {stderr}");
    }
}

#[test]
fn a_flag_or_environment_token_that_could_never_match_stops_start_up_with_exit_2() {
    let long = "a".repeat(4097);
    let (code, stderr) = exit_of(&["--token", &long], None);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--token is longer than 4096 bytes"),
        "{stderr}"
    );
    let (code, stderr) = exit_of(&[], Some("bad\x01token"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("PLANTSTORE_TOKEN contains a control character"),
        "{stderr}"
    );
}

#[test]
fn a_repeated_token_in_the_file_is_a_start_up_warning_naming_the_lines() {
    let file = token_file("dup-tokens", b"rotate-me\nnext\n\nrotate-me\n");
    let server = Running::start(&["--token-file", file.0.to_str().unwrap()], None);
    assert_eq!(create(server.addr, "rotate-me", 1), 200);
    let log = server.log();
    assert!(
        log.iter()
            .any(|l| l.contains("WARN") && l.ends_with("line 4 repeats the token of line 1")),
        "{log:?}"
    );
    assert!(!log.iter().any(|l| l.contains("rotate-me")), "{log:?}");
}

crate::on_each_store!(
    missing_token_is_401_with_challenge,
    wrong_scheme_is_401_without_invalid_token,
    wrong_token_is_401_invalid_token,
    failed_auth_never_parses_the_body,
    several_tokens_from_a_file_all_work,
);
