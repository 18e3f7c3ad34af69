//! HTTPS certificates: `--tls-cert` and `--tls-key` read and made into the
//! configuration the event loops serve (`http::Https`), at start and again
//! on SIGHUP.
//!
//! Both files are read as every file taken at start or on a reload
//! ([`os::read_text`](crate::os::read_text): a regular file, symlinks
//! followed, since certbot's `live/` files are links; at most 16 MiB; never
//! a FIFO or a device). PEM: the certificate file holds the chain, the
//! server's certificate first; the key file one private key, PKCS#8, RSA
//! (PKCS#1) or EC (SEC1); RSA, ECDSA P-256/P-384 and Ed25519 keys work. A
//! key that does not match the certificate is refused, and so is a chain
//! of more than 8 certificates or 32 KiB (each handshake sends it whole).
//!
//! Served: TLS 1.3 and 1.2 with rustls' default cipher suites, on the ring
//! provider (it builds for every release target with the cross gcc and zig
//! the release already uses; aws-lc-rs would need CMake and bindgen for
//! 32-bit ARM); ALPN `http/1.1`; one certificate whatever the SNI;
//! session resumption by stateless tickets (see `config`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The two files that make the served certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `--tls-cert`: the chain, PEM.
    pub cert: PathBuf,
    /// `--tls-key`: its private key, PEM.
    pub key: PathBuf,
}

/// Why the certificate files cannot be served: the file at fault (if one
/// is), and why, in words that never quote the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError {
    pub file: Option<PathBuf>,
    pub why: String,
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}: {}", file.display(), self.why),
            None => f.write_str(&self.why),
        }
    }
}

impl std::error::Error for TlsError {}

fn in_file(file: &Path, why: impl Into<String>) -> TlsError {
    TlsError {
        file: Some(file.to_path_buf()),
        why: why.into(),
    }
}

/// What the files make: the configuration to serve, and the validity of
/// the server's certificate (when it can be read).
#[derive(Debug, Clone)]
pub struct Served {
    pub config: Arc<ServerConfig>,
    pub validity: Option<Validity>,
}

/// Reads both files and makes the configuration to serve. An expired or
/// not yet valid certificate loads (the caller warns, see
/// [`Validity::warning`]): the clock of a board without a real-time clock
/// may be wrong at boot.
pub fn load(files: &TlsFiles) -> Result<Served, TlsError> {
    let cert_text =
        crate::os::read_text(&files.cert).map_err(|e| in_file(&files.cert, e.to_string()))?;
    let key_text =
        crate::os::read_text(&files.key).map_err(|e| in_file(&files.key, e.to_string()))?;
    from_pem(&cert_text, &key_text).map_err(|(part, why)| match part {
        Part::Cert => in_file(&files.cert, why),
        Part::Key => in_file(&files.key, why),
        Part::Both => TlsError {
            file: None,
            why: format!(
                "{} with {}: {why}",
                files.cert.display(),
                files.key.display()
            ),
        },
    })
}

/// Which of the two texts an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Cert,
    Key,
    /// The pair: a key that does not match the certificate.
    Both,
}

/// The most certificates a served chain may hold: the server's and its
/// intermediates (a real chain has two to four).
const MAX_CHAIN_CERTS: usize = 8;
/// The most bytes (DER) a served chain may hold. Every handshake sends the
/// whole chain, and rustls queues it whatever the connection's 64 KiB
/// output bound (`http::tls`), so a chain of thousands would let each
/// client that stops reading hold megabytes.
const MAX_CHAIN_BYTES: usize = 32 * 1024;

