//! Webhooks to an https receiver: delivered when its CA is given, refused
//! (logged, retried) when it is not trusted, a CA file without a
//! certificate stopping the start, and a receiver that drips its
//! handshake held to the attempt's deadline.

use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use super::{Certs, TOKEN, metric};
use crate::process::binary::{Running, run_to_exit};
use crate::process::reload::logged;
use crate::support::PATIENCE;

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
