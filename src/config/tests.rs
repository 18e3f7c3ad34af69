//! `Config::from_args` and the token rules, flag by flag.

use super::tokens::{TokenSet, read_token_file};
use super::*;
use crate::api::Scope;
use argh::FromArgs;

/// The tokens of a set, without their scopes.
fn plain(set: &TokenSet) -> Vec<&str> {
    set.accepted.iter().map(|g| g.token.as_str()).collect()
}

fn args(extra: &[&str]) -> Args {
    Args::from_args(&["plantstore"], extra).expect("flags parse")
}

#[test]
fn token_sources_resolve_in_order() {
    let set = tokens(None, Some("f".into()), Some("e".into())).unwrap();
    assert_eq!((plain(&set), set.source), (vec!["f"], TokenSource::Flag));
    let set = tokens(None, None, Some("e".into())).unwrap();
    assert_eq!((plain(&set), set.source), (vec!["e"], TokenSource::Env));
    let set = tokens(None, None, None).unwrap();
    assert_eq!(set.source, TokenSource::Generated);
    assert_eq!(set.accepted[0].token.len(), 64);
    assert_ne!(
        set.accepted,
        tokens(None, None, None).unwrap().accepted,
        "two generated tokens differ"
    );
}

/// Writes `contents` to a fresh token file and reads it as start-up
/// would, returning the error's message on failure.
fn token_file(name: &str, contents: &[u8]) -> Result<TokenSet, String> {
    let file = crate::os::temp::TempFile::with(name, contents);
    read_token_file(file.0.clone()).map_err(|e| e.to_string())
}

#[test]
fn a_byte_order_mark_is_not_part_of_the_first_token() {
    let set = token_file("bom", b"\xef\xbb\xbffirst\r\nsecond\n").unwrap();
    assert_eq!(plain(&set), ["first", "second"]);
    let set = token_file("bom-comment", "\u{feff}# rotation\nonly\n".as_bytes()).unwrap();
    assert_eq!(plain(&set), ["only"]);
    assert!(token_file("bom-alone", b"\xef\xbb\xbf\n").is_err());
}

#[test]
fn a_token_file_line_that_cannot_match_is_refused_naming_the_line() {
    let long = format!("ok\ns3cr3t{}\n", "a".repeat(MAX_TOKEN));
    for (name, contents, line, why) in [
        ("ctl", "ok\n\n# c\ns3cr3t\x01x\n", 4, "a control character"),
        ("nul", "s3cr3t\0x\n", 1, "a control character"),
        ("del", "ok\ns3cr3t\x7fx", 2, "a control character"),
        (
            "space",
            "# c\ns3cr3t x\n",
            2,
            "a scope other than read or write",
        ),
        ("tab", "s3cr3t\tx\n", 1, "a scope other than read or write"),
        (
            "words",
            "s3cr3t read x\n",
            1,
            "followed by more than a scope",
        ),
        ("nbsp", "ok\ns3cr3t\u{a0}x\n", 2, "whitespace"),
        ("long", &long, 2, "longer than 4096 bytes"),
    ] {
        let error = token_file(name, contents.as_bytes()).unwrap_err();
        assert!(
            error.contains(&format!(" line {line}: ")),
            "{name}: {error}"
        );
        assert!(error.contains(why), "{name}: {error}");
        assert!(
            error.contains(&format!("-{name} ")),
            "names the file: {error}"
        );
        assert!(
            !error.contains("s3cr3t"),
            "no token in the message: {error}"
        );
    }
    let longest = "a".repeat(MAX_TOKEN);
    let set = token_file("longest", format!(" {longest}\t\n").as_bytes()).unwrap();
    assert_eq!(plain(&set), [longest.as_str()]);
}

#[test]
fn a_token_file_line_may_name_its_scope() {
    let set = token_file("scopes", b"writer\nreader read\n  both\twrite \n").unwrap();
    let scopes: Vec<(&str, Scope)> = set
        .accepted
        .iter()
        .map(|g| (g.token.as_str(), g.scope))
        .collect();
    assert_eq!(
        scopes,
        [
            ("writer", Scope::Write),
            ("reader", Scope::Read),
            ("both", Scope::Write)
        ]
    );
}

