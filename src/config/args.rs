//! The flags as typed (`Args`, argh's struct) and [`FLAGS`], the one list
//! of them by long name, from which `flags.rs` derives `--flag=value` and
//! the `PLANTSTORE_<FLAG>` variables, and what `--version` says of the
//! build. Nothing is checked here: that is `Config::from_args`.

use std::path::PathBuf;

use argh::{ArgsInfo, FromArgs};

/// What `--version` adds to the version: the build's features, so that the
/// default, the plain, the ACME and the PostgreSQL builds of one version tell
/// themselves apart (the features decide which flags exist, here).
#[cfg(all(feature = "postgres", feature = "acme"))]
pub const FEATURES: &str = "(HTTPS, ACME, PostgreSQL)";
#[cfg(all(feature = "postgres", not(feature = "acme")))]
pub const FEATURES: &str = "(HTTPS, PostgreSQL)";
#[cfg(all(feature = "acme", not(feature = "postgres")))]
pub const FEATURES: &str = "(HTTPS, ACME)";
#[cfg(all(feature = "tls", not(feature = "postgres"), not(feature = "acme")))]
pub const FEATURES: &str = "(HTTPS)";
#[cfg(not(feature = "tls"))]
pub const FEATURES: &str = "(plain: no HTTPS, no PostgreSQL)";

