//! Where the built binary takes its flags from: `PLANTSTORE_<FLAG>`
//! variables under the command line, `-h`, `-V` and `--flag=value`, and a
//! bad value named as such whatever the other flags.

use std::net::SocketAddr;
use std::process::Output;
use std::time::Duration;

use crate::process::binary::{Running, command, command_to_exit, create, server_command};
use crate::support::{TempFile, send_to};

const A: &str = "https://a.example";
const B: &str = "https://b.example";
const C: &str = "https://c.example";

/// The `maxLength` the server declares for a plant's name.
fn max_name(addr: SocketAddr) -> serde_json::Value {
    let document = send_to(addr, "GET", "/openapi.json", &[], "").json();
    document["components"]["schemas"]["Plant"]["properties"]["name"]["maxLength"].clone()
}

/// Whether the server lets a page from `origin` read its answers.
fn allows(addr: SocketAddr, origin: &str) -> bool {
    let reply = send_to(addr, "GET", "/healthz", &[("Origin", origin)], "");
    reply.header("access-control-allow-origin") == Some(origin)
}

/// Starts the binary with `args` and the variables `vars`.
fn start(args: &[&str], vars: &[(&str, &str)]) -> Running {
    let mut command = server_command(args, Some("t0k3n"));
    command.envs(vars.iter().copied());
    Running::spawn(command, Duration::from_secs(10))
}

/// Runs the binary with only `args` (no `--addr`) and `vars` to its exit.
fn output(args: &[&str], vars: &[(&str, &str)]) -> Output {
    command()
        .args(args)
        .envs(vars.iter().copied())
        .output()
        .unwrap()
}

const VARS: &[(&str, &str)] = &[
    ("PLANTSTORE_MAX_NAME", "20"),
    (
        "PLANTSTORE_CORS_ORIGIN",
        "https://a.example, https://b.example",
    ),
    ("PLANTSTORE_NO_UI", "yes"),
];

#[test]
fn variables_set_flags_a_repeatable_one_as_a_list() {
    let server = start(&[], VARS);
    assert_eq!(max_name(server.addr), 20);
    assert!(allows(server.addr, A) && allows(server.addr, B));
    assert!(!allows(server.addr, C));
    let page = send_to(server.addr, "GET", "/", &[], "");
    page.assert_error(404, "no such resource");
    // No variable is a warning; the only one is the 5-byte token's, and
    // it does not name it.
    let log = server.log();
    let warnings: Vec<&String> = log.iter().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("the token from PLANTSTORE_TOKEN is shorter than 16 bytes"));
    assert!(!warnings[0].contains("t0k3n"), "{warnings:?}");
}

#[test]
fn the_command_line_wins_over_the_variables() {
    let server = start(&["--max-name", "30", "--cors-origin", C], VARS);
    assert_eq!(max_name(server.addr), 30);
    assert!(allows(server.addr, C));
    assert!(!allows(server.addr, A) && !allows(server.addr, B));
    let off = start(&[], &[("PLANTSTORE_NO_UI", "no")]);
    assert_eq!(send_to(off.addr, "GET", "/", &[], "").status, 200);
}

#[test]
fn the_token_flags_keep_the_token_file_variable_out() {
    let file = TempFile::new("flags.tokens");
    std::fs::write(&file.0, "from-file\n").unwrap();
    let path = file.0.to_str().unwrap();
    let vars = [("PLANTSTORE_TOKEN_FILE", path)];
    // PLANTSTORE_TOKEN ("t0k3n") comes after a token file, from either.
    let server = start(&[], &vars);
    assert_eq!(create(server.addr, "from-file", 1), 200);
    assert_eq!(create(server.addr, "t0k3n", 2), 401);
    let server = start(&["--token", "from-flag"], &vars);
    assert_eq!(create(server.addr, "from-flag", 1), 200);
    assert_eq!(create(server.addr, "from-file", 2), 401);
}

#[test]
fn flag_equals_value_is_the_flag_with_that_value() {
    let server = start(&["--max-name=10", &format!("--cors-origin={A}")], &[]);
    assert_eq!(max_name(server.addr), 10);
    assert!(allows(server.addr, A));
}

#[test]
fn dash_h_prints_the_help_naming_the_variables() {
    let out = output(&["-h"], &[("PLANTSTORE_NO_UI", "maybe")]);
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in ["--max-name", "PLANTSTORE_<FLAG>", "PLANTSTORE_ADDR"] {
        assert!(help.contains(needle), "{needle} in {help}");
    }
}

#[test]
fn dash_v_prints_the_version() {
    let out = output(&["-V"], &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        crate::process::firstrun::version_line()
    );
}

/// Regression: `--sync sometimes` without `--data` said "--sync needs
/// --data FILE".
#[test]
fn a_bad_value_is_named_whatever_the_other_flags() {
    for (args, vars, says) in [
        (
            &["--sync", "sometimes"][..],
            &[][..],
            r#"--sync "sometimes" is not one of always, never"#,
        ),
        (
            &[],
            &[("PLANTSTORE_SYNC", "sometimes")],
            r#"--sync "sometimes" is not one of always, never"#,
        ),
        (
            &[],
            &[("PLANTSTORE_NO_UI", "maybe")],
            r#"PLANTSTORE_NO_UI "maybe" is not one of"#,
        ),
        (
            &[],
            &[("PLANTSTORE_MAX_NAME", "ten")],
            "PLANTSTORE_MAX_NAME: Error parsing option '--max-name' with value 'ten'",
        ),
    ] {
        let mut command = server_command(args, Some("t0k3n"));
        command.envs(vars.iter().copied());
        let (code, stderr) = command_to_exit(command, Duration::from_secs(5));
        assert_eq!(code, Some(2), "{args:?} {vars:?}");
        assert!(stderr.contains(says), "{args:?} {vars:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
}

#[test]
fn an_unknown_variable_is_a_warning() {
    // Not a setting in any build (PLANTSTORE_DATABASE is one with the
    // postgres feature).
    let server = start(&[], &[("PLANTSTORE_DATABSE", "x")]);
    assert_eq!(create(server.addr, "t0k3n", 1), 200);
    let log = server.log();
    assert!(
        log.iter().any(|line| line.contains("WARN")
            && line.contains("PLANTSTORE_DATABSE is not a plantstore setting")),
        "{log:?}"
    );
}
