//! What a first-time user meets, through the built binary: start-up lines
//! that say where the token came from and where the page and the API's
//! description are, a 401 that says how to send a token without its
//! scheme, flag errors that say what to do next, a `--version` that names
//! the build, and counts that read as English.

use crate::process::binary::{Running, command};
use crate::support::{PATIENCE, TempFile, eventually, send_to};

/// What `--version` prints for the build under test.
pub(crate) fn version_line() -> String {
    let features = if cfg!(all(feature = "postgres", feature = "acme")) {
        "(HTTPS, ACME, PostgreSQL)"
    } else if cfg!(feature = "postgres") {
        "(HTTPS, PostgreSQL)"
    } else if cfg!(feature = "acme") {
        "(HTTPS, ACME)"
    } else if cfg!(feature = "tls") {
        "(HTTPS)"
    } else {
        "(plain: no HTTPS, no PostgreSQL)"
    };
    format!("plantstore {} {features}", env!("CARGO_PKG_VERSION"))
}

/// The first line of `server`'s log holding `needle`, once it is there.
fn line_with(server: &Running, needle: &str) -> String {
    let find = || server.log().into_iter().find(|l| l.contains(needle));
    assert!(
        eventually(|| find().is_some()),
        "{needle}: {:?}",
        server.log()
    );
    find().unwrap()
}

/// The binary run with `args` to its exit: the exit code and stderr.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let out = command().args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn start_up_says_where_the_tokens_came_from_and_where_the_page_is() {
    let file = TempFile::new("firstrun.tokens");
    let lines = "writer-token-0123456789\nreader-token-0123456789 read\nother-token-0123456789\n";
    std::fs::write(&file.0, lines).unwrap();
    let path = file.0.to_str().unwrap();
    let server = Running::start(&["--token-file", path], None);
    let origin = line_with(&server, "tokens from");
    assert!(
        origin.ends_with(&format!("3 tokens from {path}: 2 write, 1 read")),
        "{origin}"
    );
    let base = format!("http://{}", server.addr);
    let urls = line_with(&server, "the API's description");
    let both = format!("the page: {base}/, the API's description: {base}/openapi.json");
    assert!(urls.ends_with(&both), "{urls}");
    // Both URLs answer what they say.
    let page = send_to(server.addr, "GET", "/", &[], "");
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let document = send_to(server.addr, "GET", "/openapi.json", &[], "").json();
    assert!(document["openapi"].is_string());
    assert!(server.log().iter().all(|l| !l.contains("writer-token")));

    let env = Running::start(&["--no-ui"], Some("an-env-token-0123456789"));
    let urls = line_with(&env, "the API's description");
    let only = format!("] the API's description: http://{}/openapi.json", env.addr);
    assert!(urls.ends_with(&only), "no page with --no-ui: {urls}");
    let origin = line_with(&env, "token from");
    assert!(
        origin.ends_with("1 token from PLANTSTORE_TOKEN: 1 write, 0 read"),
        "{origin}"
    );

    let flag = Running::start(&["--token", "a-flag-token-0123456789"], None);
    let origin = line_with(&flag, "token from");
    assert!(
        origin.ends_with("1 token from --token: 1 write, 0 read"),
        "{origin}"
    );

    let generated = Running::start(&[], None);
    let origin = line_with(&generated, "token generated");
    assert!(
        origin.contains("WARN")
            && origin.ends_with("1 token generated for this run, printed above: 1 write, 0 read"),
        "{origin}"
    );
}

