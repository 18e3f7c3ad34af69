//! HTTPS (`--tls-cert`, `--tls-key`): the built binary with certificates
//! made here by `openssl` from a test CA, spoken to by real TLS clients
//! (curl and Python's `ssl`), TLS 1.2 and 1.3; what a plain-HTTP client,
//! garbage bytes and a stalled handshake get; a certificate swapped by
//! SIGHUP; files that cannot be served.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::process::binary::{Running, run_to_exit};
use crate::process::reload::logged;
use crate::support::{PATIENCE, TempDir};

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

#[test]
fn curl_makes_every_api_call_over_tls_1_2_and_1_3() {
    let certs = Certs::new("tls-curl", "ec");
    let server = certs.start(&[]);
    let addr = server.addr;
    for (version, id) in [("1.2", 1), ("1.3", 2)] {
        let pin = [
            format!("--tlsv{version}"),
            "--tls-max".into(),
            version.into(),
        ];
        let pin: Vec<&str> = pin.iter().map(String::as_str).collect();
        let with = |more: &[&str]| -> Vec<String> {
            pin.iter().chain(more).map(|a| a.to_string()).collect()
        };
        let json = "Content-Type: application/json";
        let body = format!(r#"{{"id":{id},"name":"fern over {version}"}}"#);
        let made = curl(&certs, addr, "/plants", &with(&["-H", json, "-d", &body]));
        assert_eq!(
            (made.0, made.1.as_str()),
            (0, "200"),
            "create over {version}: {made:?}"
        );
        let path = format!("/plants/{id}");
        let read = curl(&certs, addr, &path, &with(&[]));
        assert_eq!(read.1, "200", "{read:?}");
        assert!(read.2.contains(&format!("fern over {version}")), "{read:?}");
        let put = format!(r#"{{"id":{id},"name":"palm","tag":"tls"}}"#);
        let replaced = curl(
            &certs,
            addr,
            &path,
            &with(&["-X", "PUT", "-H", json, "-d", &put]),
        );
        assert_eq!(replaced.1, "200", "{replaced:?}");
        let listed = curl(&certs, addr, "/plants?tag=tls", &with(&[]));
        assert!(listed.2.contains("palm"), "{listed:?}");
        let deleted = curl(&certs, addr, &path, &with(&["-X", "DELETE"]));
        assert_eq!(deleted.1, "204", "{deleted:?}");
        assert_eq!(curl(&certs, addr, &path, &with(&[])).1, "404");
        // The protocol negotiated is the one asked for, with ALPN http/1.1.
        let verbose = Command::new("curl")
            .args(["-sv", "-o", "/dev/null", "--cacert"])
            .arg(&certs.ca)
            .args(&pin)
            .arg(format!("https://127.0.0.1:{}/healthz", addr.port()))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&verbose.stderr);
        assert!(said.contains(&format!("TLSv{version}")), "{said}");
        assert!(said.contains("ALPN: server accepted http/1.1"), "{said}");
    }
}

/// Python's `ssl` client: every API call over one kept-alive connection,
/// with TLS pinned to `version`; prints the statuses.
const PYTHON_CLIENT: &str = r#"
import http.client, json, ssl, sys
port, ca, token, version = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
context = ssl.create_default_context(cafile=ca)
pinned = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}[version]
context.minimum_version = context.maximum_version = pinned
conn = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
auth = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
out = []
conn_link = [None]
def call(method, path, body=None):
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=auth)
    reply = conn.getresponse()
    conn_link[0] = reply.getheader("Link")
    data = reply.read()
    out.append(f"{method} {path} {reply.status}")
    return data
call("POST", "/plants", {"id": 7, "name": "ivy"})
assert json.loads(call("GET", "/plants/7"))["name"] == "ivy"
call("PUT", "/plants/7", {"id": 7, "name": "ivy", "tag": "python"})
call("POST", "/plants", {"id": 8, "name": "fig", "tag": "python"})
assert json.loads(call("GET", "/plants?tag=python&limit=1"))[0]["id"] == 7
link = conn_link[0]
assert link == f'<https://localhost:{port}/plants?after=7&limit=1&tag=python>; rel="next"', link
call("DELETE", "/plants/8")
call("DELETE", "/plants/7")
call("GET", "/plants/7")
out.append(conn.sock.version())
print(" | ".join(out))
"#;

#[test]
fn pythons_ssl_client_makes_every_api_call_over_tls_1_2_and_1_3() {
    let certs = Certs::new("tls-python", "rsa");
    let server = certs.start(&[]);
    for (version, name) in [("1.2", "TLSv1.2"), ("1.3", "TLSv1.3")] {
        let out = Command::new("python3")
            .args(["-c", PYTHON_CLIENT, &server.addr.port().to_string()])
            .arg(&certs.ca)
            .args([TOKEN, version])
            .output()
            .expect("python3 runs");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{said} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            said.trim(),
            format!(
                "POST /plants 200 | GET /plants/7 200 | PUT /plants/7 200 | POST /plants 200 | \
                 GET /plants?tag=python&limit=1 200 | DELETE /plants/8 204 | DELETE /plants/7 204 | \
                 GET /plants/7 404 | {name}"
            )
        );
    }
}

