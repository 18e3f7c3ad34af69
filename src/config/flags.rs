//! Where flag values come from: the command line, then `PLANTSTORE_<FLAG>`
//! environment variables. [`Flags::gather`] turns both into [`Args`];
//! checking what the values mean is `Config::from_args`'s job, not this
//! module's.
//!
//! The command line is argh's, with one addition: `--flag=value` is read as
//! `--flag value` for the options of [`FLAGS`], up to a bare `--`. Any
//! other `--name=...` is left whole for argh to refuse as unrecognised
//! (`--no-ui=1` is not taken for `--no-ui 1`). `-h` and `-V` are argh's own
//! (`help_triggers` and `short` on `Args`).
//!
//! Every flag of [`FLAGS`] but `--version` has a variable: `PLANTSTORE_`
//! and the long name in upper case with `-` as `_`. A variable counts only
//! when the command line does not give its flag (nor, for [`ALTERNATIVES`],
//! one of the flags it excludes): the command line wins, flag by flag. A
//! set variable is used even when empty, as `PLANTSTORE_TOKEN` always was:
//! an empty option value is checked like any other.
//!
//! - An option's value is taken as it is.
//! - A repeatable flag's value is a comma-separated list; items are
//!   trimmed and empty ones skipped, so an empty variable gives none. There
//!   is no escape for a comma: a `--webhook` URL holding one (rare) has to
//!   be given on the command line, which then replaces the whole variable.
//! - A switch's value is 1, true, yes (given) or 0, false, no (not given),
//!   in any case; anything else stops start-up, naming the variable.
//! - `PLANTSTORE_TOKEN` keeps the meaning it had before the other
//!   variables: it is handed to `Config::from_args` as it is, which uses it
//!   only without `--token-file` and `--token` (and so without
//!   `PLANTSTORE_TOKEN_FILE`), naming it in errors.
//!
//! A variable's value that argh cannot parse (`PLANTSTORE_MAX_NAME=ten`)
//! stops start-up naming the variable. The command line is parsed first,
//! so `-h` shows the help whatever the environment holds. Other
//! `PLANTSTORE_*` variables, and `PLANTSTORE_VERSION`, are ignored with a
//! start-up warning: a misspelt name is then seen, and a variable meant for
//! something else (a test harness's) costs nothing more than a log line.

use std::ffi::OsString;

use argh::{EarlyExit, FromArgs};

use super::{ALTERNATIVES, Args, FLAGS, FlagKind};

/// The prefix of every variable.
const PREFIX: &str = "PLANTSTORE_";

/// What the command line and the environment gave.
#[derive(Debug)]
pub struct Flags {
    /// Both, merged, as argh parsed them.
    pub args: Args,
    /// `PLANTSTORE_TOKEN`, for `Config::from_args` (`None` when unset or
    /// not UTF-8).
    pub env_token: Option<String>,
    /// Variables ignored, for the start-up log (names only, never values).
    pub warnings: Vec<String>,
}

