//! The HTTPS flags (the `tls` feature): `--tls-cert` with `--tls-key`, or
//! `--tls-auto`; `--hsts`; `--webhook-ca` for https webhooks.

use std::fmt;

use super::super::Args;
use crate::certs::{Setup, TlsFiles, check_dir, load};
use crate::transport::{TlsError, client_config};
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

/// `--tls-cert` with `--tls-key` (one without the other is refused), read
/// and checked now, so that a file that cannot be served stops the start;
/// or `--tls-auto` (not with them), its directory checked (made if
/// missing).
pub(in super::super) fn https(args: &Args) -> Result<Option<Setup>, HttpsError> {
    let (cert, key) = (args.tls_cert.clone(), args.tls_key.clone());
    if let Some(dir) = args.tls_auto.clone() {
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
pub(in super::super) fn hsts(args: &Args, https: bool) -> Result<Option<u64>, HttpsError> {
    if args.hsts.is_some() && !https {
        return Err(HttpsError::HstsWithoutTls);
    }
    Ok(args.hsts)
}

/// With an https webhook or `--webhook-ca`: the client's TLS, verifying
/// against the system's CA certificates and `--webhook-ca`'s (a warning
/// added when the system has none).
pub(in super::super) fn webhook_tls(
    args: &Args,
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
