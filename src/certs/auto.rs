//! Serving what the flags chose, and `--tls-auto`'s renewals: the
//! certificate of the local CA (`local_ca/`) served at start, checked again
//! on SIGHUP and by the `tls-renew` thread, replaced for new connections
//! when it nears its expiry or stops naming what the server advertises;
//! and the lines the log says about it.
//!
//! The start-up line gives the CA's SHA-256 fingerprint, for the user to
//! compare with that of the `/ca.pem` a client fetched (over plain HTTP,
//! or before trusting it, it could have been swapped).

use log::{error, info, warn};

use super::Names;
use super::local_ca::{LocalCa, Renewal};
use super::source::{Certificate, Setup, Source};
use crate::transport::{CaCert, Https, TlsError, date, now};

/// The longest the `tls-renew` thread sleeps between two looks, seconds.
const LOOK_AT_LEAST: i64 = 3600;

impl Certificate {
    /// Serves what `setup` chose: the files read at start, or (with
    /// `--tls-auto`) the local CA's certificate for `names`, the CA made
    /// first if its directory holds none.
    pub fn start(setup: &Setup, names: &Names) -> Result<Certificate, TlsError> {
        match setup {
            Setup::Files(files, served) => Ok(Certificate::new(
                Https::new(served, None)?,
                Source::Files(files.clone()),
            )),
            Setup::Auto(dir, claim) => {
                let (ca, made) = LocalCa::open(dir, claim, names)?;
                info!(
                    target: "plantstore",
                    "tls-auto: local CA {}/ca.pem ({}), SHA-256 fingerprint {}; a client trusts it \
                     from GET /ca.pem once the two fingerprints match",
                    dir.display(),
                    if made { "made now" } else { "kept" },
                    ca.fingerprint()
                );
                if let Some(why) = ca.earlier() {
                    warn!(target: "plantstore", "tls-auto: {}/ca.pem {why}", dir.display());
                }
                let renewal = ca.renew(names)?;
                log_renewal(&ca, &renewal);
                let https = Https::new(&renewal.served, None)?;
                https.set_ca_cert(CaCert {
                    pem: ca.pem().to_string(),
                    fingerprint: ca.fingerprint().to_string(),
                });
                Ok(Certificate::new(https, Source::Auto(ca)))
            }
        }
    }

    /// With `--tls-auto`: serves a new certificate if the one in use is due
    /// for renewal or does not name every one of `names` (logged; also when
    /// nothing changed unless `quiet`); a failure is logged and the
    /// certificate in use stays. When to look again (Unix seconds); `None`
    /// without `--tls-auto`.
    pub fn renew(&self, names: &Names, quiet: bool) -> Option<i64> {
        let Source::Auto(ca) = self.source() else {
            return None;
        };
        match ca.renew_then(names, |renewal| self.https().serve(&renewal.served)) {
            Ok(renewal) => {
                if renewal.made || !quiet {
                    log_renewal(ca, &renewal);
                }
                let due = renewal.served.validity.map(|v| ca.renew_at(v.not_after));
                Some(due.unwrap_or_else(|| now() + ca.retry_after()))
            }
            Err(e) => {
                error!(
                    target: "plantstore",
                    "tls-auto: cannot renew the certificate: {e}; the certificate in use stays"
                );
                Some(now() + ca.retry_after())
            }
        }
    }

    /// With `--tls-auto`: starts the `tls-renew` thread, which renews the
    /// certificate when it nears its expiry, looking at least hourly (and
    /// then at `names()`, what the server advertises now). It lives as
    /// long as the process, as the reload thread does. Nothing without
    /// `--tls-auto`.
    pub fn start_renewals(&self, names: fn() -> Names) -> std::io::Result<()> {
        if !matches!(self.source(), Source::Auto(_)) {
            return Ok(());
        }
        let https = self.clone();
        std::thread::Builder::new()
            .name("tls-renew".into())
            .spawn(move || {
                loop {
                    let due = https.renew(&names(), true).unwrap_or(i64::MAX);
                    let wait = due.saturating_sub(now()).clamp(1, LOOK_AT_LEAST);
                    std::thread::sleep(std::time::Duration::from_secs(wait as u64));
                }
            })
            .map(drop)
    }
}

/// What a renewal served, for the log.
fn log_renewal(ca: &LocalCa, renewal: &Renewal) {
    let until = renewal
        .served
        .validity
        .map_or_else(|| "?".to_string(), |v| date(v.not_after));
    info!(
        target: "plantstore",
        "tls-auto: {} {}/server.pem for {}, valid until {until}",
        if renewal.made { "new certificate" } else { "certificate kept:" },
        ca.dir().display(),
        renewal.names.join(", ")
    );
    if !renewal.left_out.is_empty() {
        warn!(
            target: "plantstore",
            "tls-auto: not in the certificate (its CA cannot vouch for them): {}",
            renewal.left_out.join(", ")
        );
    }
}
