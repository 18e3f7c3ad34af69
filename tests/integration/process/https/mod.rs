//! HTTPS (`--tls-cert`, `--tls-key`): the built binary with certificates
//! made here by `openssl` from a test CA. This file is the fixture (the
//! CA and certificates, curl trusting it, metrics read over HTTPS); the
//! tests are split by concern:
//!
//! - `clients.rs`: real TLS clients (curl and Python's `ssl`), TLS 1.2
//!   and 1.3, every key kind, certificates a client must refuse;
//! - `connections.rs`: what a plain-HTTP client, garbage bytes, a stalled
//!   handshake, a connection past the cap, and slow or stalled readers get;
//! - `certificates.rs`: a certificate swapped by SIGHUP, files that cannot
//!   be served, the expiry gauge and dated certificates, the environment;
//! - `webhooks.rs`: webhooks delivered to (or refused by) an https
//!   receiver;
//! - `local_ca.rs`: `--tls-auto`'s local CA (with a fixture of its own)
//!   and `--hsts`;
//! - `local_ca_dir.rs`: who may hold `--tls-auto`'s directory (its
//!   owner, its mode, one server at a time).

mod certificates;
mod clients;
mod connections;
mod local_ca;
mod local_ca_dir;
mod webhooks;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::binary::Running;
use crate::support::TempDir;

const TOKEN: &str = "tls-test-token";

/// A test CA and a certificate it signed for `localhost` and 127.0.0.1.
struct Certs {
    dir: TempDir,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `openssl req` arguments that make a new key of `kind`.
fn new_key(kind: &str) -> Vec<&str> {
    match kind {
        "rsa" => vec!["-newkey", "rsa:2048"],
        "ec" => vec!["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
        "ed25519" => vec!["-newkey", "ed25519"],
        _ => unreachable!("{kind}"),
    }
}

impl Certs {
    /// A CA, and a `kind` key (rsa, ec, ed25519) with a certificate from it.
    fn new(name: &str, kind: &str) -> Certs {
        let dir = TempDir::new(name);
        let d = &dir.0;
        let mut ca = vec!["req", "-x509", "-nodes", "-days", "2"];
        ca.extend(new_key("ec"));
        ca.extend([
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-subj",
            "/CN=plantstore test CA",
        ]);
        openssl(d, &ca);
        std::fs::write(
            d.join("ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
        let certs = Certs {
            ca: d.join("ca.pem"),
            cert: d.join("cert.pem"),
            key: d.join("key.pem"),
            dir,
        };
        certs.issue(kind, "cert.pem", "key.pem", 1);
        certs
    }

    /// Issues a new `kind` certificate with serial `serial` into `cert`,
    /// its key into `key`.
    fn issue(&self, kind: &str, cert: &str, key: &str, serial: u32) {
        let d = &self.dir.0;
        let mut req = vec!["req", "-nodes"];
        req.extend(new_key(kind));
        req.extend([
            "-keyout",
            key,
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ]);
        openssl(d, &req);
        let serial = serial.to_string();
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-set_serial",
                &serial,
                "-days",
                "2",
                "-extfile",
                "ext",
                "-out",
                cert,
            ],
        );
    }

    fn args(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.cert.display().to_string(),
            "--tls-key".into(),
            self.key.display().to_string(),
        ]
    }

    fn start(&self, extra: &[&str]) -> Running {
        let mut args = self.args();
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = Running::start(&args, Some(TOKEN));
        assert_serves_https(&server);
        server
    }

    /// Issues, into `cert.pem` (its key into `key.pem`), a certificate
    /// valid from `start` to `end` (`YYYYMMDDHHMMSSZ`), with `openssl ca`.
    fn issue_dated(&self, start: &str, end: &str) {
        let d = &self.dir.0;
        std::fs::write(
            d.join("ca.cnf"),
            "[ca]\ndefault_ca = test\n[test]\ndatabase = index.txt\nnew_certs_dir = .\n\
             serial = serial\ndefault_md = sha256\npolicy = any\ncopy_extensions = copy\n\
             [any]\ncommonName = supplied\n",
        )
        .unwrap();
        std::fs::write(d.join("index.txt"), "").unwrap();
        std::fs::write(d.join("serial"), "20\n").unwrap();
        let mut req = vec!["req", "-nodes"];
        req.extend(new_key("ec"));
        req.extend([
            "-keyout",
            "key.pem",
            "-out",
            "dated.csr",
            "-subj",
            "/CN=localhost",
        ]);
        req.extend(["-addext", "subjectAltName=DNS:localhost"]);
        openssl(d, &req);
        openssl(
            d,
            &[
                "ca",
                "-batch",
                "-config",
                "ca.cnf",
                "-cert",
                "ca.pem",
                "-keyfile",
                "ca.key",
                "-in",
                "dated.csr",
                "-out",
                "cert.pem",
                "-notext",
                "-startdate",
                start,
                "-enddate",
                end,
            ],
        );
    }
}

/// curl at `https://localhost:PORT{path}`, trusting the test CA, with
/// `extra` arguments: (exit code, status, body).
fn curl<S: AsRef<std::ffi::OsStr>>(
    certs: &Certs,
    addr: SocketAddr,
    path: &str,
    extra: &[S],
) -> (i32, String, String) {
    let url = format!("https://localhost:{}{path}", addr.port());
    let resolve = format!("localhost:{}:127.0.0.1", addr.port());
    let ca = certs.ca.display().to_string();
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            "--resolve",
            &resolve,
            "--cacert",
            &ca,
        ])
        .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
        .args(["-w", "\n%{http_code}"])
        .args(extra)
        .arg(&url)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        out.status.code().unwrap_or(-1),
        status.to_string(),
        body.to_string(),
    )
}

/// The start-up line of `server` lists an `https://` URL.
fn assert_serves_https(server: &Running) {
    let log = server.log();
    assert!(
        log.iter().any(|l| l.contains("listening on https://")),
        "{log:?}"
    );
}

/// The status of `GET /healthz` over HTTPS, the test CA trusted.
fn healthz(certs: &Certs, server: &Running) -> String {
    curl(certs, server.addr, "/healthz", &[] as &[&str]).1
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {text}"))
}

/// Reads what the server sends until it closes (or resets) the
/// connection; panics after `within`.
fn until_closed(stream: &mut TcpStream, within: Duration) -> Vec<u8> {
    stream.set_read_timeout(Some(within)).unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("not closed after {:?}: {e}", started.elapsed()),
        }
    }
}
