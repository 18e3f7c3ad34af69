//! The local CA's names, constraints and files: what a certificate holds,
//! and what `DIR` may and may not hold.

use std::fs;
use std::net::IpAddr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use rustls::pki_types::pem::PemObject;

use super::issue::{ca_host, ca_name, dns_name, permitted, server_names};
use super::*;
use crate::os::temp::TempDir;

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|ip| ip.parse().unwrap()).collect()
}

fn names(host: Option<&str>, addresses: &[&str]) -> Names {
    Names {
        host: host.map(str::to_string),
        addresses: ips(addresses),
    }
}

fn texts(sans: &[rcgen::SanType]) -> Vec<String> {
    wanted(sans)
}

#[test]
fn a_certificate_names_the_host_loopback_and_private_addresses_only() {
    let given = names(
        Some("Board.LAN"),
        &[
            "127.0.0.1",
            "192.168.1.20",
            "203.0.113.9",
            "fd00::2",
            "2001:db8::1",
            "::1",
        ],
    );
    let (sans, left_out) = server_names(&given, Some("board.lan"));
    assert_eq!(
        texts(&sans),
        [
            "board.lan",
            "board.lan.local",
            "localhost",
            "127.0.0.1",
            "::1",
            "192.168.1.20",
            "fd00::2"
        ]
    );
    assert_eq!(left_out.len(), 2, "{left_out:?}");
    assert!(left_out[0].starts_with("203.0.113.9 "), "{left_out:?}");
    assert!(left_out[1].starts_with("2001:db8::1 "), "{left_out:?}");
}

#[test]
fn a_host_the_ca_was_not_made_for_keeps_only_its_local_name() {
    let (sans, left_out) = server_names(&names(Some("renamed.lan"), &[]), Some("board.lan"));
    assert_eq!(
        texts(&sans),
        ["localhost", "renamed.lan.local", "127.0.0.1", "::1"]
    );
    assert_eq!(left_out.len(), 1);
    assert!(left_out[0].starts_with("renamed.lan "), "{left_out:?}");
    let (sans, left_out) = server_names(&names(Some("bad_name!"), &[]), None);
    assert_eq!(texts(&sans), ["localhost", "127.0.0.1", "::1"]);
    assert!(left_out[0].contains("not a DNS name"), "{left_out:?}");
}

#[test]
fn host_names_are_checked_and_lowercased() {
    assert_eq!(dns_name("Pi-4.lan."), Some("pi-4.lan".into()));
    for bad in ["", "-pi", "pi-", "a..b", "pi_4", "pï", &"a".repeat(64)] {
        assert_eq!(dns_name(bad), None, "{bad}");
    }
}

#[test]
fn the_constraints_permit_the_host_local_names_loopback_and_private_ranges() {
    let trees = permitted(Some("board.lan"));
    let text = format!("{trees:?}");
    for want in [
        "DnsName(\"board.lan\")",
        "DnsName(\"local\")",
        "DnsName(\"localhost\")",
        "V4([127, 0, 0, 0], [255, 0, 0, 0])",
        "V4([10, 0, 0, 0], [255, 0, 0, 0])",
        "V4([172, 16, 0, 0], [255, 240, 0, 0])",
        "V4([192, 168, 0, 0], [255, 255, 0, 0])",
    ] {
        assert!(text.contains(want), "{want} not in {text}");
    }
    assert_eq!(trees.len(), 10);
    assert_eq!(permitted(None).len(), 9);
}

#[test]
fn the_ca_refuses_to_vouch_for_names_outside_its_constraints() {
    let dir = TempDir::new("local-ca-constraints");
    let path = dir.join("tls");
    let claim = check_dir(&path).unwrap();
    let (ca, _) = LocalCa::open(&path, &claim, &names(Some("board.lan"), &[])).unwrap();
    // The name constraints extension (2.5.29.30) is there, critical.
    let oid = [0x06, 0x03, 0x55, 0x1D, 0x1E];
    let der = ca.0.der.as_slice();
    let at = der.windows(oid.len()).position(|w| w == oid);
    let at = at.expect("no name constraints in the CA") + oid.len();
    assert_eq!(&der[at..at + 3], &[0x01, 0x01, 0xFF], "not critical");
    // A leaf the CA's key signs (as `renew` would, but for any name): a
    // client trusting the CA accepts it for a name the constraints permit,
    // and refuses it for a public name or address.
    let key = ca.check_files().unwrap();
    let now = now();
    let sign = |name: &str| {
        let san = match name.parse::<IpAddr>() {
            Ok(ip) => rcgen::SanType::IpAddress(ip),
            Err(_) => rcgen::SanType::DnsName(name.try_into().unwrap()),
        };
        let (der, key_der) =
            issue::make_server(&key, &ca.0.common_name, vec![san], now, 3600).unwrap();
        Served::from_der(
            vec![CertificateDer::from(der)],
            PrivatePkcs8KeyDer::from(key_der).into(),
        )
        .unwrap()
    };
    for permitted in ["board.local", "10.1.2.3"] {
        let leaf = sign(permitted);
        assert_eq!(ca.verifies(&leaf, &[permitted.into()], now), Ok(()));
    }
    for outside in ["example.com", "8.8.8.8"] {
        let leaf = sign(outside);
        let refused = ca.verifies(&leaf, &[outside.into()], now).unwrap_err();
        assert!(refused.contains("NameConstraint"), "{outside}: {refused}");
    }
}

