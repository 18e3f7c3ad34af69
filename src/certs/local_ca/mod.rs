//! `--tls-auto DIR`: a certificate authority of the server's own, for a
//! board on a LAN that no public CA can vouch for. Made at the first
//! start, kept in `DIR`, trusted once per client device; the server's
//! certificate it signs is made anew when it nears its expiry or no longer
//! names every address the server advertises (checked at start, on SIGHUP
//! and by the `tls-renew` thread), without a restart. What is signed and
//! how: `issue.rs`.
//!
//! `DIR` (made 0700 if missing; refused if it is a symbolic link, not a
//! directory, writable by every user, another user's, cannot be written,
//! or another server holds it: `state_dir.rs`, whose claim the CA keeps)
//! holds `ca.key` (the CA's key, PKCS#8 PEM, 0600, never served), `ca.pem`
//! (the CA's certificate, served at `GET /ca.pem`) and `server.pem` (the
//! server's key and certificate in one file, 0600, so that a crash between
//! two writes cannot leave a key beside another key's certificate), and
//! the claim's `lock`. Each is written to a temporary file and renamed
//! into place. What cannot be read, is not what this server
//! writes, or does not match is refused, naming the file, and nothing in
//! `DIR` is overwritten: at start that stops the server (exit 2), on a
//! renewal the certificate in use stays. A `ca.pem` without its `ca.key`
//! is refused (a CA cannot sign without its key); a `ca.key` without its
//! `ca.pem` (a first start stopped between the two) gets a new CA
//! certificate for it. A `ca.pem` is this server's CA only if it is the
//! one this code makes with `ca.key` (`own.rs`), not by its name; one an
//! earlier version made is kept with a warning, as `own.rs` says.
//!
//! Test hook: `PLANTSTORE_TEST_CERT_SECONDS` (read once, in
//! [`LocalCa::open`]) makes the server's certificates valid that many
//! seconds instead of 90 days, so that a test sees a renewal.

mod files;
mod issue;
mod own;
#[cfg(test)]
mod own_tests;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer, ServerName, UnixTime};

use super::Names;
use super::state_dir::Claim;
use crate::transport::{Served, TlsError, in_file, now};
pub use files::check_dir;
use files::{certificates, common_name, fingerprint, owner_only, pem, pkcs8, read, write_file};

const CA_KEY: &str = "ca.key";
const CA_CERT: &str = "ca.pem";
const SERVER: &str = "server.pem";
/// What to do about a `ca.key` that cannot be used.
const CA_KEY_ADVICE: &str = "restore it, or remove ca.key and ca.pem to have a new CA made \
                             (clients must then trust it anew)";

/// `e` with what to do about it.
fn advise(mut e: TlsError, advice: &str) -> TlsError {
    e.why = format!("{}; {advice}", e.why);
    e
}

/// The local CA: its certificate, and where it keeps its files.
#[derive(Debug, Clone)]
pub struct LocalCa(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    /// The directory's claim: no other server writes in it meanwhile.
    claim: Claim,
    /// The CA's certificate, DER and PEM, and its SHA-256 fingerprint.
    der: Vec<u8>,
    pem: String,
    fingerprint: String,
    /// The CA's name, and the host it was made for.
    common_name: String,
    host: Option<String>,
    /// What to say of a CA an earlier version made, unlike this one's.
    earlier: Option<String>,
    /// How long a server certificate is valid.
    seconds: i64,
    /// One renewal at a time (SIGHUP and the timer may meet).
    renewing: Mutex<()>,
}

/// What a renewal served: the certificate, whether it is new, and the
/// names left out of it (with why).
pub struct Renewal {
    pub served: Served,
    pub made: bool,
    /// The names and addresses it holds.
    pub names: Vec<String>,
    pub left_out: Vec<String>,
}

/// A clock before the floor is wrong, and nothing is signed with it: a CA
/// dated then would expire years early, a certificate be refused.
const EARLIEST: i64 = crate::os::CLOCK_FLOOR as i64;

/// The time now, if the clock can be believed.
fn signing_time(path: &Path) -> Result<i64, TlsError> {
    let now = now();
    if now < EARLIEST {
        return Err(in_file(
            path,
            format!(
                "not made: the clock says {} (before 2026); set the time (NTP) first",
                crate::transport::date(now)
            ),
        ));
    }
    Ok(now)
}

