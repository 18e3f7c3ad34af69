//! The certificate over the server's life: renewed by SIGHUP (a broken
//! key or an overlong chain keeps the one in use), files that cannot be
//! served stopping the start, the expiry gauge and certificates expired or
//! not yet valid, and the files named in the environment.

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::time::Duration;

use super::{Certs, TOKEN, assert_serves_https, curl, healthz};
use crate::process::binary::{Running, run_to_exit};
use crate::process::reload::logged;
use crate::support::PATIENCE;

#[test]
fn sighup_serves_a_renewed_certificate_to_new_connections() {
    let certs = Certs::new("tls-renew", "ec");
    let server = certs.start(&[]);
    let serial = |server: &Running| served_serial(&certs, server.addr);
    assert_eq!(serial(&server), "01");
    // Renewed in place (as certbot does), then a reload.
    certs.issue("ec", "cert.pem", "key.pem", 2);
    server.signal("HUP");
    assert!(
        logged(&server, "new connections get this certificate"),
        "{:?}",
        server.log()
    );
    assert_eq!(serial(&server), "02");
    // A broken key keeps the certificate in use.
    std::fs::write(&certs.key, "not a key\n").unwrap();
    server.signal("HUP");
    assert!(logged(&server, "reload refused"), "{:?}", server.log());
    assert_eq!(serial(&server), "02");
    // Regression: a chain of 1,000 certificates was served, sent whole to
    // every client in its handshake.
    certs.issue("ec", "cert.pem", "key.pem", 3);
    std::fs::write(&certs.cert, long_chain(&certs)).unwrap();
    server.signal("HUP");
    assert!(
        logged(&server, "holds a chain of 1000 certificates"),
        "{:?}",
        server.log()
    );
    assert_eq!(serial(&server), "02");
    assert_eq!(healthz(&certs, &server), "200");
}

/// The certificate file's first certificate a thousand times over.
fn long_chain(certs: &Certs) -> String {
    let pem = std::fs::read_to_string(&certs.cert).unwrap();
    let end = "-----END CERTIFICATE-----\n";
    let first = &pem[..pem.find(end).expect("a PEM certificate") + end.len()];
    first.repeat(1000)
}

/// The serial number of the certificate a new connection is served, as
/// openssl prints it.
fn served_serial(certs: &Certs, addr: SocketAddr) -> String {
    let out: Output = Command::new("python3")
        .args([
            "-c",
            "import ssl, sys; print(ssl.get_server_certificate(('localhost', int(sys.argv[1])), ca_certs=sys.argv[2]))",
            &addr.port().to_string(),
        ])
        .arg(&certs.ca)
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{out:?}");
    let pem = certs.dir.join("served.pem");
    std::fs::write(&pem, &out.stdout).unwrap();
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-serial", "-in"])
        .arg(&pem)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim().trim_start_matches("serial=").to_string()
}

#[test]
fn certificate_files_that_cannot_be_served_stop_the_start() {
    let certs = Certs::new("tls-bad", "ec");
    let other = Certs::new("tls-other", "ec");
    let cert = certs.cert.display().to_string();
    let key = certs.key.display().to_string();
    let other_key = other.key.display().to_string();
    let empty = certs.dir.join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let empty = empty.display().to_string();
    let dir = certs.dir.0.display().to_string();
    let long = certs.dir.join("long.pem");
    std::fs::write(&long, long_chain(&certs)).unwrap();
    let long = long.display().to_string();
    let cases: [(&[&str], &str); 7] = [
        (&["--tls-cert", &cert], "--tls-cert needs --tls-key"),
        (&["--tls-key", &key], "--tls-key needs --tls-cert"),
        (
            &["--tls-cert", &cert, "--tls-key", &other_key],
            "cannot serve this certificate and key",
        ),
        (
            &["--tls-cert", &empty, "--tls-key", &key],
            "holds no PEM certificate",
        ),
        (
            &["--tls-cert", &cert, "--tls-key", &cert],
            "holds no PEM private key",
        ),
        (&["--tls-cert", &dir, "--tls-key", &key], "directory"),
        (
            &["--tls-cert", &long, "--tls-key", &key],
            "holds a chain of 1000 certificates",
        ),
    ];
    for (args, want) in cases {
        let (code, stderr) = run_to_exit(args, Some(TOKEN), PATIENCE);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(!stderr.contains("PRIVATE KEY"), "{stderr}");
    }
}

