//! What the local CA signs, made with rcgen (on ring): the CA itself and
//! the server's certificate, and the names each may hold.
//!
//! The CA: ECDSA P-256, valid ten years, may sign server certificates
//! only (path length 0), with critical name constraints permitting the
//! host's name at the CA's making, `local` (every `.local` name),
//! `localhost`, loopback (127.0.0.0/8, ::1) and the private ranges
//! (10/8, 172.16/12, 192.168/16, fc00::/7, fe80::/10): a CA trusted on a
//! phone cannot vouch for any other site. Its common name says what it is
//! and for which host: `plantstore local CA <id> for <host>`.
//!
//! A name constraint permits the name and every name under it (RFC 5280),
//! so the host's name is in the constraints (and its common name) only if
//! it has two labels or more: a host named `dev` or `com` would let the CA
//! vouch for `www.google.dev`. A single-label host is left out of the
//! constraints and of the certificate, which names it as `<host>.local`
//! (under `local`) instead. A host name like an IP address (`8.8.8.8`, any
//! name whose last label is a number) is no DNS name a client would ask
//! for (it would read it as an address): it is left out too, with the
//! reason in the log, not refused, as any other name a certificate cannot
//! hold. (Earlier versions put both in the constraints; such a CA is still
//! taken as the server's own, `own.rs`.)
//!
//! Signing with a CA made at an earlier start: rcgen's `Issuer` needs the
//! CA's distinguished name, its key and how it identifies keys, not the
//! certificate; so the name is rebuilt from the common name read back out
//! of `ca.pem` (the one text the CA's name holds, a UTF8String as rcgen
//! writes it) instead of linking rcgen's X.509 parser. A certificate
//! signed so is verified under `ca.pem` before it is served.
//!
//! The server's certificate: ECDSA P-256, a new key each time, 90 days,
//! an empty subject (the names are in its critical subjectAltName), for
//! server authentication only.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rcgen::{
    BasicConstraints, CertificateParams, CidrSubnet, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, GeneralSubtree, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    NameConstraints, PKCS_ECDSA_P256_SHA256, SanType, SerialNumber,
};

use super::super::Names;

/// The start of the CA's common name.
const CA_NAME: &str = "plantstore local CA ";
/// How long the CA is valid: ten years.
pub(super) const CA_SECONDS: i64 = 3650 * 86_400;
/// How long the server's certificate is valid: 90 days.
pub(super) const SERVER_SECONDS: i64 = 90 * 86_400;
/// How far back a validity starts (at most): a client's clock a little
/// behind the board's still accepts a fresh certificate.
const BACKDATE: i64 = 3600;

/// A new ECDSA P-256 key.
pub(super) fn new_key() -> Result<KeyPair, String> {
    KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|e| format!("cannot make a key: {e}"))
}

/// A PKCS#8 DER key read back as one rcgen can sign with.
pub(super) fn read_key(pkcs8: &[u8]) -> Result<KeyPair, String> {
    let der = rustls::pki_types::PrivatePkcs8KeyDer::from(pkcs8);
    KeyPair::from_pkcs8_der_and_sign_algo(&der, &PKCS_ECDSA_P256_SHA256)
        .map_err(|_| "not an ECDSA P-256 private key (PKCS#8) this server made".to_string())
}

/// The CA's common name, for `host` (if the host has a usable name) and a
/// random `id`, so that two boards' CAs never share a name.
pub(super) fn ca_name(id: &str, host: Option<&str>) -> String {
    match host {
        Some(host) => format!("{CA_NAME}{id} for {host}"),
        None => format!("{CA_NAME}{id}"),
    }
}

/// The host a CA's common name was made for (`Some(None)`: none), or
/// `None` if it is not a name this server gives its CAs.
pub(super) fn ca_host(common_name: &str) -> Option<Option<&str>> {
    let rest = common_name.strip_prefix(CA_NAME)?;
    match rest.split_once(" for ") {
        Some((_, host)) => Some(Some(host)),
        None => Some(None),
    }
}

