//! Real TLS clients against the server: curl and Python's `ssl`, each
//! over TLS 1.2 and 1.3; RSA, EC and Ed25519 keys; certificates that a
//! client must refuse (untrusted, wrong name), counted by the server.

use std::process::Command;

use super::{Certs, TOKEN, curl, metric};
use crate::process::reload::logged;

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
