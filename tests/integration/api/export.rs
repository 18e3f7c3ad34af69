//! `GET /export`: every plant as NDJSON, streamed (chunked to HTTP/1.1,
//! up to the close for HTTP/1.0), ascending by id, each line the
//! PlantRecord `GET /plants/{id}` answers; the connection goes on after it.
//! On each store: from the database it is read a piece at a time through a
//! keyset cursor, and must keep the same promises.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{
    AUTH, Client, JSON, Kind, TOKEN, TempFile, TestServer, config, eventually, open_connections,
    request,
};

/// Creates plants `0..count` (odd ones tagged, some names escaped) over one
/// connection.
fn fill(server: &TestServer, count: i64) {
    let mut client = server.client();
    for id in 0..count {
        let body = if id % 2 == 1 {
            format!(r#"{{"id":{id},"name":"plant \"{id}\" \u00e9\n","tag":"odd"}}"#)
        } else {
            format!(r#"{{"id":{id},"name":"plant {id}"}}"#)
        };
        client.send(&request("POST", "/plants", &[AUTH, JSON], &body));
        assert_eq!(client.reply().status, 200);
    }
}

/// The export's lines, parsed.
fn lines(body: &[u8]) -> Vec<Value> {
    assert!(
        body.is_empty() || body.ends_with(b"\n"),
        "lines end with LF"
    );
    body.split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("each line is JSON"))
        .collect()
}

fn every_plant_is_exported_ascending_as_the_records_get_answers(kind: Kind) {
    let server = TestServer::on(kind);
    // Created out of order, so ascending is the export's doing.
    fill(&server, 3000);
    assert_eq!(
        server.send("DELETE", "/plants/1500", &[AUTH], "").status,
        204
    );
    let reply = server.send("GET", "/export", &[AUTH], "");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/x-ndjson"));
    assert_eq!(reply.header("transfer-encoding"), Some("chunked"));
    assert!(
        reply.chunks > 2,
        "streamed in pieces: {} chunks",
        reply.chunks
    );
    let records = lines(&reply.body);
    let ids: Vec<i64> = records.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    let want: Vec<i64> = (0..3000).filter(|&id| id != 1500).collect();
    assert_eq!(ids, want);
    for id in [0, 1, 2, 1499, 1501, 2999] {
        let one = server.send("GET", &format!("/plants/{id}"), &[AUTH], "");
        let at = want.iter().position(|&w| w == id).unwrap();
        assert_eq!(records[at], one.json(), "id {id}");
    }
}

fn an_empty_store_exports_nothing_and_a_token_is_needed(kind: Kind) {
    let server = TestServer::on(kind);
    let reply = server.send("GET", "/export", &[AUTH], "");
    assert_eq!((reply.status, reply.body.len()), (200, 0));
    server
        .send("GET", "/export", &[], "")
        .assert_error(401, "bearer");
    let head = server.send("HEAD", "/export", &[AUTH], "");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("transfer-encoding"), Some("chunked"));
    server
        .send("POST", "/export", &[AUTH], "")
        .assert_error(405, "");
}

fn a_request_pipelined_behind_an_export_is_answered_after_it(kind: Kind) {
    let server = TestServer::on(kind);
    fill(&server, 2000);
    let mut client = server.client();
    let mut both = request("GET", "/export", &[AUTH], "");
    both.extend(request("GET", "/plants/7", &[AUTH], ""));
    client.send(&both);
    let export = client.reply();
    assert_eq!(lines(&export.body).len(), 2000);
    let next = client.reply();
    assert_eq!(next.status, 200);
    assert_eq!(next.json()["id"], 7);
}

fn an_http_1_0_client_gets_the_export_up_to_the_close(kind: Kind) {
    let server = TestServer::on(kind);
    fill(&server, 1000);
    let mut client = server.client();
    client.send(b"GET /export HTTP/1.0\r\nAuthorization: Bearer test-token\r\n\r\n");
    let mut wire = Vec::new();
    client
        .stream
        .read_to_end(&mut wire)
        .expect("read to the close");
    let head_end = wire.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&wire[..head_end]).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(!head.contains("transfer-encoding") && !head.contains("content-length"));
    assert_eq!(lines(&wire[head_end..]).len(), 1000);
}

