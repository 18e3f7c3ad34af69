//! `--tls-auto DIR` on the built binary: the local CA made at the first
//! start, trusted by curl from the `/ca.pem` it serves (and nothing else)
//! on every loopback name and address; kept across restarts; a
//! short-lived certificate (the test hook `PLANTSTORE_TEST_CERT_SECONDS`)
//! renewed without a restart; a corrupt `DIR` refused at start (exit 2)
//! and on SIGHUP (the certificate in use stays); what `DIR` may not be;
//! and `--hsts`.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use super::TOKEN;
use crate::process::binary::{Running, command, run_to_exit, server_command};
use crate::process::reload::logged;
use crate::support::{PATIENCE, TempDir, eventually};

/// The binary with `--tls-auto DIR` (and `extra`), on 127.0.0.1:0.
fn start(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Running {
    let dir = dir.display().to_string();
    let mut args = vec!["--tls-auto", dir.as_str()];
    args.extend_from_slice(extra);
    let mut command = server_command(&args, Some(TOKEN));
    command.envs(env.iter().copied());
    Running::spawn(command, PATIENCE)
}

/// The CA's fingerprint as the start-up line gives it.
fn logged_fingerprint(server: &Running) -> String {
    let log = server.log();
    let line = log
        .iter()
        .find(|l| l.contains("SHA-256 fingerprint "))
        .unwrap_or_else(|| panic!("no fingerprint line in {log:?}"));
    let rest = line.split("SHA-256 fingerprint ").nth(1).unwrap();
    rest.split(';').next().unwrap().to_string()
}

/// curl with `args` at `url`: (exit code, stdout).
fn curl(args: &[&str], url: &str) -> (i32, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), text)
}

/// `GET /ca.pem`, not trusting the server yet (`-k`), saved to `to`; the
/// fingerprint header it came with.
fn fetch_ca(addr: SocketAddr, to: &Path) -> String {
    let url = format!("https://127.0.0.1:{}/ca.pem", addr.port());
    let to_text = to.display().to_string();
    let (code, head) = curl(&["-k", "-D", "-", "-o", &to_text], &url);
    assert_eq!(code, 0, "{head}");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/x-pem-file"),
        "{head}"
    );
    let print = fingerprint_in(&head);
    // The page reads it from /healthz, which answers 200 in every mode.
    let url = format!("https://127.0.0.1:{}/healthz", addr.port());
    let (code, health) = curl(&["-k", "-I"], &url);
    assert_eq!(code, 0, "{health}");
    assert_eq!(fingerprint_in(&health), print, "{health}");
    print
}

/// The `X-CA-Fingerprint` of an answer's `head`.
fn fingerprint_in(head: &str) -> String {
    head.lines()
        .find_map(|l| l.strip_prefix("X-CA-Fingerprint: "))
        .unwrap_or_else(|| panic!("no X-CA-Fingerprint in {head}"))
        .trim()
        .to_string()
}