/// The configuration to serve a PEM certificate chain with a PEM key;
/// an error names the text at fault and never quotes the key.
pub fn from_pem(cert: &str, key: &str) -> Result<Served, (Part, String)> {
    let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| (Part::Cert, format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err((
            Part::Cert,
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    let bytes: usize = chain.iter().map(|c| c.len()).sum();
    if chain.len() > MAX_CHAIN_CERTS || bytes > MAX_CHAIN_BYTES {
        return Err((
            Part::Cert,
            format!(
                "holds a chain of {} certificates ({bytes} bytes); at most {MAX_CHAIN_CERTS} \
                 and {} KiB are served (the server's certificate and its intermediates: \
                 every handshake sends them all)",
                chain.len(),
                MAX_CHAIN_BYTES / 1024
            ),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| {
        let why = match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "holds no PEM private key (PKCS#8, RSA or EC)"
            }
            _ => "not a readable PEM private key",
        };
        (Part::Key, why.to_string())
    })?;
    let validity = Validity::of(&chain[0]);
    let config = config(chain, key).map_err(|why| (Part::Both, why))?;
    Ok(Served { config, validity })
}

/// The rustls configuration serving `chain` with `key`.
fn config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("cannot serve this certificate and key: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Stateless tickets (ChaCha20-Poly1305, random keys rotated every 6
    // hours, in memory only): a client resumes with any ticket it holds,
    // as many times as it likes within its life, and the server keeps no
    // state per session. (rustls' stateful cache honours each TLS 1.3
    // ticket once.) A reload makes a new ticketer: sessions from before it
    // make full handshakes.
    config.ticketer = rustls::crypto::ring::Ticketer::new()
        .map_err(|e| format!("cannot make session tickets: {e}"))?;
    Ok(Arc::new(config))
}

/// Where the system's CA certificates are, by distribution; the first
/// that exists is read (`SSL_CERT_FILE`, when set, instead).
const SYSTEM_ROOTS: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt", // Debian, Raspberry Pi OS, Ubuntu, Alpine
    "/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
    "/etc/ssl/ca-bundle.pem",             // openSUSE
    "/etc/ssl/cert.pem",                  // Alpine, others
];

/// The client side, for https webhooks: server certificates verified
/// (chain and host name) against the system's CA certificates and those
/// in `extra` (`--webhook-ca`, a private CA). With none at all, every
/// delivery fails verification: the warning returned says so. There is no
/// way to turn verification off.
pub fn client_config(
    extra: Option<&Path>,
) -> Result<(Arc<rustls::ClientConfig>, Option<String>), TlsError> {
    let roots = roots(true, extra)?;
    let warning = roots.is_empty().then(|| {
        format!(
            "no CA certificates found ({}, or SSL_CERT_FILE): https webhooks will fail \
             verification; give --webhook-ca or install ca-certificates",
            SYSTEM_ROOTS[0]
        )
    });
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError {
            file: None,
            why: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok((Arc::new(config), warning))
}

/// CA certificates to verify servers against: the system's (when
/// `system`: `SSL_CERT_FILE`, else the first bundle of `SYSTEM_ROOTS` that
/// exists; a certificate in it that does not parse is left out, as other
/// TLS clients do) and those in `extra` (PEM, at least one, each usable).
pub fn roots(system: bool, extra: Option<&Path>) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    let bundle = system
        .then(|| {
            std::env::var_os("SSL_CERT_FILE")
                .map(PathBuf::from)
                .or_else(|| SYSTEM_ROOTS.iter().map(PathBuf::from).find(|p| p.is_file()))
        })
        .flatten();
    if let Some(bundle) = &bundle {
        let text = crate::os::read_text(bundle).map_err(|e| in_file(bundle, e.to_string()))?;
        let certs = CertificateDer::pem_slice_iter(text.as_bytes()).filter_map(Result::ok);
        roots.add_parsable_certificates(certs);
    }
    if let Some(ca) = extra {
        let text = crate::os::read_text(ca).map_err(|e| in_file(ca, e.to_string()))?;
        let certs = CertificateDer::pem_slice_iter(text.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| in_file(ca, format!("not PEM certificates: {e}")))?;
        if certs.is_empty() {
            return Err(in_file(
                ca,
                "holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            ));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| {
                in_file(ca, format!("holds a certificate that cannot be used: {e}"))
            })?;
        }
    }
    Ok(roots)
}

/// When a certificate is valid: `notBefore` and `notAfter`, in Unix
/// seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
}

/// Days before expiry from which start-up and reloads warn.
const EXPIRY_WARNING_DAYS: i64 = 14;

impl Validity {
    /// The validity of a DER certificate; `None` if it cannot be read
    /// (rustls has accepted the certificate by then: this only serves the
    /// warning and the gauge).
    pub fn of(der: &[u8]) -> Option<Validity> {
        // Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version
        // (optional), serialNumber, signature, issuer, validity, ... } }
        let (_, certificate, _) = tlv(der)?;
        let (_, mut tbs, _) = tlv(certificate)?;
        let (tag, _, rest) = tlv(tbs)?;
        if tag == 0xA0 {
            tbs = rest;
        }
        for _ in 0..3 {
            tbs = tlv(tbs)?.2; // serial number, signature algorithm, issuer
        }
        let (_, validity, _) = tlv(tbs)?;
        let (tag, before, rest) = tlv(validity)?;
        let not_before = time(tag, before)?;
        let (tag, after, _) = tlv(rest)?;
        Some(Validity {
            not_before,
            not_after: time(tag, after)?,
        })
    }

    /// What a client will think of the certificate at `now` (Unix
    /// seconds), when it is worth a warning.
    pub fn warning(&self, now: i64) -> Option<String> {
        let days = |s: i64| s.div_euclid(86_400);
        if now < self.not_before {
            Some(format!(
                "the certificate is not valid yet (from {}); clients will refuse it until then",
                date(self.not_before)
            ))
        } else if now >= self.not_after {
            Some(format!(
                "the certificate expired on {}; clients will refuse it",
                date(self.not_after)
            ))
        } else if days(self.not_after - now) < EXPIRY_WARNING_DAYS {
            Some(format!(
                "the certificate expires on {} (in {} day{}); renew it and reload (SIGHUP)",
                date(self.not_after),
                days(self.not_after - now),
                crate::model::plural(days(self.not_after - now) as u64)
            ))
        } else {
            None
        }
    }
}

/// One DER element at the start of `der`: its tag, its contents, and what
/// follows it.
fn tlv(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7F);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, after) = rest.split_at(count);
        rest = after;
        bytes.iter().fold(0usize, |n, &b| (n << 8) | usize::from(b))
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// A UTCTime (0x17, `YYMMDDHHMMSSZ`, years 1950-2049) or GeneralizedTime
/// (0x18, `YYYYMMDDHHMMSSZ`), in Unix seconds.
fn time(tag: u8, text: &[u8]) -> Option<i64> {
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.iter().try_fold(0i64, |n, &b| {
            b.is_ascii_digit().then(|| n * 10 + i64::from(b - b'0'))
        })
    };
    let (year, at) = match (tag, text.len()) {
        (0x17, 13) => {
            let yy = digits(0..2)?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, 2)
        }
        (0x18, 15) => (digits(0..4)?, 4),
        _ => return None,
    };
    if text.last() != Some(&b'Z') {
        return None;
    }
    let (month, day) = (digits(at..at + 2)?, digits(at + 2..at + 4)?);
    let (hour, minute, second) = (
        digits(at + 4..at + 6)?,
        digits(at + 6..at + 8)?,
        digits(at + 8..at + 10)?,
    );
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// A Unix time as `YYYY-MM-DD`.
fn date(unix: i64) -> String {
    let days = unix.div_euclid(86_400) + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_convert_both_ways() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(951_782_400), "2000-02-29");
        assert_eq!(date(4_102_444_800), "2100-01-01");
    }

    #[test]
    fn both_time_forms_read_and_bad_ones_do_not() {
        assert_eq!(time(0x17, b"200101000000Z"), Some(1_577_836_800));
        assert_eq!(time(0x17, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(time(0x17, b"500101000000Z"), Some(-631_152_000));
        assert_eq!(time(0x18, b"20500101000000Z"), Some(2_524_608_000));
        for (tag, bad) in [
            (0x17, &b"2001010000Z"[..]),
            (0x17, b"200101000000+"),
            (0x17, b"201301000000Z"),
            (0x18, b"200101000000Z"),
            (0x05, b"200101000000Z"),
        ] {
            assert_eq!(time(tag, bad), None, "{bad:?}");
        }
    }

    #[test]
    fn truncated_or_hostile_der_reads_as_none() {
        assert_eq!(Validity::of(&[]), None);
        assert_eq!(Validity::of(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(Validity::of(&[0x30, 0x03, 0x30, 0x01]), None);
        assert_eq!(Validity::of(&[0x30, 0x80, 0x00]), None);
    }

    #[test]
    fn warnings_say_what_a_client_will_think() {
        let v = Validity {
            not_before: 1_000 * 86_400,
            not_after: 2_000 * 86_400,
        };
        assert!(v.warning(999 * 86_400).unwrap().contains("not valid yet"));
        assert_eq!(v.warning(1_500 * 86_400), None);
        assert!(v.warning(1_990 * 86_400).unwrap().contains("in 10 days"));
        assert!(
            v.warning(2_000 * 86_400)
                .unwrap()
                .contains("expired on 1975-06-24")
        );
    }
}
