//! Command-line flags (`Args`, as typed) and the validated `Config`.
//!
//! [`FLAGS`] lists every flag of `Args` once; [`flags`] derives from it
//! `--flag=value` and the `PLANTSTORE_<FLAG>` variables, and merges them
//! with the command line into `Args`.
//!
//! `Config::from_args` is the only place flags are checked and resolved:
//! the address, non-zero limits, the log level, and where the bearer tokens
//! come from. Token precedence: `--token-file` or `--token` (not both), else
//! the `PLANTSTORE_TOKEN` environment variable, else a random token made
//! here. `--sync` and `--compact-min` need `--data`. Each value is checked
//! on its own before the flags it needs or excludes, so a bad value is
//! named as such whatever the other flags (`--sync sometimes` alone is a bad
//! `--sync`, not a missing `--data`). Nothing in this module logs; `main`
//! reports errors and exits 2.
//!
//! A token, from any source, must be one that a client can send and that
//! can therefore match: not empty, no whitespace inside (RFC 6750's
//! credential has none), no control characters (a header cannot carry
//! them), at most [`MAX_TOKEN`] bytes. One that breaks these rules stops start-up, naming
//! its source (and for a token file, the line), rather than being accepted
//! and never matching. A token file may start with a UTF-8 byte order mark,
//! which is not part of the first token. A token repeated in the file is
//! harmless but likely a mistake: it becomes a warning in
//! [`Config::warnings`], for the caller to log.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use argh::FromArgs;
use log::LevelFilter;

use crate::api::Cors;
use crate::http::Limits;
use crate::logging::Format as LogFormat;
use crate::plant::TextLimits;
use crate::store::{Durability, SyncMode};
use crate::webhook::{self, Target, WebhookConfig};

pub mod flags;

/// plantstore: a tiny, fast HTTP server for the Plant Store API.
#[derive(FromArgs, Debug)]
#[argh(
    help_triggers("-h", "--help", "help"),
    note = "Every flag but --version can also be set as PLANTSTORE_<FLAG>, upper case