#[test]
fn a_ca_name_gives_back_its_host() {
    assert_eq!(
        ca_host(&ca_name("0a1b2c3d", Some("board"))),
        Some(Some("board"))
    );
    assert_eq!(ca_host(&ca_name("0a1b2c3d", None)), Some(None));
    assert_eq!(ca_host("Some Other CA"), None);
}

#[test]
fn a_first_open_makes_the_ca_and_a_second_keeps_it() {
    let dir = TempDir::new("local-ca");
    let path = dir.join("tls");
    let claim = check_dir(&path).unwrap();
    assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o700);
    let given = names(Some("board.lan"), &["192.168.1.20"]);
    let (ca, made) = LocalCa::open(&path, &claim, &given).unwrap();
    assert!(made);
    assert_eq!(
        fs::metadata(path.join(CA_KEY)).unwrap().mode() & 0o777,
        0o600
    );
    let first = ca.renew(&given).unwrap();
    assert!(first.made);
    assert_eq!(
        fs::metadata(path.join(SERVER)).unwrap().mode() & 0o777,
        0o600
    );
    assert_eq!(
        common_name(&ca.0.der).as_deref().and_then(ca_host),
        Some(Some("board.lan"))
    );
    let (again, made) = LocalCa::open(&path, &claim, &given).unwrap();
    assert!(!made);
    assert_eq!(again.fingerprint(), ca.fingerprint());
    // What is served is served under the lock: no other renewal between.
    let mut held = false;
    let kept = again
        .renew_then(&given, |_| held = again.0.renewing.try_lock().is_err())
        .unwrap();
    assert!(held, "served after the renewal's lock was released");
    assert!(!kept.made);
    assert_eq!(kept.served.key.cert, first.served.key.cert);
    // A new address: a new certificate, from the same CA.
    let moved = again
        .renew(&names(Some("board.lan"), &["192.168.1.21"]))
        .unwrap();
    assert!(moved.made);
    assert!(moved.names.contains(&"192.168.1.21".to_string()));
    assert!(again.verifies(&moved.served, &moved.names, now()).is_ok());
    assert!(again.verifies(&first.served, &moved.names, now()).is_err());
}

#[test]
fn what_dir_must_not_hold_is_refused_naming_the_file() {
    let dir = TempDir::new("local-ca-bad");
    let given = names(None, &[]);
    let path = dir.join("tls");
    let claim = check_dir(&path).unwrap();
    fs::write(path.join(CA_KEY), "garbage").unwrap();
    let e = LocalCa::open(&path, &claim, &given).unwrap_err();
    assert_eq!(e.file.as_deref(), Some(path.join(CA_KEY).as_path()), "{e}");
    // A CA certificate without its key.
    fs::remove_file(path.join(CA_KEY)).unwrap();
    fs::write(path.join(CA_CERT), "x").unwrap();
    let e = LocalCa::open(&path, &claim, &given).unwrap_err();
    assert!(e.why.contains("without its key"), "{e}");
    // A key that is not the certificate's.
    fs::remove_file(path.join(CA_CERT)).unwrap();
    let (ca, _) = LocalCa::open(&path, &claim, &given).unwrap();
    let other = issue::new_key().unwrap();
    write_file(
        &path.join(CA_KEY),
        &pem("PRIVATE KEY", &other.serialize_der()),
        0o600,
    )
    .unwrap();
    let e = LocalCa::open(&path, &claim, &given).unwrap_err();
    assert!(e.why.contains("not the certificate of ca.key"), "{e}");
    // The CA in use sees it on its next renewal, and refuses.
    assert!(ca.renew(&given).is_err());
    // A symbolic link as the directory.
    let link = dir.join("link");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let e = check_dir(&link).unwrap_err();
    assert!(e.why.contains("symbolic link"), "{e}");
    let e = check_dir(&path.join(CA_KEY)).unwrap_err();
    assert!(e.why.contains("not a directory"), "{e}");
    // A key that is a symbolic link: refused, and what it leads to keeps
    // its mode.
    let elsewhere = dir.join("elsewhere.key");
    fs::write(&elsewhere, "x").unwrap();
    fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o644)).unwrap();
    fs::remove_file(path.join(CA_KEY)).unwrap();
    std::os::unix::fs::symlink(&elsewhere, path.join(CA_KEY)).unwrap();
    let e = LocalCa::open(&path, &claim, &given).unwrap_err();
    assert!(e.why.contains("not a plain file"), "{e}");
    assert_eq!(fs::metadata(&elsewhere).unwrap().mode() & 0o777, 0o644);
}

#[test]
fn pem_is_what_rustls_reads_back() {
    let der: Vec<u8> = (0..=255).collect();
    let text = pem("CERTIFICATE", &der);
    assert!(text.lines().all(|l| l.len() <= 64));
    let back = CertificateDer::from_pem_slice(text.as_bytes()).unwrap();
    assert_eq!(back.as_ref(), der.as_slice());
    assert_eq!(fingerprint(b"").len(), 32 * 3 - 1);
    assert!(fingerprint(b"").starts_with("E3:B0:C4:42"));
}