#[test]
fn flag_and_environment_tokens_follow_the_same_rules() {
    for (token, why) in [
        ("", "is empty"),
        ("  ", "is empty"),
        ("a\x01b", "contains a control character"),
        ("a b", "contains whitespace"),
        (&"a".repeat(MAX_TOKEN + 1), "is longer than 4096 bytes"),
    ] {
        let flag = tokens(None, Some(token.to_string()), None).unwrap_err();
        assert_eq!(flag.to_string(), format!("the token from --token {why}"));
        let env = tokens(None, None, Some(token.to_string())).unwrap_err();
        assert_eq!(
            env.to_string(),
            format!("the token from PLANTSTORE_TOKEN {why}")
        );
    }
    let set = tokens(None, Some(" padded\n".into()), None).unwrap();
    assert_eq!(plain(&set), ["padded"]);
}

#[test]
fn a_repeated_token_is_kept_once_with_a_warning_naming_the_lines() {
    let (a, b) = ("s3cr3t-s3cr3t-s3cr3t", "other-other-other-other");
    let text = format!("{a}\n{b}\n\n  {a}\n{b}\n");
    let set = token_file("dup", text.as_bytes()).unwrap();
    assert_eq!(plain(&set), [a, b]);
    assert_eq!(set.warnings.len(), 2, "{:?}", set.warnings);
    assert!(set.warnings[0].ends_with("line 4 repeats the token of line 1"));
    assert!(set.warnings[1].ends_with("line 5 repeats the token of line 2"));
    assert!(!set.warnings.concat().contains("s3cr3t"), "no token logged");
    let once = format!("{a}\n{b}\n");
    assert!(
        token_file("once", once.as_bytes())
            .unwrap()
            .warnings
            .is_empty()
    );
}

#[test]
fn a_token_shorter_than_16_bytes_is_a_warning_that_never_names_it() {
    let set = token_file(
        "short",
        b"# c\nlong-enough-token-1\nabc read\n0123456789abcde\n0123456789abcdef\n",
    )
    .unwrap();
    assert_eq!(set.warnings.len(), 1, "{:?}", set.warnings);
    let warning = &set.warnings[0];
    assert!(
        warning.ends_with(
            "line 3 (the first of 2): a token shorter than 16 bytes, which a guesser \
             could find; prefer 32 random bytes (openssl rand -hex 32)"
        ),
        "{warning}"
    );
    assert!(
        !warning.contains("abc ") && !warning.contains("0123"),
        "{warning}"
    );
    for (flag, env, from) in [
        (Some("change-me"), None, "--token"),
        (None, Some("change-me"), "PLANTSTORE_TOKEN"),
    ] {
        let set = tokens(None, flag.map(String::from), env.map(String::from)).unwrap();
        assert_eq!(
            set.warnings,
            [format!(
                "the token from {from} is shorter than 16 bytes, which a guesser could find; \
                 prefer 32 random bytes (openssl rand -hex 32)"
            )]
        );
    }
    let set = tokens(None, Some("0123456789abcdef".into()), None).unwrap();
    assert!(set.warnings.is_empty(), "{:?}", set.warnings);
    assert!(tokens(None, None, None).unwrap().warnings.is_empty());
}

#[test]
fn a_token_file_of_100_000_tokens_loads_and_one_over_16_mib_is_refused() {
    let many: String = (0..100_000).map(|n| format!("{n:064x}\n")).collect();
    let set = token_file("many", many.as_bytes()).unwrap();
    assert_eq!(set.accepted.len(), 100_000);
    let huge = vec![b'#'; (crate::os::MAX_FILE_BYTES + 1) as usize];
    let e = token_file("huge", &huge).unwrap_err();
    assert!(e.starts_with("cannot read token file "), "{e}");
    assert!(e.ends_with("-huge: it is larger than 16 MiB"), "{e}");
}

