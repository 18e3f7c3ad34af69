//! The instance's HTTPS: the certificate served, made from what the flags
//! chose, with what the server advertises (the host's name and addresses,
//! from `reach`, which `certs` does not import); the reload on
//! SIGHUP. With `--tls-auto`, the `tls-renew` thread
//! (`Certificate::start_renewals`) renews the certificate when it nears its
//! expiry and sees changed addresses at least hourly; key generation
//! happens there, at start or on the reload thread, never on an event
//! loop.

use log::{info, warn};

use crate::certs::{Certificate, Names};
use crate::config::Config;
use crate::reach;
use crate::transport::{self, StartTlsError, Validity};

/// What the server advertises now.
pub(super) fn names() -> Names {
    Names {
        host: reach::host_name(),
        addresses: reach::addresses(),
    }
}

/// The certificate `config` asks to serve, if any, made ready (with
/// `--tls-auto`: the CA and the certificate read or made, and logged).
pub(super) fn https(config: &Config) -> Result<Option<Certificate>, StartTlsError> {
    let started = config
        .https()
        .map(|setup| Certificate::start(setup, &names()));
    let certificate = started.transpose()?;
    if let (Some(certificate), Some(seconds)) = (&certificate, config.hsts()) {
        certificate.https().set_hsts(seconds);
    }
    Ok(certificate)
}

/// On SIGHUP: reads `--tls-cert` and `--tls-key` again, or (`--tls-auto`)
/// checks the certificate against the addresses now and renews it if it
/// must be. On an error the certificate in use stays, and the log says
/// why.
pub(super) fn reload(https: &Certificate) {
    let Some(files) = https.files() else {
        https.renew(&names(), false);
        return;
    };
    match https.reload() {
        Ok(validity) => {
            info!(
                target: "plantstore",
                "reloaded {}: new connections get this certificate",
                files.cert.display()
            );
            validity_warning(validity);
        }
        Err(e) => log::error!(
            target: "plantstore",
            "reload refused: {e}; the certificate in use stays"
        ),
    }
}

/// Warns when the served certificate is expired, not yet valid, or near
/// its expiry.
pub(super) fn validity_warning(validity: Option<Validity>) {
    if let Some(warning) = validity.and_then(|v| v.warning(transport::now())) {
        warn!(target: "plantstore", "{warning}");
    }
}
