//! The validated configuration: `Config::from_args` is the only place
//! flags are checked and resolved.
//!
//! Files: `args.rs` (the flags as typed, `Args`, and the [`FLAGS`] table),
//! `flags.rs` (`--flag=value` and the `PLANTSTORE_<FLAG>` variables merged
//! with the command line into `Args`), `tokens.rs` (where bearer tokens and
//! the webhook secret come from, and what a token may be), `error.rs`
//! ([`ConfigError`]).
//!
//! Checked here: the address, non-zero limits, the log level, the journal
//! and database flags (the store's settings are the model's words,
//! `Capacity` and `Durability`; the `--database` URL is checked by
//! `crate::dbconfig`, so no store is imported here), the webhook URLs. `--sync` and `--compact-min` need
//! `--data`. Each value is checked on its own before the flags it needs or
//! excludes, so a bad value is named as such whatever the other flags
//! (`--sync sometimes` alone is a bad `--sync`, not a missing `--data`).
//! Nothing in this module logs; `main` reports errors and exits 2, and the
//! caller logs [`Config::warnings`].

mod args;
mod error;
pub mod flags;
mod options;
#[cfg(test)]
mod tests;
mod tokens;

pub use args::{ALTERNATIVES, Args, FEATURES, FLAGS, FlagKind};
pub use error::ConfigError;
pub use options::{AcmeError, DatabaseError, HttpsError};
pub use tokens::{MAX_TOKEN, read_tokens, read_webhook_secret};

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use log::LevelFilter;

use crate::api::{Cors, Grant, Guard, longest_next_target};
use crate::http::{Limits, MAX_TARGET};
use crate::logging::Format as LogFormat;
use crate::model::{Durability, MAX_TEXT_BYTES, SyncMode, TextLimits};
use crate::webhook::{Target, WebhookConfig};
use tokens::tokens;

/// Where the accepted tokens came from (for the start-up log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    /// `--token-file`.
    File,
    /// `--token`.
    Flag,
    /// `PLANTSTORE_TOKEN`.
    Env,
    /// Made at start-up; printed once to stderr.
    Generated,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to bind.
    pub addr: SocketAddr,
    /// Engine limits and timeouts.
    pub limits: Limits,
    /// Most plants stored.
    pub max_plants: usize,
    /// Longest name and tag, in characters.
    pub text_limits: TextLimits,
    /// Bytes of names and tags the store may hold.
    pub max_data: u64,
    /// Accepted bearer tokens and their scopes (never empty).
    pub tokens: Vec<Grant>,
    /// `--read-only`: every change is refused, whatever the token.
    pub read_only: bool,
    /// `--auth-failures` and `--trusted-proxy`: who is throttled and how.
    pub guard: Guard,
    /// `--ticket-ttl`: how long a change feed ticket is valid.
    pub ticket_ttl: Duration,
    /// Where the tokens came from.
    pub token_source: TokenSource,
    /// `--token-file`: read again on SIGHUP.
    pub token_file: Option<PathBuf>,
    /// `--webhook-secret-file`: read again on SIGHUP.
    pub webhook_secret_file: Option<PathBuf>,
    /// Start-up warnings about the configuration (a token repeated in the
    /// token file), to be logged once logging is set up; never a token.
    pub warnings: Vec<String>,
    /// Log verbosity.
    pub log_level: LevelFilter,
    /// Log line format.
    pub log_format: LogFormat,
    /// The journal, with `--data`; `None` keeps plants in memory only.
    pub data: Option<Durability>,
    /// Webhook subscribers and how to reach them (no targets: none).
    pub webhook: WebhookConfig,
    /// Plants to load at start-up into an empty store (`--seed`).
    pub seed: Option<PathBuf>,
    /// Origins whose pages may read the answers (none: no CORS headers).
    pub cors: Cors,
    /// Whether the built-in page is served at `/`.
    pub ui: bool,
    /// `--delay`: each API answer held for a random time in this range
    /// (inclusive, milliseconds; `None` when not given).
    pub delay: Option<Delay>,
    /// `--allow-reset`: `POST /plants/reset` is served (else a 404).
    pub allow_reset: bool,
    /// The PostgreSQL store, with `--database`.
    pub database: Option<crate::dbconfig::DatabaseConfig>,
    /// HTTPS, with `--tls-cert` and `--tls-key` (the files, read again on
    /// SIGHUP, and what they made at start) or `--tls-auto` (the
    /// directory, checked).
    pub tls: Option<crate::certs::Setup>,
    /// `--hsts`: the `max-age` of `Strict-Transport-Security` on answers
    /// over HTTPS.
    pub hsts: Option<crate::transport::Hsts>,
    /// `--acme-domain` and its flags: the certificate from an ACME CA.
    pub acme: Option<crate::certs::acme::Settings>,
}