impl Flags {
    /// Parses `argv` (the program name first) over the `PLANTSTORE_*`
    /// variables among `env`. `Err` is argh's early exit: the help (a
    /// success), or a one-line error for exit code 2.
    pub fn gather(
        argv: &[String],
        env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<Flags, EarlyExit> {
        let name = argv.first().map_or("plantstore", String::as_str);
        let command = [name];
        let typed = argv.get(1..).unwrap_or_default();
        let (line, given) = split_equals(typed);
        let line: Vec<&str> = line.iter().map(String::as_str).collect();
        Args::from_args(&command, &line).map_err(advise)?;
        let layer = environment(env, &given).map_err(|message| EarlyExit {
            output: format!("plantstore: {message}"),
            status: Err(()),
        })?;
        // The variables' flags first: a bare `--` on the command line ends
        // flags for argh.
        let merged: Vec<&str> = layer
            .flags
            .iter()
            .map(String::as_str)
            .chain(line.iter().copied())
            .collect();
        Ok(Flags {
            args: Args::from_args(&command, &merged)?,
            env_token: layer.token,
            warnings: layer.warnings,
        })
    }
}

/// The flags of the PostgreSQL build, which a build without it does not
/// know, and their variables: named as such rather than as unknown.
#[cfg(not(feature = "postgres"))]
const DATABASE_FLAGS: &[&str] = &[
    "--database",
    "--database-file",
    "--database-pool",
    "PLANTSTORE_DATABASE",
    "PLANTSTORE_DATABASE_FILE",
    "PLANTSTORE_DATABASE_POOL",
];

/// Variables the server reads that are not settings: a test's hook and a
/// benchmark's switch, each read where it acts (not warned of as unknown).
const HOOKS: &[&str] = &[
    "PLANTSTORE_TEST_CERT_SECONDS",
    "PLANTSTORE_BENCH_NO_CHANGE_LOG",
];

/// What a build without the PostgreSQL store says of its flags.
const DATABASE_BUILD: &str = " is for the PostgreSQL build (plantstore-postgres; or cargo \
     build --release --features postgres --target-dir target/postgres), not this one";

/// Whether `name` (a flag or a variable) is of the PostgreSQL build while
/// this build has no PostgreSQL store.
#[cfg(not(feature = "postgres"))]
fn of_postgres(name: &str) -> bool {
    DATABASE_FLAGS.contains(&name)
}

/// The PostgreSQL build knows its own flags.
#[cfg(feature = "postgres")]
fn of_postgres(_: &str) -> bool {
    false
}

/// argh's error for the command line, told what to do next: a flag of the
/// PostgreSQL build on a build without it is named as such; any other
/// error ends with `see --help`. The help itself passes as it is. One
/// `format!` for both: each costs the plain build.
fn advise(exit: EarlyExit) -> EarlyExit {
    if exit.status.is_ok() {
        return exit;
    }
    let said = exit.output.trim_end();
    let (what, next) = said
        .strip_prefix("Unrecognized argument: ")
        .map(|given| given.split_once('=').map_or(given, |(name, _)| name))
        .filter(|name| of_postgres(name))
        .map_or((said, "; see --help"), |flag| (flag, DATABASE_BUILD));
    EarlyExit {
        output: format!("plantstore: {what}{next}"),
        status: Err(()),
    }
}

/// The variable of `flag`: `max-name` is `PLANTSTORE_MAX_NAME`.
pub fn variable(flag: &str) -> String {
    format!("{PREFIX}{}", flag.to_ascii_uppercase().replace('-', "_"))
}

fn takes_value(kind: FlagKind) -> bool {
    matches!(
        kind,
        FlagKind::Option | FlagKind::Repeated | FlagKind::Token
    )
}

/// `typed` with `--flag=value` as `--flag value` for the options of
/// [`FLAGS`] before any bare `--`, and the long names of the flags given.
/// An option's value is stepped over, so a value that looks like a flag
/// (`--token --x=y`) is left alone, as argh will read it.
fn split_equals(typed: &[String]) -> (Vec<String>, Vec<&'static str>) {
    let mut line = Vec::with_capacity(typed.len());
    let mut given = Vec::new();
    let mut rest = typed.iter();
    while let Some(token) = rest.next() {
        if token == "--" {
            line.push(token.clone());
            line.extend(rest.by_ref().cloned());
            break;
        }
        let long = match token.strip_prefix("--") {
            Some(long) => long,
            None if token == "-V" => "version",
            None => {
                line.push(token.clone());
                continue;
            }
        };
        let (name, value) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (long, None),
        };
        let Some(&(flag, kind)) = FLAGS.iter().find(|(flag, _)| *flag == name) else {
            line.push(token.clone());
            continue;
        };
        if value.is_some() && !takes_value(kind) {
            line.push(token.clone());
            continue;
        }
        given.push(flag);
        match value {
            Some(value) => line.extend([format!("--{flag}"), value.to_string()]),
            None => {
                line.push(token.clone());
                if takes_value(kind) {
                    line.extend(rest.next().cloned());
                }
            }
        }
    }
    (line, given)
}

/// What the variables give: flags for argh, `PLANTSTORE_TOKEN`, warnings.
#[derive(Debug, Default, PartialEq)]
struct Layer {
    flags: Vec<String>,
    token: Option<String>,
    warnings: Vec<String>,
}