fn an_export_while_plants_change_lists_every_stable_plant_once_in_order(kind: Kind) {
    // Seeded: 20,000 creates one by one would take minutes on the database.
    let (server, _seed) = seeded(kind, 20_000, |id| format!("plant {id}"), config());
    let addr = server.addr;
    // Odd ids come and go from before the export starts until it ends.
    let stop = Arc::new(AtomicBool::new(false));
    let (started, running) = mpsc::channel();
    let writer = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            let mut client = Client::connect(addr);
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                let id = 1 + 2 * ((round * 7919) % 10_000);
                client.send(&request("DELETE", &format!("/plants/{id}"), &[AUTH], ""));
                client.reply();
                let body = format!(r#"{{"id":{id},"name":"back"}}"#);
                client.send(&request("POST", "/plants", &[AUTH, JSON], &body));
                client.reply();
                round += 1;
                if round == 100 {
                    let _ = started.send(());
                }
            }
            round
        })
    };
    running.recv().expect("the writer runs");
    let mut client = server.client();
    client.send(&request("GET", "/export", &[AUTH], ""));
    let export = client.reply();
    stop.store(true, Ordering::Relaxed);
    assert!(writer.join().expect("the writer") > 100);
    let ids: Vec<i64> = lines(&export.body)
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "strictly ascending");
    let evens: Vec<i64> = ids.iter().copied().filter(|id| id % 2 == 0).collect();
    assert_eq!(evens, (0..20_000).step_by(2).collect::<Vec<_>>());
}

/// A server on `kind`'s store with `config`, holding plants `0..count`
/// named `name(id)`, seeded from a file (kept until the test ends).
fn seeded(
    kind: Kind,
    count: i64,
    name: impl Fn(i64) -> String,
    mut config: plantstore::config::Config,
) -> (TestServer, TempFile) {
    use std::io::Write;
    let seed = TempFile::new("export.ndjson");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&seed.0).unwrap());
    for id in 0..count {
        writeln!(file, r#"{{"id":{id},"name":"{}"}}"#, name(id)).unwrap();
    }
    file.flush().unwrap();
    drop(file);
    config.seed = Some(seed.0.clone());
    (TestServer::on_with(kind, config), seed)
}

/// A server holding `count` plants with 100-character names (about 130
/// bytes of export each), seeded from a file, whose write timeout is 3 s.
fn large(kind: Kind, count: i64) -> (TestServer, TempFile) {
    let mut config = config();
    config.limits.write_timeout = Duration::from_secs(3);
    seeded(kind, count, |id| format!("{id:0>100}"), config)
}

/// The write timeout measures what the client takes: a reader taking a
/// steady 100 KB/s is served for as long as it reads (here 7 s, with a
/// 3 s timeout; without `TCP_NOTSENT_LOWAT` it was cut after about 4 s). Measured by when the kernel's send buffer drained, as it
/// once was, the timeout ran out first: Linux lets that buffer grow to
/// megabytes and reports it writable only once a third of it is free.
fn a_slow_steady_reader_of_an_export_is_not_cut_off(kind: Kind) {
    let (server, _seed) = large(kind, 100_000);
    let mut client = server.client();
    client.send(&request("GET", "/export", &[AUTH], ""));
    let started = Instant::now();
    let mut chunk = [0u8; 8192];
    let mut taken = 0;
    while started.elapsed() < Duration::from_secs(7) {
        thread::sleep(Duration::from_millis(80));
        match client.stream.read(&mut chunk) {
            Ok(0) => panic!("closed after {taken} bytes"),
            Ok(n) => taken += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("{e} after {taken} bytes"),
        }
    }
    assert!(taken < 1_000_000, "the reader set the pace: {taken} bytes");
}

/// An export the client stops reading is cut after the write timeout by a
/// reset, never by an orderly close: over HTTP/1.0, whose body ends at the
/// close, a close would make the part received look like the whole export.
fn an_http_1_0_export_cut_short_ends_in_a_reset(kind: Kind) {
    let (server, _seed) = large(kind, 100_000);
    let mut client = server.client();
    client.send(b"GET /export HTTP/1.0\r\nAuthorization: Bearer test-token\r\n\r\n");
    // Not read: after the 3 s write timeout the server lets it go, and
    // counts only the connection asking.
    assert!(
        eventually(|| open_connections(server.addr, TOKEN) == 1),
        "the stalled export was never cut"
    );
    let mut wire = Vec::new();
    let end = client.stream.read_to_end(&mut wire);
    let error = end.expect_err("a reset, not the end of the body");
    assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset, "{error}");
    assert!(wire.len() < 13_000_000, "cut before the end");
}

crate::on_each_store!(
    every_plant_is_exported_ascending_as_the_records_get_answers,
    an_empty_store_exports_nothing_and_a_token_is_needed,
    a_request_pipelined_behind_an_export_is_answered_after_it,
    an_http_1_0_client_gets_the_export_up_to_the_close,
    an_export_while_plants_change_lists_every_stable_plant_once_in_order,
    a_slow_steady_reader_of_an_export_is_not_cut_off,
    an_http_1_0_export_cut_short_ends_in_a_reset,
);
