//! SIGHUP: the built binary re-reads `--token-file` (and
//! `--webhook-secret-file`) without restarting; a file that does not check
//! out changes nothing; the process never exits and keeps its plants.

use std::net::SocketAddr;

use crate::process::binary::Running;
use crate::support::{Client, JSON, PATIENCE, TempFile, eventually, request};

/// The status of `GET /plants/1` with `token`.
fn status_with(addr: SocketAddr, token: &str) -> u16 {
    let auth = format!("Bearer {token}");
    let mut client = Client::connect(addr);
    client.send(&request(
        "GET",
        "/plants/1",
        &[("Authorization", &auth)],
        "",
    ));
    client.reply().status
}

/// Waits (signals are handled on their own thread) until `token` gets
/// `want`, within the tests' patience; the status last seen.
fn status_eventually(addr: SocketAddr, token: &str, want: u16) -> u16 {
    let mut status = 0;
    eventually(|| {
        status = status_with(addr, token);
        status == want
    });
    status
}

/// Waits (within the tests' patience) until a log line contains `needle`.
pub(crate) fn logged(server: &Running, needle: &str) -> bool {
    eventually(|| server.log().iter().any(|line| line.contains(needle)))
}

#[test]
fn sighup_rotates_the_tokens_keeps_the_plants_and_survives_a_broken_file() {
    let file = TempFile::new("tokens");
    std::fs::write(&file.0, "old-token\n").unwrap();
    let path = file.0.to_str().unwrap();
    let mut server = Running::start(&["--token-file", path], None);
    let addr = server.addr;
    let mut client = Client::connect(addr);
    let body = r#"{"id":1,"name":"kept in memory"}"#;
    client.send(&request(
        "POST",
        "/plants",
        &[("Authorization", "Bearer old-token"), JSON],
        body,
    ));
    assert_eq!(client.reply().status, 200);
    assert_eq!(status_with(addr, "new-token"), 401);

    // Rotation: the new token is added and the old one removed.
    std::fs::write(&file.0, "# rotated\nnew-token\nspare-token\n").unwrap();
    server.signal("HUP");
    assert_eq!(
        status_eventually(addr, "new-token", 200),
        200,
        "the new token works"
    );
    assert_eq!(
        status_with(addr, "old-token"),
        401,
        "the removed one is refused"
    );
    assert_eq!(status_with(addr, "spare-token"), 200);
    assert!(logged(&server, "2 tokens active"), "{:?}", server.log());

    // A broken file (a token with a space inside) keeps the current set.
    std::fs::write(&file.0, "new token with spaces\n").unwrap();
    server.signal("HUP");
    assert!(logged(&server, "reload refused"), "{:?}", server.log());
    assert!(server.log().iter().any(|l| l.contains("line 1")));
    assert_eq!(status_with(addr, "new-token"), 200);
    assert_eq!(status_with(addr, "spare-token"), 200);
    // So does a missing one.
    std::fs::remove_file(&file.0).unwrap();
    server.signal("HUP");
    let refusals = || {
        server
            .log()
            .iter()
            .filter(|l| l.contains("reload refused"))
            .count()
    };
    eventually(|| refusals() >= 2);
    assert_eq!(refusals(), 2, "{:?}", server.log());
    assert_eq!(status_with(addr, "new-token"), 200);

    // The process lived through it all, with its in-memory plant.
    assert!(server.child.try_wait().unwrap().is_none(), "still running");
    let mut client = Client::connect(addr);
    client.send(&request(
        "GET",
        "/plants/1",
        &[("Authorization", "Bearer new-token")],
        "",
    ));
    assert_eq!(client.reply().json()["name"], "kept in memory");
}

#[test]
fn sighup_without_files_to_reload_is_harmless() {
    let mut server = Running::start(&[], Some("env-token"));
    server.signal("HUP");
    assert!(logged(&server, "nothing to re-read"), "{:?}", server.log());
    assert_eq!(status_with(server.addr, "env-token"), 404);
    assert!(server.child.try_wait().unwrap().is_none(), "still running");
    server.signal("TERM");
    assert!(server.wait(PATIENCE).success());
}
