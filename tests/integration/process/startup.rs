//! The start-up line of a server bound to every address lists the URLs it
//! can be reached at, not `http://0.0.0.0:...`, which no one can open.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::process::binary::BIN;
use crate::support::{Client, request};

#[test]
fn bound_to_every_address_the_start_up_line_lists_real_urls() {
    let mut child = Command::new(BIN)
        .args(["--addr", "0.0.0.0:0"])
        .env("PLANTSTORE_TOKEN", "t")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines().map_while(Result::ok);
    let line = lines
        .find(|line| line.contains("listening on"))
        .expect("a start-up line");
    assert!(!line.contains("http://0.0.0.0"), "{line}");
    let urls = line.split("reachable at ").nth(1).expect("the URLs");
    let first = urls.split(", ").next().unwrap();
    let port = first
        .strip_prefix("http://127.0.0.1:")
        .expect("loopback first");
    let port: u16 = port.parse().expect("a port");
    assert_ne!(port, 0);
    assert!(
        line.contains(&format!("port {port} (0.0.0.0:{port})")),
        "{line}"
    );
    for url in urls.split(", ") {
        assert!(
            url.starts_with("http://") && url.ends_with(&format!(":{port}")),
            "{url}"
        );
    }
    // The first one answers.
    let mut client = Client::connect(([127, 0, 0, 1], port).into());
    client.send(&request("GET", "/healthz", &[], ""));
    let status = client.reply().status;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200);
}