/// plantstore: a tiny, fast HTTP server for the Plant Store API.
#[derive(FromArgs, ArgsInfo, Debug)]
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
    /// address to listen on (default 127.0.0.1:8080; 0.0.0.0:8080 serves the LAN)
    #[argh(option, default = "String::from(\"127.0.0.1:8080\")")]
    pub addr: String,
    /// event loops serving connections (default: the CPUs this process may run on)
    #[argh(option)]
    pub threads: Option<usize>,
    /// most connections served at once, more answered with 503 (default 10000, capped by the open-file limit)
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
    /// file of bearer tokens, one per line; blank lines and # comments are ignored (a regular file, at most 16 MiB)
    #[argh(option)]
    pub token_file: Option<PathBuf>,
    /// a bearer token (visible in the process list: prefer --token-file or PLANTSTORE_TOKEN)
    #[argh(option)]
    pub token: Option<String>,
    /// refuse every change (403) whatever the token: serve the plants read-only
    #[argh(switch)]
    pub read_only: bool,
    /// failed authentications a minute allowed from one client address (IPv6: one /64) before it is answered 429 for a while; 0 turns the limit off (default 20)
    #[argh(option, default = "20")]
    pub auth_failures: u32,
    /// seconds a change feed ticket (POST /plants/changes/tickets) is valid, 1 to 3600 (default 60)
    #[argh(option, default = "60")]
    pub ticket_ttl: u64,
    /// a reverse proxy (ADDR or CIDR) whose Forwarded or X-Forwarded-For header names the client, for the auth-failure limit (repeatable)
    #[argh(option)]
    pub trusted_proxy: Vec<String>,
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
    /// file with the key that signs webhook deliveries (whsec_<base64> or raw text; a regular file, at most 16 MiB)
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
    /// hold each API answer for MIN or a random MIN..MAX milliseconds before it is written, to show loading states (at most 60000; health, metrics, the page and the feed are not held)
    #[argh(option)]
    pub delay: Option<String>,
    /// enable POST /plants/reset: every plant replaced by the --seed file's plants (or none), for test suites
    #[argh(switch)]
    pub allow_reset: bool,
    /// the PostgreSQL database holding the plants, postgres://user:password@host:port/dbname; instances naming the same database serve the same plants (not with --data)
    #[cfg(feature = "postgres")]
    #[argh(option)]
    pub database: Option<String>,
    /// a file holding the --database URL on one line (# comments and blank lines ignored), to keep its password out of the process list and the unit; readable by this server's user only
    #[cfg(feature = "postgres")]
    #[argh(option)]
    pub database_file: Option<PathBuf>,
    /// with --database: connections to it, one per worker thread (default 8)
    #[cfg(feature = "postgres")]
    #[argh(option)]
    pub database_pool: Option<usize>,
    /// serve HTTPS with this certificate chain (PEM, the server's certificate first; with --tls-key); read again on SIGHUP
    #[cfg(feature = "tls")]
    #[argh(option)]
    pub tls_cert: Option<PathBuf>,
    /// the private key of --tls-cert (PEM: PKCS#8, RSA or EC); read again on SIGHUP
    #[cfg(feature = "tls")]
    #[argh(option)]
    pub tls_key: Option<PathBuf>,
    /// serve HTTPS with a certificate of a local CA kept in this directory (made 0700 at the first start, with the CA): renewed without a restart; the CA at GET /ca.pem (not with --tls-cert)
    #[cfg(feature = "tls")]
    #[argh(option)]
    pub tls_auto: Option<PathBuf>,
    /// with HTTPS (--tls-cert, --tls-auto or --acme-domain): answers carry Strict-Transport-Security: max-age=SECONDS (off by default: a client told so refuses plain HTTP to this host until then)
    #[cfg(feature = "tls")]
    #[argh(option)]
    pub hsts: Option<u64>,
    /// CA certificates (PEM) trusted for https webhooks besides the system's (a private CA)
    #[cfg(feature = "tls")]
    #[argh(option)]
    pub webhook_ca: Option<PathBuf>,
    /// obtain and renew the HTTPS certificate for this public DNS name from an ACME CA (Let's Encrypt; with --acme-dir)
    #[cfg(feature = "acme")]
    #[argh(option)]
    pub acme_domain: Option<String>,
    /// where the ACME account and certificate are kept and reused across restarts (made 0700; not a symlink)
    #[cfg(feature = "acme")]
    #[argh(option)]
    pub acme_dir: Option<PathBuf>,
    /// the contact address given to the ACME CA (expiry notices)
    #[cfg(feature = "acme")]
    #[argh(option)]
    pub acme_email: Option<String>,
    /// the ACME directory URL (default: Let's Encrypt, https://acme-v02.api.letsencrypt.org/directory)
    #[cfg(feature = "acme")]
    #[argh(option)]
    pub acme_directory: Option<String>,
    /// use Let's Encrypt's staging directory (certificates no browser trusts; for trying the setup)
    #[cfg(feature = "acme")]
    #[argh(switch)]
    pub acme_staging: bool,
    /// a second, plain listener (usually :80) answering HTTP-01 challenges and redirecting the rest to HTTPS; without it TLS-ALPN-01 on the HTTPS port
    #[cfg(feature = "acme")]
    #[argh(option)]
    pub acme_http_addr: Option<String>,
    /// a CA certificate (PEM) trusted for the ACME directory's HTTPS besides the system's (a private ACME CA)
    #[cfg(feature = "acme")]
    #[argh(option)]
    pub acme_ca: Option<PathBuf>,
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
    ("read-only", FlagKind::Switch),
    ("auth-failures", FlagKind::Option),
    ("ticket-ttl", FlagKind::Option),
    ("trusted-proxy", FlagKind::Repeated),
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
    ("delay", FlagKind::Option),
    ("allow-reset", FlagKind::Switch),
    #[cfg(feature = "postgres")]
    ("database", FlagKind::Option),
    #[cfg(feature = "postgres")]
    ("database-file", FlagKind::Option),
    #[cfg(feature = "postgres")]
    ("database-pool", FlagKind::Option),
    #[cfg(feature = "tls")]
    ("tls-cert", FlagKind::Option),
    #[cfg(feature = "tls")]
    ("tls-key", FlagKind::Option),
    #[cfg(feature = "tls")]
    ("tls-auto", FlagKind::Option),
    #[cfg(feature = "tls")]
    ("hsts", FlagKind::Option),
    #[cfg(feature = "tls")]
    ("webhook-ca", FlagKind::Option),
    #[cfg(feature = "acme")]
    ("acme-domain", FlagKind::Option),
    #[cfg(feature = "acme")]
    ("acme-dir", FlagKind::Option),
    #[cfg(feature = "acme")]
    ("acme-email", FlagKind::Option),
    #[cfg(feature = "acme")]
    ("acme-directory", FlagKind::Option),
    #[cfg(feature = "acme")]
    ("acme-staging", FlagKind::Switch),
    #[cfg(feature = "acme")]
    ("acme-http-addr", FlagKind::Option),
    #[cfg(feature = "acme")]
    ("acme-ca", FlagKind::Option),
];

/// Flags that exclude each other: the command line giving one of them
/// keeps the variables of all of them out, so that the command line wins
/// instead of clashing (`--token` with `PLANTSTORE_TOKEN_FILE` set).
pub const ALTERNATIVES: &[&[&str]] = &[
    &["token", "token-file"],
    #[cfg(feature = "postgres")]
    &["database", "database-file"],
];