/// The flags the `PLANTSTORE_*` variables among `env` give, leaving out
/// those of the flags in `given` (and of their [`ALTERNATIVES`]). `Err` is
/// a message naming the variable.
fn environment(
    env: impl IntoIterator<Item = (OsString, OsString)>,
    given: &[&str],
) -> Result<Layer, String> {
    // A list, not a map: a handful of variables, and a map of them (with
    // the sort that builds it) costs about 10 KiB of binary.
    let mut vars: Vec<(String, OsString)> = env
        .into_iter()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value)))
        .filter(|(name, _)| name.starts_with(PREFIX) && !HOOKS.contains(&name.as_str()))
        .collect();
    let mut layer = Layer::default();
    for &(flag, kind) in FLAGS {
        let name = variable(flag);
        let Some(value) = take(&mut vars, &name) else {
            continue;
        };
        match kind {
            FlagKind::CommandLine => {
                layer.warnings.push(format!(
                    "{name} is ignored: --{flag} is for the command line only"
                ));
                continue;
            }
            // As before: unusable text is as if unset.
            FlagKind::Token => {
                layer.token = value.into_string().ok();
                continue;
            }
            _ if excluded(flag, given) => continue,
            _ => {}
        }
        let value = value
            .into_string()
            .map_err(|_| format!("{name} is not valid UTF-8"))?;
        let flags = from_variable(flag, kind, &value)
            .ok_or_else(|| format!("{name} {value:?} is not one of 1, true, yes, 0, false, no"))?;
        // Parsed alone, so that a value argh refuses is blamed on its
        // variable (argh's message names the flag and the value).
        let alone: Vec<&str> = flags.iter().map(String::as_str).collect();
        if let Err(exit) = Args::from_args(&["plantstore"], &alone) {
            return Err(format!("{name}: {}", exit.output.trim()));
        }
        layer.flags.extend(flags);
    }
    // In order of name, once each, whatever the environment's order.
    let mut unknown: Vec<String> = Vec::new();
    for (name, _) in vars {
        if let Err(at) = unknown.binary_search(&name) {
            unknown.insert(at, name);
        }
    }
    for name in unknown {
        let why = match of_postgres(&name) {
            true => DATABASE_BUILD,
            false => " is not a plantstore setting",
        };
        layer.warnings.push(format!("{name}{why}; ignored"));
    }
    Ok(layer)
}

/// The value of the variable `name` (the last one, should the environment
/// hold it twice), taken out of `vars` with every other entry of it.
fn take(vars: &mut Vec<(String, OsString)>, name: &str) -> Option<OsString> {
    let mut value = None;
    vars.retain_mut(|(n, v)| {
        let keep = n != name;
        if !keep {
            value = Some(std::mem::take(v));
        }
        keep
    });
    value
}

/// Whether the command line gave `flag` or a flag that excludes it.
fn excluded(flag: &str, given: &[&str]) -> bool {
    given.contains(&flag)
        || ALTERNATIVES
            .iter()
            .any(|group| group.contains(&flag) && group.iter().any(|f| given.contains(f)))
}