impl Config {
    /// HTTPS, as the flags chose it (always `None` in a build without
    /// TLS, which has no such flags).
    pub fn https(&self) -> Option<&crate::certs::Setup> {
        self.tls.as_ref()
    }

    /// `--hsts` (always `None` in a build without TLS).
    pub fn hsts(&self) -> Option<u64> {
        self.hsts.as_ref().map(crate::transport::Hsts::seconds)
    }

    /// Validates flags; `env_token` is the value of `PLANTSTORE_TOKEN`.
    pub fn from_args(mut args: Args, env_token: Option<String>) -> Result<Config, ConfigError> {
        // The HTTPS flags are read last, after others that are moved out.
        let mut https_flags = options::HttpsFlags::take(&mut args);
        let addr = parse_addr(&args.addr)?;
        let log_level = args
            .log_level
            .parse::<LevelFilter>()
            .ok()
            .filter(|l| *l != LevelFilter::Off)
            .ok_or_else(|| ConfigError::LogLevel(args.log_level.clone()))?;
        let log_format = match args.log_format.as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            _ => return Err(ConfigError::LogFormat(args.log_format)),
        };
        let positive = |value: u64, flag: &'static str| {
            if value == 0 {
                Err(ConfigError::Zero(flag))
            } else {
                Ok(value)
            }
        };
        let limits = Limits {
            max_connections: positive(args.max_connections as u64, "--max-connections")? as usize,
            max_body: positive(args.max_body as u64, "--max-body")? as usize,
            head_timeout: Duration::from_secs(positive(args.head_timeout, "--head-timeout")?),
            body_timeout: Duration::from_secs(positive(args.body_timeout, "--body-timeout")?),
            idle_timeout: Duration::from_secs(positive(args.idle_timeout, "--idle-timeout")?),
            write_timeout: Duration::from_secs(positive(args.write_timeout, "--write-timeout")?),
            threads: match args.threads {
                Some(n) => positive(n as u64, "--threads")? as usize,
                None => Limits::default().threads,
            },
            ..Limits::default()
        };
        if limits.max_body > MAX_TEXT_BYTES {
            return Err(ConfigError::BodyOverCap(limits.max_body));
        }
        positive(args.max_plants as u64, "--max-plants")?;
        let (database, database_warning) =
            options::database(&args).map_err(ConfigError::Database)?;
        let text_limits = text_limits(&args, limits.max_body)?;
        positive(args.max_data, "--max-data")?;
        let acme =
            options::acme(&args, https_flags.certificate_flags()).map_err(ConfigError::Acme)?;
        let token_file = args.token_file.clone();
        let webhook_secret_file = args.webhook_secret_file.clone();
        let tokens = tokens(args.token_file, args.token, env_token)?;
        let mut warnings = tokens.warnings;
        if let Some(warning) = database_warning {
            warnings.push(warning);
        }
        let data = durability(args.data, args.sync, args.compact_min)?;
        positive(args.webhook_queue as u64, "--webhook-queue")?;
        let mut webhook =
            webhook_config(args.webhook, args.webhook_secret_file, args.webhook_queue)?;
        options::webhook_tls(&https_flags, &mut webhook, &mut warnings)
            .map_err(ConfigError::Https)?;
        if !(1..=3600).contains(&args.ticket_ttl) {
            return Err(ConfigError::TicketTtl(args.ticket_ttl));
        }
        let guard = Guard::parse(args.auth_failures, &args.trusted_proxy)
            .map_err(|(proxy, why)| ConfigError::TrustedProxy(proxy, why))?;
        let delay = match args.delay.as_deref() {
            Some(given) => {
                Some(Delay::parse(given).ok_or_else(|| ConfigError::Delay(given.to_owned()))?)
            }
            None => None,
        };
        let cors = Cors::parse(&args.cors_origin)
            .map_err(|(origin, why)| ConfigError::CorsOrigin(origin, why))?;
        let tls = options::https(&mut https_flags).map_err(ConfigError::Https)?;
        // ACME serves HTTPS too: `--hsts` goes with it as with the others.
        let hsts = options::hsts(&https_flags, tls.is_some() || acme.is_some())
            .map_err(ConfigError::Https)?;
        Ok(Config {
            addr,
            limits,
            max_plants: args.max_plants,
            text_limits,
            max_data: args.max_data,
            tokens: tokens.accepted,
            read_only: args.read_only,
            guard,
            ticket_ttl: Duration::from_secs(args.ticket_ttl),
            token_source: tokens.source,
            token_file,
            webhook_secret_file,
            warnings,
            log_level,
            log_format,
            data,
            webhook,
            seed: args.seed,
            delay,
            allow_reset: args.allow_reset,
            cors,
            ui: !args.no_ui,
            database,
            tls,
            hsts,
            acme,
        })
    }
}