/// The SHA-256 fingerprint openssl computes for a PEM certificate.
fn openssl_fingerprint(pem: &Path) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(pem)
        .output()
        .expect("openssl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .split('=')
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

/// The serial and `notAfter` of the certificate a new connection to
/// `addr` is served, as openssl prints them.
fn served(addr: SocketAddr) -> String {
    let text = served_as(addr, "-serial -enddate");
    assert!(text.contains("serial="), "{text}");
    text
}

/// What `openssl x509 -noout` with `print` says of the certificate a new
/// connection to `addr` is served. `s_client` runs under `timeout`: a
/// server that never answers fails the test instead of stalling the suite.
fn served_as(addr: SocketAddr, print: &str) -> String {
    let script = format!(
        "timeout 10 openssl s_client -connect 127.0.0.1:{} -servername localhost \
         </dev/null 2>/dev/null | openssl x509 -noout {print}",
        addr.port()
    );
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `GET /healthz` over HTTPS at `host` (resolved to `ip`) trusting only
/// `ca`: curl's exit code.
fn healthz_as(ca: &Path, host: &str, ip: &str, port: u16) -> i32 {
    let ca = ca.display().to_string();
    let resolve = format!("{host}:{port}:{ip}");
    let (url, args) = match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(_)) => (format!("https://[{host}]:{port}/healthz"), vec![]),
        Ok(_) => (format!("https://{host}:{port}/healthz"), vec![]),
        Err(_) => (
            format!("https://{host}:{port}/healthz"),
            vec!["--resolve", resolve.as_str()],
        ),
    };
    let (code, body) = curl(
        &[&["--cacert", ca.as_str()], args.as_slice()].concat(),
        &url,
    );
    if code == 0 {
        assert!(body.contains("\"ok\""), "{body}");
    }
    code
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_ascii_lowercase()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_first_start_makes_a_ca_that_curl_trusts_for_every_loopback_name() {
    let scratch = TempDir::new("tls-auto-first");
    let dir = scratch.join("tls");
    let server = start(&dir, &[], &[]);
    let port = server.addr.port();
    assert!(logged(&server, "(made now)"), "{:?}", server.log());
    let fingerprint = logged_fingerprint(&server);
    let ca = scratch.join("served-ca.pem");
    assert_eq!(fetch_ca(server.addr, &ca), fingerprint);
    assert_eq!(openssl_fingerprint(&ca), fingerprint);
    let served_text = std::fs::read_to_string(&ca).unwrap();
    assert!(!served_text.contains("PRIVATE"), "{served_text}");
    assert_eq!(
        served_text,
        std::fs::read_to_string(dir.join("ca.pem")).unwrap()
    );
    assert_eq!((mode(&dir), mode(&dir.join("ca.key"))), (0o700, 0o600));
    assert_eq!(mode(&dir.join("server.pem")), 0o600);
    // Trusting the served CA alone: every loopback name and address; the
    // host's name only if it has two labels or more (a CA permitting a
    // single-label name would permit every name under it).
    let host = host_name();
    for name in ["127.0.0.1", "localhost", &format!("{host}.local")] {
        assert_eq!(healthz_as(&ca, name, "127.0.0.1", port), 0, "{name}");
    }
    let want = if host.contains('.') { 0 } else { 60 };
    assert_eq!(healthz_as(&ca, &host, "127.0.0.1", port), want, "{host}");
    // And trusting nothing, curl refuses it (so the CA is what it trusts).
    let url = format!("https://127.0.0.1:{port}/healthz");
    assert_eq!(curl(&[], &url).0, 60);
    // A name the CA cannot vouch for is refused.
    assert_eq!(healthz_as(&ca, "example.com", "127.0.0.1", port), 60);
    // The key is nowhere to be fetched.
    let key_url = format!("https://127.0.0.1:{port}/ca.key");
    let (_, body) = curl(&["-k", "-w", "%{http_code}"], &key_url);
    assert!(body.ends_with("404"), "{body}");
    assert_served_over_ipv6_loopback(server, &dir, &ca);
}

/// ::1: the certificate names it, whether or not this host has IPv6
/// loopback; where it has, the next server with the same `DIR` (`v4`
/// stopped first: it holds `DIR`) on `[::1]` is trusted there too (where
/// it has not, that much is said).
fn assert_served_over_ipv6_loopback(v4: Running, dir: &Path, ca: &Path) {
    let text = served_as(v4.addr, "-ext subjectAltName");
    drop(v4);
    // openssl writes ::1 in full.
    assert!(text.contains("IP Address:0:0:0:0:0:0:0:1"), "{text}");
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!(
            "no IPv6 loopback on this host: ::1 checked in the certificate only, not connected to"
        );
        return;
    }
    let mut command = command();
    command
        .args(["--addr", "[::1]:0", "--tls-auto"])
        .arg(dir)
        .env("PLANTSTORE_TOKEN", TOKEN);
    let server = Running::spawn(command, PATIENCE);
    assert_eq!(healthz_as(ca, "::1", "::1", server.addr.port()), 0);
}

#[test]
fn a_restart_keeps_the_ca_and_the_certificate() {
    let scratch = TempDir::new("tls-auto-restart");
    let dir = scratch.join("tls");
    let first = start(&dir, &[], &[]);
    let (fingerprint, certificate) = (logged_fingerprint(&first), served(first.addr));
    drop(first);
    let again = start(&dir, &[], &[]);
    assert!(logged(&again, "(kept)"), "{:?}", again.log());
    assert!(logged(&again, "certificate kept:"), "{:?}", again.log());
    assert_eq!(logged_fingerprint(&again), fingerprint);
    assert_eq!(served(again.addr), certificate);
}