impl LocalCa {
    /// The CA kept in `dir` (checked and claimed by [`check_dir`], the
    /// claim kept as long as the CA), made now if `dir` holds none (for
    /// the host `names` give); whether it was made.
    pub fn open(dir: &Path, claim: &Claim, names: &Names) -> Result<(LocalCa, bool), TlsError> {
        let key_path = dir.join(CA_KEY);
        let cert_path = dir.join(CA_CERT);
        let (key_text, cert_text) = (read(&key_path)?, read(&cert_path)?);
        let (key, der, made) = match (key_text, cert_text) {
            (None, Some(_)) => {
                return Err(in_file(
                    &cert_path,
                    format!(
                        "is a CA certificate without its key ({CA_KEY}); restore {CA_KEY}, or \
                         remove {CA_CERT} to have a new CA made (clients must then trust it anew)"
                    ),
                ));
            }
            (None, None) => {
                signing_time(&cert_path)?;
                let key = issue::new_key().map_err(|why| in_file(&key_path, why))?;
                write_file(&key_path, &pem("PRIVATE KEY", &key.serialize_der()), 0o600)?;
                (key, None, true)
            }
            (Some(text), cert) => {
                owner_only(&key_path)?;
                let der = pkcs8(&key_path, &text).map_err(|e| advise(e, CA_KEY_ADVICE))?;
                let key = issue::read_key(&der)
                    .map_err(|why| advise(in_file(&key_path, why), CA_KEY_ADVICE))?;
                let cert = cert
                    .map(|text| certificates(&cert_path, &text).map(|c| c[0].to_vec()))
                    .transpose()?;
                (key, cert, false)
            }
        };
        let der = match der {
            Some(der) => der,
            None => {
                let host = names.host.as_deref().and_then(issue::ca_host_for);
                let id = crate::os::random_hex(4).map_err(|e| in_file(dir, e.to_string()))?;
                let name = issue::ca_name(&id, host.as_deref());
                let der = issue::make_ca(&key, &name, host.as_deref(), signing_time(&cert_path)?)
                    .map_err(|why| in_file(&cert_path, why))?;
                write_file(&cert_path, &pem("CERTIFICATE", &der), 0o644)?;
                der
            }
        };
        let ca = LocalCa::from_parts(dir, claim, &key, der)?;
        Ok((ca, made))
    }

    /// The CA of `der` and `key`, checked to belong together and to be one
    /// this server made.
    fn from_parts(
        dir: &Path,
        claim: &Claim,
        key: &rcgen::KeyPair,
        der: Vec<u8>,
    ) -> Result<LocalCa, TlsError> {
        let cert_path = dir.join(CA_CERT);
        let foreign = |why: &str| in_file(&cert_path, why.to_string());
        let pkcs8 = PrivatePkcs8KeyDer::from(key.serialize_der());
        Served::from_der(vec![CertificateDer::from(der.clone())], pkcs8.into()).map_err(|_| {
            foreign("is not the certificate of ca.key (a foreign file?); restore the pair")
        })?;
        let common_name = common_name(&der)
            .ok_or_else(|| foreign("is not a CA this server made (its name is not one)"))?;
        let host = issue::ca_host(&common_name)
            .ok_or_else(|| foreign("is not a CA this server made (its name is not one)"))?
            .map(str::to_string);
        let earlier = match own::check(key, &der, &common_name, host.as_deref()) {
            Ok(own::Own::Now) => None,
            Ok(own::Own::Earlier(why)) => Some(why),
            Err(why) => return Err(foreign(&why)),
        };
        Ok(LocalCa(Arc::new(Inner {
            dir: dir.to_path_buf(),
            claim: claim.clone(),
            pem: pem("CERTIFICATE", &der),
            fingerprint: fingerprint(&der),
            der,
            common_name,
            host,
            earlier,
            seconds: server_seconds(),
            renewing: Mutex::new(()),
        })))
    }

