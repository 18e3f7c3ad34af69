//! Which CA the local CA takes as its own, and which names it may vouch
//! for: a single-label host or one like an address kept out of the
//! constraints (checked with `openssl verify` as a client checks), a
//! foreign CA with `ca.key` refused, an earlier version's CA kept.

use std::fs;
use std::path::Path;
use std::process::Command;

use super::issue::{ca_name, like_address};
use super::*;
use crate::os::temp::TempDir;

fn names(host: &str) -> Names {
    Names {
        host: Some(host.to_string()),
        addresses: Vec::new(),
    }
}

/// openssl in `dir` with `args`: whether it succeeded, and what it said.
fn openssl(dir: &Path, args: &[&str]) -> (bool, String) {
    let out =
        crate::os::run(Command::new("openssl").current_dir(dir).args(args)).expect("openssl runs");
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said.into_owned())
}

/// Whether `openssl verify`, trusting `DIR/ca.pem` alone, accepts a leaf
/// for `name` that `DIR/ca.key` signed (as anyone holding the key could),
/// and what it said.
fn verifies_for(dir: &Path, name: &str) -> (bool, String) {
    let ext = format!("subjectAltName=DNS:{name}\nbasicConstraints=CA:FALSE\n");
    fs::write(dir.join("leaf.ext"), ext).unwrap();
    let made = openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "leaf.key",
            "-subj",
            "/O=leaf",
            "-out",
            "leaf.csr",
        ],
    );
    assert!(made.0, "{}", made.1);
    let signed = openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            "7",
            "-days",
            "1",
            "-extfile",
            "leaf.ext",
            "-out",
            "leaf.pem",
        ],
    );
    assert!(signed.0, "{}", signed.1);
    openssl(dir, &["verify", "-CAfile", "ca.pem", "leaf.pem"])
}

/// Regression: a host named `dev` made a CA whose constraints permitted
/// `dev`, so every name under it: a leaf for www.google.dev signed with
/// `ca.key` verified.
#[test]
fn a_single_label_host_is_in_neither_the_constraints_nor_the_certificate() {
    let scratch = TempDir::new("local-ca-single-label");
    let path = scratch.join("tls");
    let claim = check_dir(&path).unwrap();
    let given = names("dev");
    let (ca, _) = LocalCa::open(&path, &claim, &given).unwrap();
    for outside in ["www.google.dev", "dev"] {
        let (ok, said) = verifies_for(&path, outside);
        assert!(!ok, "{outside}: {said}");
        assert!(said.contains("permitted subtree violation"), "{said}");
    }
    // The checker accepts what the constraints permit.
    let (ok, said) = verifies_for(&path, "dev.local");
    assert!(ok, "{said}");
    assert_eq!(ca.0.host, None);
    let renewal = ca.renew(&given).unwrap();
    assert_eq!(
        renewal.names,
        ["dev.local", "localhost", "127.0.0.1", "::1"]
    );
    assert!(
        renewal.left_out[0].starts_with("dev (a single-label name"),
        "{:?}",
        renewal.left_out
    );
}

/// Regression: a host named `8.8.8.8` put `DNS:8.8.8.8` in the CA's
/// constraints and its certificate, which never verified: every start
/// stopped, blaming `server.pem`.
#[test]
fn a_host_named_like_an_address_is_left_out_and_the_server_starts() {
    for like in ["8.8.8.8", "0x7f.1", "board.123"] {
        assert!(like_address(like), "{like}");
    }
    for not in ["pi-4.lan", "1a.b", "123.lan", "0xg"] {
        assert!(!like_address(not), "{not}");
    }
    let scratch = TempDir::new("local-ca-address");
    let path = scratch.join("tls");
    let claim = check_dir(&path).unwrap();
    let given = names("8.8.8.8");
    let (ca, _) = LocalCa::open(&path, &claim, &given).unwrap();
    assert_eq!(ca.0.host, None);
    let renewal = ca.renew(&given).unwrap();
    assert!(!renewal.names.contains(&"8.8.8.8".to_string()));
    assert!(
        renewal.left_out[0].starts_with("8.8.8.8 (a host name like an IP address)"),
        "{:?}",
        renewal.left_out
    );
    let (ok, said) = verifies_for(&path, "8.8.8.8");
    assert!(!ok, "{said}");
}