#[test]
fn rsa_ec_and_ed25519_keys_are_served() {
    for kind in ["rsa", "ec", "ed25519"] {
        let certs = Certs::new(&format!("tls-{kind}"), kind);
        let server = certs.start(&[]);
        let (code, status, _) = curl(&certs, server.addr, "/healthz", &[] as &[&str]);
        assert_eq!((code, status.as_str()), (0, "200"), "{kind}");
    }
}

#[test]
fn untrusted_and_wrong_name_certificates_are_refused_by_the_client() {
    let certs = Certs::new("tls-refused", "ec");
    let server = certs.start(&[]);
    let port = server.addr.port();
    // No trust in the test CA: curl refuses the certificate (exit 60).
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "--max-time", "10"])
        .arg(format!("https://127.0.0.1:{port}/healthz"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(60), "{out:?}");
    // A name the certificate does not hold (whatever the SNI, the one
    // certificate is served): refused by the client, exit 60.
    let resolve = format!("wrong.example:{port}:127.0.0.1");
    let out = Command::new("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "--max-time",
            "10",
            "--resolve",
            &resolve,
        ])
        .arg("--cacert")
        .arg(&certs.ca)
        .arg(format!("https://wrong.example:{port}/healthz"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(60), "{out:?}");
    // The server counts the refused handshake and logs it once.
    assert!(
        logged(&server, "TLS handshake with 127.0.0.1"),
        "{:?}",
        server.log()
    );
    let (_, _, metrics) = curl(&certs, server.addr, "/metrics", &[] as &[&str]);
    let failures = metric(&metrics, "plantstore_tls_handshake_failures_total");
    assert!(failures >= 1, "{metrics}");
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
            Err(e) => panic!("not closed after {:?}: {e}", started.elapsed()),
        }
    }
}

