//! The HTTPS flags (the `tls` feature): `--tls-cert` with `--tls-key`, or
//! `--tls-auto`; `--hsts`; `--webhook-ca` for https webhooks.

use std::fmt;
use std::path::PathBuf;

use super::super::Args;
use crate::certs::{Setup, TlsFiles, check_dir, load};
use crate::transport::{Hsts, TlsError, client_config};
use crate::webhook::{Target, WebhookConfig};

/// An HTTPS flag that cannot be used.
#[derive(Debug)]
pub enum HttpsError {
    /// A flag given without the one it needs (the flag, the one missing).
    NeedsBoth(&'static str, &'static str),
    /// Two flags that exclude each other.
    Excludes(&'static str, &'static str),
    /// `--hsts` without HTTPS.
    HstsWithoutTls,
    /// The certificate or key cannot be served.
    Tls(TlsError),
    /// The CA certificates for https webhooks cannot be read.
    WebhookTls(TlsError),
}

impl fmt::Display for HttpsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpsError::NeedsBoth(flag, missing) => write!(f, "{flag} needs {missing} too"),
            HttpsError::Excludes(a, b) => {
                write!(f, "{a} and {b} exclude each other: give one of them")
            }
            HttpsError::HstsWithoutTls => f.write_str(
                "--hsts needs HTTPS (--tls-cert and --tls-key, --tls-auto or --acme-domain)",
            ),
            HttpsError::Tls(e) => write!(f, "cannot serve HTTPS: {e}"),
            HttpsError::WebhookTls(e) => write!(f, "https webhooks: {e}"),
        }
    }
}

/// The HTTPS flags, taken out of `Args` before the rest is read.
pub(in super::super) struct HttpsFlags {
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    auto: Option<PathBuf>,
    hsts: Option<u64>,
    webhook_ca: Option<PathBuf>,
}

impl HttpsFlags {
    /// Takes them out of `args`.
    pub(in super::super) fn take(args: &mut Args) -> HttpsFlags {
        HttpsFlags {
            cert: args.tls_cert.take(),
            key: args.tls_key.take(),
            auto: args.tls_auto.take(),
            hsts: args.hsts,
            webhook_ca: args.webhook_ca.take(),
        }
    }

    /// Whether `--tls-cert` or `--tls-key` was given, and whether
    /// `--tls-auto` was: each excludes `--acme-domain`.
    pub(in super::super) fn certificate_flags(&self) -> (bool, bool) {
        (
            self.cert.is_some() || self.key.is_some(),
            self.auto.is_some(),
        )
    }
}

/// `--tls-cert` with `--tls-key` (one without the other is refused), read
/// and checked now, so that a file that cannot be served stops the start;
/// or `--tls-auto` (not with them), its directory checked (made if
/// missing).
pub(in super::super) fn https(args: &mut HttpsFlags) -> Result<Option<Setup>, HttpsError> {
    let (cert, key) = (args.cert.take(), args.key.take());
    if let Some(dir) = args.auto.take() {
        if cert.is_some() || key.is_some() {
            let given = if cert.is_some() {
                "--tls-cert"
            } else {
                "--tls-key"
            };
            return Err(HttpsError::Excludes("--tls-auto", given));
        }
        let claim = check_dir(&dir).map_err(HttpsError::Tls)?;
        return Ok(Some(Setup::Auto(dir, claim)));
    }
    let files = match (cert, key) {
        (None, None) => return Ok(None),
        (Some(cert), Some(key)) => TlsFiles { cert, key },
        (Some(_), None) => return Err(HttpsError::NeedsBoth("--tls-cert", "--tls-key")),
        (None, Some(_)) => return Err(HttpsError::NeedsBoth("--tls-key", "--tls-cert")),
    };
    let served = load(&files).map_err(HttpsError::Tls)?;
    Ok(Some(Setup::Files(files, served)))
}

/// `--hsts`, which needs HTTPS (`https`: the flags chose a certificate,
/// from files, the local CA or ACME).
pub(in super::super) fn hsts(args: &HttpsFlags, https: bool) -> Result<Option<Hsts>, HttpsError> {
    if args.hsts.is_some() && !https {
        return Err(HttpsError::HstsWithoutTls);
    }
    Ok(args.hsts.map(Hsts))
}

/// With an https webhook or `--webhook-ca`: the client's TLS, verifying
/// against the system's CA certificates and `--webhook-ca`'s (a warning
/// added when the system has none).
pub(in super::super) fn webhook_tls(
    args: &HttpsFlags,
    webhook: &mut WebhookConfig,
    warnings: &mut Vec<String>,
) -> Result<(), HttpsError> {
    if webhook.targets.iter().any(Target::is_https) || args.webhook_ca.is_some() {
        let (client, warning) =
            client_config(args.webhook_ca.as_deref()).map_err(HttpsError::WebhookTls)?;
        webhook.tls = Some(client);
        warnings.extend(warning);
    }
    Ok(())
}