/// A distinguished name of one common name, as rcgen writes it.
fn named(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, DnValue::Utf8String(common_name.into()));
    name
}

/// Unix seconds as the time rcgen takes.
fn at(unix: i64) -> Result<time::OffsetDateTime, String> {
    time::OffsetDateTime::from_unix_timestamp(unix).map_err(|e| format!("bad time {unix}: {e}"))
}

/// A random serial number of 16 bytes, positive.
fn serial() -> Result<SerialNumber, String> {
    let mut bytes = [0u8; 16];
    crate::os::random_fill(&mut bytes).map_err(|e| format!("no random bytes: {e}"))?;
    bytes[0] &= 0x7F;
    bytes[0] |= 0x01;
    Ok(SerialNumber::from_slice(&bytes))
}

/// The subtrees a CA for `host` permits.
pub(super) fn permitted(host: Option<&str>) -> Vec<GeneralSubtree> {
    let mut trees: Vec<GeneralSubtree> = host
        .into_iter()
        .chain(["local", "localhost"])
        .map(|name| GeneralSubtree::DnsName(name.into()))
        .collect();
    for (ip, prefix) in PRIVATE {
        trees.push(GeneralSubtree::IpAddress(CidrSubnet::from_addr_prefix(
            *ip, *prefix,
        )));
    }
    trees
}

/// Loopback and the private ranges: the addresses a CA permits.
const PRIVATE: &[(IpAddr, u8)] = &[
    (IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)), 8),
    (IpAddr::V6(Ipv6Addr::LOCALHOST), 128),
    (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8),
    (IpAddr::V4(Ipv4Addr::new(172, 16, 0, 0)), 12),
    (IpAddr::V4(Ipv4Addr::new(192, 168, 0, 0)), 16),
    (IpAddr::V6(Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0)), 7),
    (IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0)), 10),
];

/// Whether `ip` is in one of the ranges a CA permits.
fn is_private(ip: IpAddr) -> bool {
    PRIVATE.iter().any(|&(net, prefix)| match (net, ip) {
        (IpAddr::V4(net), IpAddr::V4(ip)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(net) & mask == u32::from(ip) & mask
        }
        (IpAddr::V6(net), IpAddr::V6(ip)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(net) & mask == u128::from(ip) & mask
        }
        _ => false,
    })
}

/// A host name a certificate can hold: letters, digits and hyphens in
/// dot-separated labels of 1 to 63, 253 at most; lowercased. Not one like
/// an IP address ([`like_address`]).
pub(super) fn dns_name(name: &str) -> Option<String> {
    let name = name.trim().trim_end_matches('.').to_ascii_lowercase();
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    let fits = name.len() <= 253 && name.split('.').all(label_ok);
    (fits && !like_address(&name)).then_some(name)
}

/// Whether a client would read `name` as an IP address, not a host name:
/// its last label is a number (decimal, or hex with `0x`), as in
/// `8.8.8.8` or `0x7f.1` (the WHATWG URL rule).
pub(super) fn like_address(name: &str) -> bool {
    let last = name.trim_end_matches('.').rsplit('.').next().unwrap_or("");
    let hex = last
        .strip_prefix("0x")
        .or_else(|| last.strip_prefix("0X"))
        .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    hex || (!last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()))
}

/// The host name a new CA is made for, and its name constraints permit:
/// `host` as [`dns_name`] takes it, if it has two labels or more (a
/// constraint for `dev` would permit every name under `dev`).
pub(super) fn ca_host_for(host: &str) -> Option<String> {
    dns_name(host).filter(|name| name.contains('.') && name != "localhost")
}

/// Whether a CA made for `ca_host` permits the DNS name `name`.
fn permits(ca_host: Option<&str>, name: &str) -> bool {
    let under = |base: &str| name == base || name.ends_with(&format!(".{base}"));
    under("local") || under("localhost") || ca_host.is_some_and(under)
}

