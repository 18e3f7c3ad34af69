//! `ConfigError`: a flag value that cannot be used, named with the flag
//! (and, for a file, the path and line). `main` prints it and exits 2.

use std::fmt;
use std::io;
use std::path::PathBuf;

use super::{AcmeError, DatabaseError, Delay, HttpsError, body_for};
use crate::model::{MAX_TEXT_BYTES, TextLimits};
use crate::os::FileError;

/// A flag value that cannot be used.
#[derive(Debug)]
pub enum ConfigError {
    /// `--addr` is not an address.
    Addr(String),
    /// A limit or timeout flag is zero.
    Zero(&'static str),
    /// `--max-body` is over [`MAX_TEXT_BYTES`] (the value given).
    BodyOverCap(usize),
    /// `--max-name` and `--max-tag` allow plants whose body cannot fit in
    /// `--max-body` (the name and tag limits, the body limit).
    TextOverBody(TextLimits, usize),
    /// `--max-tag` allows a tag whose next-page `Link` is longer than a
    /// request target may be (the value given, the most allowed).
    TagOverLink(usize, usize),
    /// `--log-level` is not a level.
    LogLevel(String),
    /// `--log-format` is neither `text` nor `json`.
    LogFormat(String),
    /// `--token` and `--token-file` together.
    TwoTokenSources,
    /// A token from `--token` or `PLANTSTORE_TOKEN` cannot be used (the
    /// source, why).
    BadToken(&'static str, &'static str),
    /// A token in the token file cannot be used (the file, its 1-based line
    /// number, why).
    BadTokenLine(PathBuf, usize, &'static str),
    /// `--ticket-ttl` outside 1 to 3600 seconds (the value given).
    TicketTtl(u64),
    /// A `--trusted-proxy` that is not an address or a CIDR block (as
    /// given, and why).
    TrustedProxy(String, &'static str),
    /// The token file cannot be read (not a regular file, over 16 MiB,
    /// not text, or an I/O error).
    TokenFile(PathBuf, FileError),
    /// The token file has no token in it.
    NoTokenInFile(PathBuf),
    /// The OS random source failed.
    Random(io::Error),
    /// `--sync` is neither `always` nor `never`.
    Sync(String),
    /// A journal flag without `--data`.
    NeedsData(&'static str),
    /// A `--webhook` URL that cannot be used (the URL, why).
    Webhook(String, String),
    /// The webhook secret file cannot be read (as for `TokenFile`) or
    /// holds no key.
    WebhookSecret(PathBuf, String),
    /// A `--cors-origin` that no browser would send (the value, why).
    CorsOrigin(String, &'static str),
    /// An HTTPS flag that cannot be used (none in the plain build).
    Https(HttpsError),
    /// A database flag that cannot be used (none in a build without the
    /// PostgreSQL store).
    Database(DatabaseError),
    /// An `--acme-*` flag that cannot be used (none in a build without
    /// ACME).
    Acme(AcmeError),
    /// `--delay` that is not `MIN` or `MIN..MAX` milliseconds within range.
    Delay(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Addr(a) => write!(
                f,
                "--addr {a:?} is not a socket address such as 127.0.0.1:8080"
            ),
            ConfigError::Zero(flag) => write!(f, "{flag} must be greater than 0"),
            ConfigError::Delay(given) => write!(
                f,
                "--delay {given:?} is not MIN or MIN..MAX whole milliseconds, MIN at most MAX, \
                 MAX at most {}",
                Delay::MAX_MS
            ),
            ConfigError::TicketTtl(given) => {
                write!(
                    f,
                    "--ticket-ttl must be from 1 to 3600 seconds, not {given}"
                )
            }
            ConfigError::BodyOverCap(body) => write!(
                f,
                "--max-body {body} is over the most a plant may take, {MAX_TEXT_BYTES} bytes (16 MiB)"
            ),
            ConfigError::TextOverBody(text, body) => write!(
                f,
                "--max-name {} and --max-tag {} allow bodies of up to {} bytes, \
                 more than --max-body {body}",
                text.name,
                text.tag,
                body_for(*text)
            ),
            ConfigError::TagOverLink(tag, most) => write!(
                f,
                "--max-tag {tag} allows tags whose next-page Link would be longer than \
                 the 8 KiB a request target may have (following it would be a 414); \
                 the most is --max-tag {most}"
            ),
            ConfigError::LogLevel(l) => {
                write!(
                    f,
                    "--log-level {l:?} is not one of error, warn, info, debug, trace"
                )
            }
            ConfigError::LogFormat(l) => write!(f, "--log-format {l:?} is not one of text, json"),
            ConfigError::TwoTokenSources => f.write_str("give --token or --token-file, not both"),
            ConfigError::BadToken(from, why) => write!(f, "the token from {from} {why}"),
            ConfigError::TrustedProxy(proxy, why) => {
                write!(f, "--trusted-proxy {proxy:?} {why}")
            }
            ConfigError::BadTokenLine(p, line, why) => {
                write!(f, "token file {} line {line}: the token {why}", p.display())
            }
            ConfigError::TokenFile(p, e) => {
                write!(f, "cannot read token file {}: {e}", p.display())
            }
            ConfigError::NoTokenInFile(p) => write!(f, "token file {} holds no token", p.display()),
            ConfigError::Random(e) => write!(f, "cannot read the OS random source: {e}"),
            ConfigError::Sync(s) => write!(f, "--sync {s:?} is not one of always, never"),
            ConfigError::NeedsData(flag) => write!(f, "{flag} needs --data FILE"),
            ConfigError::Webhook(url, why) => write!(f, "--webhook {url:?} {why}"),
            ConfigError::WebhookSecret(p, why) => {
                write!(f, "webhook secret file {}: {why}", p.display())
            }
            ConfigError::CorsOrigin(origin, why) => write!(f, "--cors-origin {origin:?} {why}"),
            ConfigError::Https(e) => e.fmt(f),
            ConfigError::Database(e) => e.fmt(f),
            ConfigError::Acme(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::TokenFile(_, e) => Some(e),
            ConfigError::Random(e) => Some(e),
            _ => None,
        }
    }
}