#[test]
fn plain_http_on_the_tls_port_is_told_to_use_https_and_garbage_is_closed() {
    let certs = Certs::new("tls-plain", "ec");
    let server = certs.start(&[]);
    let mut plain = TcpStream::connect(server.addr).unwrap();
    plain
        .write_all(b"GET /plants HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let answer = String::from_utf8(until_closed(&mut plain, PATIENCE)).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    assert!(answer.contains("Connection: close"), "{answer}");
    assert!(answer.ends_with("use an https:// address.\r\n"), "{answer}");

    // Bytes that are neither TLS nor HTTP: closed, nothing but an alert.
    for garbage in [
        &[0x01u8, 0x02, 0x03, 0xff, 0x00][..],
        &[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5],
    ] {
        let mut stream = TcpStream::connect(server.addr).unwrap();
        stream.write_all(garbage).unwrap();
        let got = until_closed(&mut stream, PATIENCE);
        assert!(
            got.len() < 64 && got.first().is_none_or(|&b| b == 0x15),
            "{got:?}"
        );
    }
    // The server still serves.
    assert_eq!(healthz(&certs, &server), "200");
}

#[test]
fn a_stalled_handshake_is_closed_by_the_head_deadline() {
    let certs = Certs::new("tls-stall", "ec");
    let server = certs.start(&["--head-timeout", "1"]);
    let mut stream = TcpStream::connect(server.addr).unwrap();
    // The start of a ClientHello record, and then nothing.
    stream
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .unwrap();
    let started = Instant::now();
    until_closed(&mut stream, PATIENCE);
    // Goal: 1 s (the deadline) plus a sweep; bound: several times that.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "closed after {took:?}");
    assert!(took >= Duration::from_millis(900), "closed after {took:?}");
    // Logged and counted as a failed handshake.
    assert!(
        logged(&server, "not done within the head timeout"),
        "{:?}",
        server.log()
    );
    let (_, _, metrics) = curl(&certs, server.addr, "/metrics", &[] as &[&str]);
    assert_eq!(
        metric(&metrics, "plantstore_tls_handshake_failures_total"),
        1,
        "{metrics}"
    );
}

#[test]
fn past_the_connection_cap_a_tls_connection_is_closed_without_a_plain_answer() {
    let certs = Certs::new("tls-cap", "ec");
    let server = certs.start(&["--max-connections", "1"]);
    // The one connection allowed, held open mid-handshake.
    let mut held = TcpStream::connect(server.addr).unwrap();
    held.write_all(&[0x16, 0x03, 0x01]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut refused = TcpStream::connect(server.addr).unwrap();
    let _ = refused.write_all(include_bytes!("../../data/tls/client_hello_tls13.bin"));
    let got = until_closed(&mut refused, PATIENCE);
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    drop(held);
}

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

/// An https webhook receiver in Python (`http.server` behind `ssl`), with
/// the certificate and key given: prints its port, then each delivery's
/// path and body on a line; answers 204.
const RECEIVER: &str = r#"
import http.server, ssl, sys
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        print(self.path, body.decode(), flush=True)
        self.send_response(204)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[1], sys.argv[2])
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// The Python receiver, stopped when dropped.
struct Receiver {
    child: std::process::Child,
    port: u16,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Receiver {
    fn start(certs: &Certs) -> Receiver {
        use std::io::BufRead;
        let mut child = Command::new("python3")
            .args(["-c", RECEIVER])
            .arg(&certs.cert)
            .arg(&certs.key)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line);
            }
        });
        let port = lines
            .recv_timeout(PATIENCE)
            .expect("receiver's port")
            .parse()
            .unwrap();
        Receiver { child, port, lines }
    }

    fn url(&self) -> String {
        format!("https://localhost:{}/hooks/new-plant", self.port)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plant made over plain HTTP on `server`; the status.
fn create_plain(server: &Running, id: i64) -> u16 {
    crate::process::binary::create(server.addr, TOKEN, id)
}

fn webhook_counter(server: &Running, outcome: &str) -> u64 {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-H"])
        .arg(format!("Authorization: Bearer {TOKEN}"))
        .arg(format!("http://{}/metrics", server.addr))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let name = format!("plantstore_webhook_events_total{{result=\"{outcome}\"}}");
    metric(&text, &name)
}

#[test]
fn a_webhook_is_delivered_to_an_https_receiver_signed_by_the_ca_given() {
    let certs = Certs::new("tls-hook", "ec");
    let receiver = Receiver::start(&certs);
    let url = receiver.url();
    let ca = certs.ca.display().to_string();
    let server = Running::start(&["--webhook", &url, "--webhook-ca", &ca], Some(TOKEN));
    assert_eq!(create_plain(&server, 41), 200);
    let line = receiver.lines.recv_timeout(PATIENCE).expect("a delivery");
    assert!(line.starts_with("/hooks/new-plant {"), "{line}");
    assert!(line.contains("\"id\":41"), "{line}");
    assert!(
        crate::support::eventually(|| webhook_counter(&server, "delivered") == 1),
        "{:?}",
        server.log()
    );
}

#[test]
fn an_https_receiver_with_an_untrusted_certificate_is_refused_logged_and_retried() {
    let certs = Certs::new("tls-hook-untrusted", "ec");
    let receiver = Receiver::start(&certs);
    let url = receiver.url();
    // The system's CA certificates only: the test CA is not among them.
    let server = Running::start(&["--webhook", &url], Some(TOKEN));
    assert_eq!(create_plain(&server, 42), 200);
    assert!(logged(&server, "attempt 2 of 5"), "{:?}", server.log());
    let refused = server
        .log()
        .into_iter()
        .find(|l| l.contains("failed ("))
        .unwrap();
    assert!(refused.contains("certificate"), "{refused}");
    assert!(webhook_counter(&server, "retried") >= 1);
    assert_eq!(webhook_counter(&server, "delivered"), 0);
    assert!(receiver.lines.try_recv().is_err(), "nothing delivered");
}

#[test]
fn a_webhook_ca_file_that_holds_no_certificate_stops_the_start() {
    let certs = Certs::new("tls-hook-bad-ca", "ec");
    let key = certs.key.display().to_string();
    let (code, stderr) = run_to_exit(
        &["--webhook", "https://localhost:1/x", "--webhook-ca", &key],
        Some(TOKEN),
        PATIENCE,
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("https webhooks") && stderr.contains("holds no PEM certificate"),
        "{stderr}"
    );
}

impl Certs {
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

/// Python's ssl client: `GET /export` over HTTPS with `Connection: close`
/// and a small receive buffer; `slow` waits before reading and then reads
/// in small pieces, 10 ms apart: the server is always ahead, and the
/// socket full, to the end. Prints the bytes of the whole response and whether it
/// ended with close_notify (`clean`) or a bare TCP close (`ragged`).
const EXPORT_READER: &str = r#"
import socket, ssl, sys, time
port, ca, token, slow = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == "slow"
context = ssl.create_default_context(cafile=ca)
raw = socket.socket()
raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
raw.connect(("127.0.0.1", port))
conn = context.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False)
conn.sendall(f"GET /export HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n".encode())
if slow:
    time.sleep(0.5)
got, end = 0, "clean"
while True:
    try:
        piece = conn.recv(4096 if slow else 65536)
    except ssl.SSLEOFError:
        end = "ragged"
        break
    if not piece:
        break
    got += len(piece)
    if slow:
        time.sleep(0.01)
print(got, end)
"#;

/// A seed file of `n` plants (NDJSON), in `dir`.
fn seed_file(dir: &TempDir, n: usize) -> String {
    let path = dir.join("seed.ndjson");
    let lines: String = (1..=n)
        .map(|id| {
            format!(
                "{{\"id\":{id},\"name\":\"{}{id}\",\"tag\":\"t{}\"}}\n",
                "n".repeat(200),
                id % 7
            )
        })
        .collect();
    std::fs::write(&path, lines).unwrap();
    path.display().to_string()
}

fn read_export(certs: &Certs, server: &Running, how: &str) -> String {
    let out = Command::new("python3")
        .args(["-c", EXPORT_READER, &server.addr.port().to_string()])
        .arg(&certs.ca)
        .args([TOKEN, how])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_slow_reader_gets_the_whole_response_and_a_close_notify() {
    let certs = Certs::new("tls-slow-reader", "ec");
    let seed = seed_file(&certs.dir, 2_000);
    let server = certs.start(&["--seed", &seed, "--threads", "1"]);
    let fast = read_export(&certs, &server, "fast");
    assert!(fast.ends_with(" clean"), "{fast}");
    let bytes: usize = fast.split(' ').next().unwrap().parse().unwrap();
    assert!(bytes > 400_000, "{fast}");
    // The socket fills while the client waits; what rustls holds then must
    // still leave before the close, and the close must say so.
    for _ in 0..3 {
        assert_eq!(read_export(&certs, &server, "slow"), fast);
    }
}

#[test]
fn a_reader_that_stops_is_closed_within_the_write_timeout() {
    let certs = Certs::new("tls-stalled-reader", "ec");
    let seed = seed_file(&certs.dir, 40_000);
    let server = certs.start(&[
        "--seed",
        &seed,
        "--write-timeout",
        "2",
        "--idle-timeout",
        "1",
    ]);
    // A client that asks for the export and never reads.
    let script = r#"
import socket, ssl, sys, time
context = ssl.create_default_context(cafile=sys.argv[2])
raw = socket.socket()
raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
raw.connect(("127.0.0.1", int(sys.argv[1])))
conn = context.wrap_socket(raw, server_hostname="localhost")
conn.sendall(f"GET /export HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {sys.argv[3]}\r\n\r\n".encode())
print("sent", flush=True)
time.sleep(60)
"#;
    let mut stalled = Command::new("python3")
        .args(["-c", script, &server.addr.port().to_string()])
        .arg(&certs.ca)
        .arg(TOKEN)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let open = |server: &Running| {
        let (_, _, text) = curl(&certs, server.addr, "/metrics", &[] as &[&str]);
        metric(&text, "plantstore_connections_open")
    };
    let started = Instant::now();
    // The stalled client is held open at first (the curl is the other).
    std::thread::sleep(Duration::from_millis(500));
    let mut closed = false;
    while started.elapsed() < Duration::from_secs(20) {
        if open(&server) == 1 {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let took = started.elapsed();
    let _ = stalled.kill();
    let _ = stalled.wait();
    // Goal: the write timeout (2 s) for the protocol, then 2 s for what
    // rustls holds; bound: several times that.
    assert!(closed, "the stalled reader was still open after {took:?}");
}

#[test]
fn a_receiver_that_drips_its_handshake_cannot_stretch_an_attempt() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let certs = Certs::new("tls-hook-drip", "ec");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let done = Arc::new(AtomicBool::new(false));
    let stop = Arc::clone(&done);
    // Takes the ClientHello, announces a 16 KiB handshake record, then
    // sends one byte of it a second.
    let dripper = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut hello = [0u8; 4096];
        let _ = conn.read(&mut hello);
        let _ = conn.write_all(&[0x16, 0x03, 0x03, 0x40, 0x00]);
        while !stop.load(Ordering::Relaxed) {
            if conn.write_all(&[0x02]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    let url = format!("https://127.0.0.1:{port}/x");
    let ca = certs.ca.display().to_string();
    let server = Running::start(&["--webhook", &url, "--webhook-ca", &ca], Some(TOKEN));
    let started = Instant::now();
    assert_eq!(create_plain(&server, 43), 200);
    // An attempt has 5 s in all; the goal is that, the bound twice it.
    let mut failed = false;
    while started.elapsed() < Duration::from_secs(10) {
        if server
            .log()
            .iter()
            .any(|l| l.contains("failed (") && l.contains("attempt 2 of 5"))
        {
            failed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = started.elapsed();
    done.store(true, Ordering::Relaxed);
    drop(server);
    let _ = dripper.join();
    assert!(failed, "the attempt was still running after {took:?}");
}