with - as _ (PLANTSTORE_ADDR, PLANTSTORE_DATA, PLANTSTORE_MAX_NAME, ...);
a repeatable flag takes a comma-separated list, a switch 1, true, yes, 0,
false or no. The command line wins. PLANTSTORE_TOKEN is used only without
--token, --token-file and PLANTSTORE_TOKEN_FILE. --flag=value is the same
as --flag value."
)]
pub struct Args {
    /// address to listen on (default 127.0.0.1:8080; use 0.0.0.0:8080 to serve the LAN)
    #[argh(option, default = "String::from(\"127.0.0.1:8080\")")]
    pub addr: String,
    /// event loops serving connections (default: the CPUs this process may run on)
    #[argh(option)]
    pub threads: Option<usize>,
    /// most connections served at once; more are answered 503 (default 10000, capped by the open-file limit)
    #[argh(option, default = "10_000")]
    pub max_connections: usize,
    /// largest request body in bytes; larger is 413 (default 65536)
    #[argh(option, default = "65536")]
    pub max_body: usize,
    /// most plants stored; past it a create is 507 (default 1000000)
    #[argh(option, default = "1_000_000")]
    pub max_plants: usize,
    /// longest plant name in characters (Unicode code points); longer is 400 (default 256)
    #[argh(option, default = "256")]
    pub max_name: usize,
    /// longest tag in characters (Unicode code points); longer is 400 (default 64)
    #[argh(option, default = "64")]
    pub max_tag: usize,
    /// bytes of plant names and tags the store may hold (default 268435456, 256 MiB)
    #[argh(option, default = "268_435_456")]
    pub max_data: u64,
    /// file of bearer tokens, one per line; blank lines and # comments are ignored
    #[argh(option)]
    pub token_file: Option<PathBuf>,
    /// a bearer token (visible in the process list: prefer --token-file or PLANTSTORE_TOKEN)
    #[argh(option)]
    pub token: Option<String>,
    /// log level: error, warn, info, debug or trace (default info)
    #[argh(option, default = "String::from(\"info\")")]
    pub log_level: String,
    /// log format: text or json, one object a line (default text)
    #[argh(option, default = "String::from(\"text\")")]
    pub log_format: String,
    /// seconds a client has to send a request head (default 10)
    #[argh(option, default = "10")]
    pub head_timeout: u64,
    /// seconds of silence allowed while a client sends a body (default 10)
    #[argh(option, default = "10")]
    pub body_timeout: u64,
    /// seconds an idle keep-alive connection is kept open (default 5)
    #[argh(option, default = "5")]
    pub idle_timeout: u64,
    /// seconds allowed for the whole of one response to reach a client; for a streamed one (GET /export), for each 32 KiB of it (default 10)
    #[argh(option, default = "10")]
    pub write_timeout: u64,
    /// journal file that keeps the plants across restarts (default: memory only)
    #[argh(option)]
    pub data: Option<PathBuf>,
    /// with --data: "always" answers a change only after fsync (survives a power cut), "never" after write (survives a process crash) (default always)
    #[argh(option)]
    pub sync: Option<String>,
    /// with --data: never compact a journal smaller than this many bytes (default 1048576)
    #[argh(option)]
    pub compact_min: Option<u64>,
    /// URL to POST each new plant to, http://host:port/path (repeatable)
    #[argh(option)]
    pub webhook: Vec<String>,
    /// file with the key that signs webhook deliveries (whsec_<base64> or raw text)
    #[argh(option)]
    pub webhook_secret_file: Option<PathBuf>,
    /// webhook events queued per URL, retries included; more are dropped (default 1024)
    #[argh(option, default = "1024")]
    pub webhook_queue: usize,
    /// plants to load at start-up: a JSON array or NDJSON of {"id","name","tag"?}; with --data, only into a new, empty journal
    #[argh(option)]
    pub seed: Option<PathBuf>,
    /// print the version and exit
    #[argh(switch, short = 'V')]
    pub version: bool,
    /// web page origin allowed to call the API from a browser (CORS), as http(s)://host[:port], or * for any (repeatable)
    #[argh(option)]
    pub cors_origin: Vec<String>,
    /// do not serve the built-in page at /
    #[argh(switch)]
    pub no_ui: bool,
    /// the PostgreSQL database holding the plants, postgres://user:password@host:port/dbname; instances naming the same database serve the same plants (not with --data)
    #[cfg(feature = "postgres")]
    #[argh(option)]
    pub database: Option<String>,
    /// with --database: connections to it, one per worker thread (default 8)
    #[cfg(feature = "postgres")]
    #[argh(option)]
    pub database_pool: Option<usize>,
}

/// How a flag takes its value, on the command line and from its
/// `PLANTSTORE_<FLAG>` variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    /// One value: `--flag value`, `--flag=value`, `PLANTSTORE_FLAG=value`.
    Option,
    /// A value each time it is given; its variable holds a comma-separated
    /// list.
    Repeated,
    /// No value; its variable holds 1, true, yes (given) or 0, false, no.
    Switch,
    /// `--token`: one value, but `PLANTSTORE_TOKEN` is not its plain
    /// environment form: `Config::from_args` takes it separately, after
    /// `--token-file` and `--token`, and names it in errors.
    Token,
    /// Only on the command line (`--version`).
    CommandLine,
}

/// Every flag of [`Args`] by its long name: the one list that `--flag=value`
/// and the environment variables are derived from. A unit test compares it
/// with argh's own `--help`, so a flag added to `Args` without a row here
/// fails it.
pub const FLAGS: &[(&str, FlagKind)] = &[
    ("addr", FlagKind::Option),
    ("threads", FlagKind::Option),
    ("max-connections", FlagKind::Option),
    ("max-body", FlagKind::Option),
    ("max-plants", FlagKind::Option),
    ("max-name", FlagKind::Option),
    ("max-tag", FlagKind::Option),
    ("max-data", FlagKind::Option),
    ("token-file", FlagKind::Option),
    ("token", FlagKind::Token),
    ("log-level", FlagKind::Option),
    ("log-format", FlagKind::Option),
    ("head-timeout", FlagKind::Option),
    ("body-timeout", FlagKind::Option),
    ("idle-timeout", FlagKind::Option),
    ("write-timeout", FlagKind::Option),
    ("data", FlagKind::Option),
    ("sync", FlagKind::Option),
    ("compact-min", FlagKind::Option),
    ("webhook", FlagKind::Repeated),
    ("webhook-secret-file", FlagKind::Option),
    ("webhook-queue", FlagKind::Option),
    ("seed", FlagKind::Option),
    ("version", FlagKind::CommandLine),
    ("cors-origin", FlagKind::Repeated),
    ("no-ui", FlagKind::Switch),
    #[cfg(feature = "postgres")]
    ("database", FlagKind::Option),
    #[cfg(feature = "postgres")]
    ("database-pool", FlagKind::Option),
];