    /// The CA's certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.0.pem
    }

    /// The SHA-256 fingerprint of the CA's certificate, `AA:BB:...`.
    pub fn fingerprint(&self) -> &str {
        &self.0.fingerprint
    }

    /// Why the CA is not as this version makes them, if an earlier one
    /// made it (`own.rs`): for a warning at start.
    pub fn earlier(&self) -> Option<&str> {
        self.0.earlier.as_deref()
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.0.dir
    }

    /// When a server certificate valid until `not_after` is renewed: once
    /// less than a third of a certificate's life is left.
    pub fn renew_at(&self, not_after: i64) -> i64 {
        not_after - self.0.seconds / 3
    }

    /// How long after a failed renewal the next try comes: five minutes,
    /// less for a short-lived certificate.
    pub fn retry_after(&self) -> i64 {
        (self.0.seconds / 6).clamp(1, 300)
    }

    /// The server certificate to serve for `names`: the one in `DIR` while
    /// it names them all and is not due for renewal, else a new one (then
    /// kept in `DIR`). Checks that the CA files still hold this CA.
    pub fn renew(&self, names: &Names) -> Result<Renewal, TlsError> {
        self.renew_then(names, |_| {})
    }

    /// [`LocalCa::renew`], and `serve` given what it served before the
    /// next renewal may start: SIGHUP and the `tls-renew` thread may renew
    /// at once, and the one that made the newer certificate must not have
    /// the older served after it.
    pub fn renew_then(
        &self,
        names: &Names,
        serve: impl FnOnce(&Renewal),
    ) -> Result<Renewal, TlsError> {
        let _one = crate::lock::lock(&self.0.renewing);
        let renewal = self.renewal(names)?;
        serve(&renewal);
        Ok(renewal)
    }

    /// [`LocalCa::renew`]'s work, under its lock.
    fn renewal(&self, names: &Names) -> Result<Renewal, TlsError> {
        let key = self.check_files()?;
        let (sans, left_out) = issue::server_names(names, self.0.host.as_deref());
        let wanted = wanted(&sans);
        let path = self.0.dir.join(SERVER);
        let now = now();
        if let Some(text) = read(&path)? {
            let served = self.read_server(&path, &text)?;
            let due = served
                .validity
                .is_none_or(|v| now >= self.renew_at(v.not_after));
            if !due && self.verifies(&served, &wanted, now).is_ok() {
                return Ok(Renewal {
                    served,
                    made: false,
                    names: wanted,
                    left_out,
                });
            }
        }
        let now = signing_time(&path)?;
        let (der, key_der) =
            issue::make_server(&key, &self.0.common_name, sans, now, self.0.seconds)
                .map_err(|why| in_file(&path, why))?;
        let served = Served::from_der(
            vec![CertificateDer::from(der.clone())],
            PrivatePkcs8KeyDer::from(key_der.clone()).into(),
        )
        .map_err(|(_, why)| in_file(&path, why))?;
        self.verifies(&served, &wanted, now).map_err(|why| {
            in_file(
                &path,
                format!("the certificate made does not verify: {why}"),
            )
        })?;
        let text = pem("PRIVATE KEY", &key_der) + &pem("CERTIFICATE", &der);
        write_file(&path, &text, 0o600)?;
        Ok(Renewal {
            served,
            made: true,
            names: wanted,
            left_out,
        })
    }

    /// The CA's key, read again, after checking that `ca.key` and `ca.pem`
    /// still hold this CA.
    fn check_files(&self) -> Result<rcgen::KeyPair, TlsError> {
        let key_path = self.0.dir.join(CA_KEY);
        let cert_path = self.0.dir.join(CA_CERT);
        let text = read(&key_path)?.ok_or_else(|| in_file(&key_path, "is gone"))?;
        let key =
            issue::read_key(&pkcs8(&key_path, &text)?).map_err(|why| in_file(&key_path, why))?;
        let cert = read(&cert_path)?.ok_or_else(|| in_file(&cert_path, "is gone"))?;
        if certificates(&cert_path, &cert)?[0].as_ref() != self.0.der.as_slice() {
            return Err(in_file(
                &cert_path,
                "is no longer the CA this server started with; restart to serve another CA",
            ));
        }
        LocalCa::from_parts(&self.0.dir, &self.0.claim, &key, self.0.der.clone())?;
        Ok(key)
    }

    /// `server.pem` read: its key and certificate, matching.
    fn read_server(&self, path: &Path, text: &str) -> Result<Served, TlsError> {
        let key = pkcs8(path, text).map_err(|e| advise(e, "remove it to have a new one made"))?;
        let chain = certificates(path, text)?;
        Served::from_der(chain, PrivatePkcs8KeyDer::from(key).into())
            .map_err(|(_, why)| in_file(path, format!("{why}; remove it to have a new one made")))
    }

    /// Whether a client trusting this CA alone accepts `served` for each
    /// of `names` at `now`.
    fn verifies(&self, served: &Served, names: &[String], now: i64) -> Result<(), String> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(self.0.der.clone()))
            .map_err(|e| e.to_string())?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| e.to_string())?;
        let leaf = served.key.end_entity_cert().map_err(|e| e.to_string())?;
        let at = UnixTime::since_unix_epoch(Duration::from_secs(now.max(0) as u64));
        for name in names {
            let server = ServerName::try_from(name.as_str())
                .map_err(|e| format!("{name}: {e}"))?
                .to_owned();
            use rustls::client::danger::ServerCertVerifier as _;
            verifier
                .verify_server_cert(leaf, &[], &server, &[], at)
                .map_err(|e| format!("{name}: {e}"))?;
        }
        Ok(())
    }
}

/// Each name of `sans` as text, for the check that a certificate names it.
fn wanted(sans: &[rcgen::SanType]) -> Vec<String> {
    sans.iter()
        .filter_map(|san| match san {
            rcgen::SanType::DnsName(name) => Some(name.as_str().to_string()),
            rcgen::SanType::IpAddress(ip) => Some(ip.to_string()),
            _ => None,
        })
        .collect()
}

/// How long a server certificate is valid: 90 days, or, as a test hook,
/// `PLANTSTORE_TEST_CERT_SECONDS` (at least 2).
fn server_seconds() -> i64 {
    std::env::var("PLANTSTORE_TEST_CERT_SECONDS")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|&s| (2..=issue::SERVER_SECONDS).contains(&s))
        .unwrap_or(issue::SERVER_SECONDS)
}