#[test]
fn a_token_without_its_scheme_is_told_to_send_bearer() {
    let server = Running::start(&[], Some("change-me"));
    for header in ["change-me", "Basic Y2hhbmdlLW1l"] {
        let reply = send_to(
            server.addr,
            "GET",
            "/plants",
            &[("Authorization", header)],
            "",
        );
        reply.assert_error(401, "scheme must be Bearer");
        reply.assert_error(401, "Authorization: Bearer <token>");
        assert_eq!(
            reply.header("www-authenticate"),
            Some(r#"Bearer realm="plantstore""#)
        );
    }
    let none = send_to(server.addr, "GET", "/plants", &[], "");
    none.assert_error(401, "missing bearer token");
    let right = [("Authorization", "Bearer change-me")];
    assert_eq!(
        send_to(server.addr, "GET", "/plants", &right, "").status,
        200
    );
    // No bearer token was presented, so none was guessed: counted as
    // missing, never as a failure that the throttle counts.
    let metrics = send_to(server.addr, "GET", "/metrics", &right, "").text();
    let count = |reason: &str| {
        let sample = format!("plantstore_auth_refusals_total{{reason=\"{reason}\"}} ");
        let line = metrics
            .lines()
            .find_map(|l| l.strip_prefix(sample.as_str()));
        line.and_then(|v| v.trim().parse::<u64>().ok())
    };
    assert_eq!((count("missing"), count("invalid")), (Some(3), Some(0)));
}

#[test]
fn an_unknown_flag_says_see_help() {
    for args in [
        &["--no-such-flag"][..],
        &["--max-name", "ten"],
        &["--no-ui=1"],
    ] {
        let (code, stderr) = refused(args);
        assert_eq!(code, Some(2), "{args:?}");
        let line = stderr.trim();
        assert_eq!(line.lines().count(), 1, "{args:?}: {stderr}");
        assert!(line.starts_with("plantstore: "), "{line}");
        assert!(line.ends_with("; see --help"), "{line}");
    }
    let (_, stderr) = refused(&["--no-such-flag"]);
    assert!(stderr.contains("--no-such-flag"), "{stderr}");
}

#[test]
fn version_names_the_build_features() {
    for flag in ["--version", "-V"] {
        let out = command().arg(flag).output().unwrap();
        assert!(out.status.success());
        let printed = String::from_utf8_lossy(&out.stdout);
        assert_eq!(printed.trim(), version_line());
    }
}

/// On a build without the PostgreSQL store its flags name the build that
/// has them; on that build they are its own (here: one that needs another).
#[test]
fn database_flags_say_which_build_has_them() {
    for (args, flag) in [
        // With --data too: the PostgreSQL build refuses the pair before it
        // would try to reach a database.
        (
            &[
                "--database",
                "postgres://u:p@127.0.0.1/plants",
                "--data",
                "j",
            ][..],
            "--database",
        ),
        (&["--database-file=/nonexistent/db"], "--database-file"),
        (&["--database-pool", "2"], "--database-pool"),
    ] {
        let (code, stderr) = refused(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        let line = stderr.trim();
        assert_eq!(line.lines().count(), 1, "{stderr}");
        if cfg!(feature = "postgres") {
            assert!(!line.contains("PostgreSQL build"), "{line}");
            continue;
        }
        assert!(line.starts_with(&format!("plantstore: {flag} ")), "{line}");
        for needle in [
            "is for the PostgreSQL build",
            "plantstore-postgres",
            "cargo build --release --features postgres --target-dir target/postgres",
        ] {
            assert!(line.contains(needle), "{needle}: {line}");
        }
        assert!(!line.contains("p@"), "no password echoed: {line}");
    }
}

#[test]
fn counts_read_as_english() {
    let seed = TempFile::new("firstrun.seed.json");
    std::fs::write(&seed.0, r#"[{"id":1,"name":"Monstera"}]"#).unwrap();
    let tokens = TempFile::new("firstrun.one.tokens");
    std::fs::write(&tokens.0, "one-token-0123456789\ntwo-token-0123456789\n").unwrap();
    let (seed_path, token_path) = (seed.0.to_str().unwrap(), tokens.0.to_str().unwrap());
    let args = ["--seed", seed_path, "--token-file", token_path];
    let mut server = Running::start(&args, None);
    let loaded = line_with(&server, "loaded 1 plant in");
    assert!(loaded.contains(seed_path), "{loaded}");
    let listening = line_with(&server, "listening on");
    assert!(listening.ends_with(", 1 plant"), "{listening}");
    line_with(&server, "2 tokens from");
    std::fs::write(&tokens.0, "one-token-0123456789\n").unwrap();
    server.signal("HUP");
    line_with(&server, &format!("reloaded {token_path}: 1 token active"));
    server.signal("TERM");
    assert!(server.wait(PATIENCE).success());
    let log = server.log();
    let plural_one = ["1 plants", "1 tokens", "1 records"];
    let wrong = log
        .iter()
        .find(|l| plural_one.iter().any(|w| l.contains(w)));
    assert!(wrong.is_none(), "{wrong:?}");
}