/// Regression: a CA in `DIR` was taken as the server's own by its common
/// name alone: one without name constraints, named as this server names
/// its CAs, signed `server.pem` and was served at `/ca.pem`.
#[test]
fn a_ca_of_ca_key_not_made_here_is_refused_whatever_its_name() {
    let scratch = TempDir::new("local-ca-foreign");
    let path = scratch.join("tls");
    let claim = check_dir(&path).unwrap();
    let given = names("board.lan");
    drop(LocalCa::open(&path, &claim, &given).unwrap());
    let text = fs::read_to_string(path.join(CA_KEY)).unwrap();
    let key = issue::read_key(&pkcs8(&path, &text).unwrap()).unwrap();
    let name = ca_name("0a1b2c3d", Some("board.lan"));
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        rcgen::DnValue::Utf8String(name.clone()),
    );
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    let unconstrained = params.self_signed(&key).unwrap().der().to_vec();
    // And one as this server makes them, but permitting another host.
    let other = issue::self_signed(&key, &name, Some("bank.example"), (now(), now() + 60), {
        rcgen::SerialNumber::from_slice(&[1, 2, 3])
    })
    .unwrap();
    for der in [unconstrained, other] {
        write_file(&path.join(CA_CERT), &pem("CERTIFICATE", &der), 0o644).unwrap();
        let e = LocalCa::open(&path, &claim, &given).unwrap_err();
        assert_eq!(e.file.as_deref(), Some(path.join(CA_CERT).as_path()), "{e}");
        assert!(e.why.contains("is not a CA this server made"), "{e}");
        assert!(
            e.why.contains("remove ca.key, ca.pem and server.pem"),
            "{e}"
        );
    }
}

/// What an earlier version wrote in `dir` for `host`: its key and CA.
fn earlier_ca(dir: &Path, host: &str) {
    let key = issue::new_key().unwrap();
    let der = issue::make_ca(&key, &ca_name("0a1b2c3d", Some(host)), Some(host), now());
    write_file(
        &dir.join(CA_KEY),
        &pem("PRIVATE KEY", &key.serialize_der()),
        0o600,
    )
    .unwrap();
    write_file(
        &dir.join(CA_CERT),
        &pem("CERTIFICATE", &der.unwrap()),
        0o644,
    )
    .unwrap();
}

/// A CA an earlier version made for a single-label host (its constraints
/// permit that name): the devices that trust it keep trusting the
/// server, and the log says how to start over. One it made for a name
/// like an address never served (it stopped every start): refused.
#[test]
fn an_earlier_versions_ca_is_kept_with_a_warning() {
    let scratch = TempDir::new("local-ca-earlier");
    let path = scratch.join("tls");
    let claim = check_dir(&path).unwrap();
    earlier_ca(&path, "dev");
    let given = names("dev");
    let (ca, made) = LocalCa::open(&path, &claim, &given).unwrap();
    assert!(!made);
    let warning = ca.earlier().expect("no warning");
    assert!(warning.contains("earlier version"), "{warning}");
    assert!(
        warning.contains("delete ca.key, ca.pem and server.pem"),
        "{warning}"
    );
    let renewal = ca.renew(&given).unwrap();
    assert!(
        !renewal.names.contains(&"dev".to_string()),
        "{:?}",
        renewal.names
    );
    assert!(ca.verifies(&renewal.served, &renewal.names, now()).is_ok());
    // One made for 8.8.8.8.
    let scratch = TempDir::new("local-ca-earlier-address");
    let path = scratch.join("tls");
    let claim = check_dir(&path).unwrap();
    earlier_ca(&path, "8.8.8.8");
    let e = LocalCa::open(&path, &claim, &names("8.8.8.8")).unwrap_err();
    assert!(e.why.contains("like an IP address"), "{e}");
    assert!(
        e.why.contains("remove ca.key, ca.pem and server.pem"),
        "{e}"
    );
    // A CA this version made has nothing to say.
    let scratch = TempDir::new("local-ca-now");
    let path = scratch.join("tls");
    let claim = check_dir(&path).unwrap();
    let (ca, _) = LocalCa::open(&path, &claim, &names("board.lan")).unwrap();
    assert_eq!(ca.earlier(), None);
    let (again, _) = LocalCa::open(&path, &claim, &names("board.lan")).unwrap();
    assert_eq!(again.earlier(), None);
}