/// Flags that exclude each other: the command line giving one of them
/// keeps the variables of all of them out, so that the command line wins
/// instead of clashing (`--token` with `PLANTSTORE_TOKEN_FILE` set).
pub const ALTERNATIVES: &[&[&str]] = &[&["token", "token-file"]];

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
    /// Accepted bearer tokens (never empty).
    pub tokens: Vec<String>,
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
    /// The PostgreSQL store, with `--database`.
    #[cfg(feature = "postgres")]
    pub database: Option<crate::database::DatabaseConfig>,
}

/// A flag value that cannot be used.
#[derive(Debug)]
pub enum ConfigError {
    /// `--addr` is not an address.
    Addr(String),
    /// A limit or timeout flag is zero.
    Zero(&'static str),
    /// `--max-name` and `--max-tag` allow plants whose body cannot fit in
    /// `--max-body` (the name and tag limits, the body limit).
    TextOverBody(TextLimits, usize),
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
    /// The token file cannot be read.
    TokenFile(PathBuf, io::Error),
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
    /// The webhook secret file cannot be read or holds no key.
    WebhookSecret(PathBuf, String),
    /// A `--cors-origin` that no browser would send (the value, why).
    CorsOrigin(String, &'static str),
    /// `--database` cannot be used (why; never the password).
    #[cfg(feature = "postgres")]
    Database(String),
    /// A flag that needs `--database` without it.
    #[cfg(feature = "postgres")]
    NeedsDatabase(&'static str),
    /// `--database` with `--data`.
    #[cfg(feature = "postgres")]
    DataAndDatabase,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Addr(a) => write!(
                f,
                "--addr {a:?} is not a socket address such as 127.0.0.1:8080"
            ),
            ConfigError::Zero(flag) => write!(f, "{flag} must be greater than 0"),
            ConfigError::TextOverBody(text, body) => write!(
                f,
                "--max-name {} and --max-tag {} allow bodies of up to {} bytes, \
                 more than --max-body {body}",
                text.name,
                text.tag,
                body_for(*text)
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
            #[cfg(feature = "postgres")]
            ConfigError::Database(why) => write!(f, "--database: {why}"),
            #[cfg(feature = "postgres")]
            ConfigError::NeedsDatabase(flag) => write!(f, "{flag} needs --database URL"),
            #[cfg(feature = "postgres")]
            ConfigError::DataAndDatabase => f.write_str(
                "give --data or --database, not both: the plants are in a journal file or in \
                 the database",
            ),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::TokenFile(_, e) | ConfigError::Random(e) => Some(e),
            _ => None,
        }
    }
}

impl Config {
    /// Validates flags; `env_token` is the value of `PLANTSTORE_TOKEN`.
    pub fn from_args(args: Args, env_token: Option<String>) -> Result<Config, ConfigError> {
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
        positive(args.max_plants as u64, "--max-plants")?;
        #[cfg(feature = "postgres")]
        let database = database(&args)?;
        let text_limits = text_limits(&args, limits.max_body)?;
        positive(args.max_data, "--max-data")?;
        let token_file = args.token_file.clone();
        let webhook_secret_file = args.webhook_secret_file.clone();
        let tokens = tokens(args.token_file, args.token, env_token)?;
        let data = durability(args.data, args.sync, args.compact_min)?;
        positive(args.webhook_queue as u64, "--webhook-queue")?;
        let webhook = webhook_config(args.webhook, args.webhook_secret_file, args.webhook_queue)?;
        let cors = Cors::parse(&args.cors_origin)
            .map_err(|(origin, why)| ConfigError::CorsOrigin(origin, why))?;
        Ok(Config {
            addr,
            limits,
            max_plants: args.max_plants,
            text_limits,
            max_data: args.max_data,
            tokens: tokens.accepted,
            token_source: tokens.source,
            token_file,
            webhook_secret_file,
            warnings: tokens.warnings,
            log_level,
            log_format,
            data,
            webhook,
            seed: args.seed,
            cors,
            ui: !args.no_ui,
            #[cfg(feature = "postgres")]
            database,
        })
    }
}

/// `--database` and `--database-pool`, and that `--data` is not given too.
#[cfg(feature = "postgres")]
fn database(args: &Args) -> Result<Option<crate::database::DatabaseConfig>, ConfigError> {
    let pool = match args.database_pool {
        Some(0) => return Err(ConfigError::Zero("--database-pool")),
        Some(n) => Some(n),
        None => None,
    };
    let Some(url) = &args.database else {
        return match pool {
            Some(_) => Err(ConfigError::NeedsDatabase("--database-pool")),
            None => Ok(None),
        };
    };
    let pool = pool.unwrap_or(crate::database::DEFAULT_POOL);
    let database =
        crate::database::DatabaseConfig::parse(url, pool).map_err(ConfigError::Database)?;
    if args.data.is_some() {
        return Err(ConfigError::DataAndDatabase);
    }
    Ok(Some(database))
}

/// Bytes of JSON object around a name and a tag in the largest body:
/// `{"id":-9223372036854775808,"name":"","tag":""}` is 47.
const BODY_FRAME: usize = 64;

/// The body a NewPlant needs at most when its name and tag are as long as
/// `text` allows, written as plain UTF-8 (up to 4 bytes a character).
fn body_for(text: TextLimits) -> usize {
    text.name
        .saturating_add(text.tag)
        .saturating_mul(4)
        .saturating_add(BODY_FRAME)
}

/// `--max-name` and `--max-tag`: non-zero, and together small enough that
/// a plant at both limits can be sent within `--max-body`, so the declared
/// `maxLength` is a limit a client can reach, not one the body limit hides.
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

/// The key in a `--webhook-secret-file`, checked as at start-up (for a
/// reload).
pub fn read_webhook_secret(path: &Path) -> Result<Vec<u8>, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::WebhookSecret(path.to_path_buf(), e.to_string()))?;
    webhook::read_secret(&text).map_err(|why| ConfigError::WebhookSecret(path.to_path_buf(), why))
}

