//! Where the bearer tokens and the webhook secret come from, and what a
//! token may be.
//!
//! Token precedence: `--token-file` or `--token` (not both), else the
//! `PLANTSTORE_TOKEN` environment variable, else a random token made here.
//! A token, from any source, must be one that a client can send and that
//! can therefore match: not empty, no whitespace inside (RFC 6750's
//! credential has none), no control characters (a header cannot carry
//! them), at most [`MAX_TOKEN`] bytes. One that breaks these rules stops
//! start-up, naming its source (and for a token file, the line), rather
//! than being accepted and never matching. A token file may start with a
//! UTF-8 byte order mark, which is not part of the first token. A token
//! repeated in the file is harmless but likely a mistake: it becomes a
//! warning in `Config::warnings`, for the caller to log; so is a token
//! shorter than [`SHORT_TOKEN`] bytes, which a guesser could find even at
//! `--auth-failures` a minute (the warning names its source or lines,
//! never the token). The same readers serve a reload (`read_tokens`,
//! `read_webhook_secret`).
//!
//! Both files are read by `os::read_text`: a regular file only (a FIFO, a
//! device or a directory is refused before it is opened, so a read never
//! hangs), at most 16 MiB (a file of 100,000 tokens fits).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{ConfigError, TokenSource};
use crate::api::{Grant, Scope};
use crate::{os, webhook};

/// The key in a `--webhook-secret-file`, checked as at start-up (for a
/// reload).
pub fn read_webhook_secret(path: &Path) -> Result<Vec<u8>, ConfigError> {
    let text = os::read_text(path)
        .map_err(|e| ConfigError::WebhookSecret(path.to_path_buf(), e.to_string()))?;
    webhook::read_secret(&text).map_err(|why| ConfigError::WebhookSecret(path.to_path_buf(), why))
}

/// The tokens in a `--token-file`, checked as at start-up, and the
/// warnings about it (for a reload).
pub fn read_tokens(path: &Path) -> Result<(Vec<Grant>, Vec<String>), ConfigError> {
    let set = read_token_file(path.to_path_buf())?;
    Ok((set.accepted, set.warnings))
}

/// The longest token accepted, in bytes. A request head is at most 16 KiB,
/// and the `Authorization` header shares it with the rest; no real token
/// comes near this (a generated one is 64 bytes).
pub const MAX_TOKEN: usize = 4096;

/// A token shorter than this, in bytes, is a start-up warning.
const SHORT_TOKEN: usize = 16;

/// The end of the warning about a short token.
macro_rules! short {
    () => {
        "shorter than 16 bytes, which a guesser could find; \
         prefer 32 random bytes (openssl rand -hex 32)"
    };
}

/// Why `token` (already trimmed) cannot be used, if it cannot.
fn token_fault(token: &str) -> Option<&'static str> {
    if token.is_empty() {
        Some("is empty")
    } else if token.len() > MAX_TOKEN {
        Some("is longer than 4096 bytes")
    } else if token.contains(char::is_whitespace) {
        Some("contains whitespace") // tabs and line breaks included
    } else if token.contains(char::is_control) {
        Some("contains a control character")
    } else {
        None
    }
}

/// The tokens the flags resolve to.
#[derive(Debug)]
pub(super) struct TokenSet {
    /// Accepted tokens, each once (never empty).
    pub(super) accepted: Vec<Grant>,
    /// Where they came from.
    pub(super) source: TokenSource,
    /// Warnings for the start-up log.
    pub(super) warnings: Vec<String>,
}

impl TokenSet {
    fn one(token: String, source: TokenSource) -> TokenSet {
        TokenSet {
            accepted: vec![Grant::write(token)],
            source,
            warnings: Vec::new(),
        }
    }
}