/// The names and addresses a server certificate holds, and those left
/// out (named, with why): the host's name (not a single-label one) and its
/// `.local` name (when the CA permits them), `localhost`, 127.0.0.1, ::1,
/// and each address given that is loopback or private, once each.
pub(super) fn server_names(names: &Names, ca_host: Option<&str>) -> (Vec<SanType>, Vec<String>) {
    let mut dns: Vec<String> = Vec::new();
    let mut left_out = Vec::new();
    if let Some(host) = names.host.as_deref() {
        match dns_name(host) {
            Some(host) if host != "localhost" => {
                let local = match host.ends_with(".local") {
                    true => None,
                    false => Some(format!("{host}.local")),
                };
                let host = match host.contains('.') {
                    true => Some(host),
                    false => {
                        left_out.push(format!(
                            "{host} (a single-label name: a CA permitting it would permit \
                             every name under it; its .local name is named instead)"
                        ));
                        None
                    }
                };
                for name in local.into_iter().chain(host) {
                    if permits(ca_host, &name) {
                        dns.push(name);
                    } else {
                        left_out.push(format!("{name} (the CA was made for another host name)"));
                    }
                }
            }
            Some(_) => {}
            None if like_address(host.trim()) => {
                left_out.push(format!("{host} (a host name like an IP address)"));
            }
            None => left_out.push(format!("{host} (not a DNS name)")),
        }
    }
    dns.push("localhost".into());
    dns.sort();
    dns.dedup();
    let mut ips: Vec<IpAddr> = vec![Ipv4Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into()];
    for &ip in &names.addresses {
        if ips.contains(&ip) {
        } else if is_private(ip) {
            ips.push(ip);
        } else {
            left_out.push(format!("{ip} (not a loopback or private address)"));
        }
    }
    let mut sans: Vec<SanType> = Vec::new();
    for name in dns {
        if let Ok(name) = name.try_into() {
            sans.push(SanType::DnsName(name));
        }
    }
    sans.extend(ips.into_iter().map(SanType::IpAddress));
    (sans, left_out)
}

/// A new CA, self-signed with `key`, named `common_name`, for `host`.
pub(super) fn make_ca(
    key: &KeyPair,
    common_name: &str,
    host: Option<&str>,
    now: i64,
) -> Result<Vec<u8>, String> {
    let validity = (now - BACKDATE, now + CA_SECONDS);
    self_signed(key, common_name, host, validity, serial()?)
}

/// The CA [`make_ca`] makes, with its validity (Unix seconds) and serial
/// given: all that is not random or the clock. (`own.rs` makes it again
/// to tell a CA this code made from any other.)
pub(super) fn self_signed(
    key: &KeyPair,
    common_name: &str,
    host: Option<&str>,
    (not_before, not_after): (i64, i64),
    serial: SerialNumber,
) -> Result<Vec<u8>, String> {
    let mut params = CertificateParams::default();
    params.distinguished_name = named(common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.name_constraints = Some(NameConstraints {
        permitted_subtrees: permitted(host),
        excluded_subtrees: Vec::new(),
    });
    params.not_before = at(not_before)?;
    params.not_after = at(not_after)?;
    params.serial_number = Some(serial);
    let cert = params
        .self_signed(key)
        .map_err(|e| format!("cannot make the CA: {e}"))?;
    Ok(cert.der().to_vec())
}

/// A server certificate for `sans` with a new key, signed by the CA named
/// `common_name` with `ca_key`, valid `seconds` from `now`: its DER and
/// its key's PKCS#8 DER.
pub(super) fn make_server(
    ca_key: &KeyPair,
    common_name: &str,
    sans: Vec<SanType>,
    now: i64,
    seconds: i64,
) -> Result<(Vec<u8>, Vec<u8>), String> {
    let key = new_key()?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.subject_alt_names = sans;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = at(now - BACKDATE.min(seconds))?;
    params.not_after = at(now + seconds)?;
    params.serial_number = Some(serial()?);
    let mut ca = CertificateParams::default();
    ca.distinguished_name = named(common_name);
    let issuer = Issuer::new(ca, ca_key);
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(|e| format!("cannot sign the server's certificate: {e}"))?;
    Ok((cert.der().to_vec(), key.serialize_der()))
}