#[test]
fn a_short_lived_certificate_is_renewed_without_a_restart() {
    let scratch = TempDir::new("tls-auto-renew");
    let dir = scratch.join("tls");
    let hook = [("PLANTSTORE_TEST_CERT_SECONDS", "6")];
    let server = start(&dir, &[], &hook);
    let ca = scratch.join("ca.pem");
    let fingerprint = fetch_ca(server.addr, &ca);
    let first = served(server.addr);
    // Renewed at two thirds of its 6 seconds, by the tls-renew thread.
    assert!(
        eventually(|| served(server.addr) != first),
        "{:?}",
        server.log()
    );
    let renewals = |server: &Running| {
        let log = server.log();
        log.iter().filter(|l| l.contains("new certificate")).count()
    };
    assert!(renewals(&server) >= 2, "{:?}", server.log());
    // The same CA, trusted as before.
    assert_eq!(fetch_ca(server.addr, &ca), fingerprint);
    assert_eq!(
        healthz_as(&ca, "localhost", "127.0.0.1", server.addr.port()),
        0
    );
}

#[test]
fn a_corrupt_dir_keeps_the_certificate_on_sighup_and_stops_the_start() {
    let scratch = TempDir::new("tls-auto-corrupt");
    let dir = scratch.join("tls");
    let server = start(&dir, &[], &[]);
    let before = served(server.addr);
    std::fs::write(dir.join("server.pem"), "not a certificate\n").unwrap();
    server.signal("HUP");
    assert!(
        logged(&server, "cannot renew the certificate"),
        "{:?}",
        server.log()
    );
    let line = server
        .log()
        .into_iter()
        .find(|l| l.contains("cannot renew"))
        .unwrap();
    assert!(
        line.contains("server.pem") && line.contains("stays"),
        "{line}"
    );
    assert_eq!(served(server.addr), before);
    drop(server);
    let dir_text = dir.display().to_string();
    let refused = |want: &str| {
        let (code, stderr) = run_to_exit(&["--tls-auto", &dir_text], Some(TOKEN), PATIENCE);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(want), "{want}: {stderr}");
        assert!(!stderr.contains("BEGIN"), "{stderr}");
    };
    refused("server.pem");
    std::fs::remove_file(dir.join("server.pem")).unwrap();
    std::fs::write(dir.join("ca.key"), "-----BEGIN PRIVATE KEY-----\nAAAA\n").unwrap();
    refused("ca.key");
    std::fs::remove_file(dir.join("ca.key")).unwrap();
    refused("ca.pem: is a CA certificate without its key");
}

#[test]
fn what_tls_auto_refuses() {
    let scratch = TempDir::new("tls-auto-refused");
    let real = scratch.join("real");
    std::fs::create_dir(&real).unwrap();
    let link = scratch.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let link = link.display().to_string();
    let file = scratch.join("file");
    std::fs::write(&file, "").unwrap();
    let file = file.display().to_string();
    let dir = scratch.join("tls").display().to_string();
    let cases: [(&[&str], &str); 5] = [
        (&["--tls-auto", &link], "is a symbolic link"),
        (&["--tls-auto", &file], "is not a directory"),
        (
            &["--tls-auto", &dir, "--tls-cert", &file],
            "--tls-auto and --tls-cert exclude each other",
        ),
        (
            &["--tls-auto", &dir, "--tls-key", &file],
            "--tls-auto and --tls-key exclude each other",
        ),
        (&["--hsts", "60"], "--hsts needs HTTPS"),
    ];
    for (args, want) in cases {
        let (code, stderr) = run_to_exit(args, Some(TOKEN), PATIENCE);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    assert!(std::fs::read_dir(&real).unwrap().next().is_none());
}

/// The headers of `GET path` over HTTPS (not checking the certificate),
/// lowercased; with `extra` curl arguments.
fn headers(addr: SocketAddr, path: &str, extra: &[&str]) -> String {
    let url = format!("https://127.0.0.1:{}{path}", addr.port());
    let auth = format!("Authorization: Bearer {TOKEN}");
    let args = [&["-k", "-D", "-", "-o", "/dev/null", "-H", &auth], extra].concat();
    let (code, text) = curl(&args, &url);
    assert_eq!(code, 0, "{text}");
    text.to_ascii_lowercase()
}

#[test]
fn hsts_is_sent_over_https_with_the_flag_only() {
    let scratch = TempDir::new("tls-auto-hsts");
    let dir = scratch.join("tls");
    let data = scratch.join("plants.journal").display().to_string();
    let with = start(&dir, &["--hsts", "600", "--data", &data], &[]);
    let hsts = "\r\nstrict-transport-security: max-age=600\r\n";
    for path in ["/healthz", "/plants", "/no-such-path", "/ca.pem", "/"] {
        let head = headers(with.addr, path, &[]);
        assert!(head.contains(hsts), "{path}: {head}");
    }
    // A durable create, answered once the journal has it (deferred).
    let create = [
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "-d",
        r#"{"id":1,"name":"fern"}"#,
    ];
    let head = headers(with.addr, "/plants", &create);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains(hsts), "{head}");
    drop(with);
    let without = start(&dir, &[], &[]);
    let head = headers(without.addr, "/healthz", &[]);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(!head.contains("strict-transport-security"), "{head}");
}