/// The command-line form of `flag`'s variable holding `value`; `None` for
/// a switch's value that is neither yes nor no.
fn from_variable(flag: &str, kind: FlagKind, value: &str) -> Option<Vec<String>> {
    let long = format!("--{flag}");
    Some(match kind {
        FlagKind::Repeated => value
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .flat_map(|item| [long.clone(), item.to_string()])
            .collect(),
        FlagKind::Switch => match value.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" => vec![long],
            "0" | "false" | "no" => Vec::new(),
            _ => return None,
        },
        _ => vec![long, value.to_string()],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(typed: &[&str]) -> Vec<String> {
        ["plantstore"]
            .iter()
            .chain(typed)
            .map(|s| s.to_string())
            .collect()
    }

    fn env(vars: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        vars.iter()
            .map(|(n, v)| ((*n).into(), (*v).into()))
            .collect()
    }

    fn gather(typed: &[&str], vars: &[(&str, &str)]) -> Result<Flags, String> {
        Flags::gather(&argv(typed), env(vars)).map_err(|exit| exit.output)
    }

    /// `--help` as argh writes it for `Args`.
    fn help() -> String {
        Args::from_args(&["plantstore"], &["--help"])
            .unwrap_err()
            .output
    }

    #[test]
    fn the_table_names_every_flag_of_args_with_its_kind() {
        let help = help();
        let usage = help.lines().next().unwrap();
        for &(flag, kind) in FLAGS {
            let form = match kind {
                FlagKind::Option | FlagKind::Token => format!("[--{flag} <{flag}>]"),
                FlagKind::Repeated => format!("[--{flag} <{flag}...>]"),
                FlagKind::Switch => format!("[--{flag}]"),
                FlagKind::CommandLine => format!("--{flag}"),
            };
            let haystack = if kind == FlagKind::CommandLine {
                &help
            } else {
                usage
            };
            assert!(haystack.contains(&form), "{form} in {usage}");
        }
        let options = help
            .lines()
            .skip_while(|line| *line != "Options:")
            .take_while(|line| !line.is_empty())
            .filter(|line| line.starts_with("  -") && !line.contains("--help"))
            .count();
        assert_eq!(options, FLAGS.len(), "a flag of Args is missing from FLAGS");
    }

    #[test]
    fn help_names_the_variables() {
        let help = gather(&["-h"], &[]).unwrap_err();
        assert!(help.contains("PLANTSTORE_<FLAG>"), "{help}");
        assert!(help.contains("PLANTSTORE_ADDR"), "{help}");
        let bad = gather(&["--help"], &[("PLANTSTORE_NO_UI", "maybe")]).unwrap_err();
        assert_eq!(bad, help, "help whatever the environment holds");
    }

    #[test]
    fn variables_give_flags_the_command_line_does_not() {
        let flags = gather(
            &["--max-tag", "9", "--cors-origin", "https://c.example"],
            &[
                ("PLANTSTORE_MAX_NAME", "10"),
                ("PLANTSTORE_MAX_TAG", "20"),
                ("PLANTSTORE_WEBHOOK", "http://a/x, ,http://b/y,"),
                (
                    "PLANTSTORE_CORS_ORIGIN",
                    "https://a.example,https://b.example",
                ),
                ("PLANTSTORE_NO_UI", "Yes"),
                ("PLANTSTORE_DATA", ""),
                ("LANG", "C.UTF-8"),
            ],
        )
        .unwrap();
        let args = flags.args;
        assert_eq!((args.max_name, args.max_tag), (10, 9));
        assert_eq!(args.webhook, ["http://a/x", "http://b/y"]);
        assert_eq!(args.cors_origin, ["https://c.example"], "the flag wins");
        assert!(args.no_ui);
        assert_eq!(args.data, Some("".into()), "set, though empty");
        assert!(flags.warnings.is_empty(), "{:?}", flags.warnings);
        for (value, given) in [("0", false), ("no", false), ("FALSE", false), ("1", true)] {
            let args = gather(&[], &[("PLANTSTORE_NO_UI", value)]).unwrap().args;
            assert_eq!(args.no_ui, given, "{value}");
        }
        assert!(
            gather(&[], &[("PLANTSTORE_WEBHOOK", "")])
                .unwrap()
                .args
                .webhook
                .is_empty()
        );
    }

    #[test]
    fn a_bad_variable_is_named() {
        for (var, value, says) in [
            (
                "PLANTSTORE_NO_UI",
                "maybe",
                r#"PLANTSTORE_NO_UI "maybe" is not one of"#,
            ),
            (
                "PLANTSTORE_NO_UI",
                "",
                r#"PLANTSTORE_NO_UI "" is not one of"#,
            ),
            (
                "PLANTSTORE_MAX_NAME",
                "ten",
                "PLANTSTORE_MAX_NAME: Error parsing option '--max-name' with value 'ten'",
            ),
        ] {
            let error = gather(&[], &[(var, value)]).unwrap_err();
            assert!(error.starts_with(&format!("plantstore: {says}")), "{error}");
        }
        let ignored = gather(&["--max-name", "5"], &[("PLANTSTORE_MAX_NAME", "ten")]);
        assert_eq!(ignored.unwrap().args.max_name, 5, "not used, not checked");
    }

    #[test]
    fn the_token_variable_keeps_its_place_below_both_token_flags() {
        let flags = gather(
            &[],
            &[("PLANTSTORE_TOKEN", "e"), ("PLANTSTORE_TOKEN_FILE", "f")],
        )
        .unwrap();
        assert_eq!(flags.env_token.as_deref(), Some("e"));
        assert_eq!(flags.args.token, None, "not made --token");
        assert_eq!(flags.args.token_file, Some("f".into()));
        let flags = gather(&["--token", "t"], &[("PLANTSTORE_TOKEN_FILE", "f")]).unwrap();
        assert_eq!(flags.args.token_file, None, "--token keeps the file out");
        assert_eq!(flags.args.token.as_deref(), Some("t"));
        let flags = gather(&["--token-file=g"], &[("PLANTSTORE_TOKEN_FILE", "f")]).unwrap();
        assert_eq!(flags.args.token_file, Some("g".into()));
    }

    #[test]
    fn flag_equals_value_is_flag_then_value() {
        let flags = gather(
            &[
                "--max-name=10",
                "--webhook=http://a/?x=1",
                "--webhook",
                "http://b/",
                "--addr=",
            ],
            &[],
        )
        .unwrap();
        assert_eq!(flags.args.max_name, 10);
        assert_eq!(flags.args.webhook, ["http://a/?x=1", "http://b/"]);
        assert_eq!(flags.args.addr, "");
        for (typed, refused) in [
            (&["--no-ui=1"][..], "--no-ui=1"),
            (&["--nope=1"], "--nope=1"),
            (&["--", "--max-name=1"], "--max-name=1"),
        ] {
            let error = gather(typed, &[]).unwrap_err();
            assert!(error.contains(refused), "{typed:?}: {error}");
        }
        let (line, given) = split_equals(&argv(&["--token", "--data=x", "-V"])[1..]);
        assert_eq!(line, ["--token", "--data=x", "-V"], "a value is left alone");
        assert_eq!(given, ["token", "version"]);
    }

    #[test]
    fn version_comes_from_the_command_line_only() {
        assert!(gather(&["-V"], &[]).unwrap().args.version);
        let flags = gather(
            &[],
            // Not a setting in any build (PLANTSTORE_DATABASE is one with
            // the postgres feature).
            &[("PLANTSTORE_VERSION", "1"), ("PLANTSTORE_DATABSE", "x")],
        )
        .unwrap();
        assert!(!flags.args.version);
        assert_eq!(
            flags.warnings,
            [
                "PLANTSTORE_VERSION is ignored: --version is for the command line only",
                "PLANTSTORE_DATABSE is not a plantstore setting; ignored",
            ]
        );
    }

    #[test]
    fn a_variable_set_twice_counts_once_and_unknown_ones_come_sorted() {
        let flags = gather(
            &[],
            &[
                ("PLANTSTORE_ZZ", "1"),
                ("PLANTSTORE_MAX_NAME", "5"),
                ("PLANTSTORE_AA", "1"),
                ("PLANTSTORE_MAX_NAME", "7"),
                ("PLANTSTORE_ZZ", "2"),
            ],
        )
        .unwrap();
        assert_eq!(flags.args.max_name, 7, "the last one, as a map keeps");
        assert_eq!(
            flags.warnings,
            [
                "PLANTSTORE_AA is not a plantstore setting; ignored",
                "PLANTSTORE_ZZ is not a plantstore setting; ignored",
            ]
        );
    }

    #[test]
    fn the_hooks_the_server_reads_are_not_called_unknown() {
        let flags = gather(
            &[],
            &[
                ("PLANTSTORE_BENCH_NO_CHANGE_LOG", "1"),
                ("PLANTSTORE_TEST_CERT_SECONDS", "6"),
                ("PLANTSTORE_TEST_DATABASE", "postgres://x"),
            ],
        )
        .unwrap();
        assert_eq!(
            flags.warnings,
            ["PLANTSTORE_TEST_DATABASE is not a plantstore setting; ignored"]
        );
    }

    #[test]
    fn a_command_line_error_says_what_to_do_next() {
        for typed in [&["--nope"][..], &["--max-name", "ten"], &["--addr"]] {
            let error = gather(typed, &[]).unwrap_err();
            assert!(error.starts_with("plantstore: "), "{typed:?}: {error}");
            assert!(error.ends_with("; see --help"), "{typed:?}: {error}");
            assert_eq!(error.lines().count(), 1, "{error}");
        }
        let help = gather(&["--help"], &[]).unwrap_err();
        assert!(!help.contains("see --help") && help.contains("Options:"));
    }

    #[cfg(not(feature = "postgres"))]
    #[test]
    fn a_flag_of_the_postgresql_build_names_that_build() {
        for (typed, flag) in [
            (&["--database", "postgres://h/d"][..], "--database"),
            (&["--database-file=/etc/db"], "--database-file"),
            (
                &["--max-name", "9", "--database-pool", "2"],
                "--database-pool",
            ),
        ] {
            let error = gather(typed, &[]).unwrap_err();
            assert_eq!(error, format!("plantstore: {flag}{DATABASE_BUILD}"));
            assert!(error.contains("--features postgres"), "{error}");
        }
        let flags = gather(&[], &[("PLANTSTORE_DATABASE", "postgres://h/d")]).unwrap();
        assert_eq!(
            flags.warnings,
            [format!("PLANTSTORE_DATABASE{DATABASE_BUILD}; ignored")]
        );
    }

    #[test]
    fn variable_names_follow_the_flags() {
        assert_eq!(variable("max-name"), "PLANTSTORE_MAX_NAME");
        assert_eq!(variable("addr"), "PLANTSTORE_ADDR");
    }
}
