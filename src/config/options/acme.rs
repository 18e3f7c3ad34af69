//! The `--acme-*` flags (the `acme` feature): a certificate for a public
//! name from an ACME CA, checked into ACME's `Settings`. The state
//! directory is opened now (made 0700 if missing; a symlink, a file or one
//! that cannot be written is a clear exit 2), and `--acme-ca` read now, so
//! that what cannot work stops the start rather than the first order.

use std::fmt;
use std::path::PathBuf;

use super::super::{Args, parse_addr};
use crate::certs::acme::{
    Challenge, Challenges, LETS_ENCRYPT, LETS_ENCRYPT_STAGING, Settings, StateDir,
};

/// An `--acme-*` flag that cannot be used, and why.
#[derive(Debug)]
pub struct AcmeError(pub String);

impl fmt::Display for AcmeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn refused(why: impl Into<String>) -> AcmeError {
    AcmeError(why.into())
}

/// The `--acme-*` flags, with `--acme-domain`; `None` without it (and
/// then no other `--acme-*` flag may be given).
/// `certificates`: whether `--tls-cert` or `--tls-key` was given, and
/// whether `--tls-auto` was (taken out of `args` already).
pub(in super::super) fn acme(
    args: &Args,
    certificates: (bool, bool),
) -> Result<Option<Settings>, AcmeError> {
    let Some(domain) = &args.acme_domain else {
        let others = args.acme_dir.is_some()
            || args.acme_email.is_some()
            || args.acme_directory.is_some()
            || args.acme_staging
            || args.acme_http_addr.is_some()
            || args.acme_ca.is_some();
        return match others {
            true => Err(refused("the --acme-* flags need --acme-domain NAME")),
            false => Ok(None),
        };
    };
    let (files, auto) = certificates;
    if files {
        return Err(refused(
            "give --acme-domain or --tls-cert/--tls-key, not both: the certificate comes \
             from the ACME CA or from the files",
        ));
    }
    if auto {
        return Err(refused(
            "give --acme-domain or --tls-auto, not both: the certificate comes from the \
             ACME CA or from the local CA",
        ));
    }
    let domain = name(domain)?;
    let dir: PathBuf = args.acme_dir.clone().ok_or_else(|| {
        refused("--acme-domain needs --acme-dir DIR (where the account and certificate are kept)")
    })?;
    let dir = StateDir::open(&dir).map_err(|why| refused(format!("--acme-dir: {why}")))?;
    let directory = match (&args.acme_directory, args.acme_staging) {
        (Some(_), true) => {
            return Err(refused("give --acme-directory or --acme-staging, not both"));
        }
        (Some(url), false) if url.starts_with("https://") && url.len() > 8 => url.clone(),
        (Some(url), false) => {
            return Err(refused(format!(
                "--acme-directory {url:?} is not an https:// URL"
            )));
        }
        (None, true) => LETS_ENCRYPT_STAGING.to_string(),
        (None, false) => LETS_ENCRYPT.to_string(),
    };
    if let Some(email) = &args.acme_email {
        let ok = email.split_once('@').is_some_and(|(user, host)| {
            !user.is_empty() && host.contains('.') && !host.contains('@')
        }) && !email.contains(|c: char| c.is_whitespace() || c == ',');
        if !ok {
            return Err(refused(format!(
                "--acme-email {email:?} is not an email address"
            )));
        }
    }
    if let Some(ca) = &args.acme_ca {
        crate::transport::roots(false, Some(ca)).map_err(|e| refused(format!("--acme-ca: {e}")))?;
    }
    let http_addr = args.acme_http_addr.as_deref().map(parse_addr).transpose();
    let http_addr = http_addr.map_err(|e| AcmeError(e.to_string()))?;
    let challenge = match http_addr {
        Some(_) => Challenge::Http01,
        None => Challenge::TlsAlpn01,
    };
    Ok(Some(Settings {
        domain,
        directory,
        email: args.acme_email.clone(),
        dir,
        ca: args.acme_ca.clone(),
        challenge,
        challenges: Challenges::default(),
        http_addr,
    }))
}