pub(super) fn tokens(
    file: Option<PathBuf>,
    flag: Option<String>,
    env: Option<String>,
) -> Result<TokenSet, ConfigError> {
    let single = |token: String, from: &'static str, source: TokenSource| {
        let token = token.trim();
        match token_fault(token) {
            Some(why) => Err(ConfigError::BadToken(from, why)),
            None => {
                let mut set = TokenSet::one(token.to_string(), source);
                if token.len() < SHORT_TOKEN {
                    set.warnings
                        .push(format!(concat!("the token from {} is ", short!()), from));
                }
                Ok(set)
            }
        }
    };
    match (file, flag, env) {
        // A bad --token is named as such; the file is not read only to
        // refuse it.
        (Some(_), Some(token), _) => {
            single(token, "--token", TokenSource::Flag)?;
            Err(ConfigError::TwoTokenSources)
        }
        (Some(path), None, _) => read_token_file(path),
        (None, Some(token), _) => single(token, "--token", TokenSource::Flag),
        (None, None, Some(token)) => single(token, "PLANTSTORE_TOKEN", TokenSource::Env),
        (None, None, None) => Ok(TokenSet::one(random_token()?, TokenSource::Generated)),
    }
}

/// One token per line, `TOKEN` (read and write) or `TOKEN read` (or
/// `TOKEN write`); blank lines and `#` comments ignored, a leading byte
/// order mark skipped. A repeated token is kept once (its first line's
/// scope), with a warning naming both lines.
pub(super) fn read_token_file(path: PathBuf) -> Result<TokenSet, ConfigError> {
    let text = os::read_text(&path).map_err(|e| ConfigError::TokenFile(path.clone(), e))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    // The first line of each token. A map keeps a file of many tokens
    // n log n (a linear search took 26 s for 100,000); the tree costs less
    // binary than a hash map.
    let mut first_line: BTreeMap<&str, usize> = BTreeMap::new();
    let mut tokens = Vec::new();
    let mut warnings = Vec::new();
    // The short tokens: how many, and the first one's line.
    let (mut short_tokens, mut first_short) = (0, None);
    for (index, line) in text.lines().enumerate() {
        // Words are split at ASCII spaces and tabs only: other whitespace
        // inside a token is refused as before.
        let mut words = line.trim().split_ascii_whitespace();
        let Some(token) = words.next().filter(|t| !t.starts_with('#')) else {
            continue;
        };
        let line = index + 1;
        if let Some(why) = token_fault(token) {
            return Err(ConfigError::BadTokenLine(path, line, why));
        }
        let scope = match (words.next(), words.next()) {
            (None, _) | (Some("write"), None) => Scope::Write,
            (Some("read"), None) => Scope::Read,
            (Some(_), None) => {
                return Err(ConfigError::BadTokenLine(
                    path,
                    line,
                    "has a scope other than read or write",
                ));
            }
            (Some(_), Some(_)) => {
                return Err(ConfigError::BadTokenLine(
                    path,
                    line,
                    "is followed by more than a scope",
                ));
            }
        };
        match first_line.get(token) {
            Some(first) => warnings.push(format!(
                "token file {} line {line} repeats the token of line {first}",
                path.display()
            )),
            None => {
                if token.len() < SHORT_TOKEN {
                    short_tokens += 1;
                    first_short.get_or_insert(line);
                }
                first_line.insert(token, line);
                tokens.push(Grant {
                    token: token.to_string(),
                    scope,
                });
            }
        }
    }
    if tokens.is_empty() {
        return Err(ConfigError::NoTokenInFile(path));
    }
    if let Some(first) = first_short {
        warnings.push(format!(
            concat!(
                "token file {} line {} (the first of {}): a token ",
                short!()
            ),
            path.display(),
            first,
            short_tokens
        ));
    }
    Ok(TokenSet {
        accepted: tokens,
        source: TokenSource::File,
        warnings,
    })
}

/// 256 random bits from the OS, as 64 hex digits.
fn random_token() -> Result<String, ConfigError> {
    os::random_hex(32).map_err(ConfigError::Random)
}