/// The samples of `plantstore_requests_total` for `route` in `metrics`:
/// (method, status, count).
fn requests(metrics: &str, route: &str) -> Vec<(String, String, u64)> {
    let prefix = format!("plantstore_requests_total{{route=\"{route}\",method=\"");
    let mut samples = Vec::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        let (labels, count) = rest.rsplit_once("} ").expect("a sample");
        let (method, status) = labels.split_once("\",status=\"").expect("a status");
        let status = status.trim_end_matches('"').to_string();
        samples.push((method.to_string(), status, count.parse().expect("a count")));
    }
    samples.sort();
    samples
}

#[test]
fn ca_pem_is_a_route_row_documented_counted_and_answered_to_head() {
    let scratch = TempDir::new("tls-auto-row");
    let server = start(&scratch.join("tls"), &[], &[]);
    let base = format!("https://127.0.0.1:{}", server.addr.port());
    // GET (and /healthz's fingerprint, the same), then HEAD: the same
    // headers, no body.
    let ca = scratch.join("served-ca.pem");
    let fingerprint = fetch_ca(server.addr, &ca);
    let length = std::fs::metadata(&ca).unwrap().len();
    let head = headers(server.addr, "/ca.pem?v=2", &["-I"]);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("\r\ncontent-type: application/x-pem-file\r\n"));
    assert!(head.contains(&format!("\r\ncontent-length: {length}\r\n")));
    let print = format!(
        "\r\nx-ca-fingerprint: {}\r\n",
        fingerprint.to_ascii_lowercase()
    );
    assert!(head.contains(&print), "{head}");
    // GET /healthz carries it too, as HEAD does (`fetch_ca`).
    assert!(headers(server.addr, "/healthz", &[]).contains(&print));
    // Another method: 405, with the row's methods.
    let post = headers(server.addr, "/ca.pem", &["-X", "POST"]);
    assert!(post.starts_with("http/1.1 405"), "{post}");
    assert!(post.contains("\r\nallow: get, head\r\n"), "{post}");
    // The document describes both methods, with no token.
    let (code, document) = curl(&["-k"], &format!("{base}/openapi.json"));
    assert_eq!(code, 0, "{document}");
    let document: serde_json::Value = serde_json::from_str(&document).unwrap();
    for method in ["get", "head"] {
        let operation = &document["paths"]["/ca.pem"][method];
        assert_eq!(operation["security"], serde_json::json!([]), "{method}");
    }
    // Each counted under the row's label.
    let auth = format!("Authorization: Bearer {TOKEN}");
    let (code, metrics) = curl(&["-k", "-H", &auth], &format!("{base}/metrics"));
    assert_eq!(code, 0, "{metrics}");
    let counted = |method: &str, status: &str| (method.to_string(), status.to_string(), 1);
    let want = [
        counted("GET", "200"),
        counted("HEAD", "200"),
        counted("POST", "405"),
    ];
    assert_eq!(requests(&metrics, "/ca.pem"), want, "{metrics}");
}