/// `--acme-domain`: one DNS name (a CA certifies no address and, over
/// these challenges, no wildcard), lower case.
fn name(given: &str) -> Result<String, AcmeError> {
    let name = given.trim_end_matches('.').to_ascii_lowercase();
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    let ip = name.parse::<std::net::IpAddr>().is_ok();
    if ip || name.len() > 253 || !name.contains('.') || !name.split('.').all(label) {
        return Err(refused(format!(
            "--acme-domain {given:?} is not a public DNS name such as shop.example.org (a CA \
             certifies no address, no wildcard, no name without a dot)"
        )));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use argh::FromArgs;

    fn refusal(flags: &[&str]) -> String {
        let mut all = vec!["--token", "t"];
        all.extend_from_slice(flags);
        let mut args = Args::from_args(&["plantstore"], &all).unwrap();
        let https = super::super::HttpsFlags::take(&mut args);
        match acme(&args, https.certificate_flags()) {
            Err(AcmeError(why)) => why,
            other => panic!("{flags:?} gave {other:?}"),
        }
    }

    #[test]
    fn flags_that_cannot_work_are_refused_with_a_reason() {
        let dir = std::env::temp_dir().join(format!("plantstore-acme-cfg-{}", std::process::id()));
        let dir: &'static str = Box::leak(dir.to_str().unwrap().to_owned().into_boxed_str());
        let domain = ["--acme-domain", "shop.example.org", "--acme-dir", dir];
        let with = |more: &[&'static str]| [&domain[..], more].concat();
        assert!(refusal(&["--acme-email", "a@b.org"]).contains("need --acme-domain"));
        assert!(refusal(&["--acme-domain", "shop.example.org"]).contains("needs --acme-dir"));
        let both = with(&["--tls-cert", "c.pem", "--tls-key", "k.pem"]);
        assert!(refusal(&both).contains("not both"));
        assert!(refusal(&with(&["--tls-auto", dir])).contains("--tls-auto, not both"));
        let staging = with(&["--acme-staging", "--acme-directory", "https://ca.test/dir"]);
        assert!(refusal(&staging).contains("not both"));
        assert!(refusal(&with(&["--acme-directory", "http://ca.test/dir"])).contains("https://"));
        assert!(refusal(&with(&["--acme-email", "nobody"])).contains("not an email"));
        let args = Args::from_args(&["plantstore"], &with(&["--acme-staging"])).unwrap();
        let config = acme(&args, (false, false)).unwrap().unwrap();
        assert_eq!(config.directory, LETS_ENCRYPT_STAGING);
        assert_eq!(config.challenge, Challenge::TlsAlpn01);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Through `Config::from_args`, which takes the HTTPS flags out of
    /// `Args` before `--acme-domain` is read.
    #[test]
    fn a_server_given_a_certificate_otherwise_refuses_acme_at_start() {
        let dir = std::env::temp_dir().join(format!("plantstore-acme-both-{}", std::process::id()));
        let dir = dir.to_str().unwrap();
        let acme = [
            "--token",
            "t",
            "--acme-domain",
            "shop.example.org",
            "--acme-dir",
            dir,
        ];
        for (other, says) in [
            (
                &["--tls-cert", "c.pem", "--tls-key", "k.pem"][..],
                "--tls-cert/--tls-key, not both",
            ),
            (&["--tls-auto", dir][..], "--tls-auto, not both"),
        ] {
            let given = [&acme[..], other].concat();
            let args = Args::from_args(&["plantstore"], &given).unwrap();
            match crate::config::Config::from_args(args, None) {
                Err(crate::config::ConfigError::Acme(AcmeError(why))) => {
                    assert!(why.contains(says), "{why}")
                }
                Err(e) => panic!("{other:?}: {e}"),
                Ok(_) => panic!("{other:?} with --acme-domain was accepted"),
            }
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn only_dns_names_are_certified() {
        assert_eq!(name("Shop.Example.org.").unwrap(), "shop.example.org");
        for bad in [
            "localhost",
            "127.0.0.1",
            "*.example.org",
            "a..b",
            "-a.b",
            "a b.c",
        ] {
            assert!(name(bad).is_err(), "{bad}");
        }
    }
}