#[test]
fn bad_values_are_errors() {
    let zero = Config::from_args(args(&["--max-connections", "0"]), Some("t".into()));
    assert!(matches!(zero, Err(ConfigError::Zero("--max-connections"))));
    let level = Config::from_args(args(&["--log-level", "loud"]), Some("t".into()));
    assert!(matches!(level, Err(ConfigError::LogLevel(_))));
    let format = Config::from_args(args(&["--log-format", "xml"]), Some("t".into()));
    assert!(matches!(format, Err(ConfigError::LogFormat(_))));
    let json = Config::from_args(args(&["--log-format", "json"]), Some("t".into()));
    assert_eq!(json.unwrap().log_format, LogFormat::Json);
    let addr = Config::from_args(args(&["--addr", "nowhere"]), Some("t".into()));
    assert!(matches!(addr, Err(ConfigError::Addr(_))));
    let both = Config::from_args(args(&["--token", "a", "--token-file", "f"]), None);
    assert!(matches!(both, Err(ConfigError::TwoTokenSources)));
    let sync = Config::from_args(args(&["--data", "f", "--sync", "maybe"]), None);
    assert!(matches!(sync, Err(ConfigError::Sync(_))));
    let hook = Config::from_args(args(&["--webhook", "ftp://x/"]), Some("t".into()));
    assert!(matches!(hook, Err(ConfigError::Webhook(..))));
    let alone = Config::from_args(args(&["--sync", "never"]), None);
    assert!(matches!(alone, Err(ConfigError::NeedsData("--sync"))));
    let compact = Config::from_args(args(&["--compact-min", "9"]), None);
    assert!(matches!(
        compact,
        Err(ConfigError::NeedsData("--compact-min"))
    ));
    let data = Config::from_args(args(&["--max-data", "0"]), Some("t".into()));
    assert!(matches!(data, Err(ConfigError::Zero("--max-data"))));
    let slash = Config::from_args(
        args(&["--cors-origin", "*", "--cors-origin", "https://a.example/"]),
        Some("t".into()),
    );
    let message = slash.unwrap_err().to_string();
    assert!(
        message.starts_with(r#"--cors-origin "https://a.example/" ends with a slash"#),
        "{message}"
    );
}

/// Regression: `--sync sometimes` without `--data` said "--sync needs
/// --data FILE", hiding the bad value.
#[test]
fn a_bad_value_is_named_before_what_its_flag_needs() {
    let sync = Config::from_args(args(&["--sync", "sometimes"]), Some("t".into()));
    let message = sync.unwrap_err().to_string();
    assert_eq!(message, r#"--sync "sometimes" is not one of always, never"#);
    let token = Config::from_args(args(&["--token", "a b", "--token-file", "f"]), None);
    let message = token.unwrap_err().to_string();
    assert_eq!(message, "the token from --token contains whitespace");
}

#[test]
fn text_limits_are_non_zero_and_fit_in_the_body_limit() {
    let with = |extra: &[&str]| Config::from_args(args(extra), Some("t".into()));
    for flag in ["--max-name", "--max-tag"] {
        assert!(matches!(with(&[flag, "0"]), Err(ConfigError::Zero(f)) if f == flag));
    }
    // (16368 + 16) * 4 + 64 = 65600 > 65536; 16352 + 16 fits exactly.
    let over = with(&["--max-name", "16368", "--max-tag", "16"]);
    assert!(matches!(over, Err(ConfigError::TextOverBody(_, 65536))));
    let text = with(&["--max-name", "16352", "--max-tag", "16"])
        .unwrap()
        .text_limits;
    assert_eq!((text.name, text.tag), (16352, 16));
    let small_body = with(&["--max-body", "1024"]);
    assert!(matches!(small_body, Err(ConfigError::TextOverBody(..))));
    let message = small_body.unwrap_err().to_string();
    assert!(message.contains("--max-body 1024"), "{message}");
    // A tag whose next-page Link would pass the 8 KiB a target may have.
    let big = ["--max-body", "65536", "--max-name", "16"];
    let most = crate::api::longest_next_target(1);
    let most = (crate::http::MAX_TARGET - most) / 12 + 1;
    let at_most = with(&[&big[..], &["--max-tag", &most.to_string()]].concat());
    assert_eq!(at_most.unwrap().text_limits.tag, most);
    let over = with(&[&big[..], &["--max-tag", &(most + 1).to_string()]].concat());
    let message = over.unwrap_err().to_string();
    assert!(
        message.contains(&format!("the most is --max-tag {most}")),
        "{message}"
    );
    let huge = with(&["--max-name", &usize::MAX.to_string()]);
    assert!(matches!(huge, Err(ConfigError::TextOverBody(..))));
}

/// The journal's format bounds a record by the largest body allowed.
#[test]
fn max_body_is_at_most_16_mib() {
    let with = |extra: &[&str]| Config::from_args(args(extra), Some("t".into()));
    let at_cap = with(&["--max-body", "16777216"]).unwrap();
    assert_eq!(at_cap.limits.max_body, 16 << 20);
    let over = with(&["--max-body", "16777217"]);
    assert!(matches!(over, Err(ConfigError::BodyOverCap(16_777_217))));
    let message = over.unwrap_err().to_string();
    assert!(message.contains("--max-body 16777217"), "{message}");
    assert!(message.contains("16 MiB"), "{message}");
}

#[test]
fn defaults_match_the_spec() {
    let config = Config::from_args(args(&[]), Some("t".into())).unwrap();
    assert_eq!(config.addr.to_string(), "127.0.0.1:8080");
    assert_eq!(config.limits.max_connections, 10_000);
    assert_eq!(config.limits.write_timeout, Duration::from_secs(10));
    assert!(config.limits.threads >= 1);
    assert_eq!(config.limits.max_body, 64 * 1024);
    assert_eq!(config.max_plants, 1_000_000);
    assert_eq!(config.text_limits, TextLimits::default());
    assert_eq!(config.max_data, 256 << 20);
    assert_eq!(config.log_level, LevelFilter::Info);
    assert_eq!(config.log_format, LogFormat::Text);
    assert_eq!(config.data, None);
    assert!(!config.cors.enabled());
    assert!(config.ui);
    let durable = Config::from_args(args(&["--data", "p.journal"]), Some("t".into())).unwrap();
    let data = durable.data.unwrap();
    assert_eq!(
        (data.sync, data.compact_min),
        (SyncMode::Always, COMPACT_MIN)
    );
}

#[test]
fn delay_is_min_or_min_to_max_milliseconds_within_the_cap() {
    let ms = Duration::from_millis;
    let parsed = |t: &str| Delay::parse(t).map(|d| (d.min, d.max));
    assert_eq!(parsed("250"), Some((ms(250), ms(250))));
    assert_eq!(parsed("0..1500"), Some((ms(0), ms(1500))));
    assert_eq!(parsed("60000"), Some((ms(60_000), ms(60_000))));
    for bad in [
        "", "..", "5..", "..5", "9..3", "60001", "1..60001", "-1", "1.5", "1 ..2", "x",
    ] {
        assert_eq!(parsed(bad), None, "{bad:?}");
    }
}

#[cfg(feature = "acme")]
#[test]
fn hsts_goes_with_acme_as_with_the_other_https_sources() {
    let dir = std::env::temp_dir().join(format!("plantstore-acme-hsts-{}", std::process::id()));
    let dir = dir.to_str().unwrap();
    let acme = ["--acme-domain", "shop.example.org", "--acme-dir", dir];
    let given = [&["--token", "t", "--hsts", "600"][..], &acme[..]].concat();
    let config = Config::from_args(args(&given), None).expect("--hsts with --acme-domain");
    assert_eq!(config.hsts(), Some(600));
    assert!(config.acme.is_some());
    let alone = Config::from_args(args(&["--token", "t", "--hsts", "600"]), None);
    assert!(matches!(
        alone,
        Err(ConfigError::Https(HttpsError::HstsWithoutTls))
    ));
    let _ = std::fs::remove_dir_all(dir);
}