fn expiry_seconds(certs: &Certs, server: &Running, extra: &[&str]) -> i64 {
    let (_, _, metrics) = curl(certs, server.addr, "/metrics", extra);
    let name = "plantstore_tls_certificate_expiry_seconds ";
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {metrics}"))
}

#[test]
fn the_expiry_gauge_counts_down_and_a_dated_certificate_loads_with_a_warning() {
    let certs = Certs::new("tls-dated", "ec");
    let server = certs.start(&[]);
    // Issued for 2 days: the gauge says so, within a minute.
    let left = expiry_seconds(&certs, &server, &[]);
    assert!((2 * 86_400 - 60..=2 * 86_400).contains(&left), "{left}");
    drop(server);

    // Expired, or not valid yet: served (a client refuses it, as a
    // browser would) and warned about at start.
    let refused = |start: &str, end: &str, warning: &str| {
        certs.issue_dated(start, end);
        let server = certs.start(&[]);
        assert!(logged(&server, warning), "{:?}", server.log());
        let (code, _, _) = curl(&certs, server.addr, "/healthz", &[] as &[&str]);
        assert_eq!(code, 60, "curl refuses it: {warning}");
        server
    };
    let server = refused(
        "20200101000000Z",
        "20200201000000Z",
        "the certificate expired on 2020-02-01",
    );
    // The gauge is negative once it has expired.
    assert!(expiry_seconds(&certs, &server, &["-k"]) < -86_400 * 365);
    drop(server);
    drop(refused(
        "20990101000000Z",
        "20990201000000Z",
        "not valid yet (from 2099-01-01)",
    ));

    // Near its expiry (10 days left): a warning that says to renew.
    let soon = |days: u64| {
        let at = std::time::SystemTime::now() + Duration::from_secs(days * 86_400);
        let secs = at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let out = Command::new("date")
            .args(["-u", "-d", &format!("@{secs}"), "+%Y%m%d%H%M%SZ"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    certs.issue_dated("20200101000000Z", &soon(10));
    let server = certs.start(&[]);
    assert!(logged(&server, "renew it and reload"), "{:?}", server.log());
    assert_eq!(healthz(&certs, &server), "200");
}

#[test]
fn the_certificate_and_key_may_come_from_the_environment() {
    let certs = Certs::new("tls-env", "ec");
    let mut command = crate::process::binary::server_command(&[], Some(TOKEN));
    command
        .env("PLANTSTORE_TLS_CERT", &certs.cert)
        .env("PLANTSTORE_TLS_KEY", &certs.key);
    let server = Running::spawn(command, PATIENCE);
    assert_serves_https(&server);
    assert_eq!(healthz(&certs, &server), "200");
}

#[test]
fn certificate_files_serve_no_ca_pem_and_the_document_has_none() {
    // `/ca.pem` is `--tls-auto`'s: over HTTPS from files, a 404.
    let certs = Certs::new("tls-no-ca", "ec");
    let server = certs.start(&[]);
    let (code, status, body) = curl(&certs, server.addr, "/ca.pem", &["-D", "-"]);
    assert_eq!((code, status.as_str()), (0, "404"), "{body}");
    assert!(!body.to_ascii_lowercase().contains("x-ca-fingerprint"));
    let (code, status, body) = curl(&certs, server.addr, "/healthz", &["-D", "-"]);
    assert_eq!((code, status.as_str()), (0, "200"), "{body}");
    assert!(!body.to_ascii_lowercase().contains("x-ca-fingerprint"));
    let (_, status, document) = curl(&certs, server.addr, "/openapi.json", &[] as &[&str]);
    assert_eq!(status, "200");
    let document: serde_json::Value = serde_json::from_str(&document).unwrap();
    assert!(document["paths"]["/healthz"].is_object());
    assert!(document["paths"].get("/ca.pem").is_none());
}