/// The tokens in a `--token-file`, checked as at start-up, and the
/// warnings about it (for a reload).
pub fn read_tokens(path: &Path) -> Result<(Vec<String>, Vec<String>), ConfigError> {
    let set = read_token_file(path.to_path_buf())?;
    Ok((set.accepted, set.warnings))
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

/// The longest token accepted, in bytes. A request head is at most 16 KiB,
/// and the `Authorization` header shares it with the rest; no real token
/// comes near this (a generated one is 64 bytes).
pub const MAX_TOKEN: usize = 4096;

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
struct TokenSet {
    /// Accepted tokens, each once (never empty).
    accepted: Vec<String>,
    /// Where they came from.
    source: TokenSource,
    /// Warnings for the start-up log.
    warnings: Vec<String>,
}

impl TokenSet {
    fn one(token: String, source: TokenSource) -> TokenSet {
        TokenSet {
            accepted: vec![token],
            source,
            warnings: Vec::new(),
        }
    }
}

fn tokens(
    file: Option<PathBuf>,
    flag: Option<String>,
    env: Option<String>,
) -> Result<TokenSet, ConfigError> {
    let single = |token: String, from: &'static str, source: TokenSource| {
        let token = token.trim();
        match token_fault(token) {
            Some(why) => Err(ConfigError::BadToken(from, why)),
            None => Ok(TokenSet::one(token.to_string(), source)),
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

/// One token per line; blank lines and `#` comments ignored, a leading
/// byte order mark skipped. A repeated token is kept once, with a warning
/// naming both lines.
fn read_token_file(path: PathBuf) -> Result<TokenSet, ConfigError> {
    let text =
        std::fs::read_to_string(&path).map_err(|e| ConfigError::TokenFile(path.clone(), e))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    // The first line of each token. A map keeps a file of many tokens
    // n log n (a linear search took 26 s for 100,000); the tree costs less
    // binary than a hash map.
    let mut first_line: BTreeMap<&str, usize> = BTreeMap::new();
    let mut tokens = Vec::new();
    let mut warnings = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let token = line.trim();
        if token.is_empty() || token.starts_with('#') {
            continue;
        }
        let line = index + 1;
        if let Some(why) = token_fault(token) {
            return Err(ConfigError::BadTokenLine(path, line, why));
        }
        match first_line.get(token) {
            Some(first) => warnings.push(format!(
                "token file {} line {line} repeats the token of line {first}",
                path.display()
            )),
            None => {
                first_line.insert(token, line);
                tokens.push(token.to_string());
            }
        }
    }
    if tokens.is_empty() {
        return Err(ConfigError::NoTokenInFile(path));
    }
    Ok(TokenSet {
        accepted: tokens,
        source: TokenSource::File,
        warnings,
    })
}

/// 256 random bits from the OS, as 64 hex digits.
fn random_token() -> Result<String, ConfigError> {
    crate::os::random_hex(32).map_err(ConfigError::Random)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        Args::from_args(&["plantstore"], extra).expect("flags parse")
    }

    #[test]
    fn token_sources_resolve_in_order() {
        let set = tokens(None, Some("f".into()), Some("e".into())).unwrap();
        assert_eq!(
            (set.accepted, set.source),
            (vec!["f".to_string()], TokenSource::Flag)
        );
        let set = tokens(None, None, Some("e".into())).unwrap();
        assert_eq!(
            (set.accepted, set.source),
            (vec!["e".to_string()], TokenSource::Env)
        );
        let set = tokens(None, None, None).unwrap();
        assert_eq!(set.source, TokenSource::Generated);
        assert_eq!(set.accepted[0].len(), 64);
        assert_ne!(
            set.accepted,
            tokens(None, None, None).unwrap().accepted,
            "two generated tokens differ"
        );
    }

    /// Writes `contents` to a fresh token file and reads it as start-up
    /// would, returning the error's message on failure.
    fn token_file(name: &str, contents: &[u8]) -> Result<TokenSet, String> {
        let path =
            std::env::temp_dir().join(format!("plantstore-config-{}-{name}", std::process::id()));
        std::fs::write(&path, contents).unwrap();
        let read = read_token_file(path.clone()).map_err(|e| e.to_string());
        std::fs::remove_file(&path).unwrap();
        read
    }

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_token() {
        let set = token_file("bom", b"\xef\xbb\xbffirst\r\nsecond\n").unwrap();
        assert_eq!(set.accepted, ["first", "second"]);
        let set = token_file("bom-comment", "\u{feff}# rotation\nonly\n".as_bytes()).unwrap();
        assert_eq!(set.accepted, ["only"]);
        assert!(token_file("bom-alone", b"\xef\xbb\xbf\n").is_err());
    }

    #[test]
    fn a_token_file_line_that_cannot_match_is_refused_naming_the_line() {
        let long = format!("ok\ns3cr3t{}\n", "a".repeat(MAX_TOKEN));
        for (name, contents, line, why) in [
            ("ctl", "ok\n\n# c\ns3cr3t\x01x\n", 4, "a control character"),
            ("nul", "s3cr3t\0x\n", 1, "a control character"),
            ("del", "ok\ns3cr3t\x7fx", 2, "a control character"),
            ("space", "# c\ns3cr3t x\n", 2, "whitespace"),
            ("tab", "s3cr3t\tx\n", 1, "whitespace"),
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
        assert_eq!(set.accepted, [longest]);
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
        assert_eq!(set.accepted, ["padded"]);
    }

    #[test]
    fn a_repeated_token_is_kept_once_with_a_warning_naming_the_lines() {
        let set = token_file("dup", b"s3cr3t\nother\n\n  s3cr3t\nother\n").unwrap();
        assert_eq!(set.accepted, ["s3cr3t", "other"]);
        assert_eq!(set.warnings.len(), 2, "{:?}", set.warnings);
        assert!(set.warnings[0].ends_with("line 4 repeats the token of line 1"));
        assert!(set.warnings[1].ends_with("line 5 repeats the token of line 2"));
        assert!(!set.warnings.concat().contains("s3cr3t"), "no token logged");
        assert!(token_file("once", b"a\nb\n").unwrap().warnings.is_empty());
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
        let hook = Config::from_args(args(&["--webhook", "https://x/"]), Some("t".into()));
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
        let huge = with(&["--max-name", &usize::MAX.to_string()]);
        assert!(matches!(huge, Err(ConfigError::TextOverBody(..))));
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
}