/// Bytes of JSON object around a name and a tag in the largest body:
/// `{"id":-9223372036854775808,"name":"","tag":""}` is 47.
const BODY_FRAME: usize = 64;

/// The body a NewPlant needs at most when its name and tag are as long as
/// `text` allows, written as plain UTF-8 (up to 4 bytes a character).
pub(super) fn body_for(text: TextLimits) -> usize {
    text.name
        .saturating_add(text.tag)
        .saturating_mul(4)
        .saturating_add(BODY_FRAME)
}

/// `--max-name` and `--max-tag`: non-zero, and together small enough that
/// a plant at both limits can be sent within `--max-body`, so the declared
/// `maxLength` is a limit a client can reach, not one the body limit hides;
/// and `--max-tag` small enough that a listing's next-page `Link` (which
/// keeps the tag) is a target the engine takes: following it is never a
/// 414.
fn text_limits(args: &Args, max_body: usize) -> Result<TextLimits, ConfigError> {
    if args.max_name == 0 {
        return Err(ConfigError::Zero("--max-name"));
    }
    if args.max_tag == 0 {
        return Err(ConfigError::Zero("--max-tag"));
    }
    let text = TextLimits {
        name: args.max_name,
        tag: args.max_tag,
    };
    if body_for(text) > max_body {
        return Err(ConfigError::TextOverBody(text, max_body));
    }
    if longest_next_target(text.tag) > MAX_TARGET {
        // Each character more adds twelve bytes to the longest.
        let most = MAX_TARGET.saturating_sub(longest_next_target(1)) / 12 + 1;
        return Err(ConfigError::TagOverLink(text.tag, most));
    }
    Ok(text)
}

fn webhook_config(
    urls: Vec<String>,
    secret_file: Option<PathBuf>,
    queue: usize,
) -> Result<WebhookConfig, ConfigError> {
    let targets = urls
        .iter()
        .map(|url| Target::parse(url).map_err(|why| ConfigError::Webhook(url.clone(), why)))
        .collect::<Result<Vec<_>, _>>()?;
    let secret = secret_file
        .as_deref()
        .map(read_webhook_secret)
        .transpose()?;
    Ok(WebhookConfig::new(targets, secret, queue))
}

/// Default `--compact-min`: small journals are never worth rewriting.
pub const COMPACT_MIN: u64 = 1 << 20;

fn durability(
    path: Option<PathBuf>,
    sync: Option<String>,
    compact_min: Option<u64>,
) -> Result<Option<Durability>, ConfigError> {
    // The value first, then what it needs: a bad value is named as such
    // whatever the other flags.
    let sync = match sync.as_deref() {
        None => None,
        Some("always") => Some(SyncMode::Always),
        Some("never") => Some(SyncMode::Never),
        Some(other) => return Err(ConfigError::Sync(other.to_string())),
    };
    let Some(path) = path else {
        return match (sync, compact_min) {
            (Some(_), _) => Err(ConfigError::NeedsData("--sync")),
            (_, Some(_)) => Err(ConfigError::NeedsData("--compact-min")),
            (None, None) => Ok(None),
        };
    };
    Ok(Some(Durability {
        path,
        sync: sync.unwrap_or(SyncMode::Always),
        compact_min: compact_min.unwrap_or(COMPACT_MIN),
    }))
}

fn parse_addr(text: &str) -> Result<SocketAddr, ConfigError> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    // A host name such as localhost:8080: take its first address.
    text.to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| ConfigError::Addr(text.to_string()))
}

/// `--delay MIN[..MAX]`: how long each API answer is held, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delay {
    /// The shortest hold.
    pub min: Duration,
    /// The longest (equal to `min` for a fixed delay).
    pub max: Duration,
}

impl Delay {
    /// The most a held answer may wait: past it a client's own timeout
    /// would more likely be what a test sees.
    pub const MAX_MS: u64 = 60_000;

    /// `MIN` or `MIN..MAX`, whole milliseconds, `MIN <= MAX <= MAX_MS`.
    pub fn parse(text: &str) -> Option<Delay> {
        let number = |t: &str| -> Option<u64> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            t.parse().ok().filter(|&ms| ms <= Delay::MAX_MS)
        };
        let (min, max) = match text.split_once("..") {
            Some((min, max)) => (number(min)?, number(max)?),
            None => (number(text)?, number(text)?),
        };
        (min <= max).then(|| Delay {
            min: Duration::from_millis(min),
            max: Duration::from_millis(max),
        })
    }
}
