//! Bearer authentication: RFC 6750 answers, several tokens, check order.

use crate::support::{JSON, TestServer};

const BODY: &str = r#"{"id": 1, "name": "a"}"#;

#[test]
fn missing_token_is_401_with_challenge() {
    let server = TestServer::start();
    let reply = server.send("POST", "/plants", &[JSON], BODY);
    reply.assert_error(401, "missing");
    assert_eq!(
        reply.header("www-authenticate"),
        Some(r#"Bearer realm="plantstore""#)
    );
}

#[test]
fn wrong_scheme_is_401_without_invalid_token() {
    let server = TestServer::start();
    let basic = [("Authorization", "Basic dGVzdC10b2tlbg=="), JSON];
    let reply = server.send("POST", "/plants", &basic, BODY);
    reply.assert_error(401, "missing");
    assert_eq!(
        reply.header("www-authenticate"),
        Some(r#"Bearer realm="plantstore""#)
    );
}

#[test]
fn wrong_token_is_401_invalid_token() {
    let server = TestServer::start();
    let wrong = [("Authorization", "Bearer test-tokem"), JSON];
    let reply = server.send("POST", "/plants", &wrong, BODY);
    reply.assert_error(401, "invalid");
    assert_eq!(
        reply.header("www-authenticate"),
        Some(r#"Bearer realm="plantstore", error="invalid_token""#)
    );
    assert!(!reply.text().contains("test-token"), "no token in the body");
}

#[test]
fn failed_auth_never_parses_the_body() {
    let server = TestServer::start();
    let reply = server.send("POST", "/plants", &[JSON], "{not json");
    reply.assert_error(401, "missing");
    let reply = server.send("POST", "/plants", &[("Content-Type", "text/plain")], BODY);
    reply.assert_error(401, "missing");
}

#[test]
fn several_tokens_from_a_file_all_work() {
    let dir = std::env::temp_dir().join(format!("plantstore-tokens-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tokens");
    std::fs::write(
        &file,
        "# rotation\n\nold-token\n  new-token  \n# retired-token\n",
    )
    .unwrap();
    let args = plantstore::config::Args {
        token_file: Some(file),
        ..argh::FromArgs::from_args(&["plantstore"], &[]).unwrap()
    };
    let mut config = plantstore::config::Config::from_args(args, None).unwrap();
    config.addr = "127.0.0.1:0".parse().unwrap();
    assert_eq!(config.tokens, ["old-token", "new-token"]);
    let server = TestServer::with(config);
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
    std::fs::remove_dir_all(&dir).unwrap();
}
