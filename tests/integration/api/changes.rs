//! `GET /plants/changes`: the change feed as Server-Sent Events. Every
//! acknowledged change once, in commit order, after it is durable;
//! `Last-Event-ID` resumes without loss or repetition, or says `reset`;
//! a subscriber that stops reading or falls behind is dropped while
//! writers go on; the stream ends cleanly when the server stops.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{
    AUTH, JSON, PATIENCE, TempFile, TestServer, allow_names_of, config, durable_config, eventually,
    request,
};

/// One message of the stream: its fields, `None` where absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Message {
    pub(crate) id: Option<String>,
    pub(crate) event: Option<String>,
    pub(crate) data: Option<String>,
    /// A comment line (`:`) was all it held.
    comment: bool,
}

impl Message {
    pub(crate) fn data(&self) -> Value {
        serde_json::from_str(self.data.as_deref().expect("data")).expect("data is JSON")
    }

    pub(crate) fn seq(&self) -> u64 {
        let id = self.id.as_deref().expect("id");
        id.split_once('-').expect("epoch-seq").1.parse().unwrap()
    }
}

/// An open feed: the head read, the chunked body decoded as it comes.
pub(crate) struct Feed {
    stream: TcpStream,
    raw: Vec<u8>,
    body: Vec<u8>,
    /// The body ended cleanly (the last chunk).
    ended: bool,
}

impl Feed {
    /// Opens the feed with these extra headers and query; asserts a 200
    /// event stream.
    pub(crate) fn open(addr: SocketAddr, headers: &[(&str, &str)], query: &str) -> Feed {
        Feed::open_on(TcpStream::connect(addr).unwrap(), headers, query)
    }

    /// As `open`, on a socket whose receive buffer is 4 KiB: the kernel
    /// then holds little of what the server sends (loopback buffers grow to
    /// megabytes otherwise).
    fn open_small(addr: SocketAddr) -> Feed {
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        socket.connect(&addr.into()).unwrap();
        Feed::open_on(socket.into(), &[], "")
    }

    fn open_on(stream: TcpStream, headers: &[(&str, &str)], query: &str) -> Feed {
        Feed::try_open_on(stream, headers, query).unwrap_or_else(|head| panic!("{head}"))
    }

    /// As `open`, but a head other than 200 is returned, not asserted.
    fn try_open_on(
        stream: TcpStream,
        headers: &[(&str, &str)],
        query: &str,
    ) -> Result<Feed, String> {
        let mut all = vec![AUTH];
        all.extend_from_slice(headers);
        Feed::try_open_as(stream, &all, query)
    }

    /// Opens the feed with exactly these headers (no token unless one of
    /// them) and query; the head, if it is not a 200.
    pub(crate) fn try_open_with(
        addr: SocketAddr,
        headers: &[(&str, &str)],
        query: &str,
    ) -> Result<Feed, String> {
        Feed::try_open_as(TcpStream::connect(addr).unwrap(), headers, query)
    }

    fn try_open_as(stream: TcpStream, all: &[(&str, &str)], query: &str) -> Result<Feed, String> {
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let path = format!("/plants/changes{query}");
        let mut feed = Feed {
            stream,
            raw: Vec::new(),
            body: Vec::new(),
            ended: false,
        };
        std::io::Write::write_all(&mut feed.stream, &request("GET", &path, all, "")).unwrap();
        let head = loop {
            if let Some(end) = feed.raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8(feed.raw[..end].to_vec()).unwrap();
                feed.raw.drain(..end + 4);
                break head;
            }
            assert!(feed.read_more(), "closed before the head");
        };
        if !head.starts_with("HTTP/1.1 200") {
            return Err(head);
        }
        let lower = head.to_ascii_lowercase();
        assert!(lower.contains("content-type: text/event-stream"), "{head}");
        assert!(lower.contains("transfer-encoding: chunked"), "{head}");
        assert!(lower.contains("cache-control: no-store"), "{head}");
        Ok(feed)
    }

    /// Reads more raw bytes; `false` at the end of the connection.
    fn read_more(&mut self) -> bool {
        let mut buf = [0; 16384];
        match self.stream.read(&mut buf) {
            Ok(0) => false,
            Ok(n) => {
                self.raw.extend_from_slice(&buf[..n]);
                true
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => false,
            // A signal to this process (another test's): not the server's doing.
            Err(e) if e.kind() == ErrorKind::Interrupted => true,
            Err(e) => panic!("reading the feed: {e}"),
        }
    }

    /// Moves every complete chunk from `raw` to `body`.
    fn dechunk(&mut self) {
        loop {
            let Some(line) = self.raw.windows(2).position(|w| w == b"\r\n") else {
                return;
            };
            let size = std::str::from_utf8(&self.raw[..line]).unwrap();
            let size = usize::from_str_radix(size, 16).expect("chunk size");
            if self.raw.len() < line + 2 + size + 2 {
                return;
            }
            self.body
                .extend_from_slice(&self.raw[line + 2..line + 2 + size]);
            self.raw.drain(..line + 2 + size + 2);
            if size == 0 {
                self.ended = true;
                return;
            }
        }
    }

    /// The next message, comments included; `None` once the stream ends
    /// (cleanly or not).
    pub(crate) fn next_message(&mut self) -> Option<Message> {
        loop {
            self.dechunk();
            if let Some(end) = self.body.windows(2).position(|w| w == b"\n\n") {
                let text = String::from_utf8(self.body[..end].to_vec()).unwrap();
                self.body.drain(..end + 2);
                let mut message = Message::default();
                for line in text.lines() {
                    if line.starts_with(':') {
                        message.comment = true;
                        continue;
                    }
                    let (field, value) = line.split_once(": ").expect("field: value");
                    let slot = match field {
                        "id" => &mut message.id,
                        "event" => &mut message.event,
                        "data" => &mut message.data,
                        other => panic!("unexpected field {other}"),
                    };
                    assert!(slot.replace(value.to_owned()).is_none(), "{field} twice");
                }
                return Some(message);
            }
            if self.ended || !self.read_more() {
                return None;
            }
        }
    }

    /// The next event (a message with data), skipping comments and the
    /// id-only opening.
    pub(crate) fn next_event(&mut self) -> Message {
        loop {
            let message = self.next_message().expect("the feed goes on");
            if message.data.is_some() {
                return message;
            }
        }
    }

    /// The id-only message a fresh stream starts with.
    pub(crate) fn opening(&mut self) -> Message {
        let message = self.next_message().expect("an opening");
        assert!(
            message.event.is_none() && message.data.is_none(),
            "{message:?}"
        );
        assert!(message.id.is_some());
        message
    }
}

pub(crate) fn plant_body(id: i64, name: &str, tag: Option<&str>) -> String {
    let mut plant = serde_json::json!({"id": id, "name": name});
    if let Some(tag) = tag {
        plant["tag"] = tag.into();
    }
    plant.to_string()
}

#[test]
fn the_feed_needs_the_token_and_takes_only_tag() {
    let server = TestServer::start();
    server
        .send("GET", "/plants/changes", &[], "")
        .assert_error(401, "bearer");
    server
        .send("GET", "/plants/changes?tags=x", &[AUTH], "")
        .assert_error(400, "tags");
    server
        .send("POST", "/plants/changes", &[AUTH, JSON], "{}")
        .assert_error(405, "GET");
    let head = server.send("HEAD", "/plants/changes", &[AUTH], "");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some("text/event-stream"));
    assert!(head.body.is_empty());
}

#[test]
fn every_change_is_one_event_in_commit_order_and_tag_filters() {
    let server = TestServer::start();
    let mut all = Feed::open(server.addr, &[], "");
    let mut green = Feed::open(server.addr, &[], "?tag=green");
    let opened = all.opening();
    assert_eq!(opened.seq(), 0, "nothing changed yet");
    green.opening();
    assert_eq!(
        server.create(&plant_body(1, "fern", Some("green"))).status,
        200
    );
    assert_eq!(server.create(&plant_body(2, "rose", None)).status, 200);
    let put = plant_body(1, "big fern", Some("blue"));
    assert_eq!(
        server.send("PUT", "/plants/1", &[AUTH, JSON], &put).status,
        200
    );
    assert_eq!(server.send("DELETE", "/plants/2", &[AUTH], "").status, 204);
    let events: Vec<Message> = (0..4).map(|_| all.next_event()).collect();
    let seen: Vec<(u64, &str, Value)> = events
        .iter()
        .map(|e| (e.seq(), e.event.as_deref().unwrap(), e.data()))
        .collect();
    assert_eq!(
        seen,
        [
            (
                1,
                "created",
                serde_json::json!({"id": 1, "name": "fern", "tag": "green"})
            ),
            (2, "created", serde_json::json!({"id": 2, "name": "rose"})),
            (
                3,
                "replaced",
                serde_json::json!({"id": 1, "name": "big fern", "tag": "blue"})
            ),
            (4, "deleted", serde_json::json!({"id": 2})),
        ]
    );
    let epoch = |m: &Message| {
        m.id.as_deref()
            .unwrap()
            .split_once('-')
            .unwrap()
            .0
            .to_owned()
    };
    assert!(events.iter().all(|e| epoch(e) == epoch(&opened)));
    // The green plant's creation, and every delete.
    assert_eq!(green.next_event().seq(), 1);
    assert_eq!(green.next_event().seq(), 4);
}

#[test]
fn the_feed_matches_the_journal_under_eight_concurrent_writers() {
    let file = TempFile::new("feed-writers");
    let mut server = TestServer::with(durable_config(&file.0));
    let mut feed = Feed::open(server.addr, &[], "");
    feed.opening();
    let addr = server.addr;
    // Eight writers over ten shared ids: creates, replaces and deletes
    // race; each counts what was acknowledged.
    let writers: Vec<_> = (0..8)
        .map(|writer| {
            thread::spawn(move || {
                let mut client = crate::support::Client::connect(addr);
                let mut acknowledged = 0;
                for round in 0..40 {
                    let id = (round * 7 + writer) % 10;
                    let name = format!("w{writer} r{round}");
                    let tag = (round % 2 == 0).then_some("even");
                    let (method, path, body) = match round % 3 {
                        0 => ("POST", "/plants".to_owned(), plant_body(id, &name, tag)),
                        1 => ("PUT", format!("/plants/{id}"), plant_body(id, &name, tag)),
                        _ => ("DELETE", format!("/plants/{id}"), String::new()),
                    };
                    client.send(&request(method, &path, &[AUTH, JSON], &body));
                    let status = client.reply().status;
                    assert!([200, 204, 404, 409].contains(&status), "{status}");
                    acknowledged += usize::from(status == 200 || status == 204);
                }
                acknowledged
            })
        })
        .collect();
    let acknowledged: usize = writers.into_iter().map(|w| w.join().unwrap()).sum();
    // Replaying the events, each must make sense where it stands: a
    // create of an absent id, a replace or delete of a present one.
    let mut replayed: BTreeMap<i64, Value> = BTreeMap::new();
    for n in 1..=acknowledged as u64 {
        let event = feed.next_event();
        assert_eq!(event.seq(), n, "numbered in order, none skipped");
        let data = event.data();
        let id = data["id"].as_i64().unwrap();
        match event.event.as_deref().unwrap() {
            "created" => assert!(replayed.insert(id, data).is_none(), "created twice: {id}"),
            "replaced" => assert!(replayed.insert(id, data).is_some(), "replaced absent: {id}"),
            "deleted" => assert!(replayed.remove(&id).is_some(), "deleted absent: {id}"),
            other => panic!("event {other}"),
        }
    }
    drop(feed);
    // The journal, replayed by a restart, holds what the feed says.
    server.restart();
    let listed = server.send("GET", "/plants?limit=1000", &[AUTH], "").json();
    let listed: BTreeMap<i64, Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_i64().unwrap(), p.clone()))
        .collect();
    assert_eq!(listed, replayed);
}

#[test]
fn last_event_id_resumes_without_loss_or_repetition() {
    let server = TestServer::start();
    let mut feed = Feed::open(server.addr, &[], "");
    feed.opening();
    for id in 0..10 {
        assert_eq!(server.create(&plant_body(id, "p", None)).status, 200);
    }
    let fourth = (0..4).map(|_| feed.next_event()).last().unwrap();
    drop(feed);
    for id in 10..15 {
        assert_eq!(server.create(&plant_body(id, "p", None)).status, 200);
    }
    let last = fourth.id.clone().unwrap();
    let mut resumed = Feed::open(server.addr, &[("Last-Event-ID", &last)], "");
    let ids: Vec<i64> = (0..11)
        .map(|_| {
            let event = resumed.next_message().unwrap();
            assert_eq!(
                event.event.as_deref(),
                Some("created"),
                "no opening, no reset"
            );
            event.data()["id"].as_i64().unwrap()
        })
        .collect();
    assert_eq!(ids, (4..15).collect::<Vec<_>>());
}

#[test]
fn an_id_too_old_or_from_before_a_restart_gets_one_reset_event() {
    let file = TempFile::new("feed-reset");
    let mut config = durable_config(&file.0);
    allow_names_of(&mut config, 70_000);
    let mut server = TestServer::with(config);
    let mut feed = Feed::open(server.addr, &[], "");
    let start = feed.opening().id.unwrap();
    // More than the history's 1 MiB of events, read as they come (a
    // subscriber left behind the history would be dropped).
    let big = "n".repeat(65_000);
    assert_eq!(server.create(&plant_body(1, &big, None)).status, 200);
    let mut last = feed.next_event();
    for _ in 0..20 {
        let put = plant_body(1, &big, None);
        assert_eq!(
            server.send("PUT", "/plants/1", &[AUTH, JSON], &put).status,
            200
        );
        last = feed.next_event();
    }
    drop(feed);
    let mut late = Feed::open(server.addr, &[("Last-Event-ID", &start)], "");
    let reset = late.next_message().unwrap();
    assert_eq!(reset.event.as_deref(), Some("reset"));
    assert_eq!(reset.id, last.id, "it goes on from the last event");
    assert_eq!(reset.data()["reason"], "too far behind");
    // Then the next change, and nothing before it.
    assert_eq!(server.send("DELETE", "/plants/1", &[AUTH], "").status, 204);
    let next = late.next_event();
    assert_eq!((next.event.as_deref(), next.seq()), (Some("deleted"), 22));
    drop(late);
    // A garbled id is a reset too, never an error.
    let mut garbled = Feed::open(server.addr, &[("Last-Event-ID", "x-1")], "");
    assert_eq!(
        garbled.next_message().unwrap().event.as_deref(),
        Some("reset")
    );
    drop(garbled);
    // After a restart the numbers start again, in a new epoch.
    server.restart();
    let mut after = Feed::open(server.addr, &[("Last-Event-ID", &last.id.unwrap())], "");
    let reset = after.next_message().unwrap();
    assert_eq!(reset.event.as_deref(), Some("reset"));
    assert_eq!(reset.data()["reason"], "the server restarted");
    assert_eq!(reset.seq(), 0);
}

/// The feed's counters from `/metrics`.
pub(crate) fn feed_metric(server: &TestServer, name: &str) -> u64 {
    let text = server.send("GET", "/metrics", &[AUTH], "").text();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{name} in /metrics"))
        .parse()
        .unwrap()
}

#[test]
fn a_subscriber_that_stops_reading_is_dropped_while_writers_go_on() {
    let mut config = config();
    allow_names_of(&mut config, 70_000);
    config.limits.write_timeout = Duration::from_secs(1);
    let server = TestServer::with(config);
    // Reads its opening, then nothing.
    let mut stalled = Feed::open_small(server.addr);
    stalled.opening();
    // Reads, but a few KiB at a time: slower than the writer below.
    let mut slow = Feed::open_small(server.addr);
    slow.opening();
    let reading = Arc::new(AtomicBool::new(true));
    let slow_reader = {
        let reading = Arc::clone(&reading);
        thread::spawn(move || {
            let mut buf = [0; 4096];
            while reading.load(Ordering::Relaxed) {
                match slow.stream.read(&mut buf) {
                    Ok(0) | Err(_) => return true,
                    Ok(_) => thread::sleep(Duration::from_millis(20)),
                }
            }
            false
        })
    };
    assert_eq!(feed_metric(&server, "plantstore_feed_subscribers"), 2);
    // Three MiB of events: every write is acknowledged, none waits for a
    // subscriber.
    let big = "n".repeat(60_000);
    let started = Instant::now();
    let mut client = server.client();
    for id in 0..50 {
        client.send(&request(
            "POST",
            "/plants",
            &[AUTH, JSON],
            &plant_body(id, &big, None),
        ));
        assert_eq!(client.reply().status, 200);
    }
    let writing = started.elapsed();
    assert!(writing < PATIENCE, "writers waited: {writing:?}");
    // The slow one falls behind the history and is cut; the stalled one
    // is closed by the write timeout.
    assert!(
        eventually(|| slow_reader.is_finished()),
        "slow subscriber kept"
    );
    reading.store(false, Ordering::Relaxed);
    assert!(slow_reader.join().unwrap(), "its connection ended");
    assert!(eventually(|| feed_metric(
        &server,
        "plantstore_feed_subscribers"
    ) == 0));
    assert!(feed_metric(&server, "plantstore_feed_dropped_total") >= 1);
    stalled.stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut rest = Vec::new();
    let ended = match stalled.stream.read_to_end(&mut rest) {
        Ok(_) => true,
        Err(e) => e.kind() == ErrorKind::ConnectionReset,
    };
    assert!(ended, "the stalled subscriber's connection ended");
}

#[test]
fn an_open_stream_ends_cleanly_when_the_server_stops() {
    let server = TestServer::start();
    let mut feed = Feed::open(server.addr, &[], "");
    feed.opening();
    let started = Instant::now();
    drop(server);
    assert!(feed.next_message().is_none());
    assert!(feed.ended, "the last chunk, not a cut");
    assert!(started.elapsed() < PATIENCE);
}

#[test]
fn an_idle_stream_gets_a_comment_and_outlives_the_idle_timeout() {
    let mut config = config();
    config.limits.idle_timeout = Duration::from_secs(1);
    config.limits.write_timeout = Duration::from_secs(1);
    let server = TestServer::with(config);
    let mut feed = Feed::open(server.addr, &[], "");
    feed.opening();
    let started = Instant::now();
    let heartbeat = feed.next_message().expect("the stream stays open");
    assert!(heartbeat.comment && heartbeat.id.is_none(), "{heartbeat:?}");
    let waited = started.elapsed();
    assert!(
        waited > Duration::from_secs(2),
        "not closed as idle: {waited:?}"
    );
    assert!(waited < PATIENCE, "{waited:?}");
    assert_eq!(server.create(&plant_body(1, "fern", None)).status, 200);
    assert_eq!(feed.next_event().seq(), 1);
}

/// Regression: a stream whose client had gone kept its connection slot
/// until a heartbeat's write failed (15-20 s with no change), so with a
/// small `--max-connections` every new client got 503 meanwhile.
#[test]
fn closed_streams_free_their_slots_at_once() {
    let mut config = config();
    config.limits.max_connections = 20;
    let server = TestServer::with(config);
    let mut feeds: Vec<Feed> = (0..20)
        .map(|_| {
            let mut feed = Feed::open(server.addr, &[], "");
            feed.opening();
            feed
        })
        .collect();
    server
        .send("GET", "/healthz", &[], "")
        .assert_error(503, "connection limit");
    let closed = Instant::now();
    feeds.truncate(10);
    // Ten new streams open as the slots come free: well within a second
    // on an idle machine; 5 s is the bound for a loaded one.
    let bound = Duration::from_secs(5);
    while feeds.len() < 20 {
        assert!(closed.elapsed() < bound, "{} slots freed", feeds.len() - 10);
        match Feed::try_open_on(TcpStream::connect(server.addr).unwrap(), &[], "") {
            Ok(mut feed) => {
                feed.opening();
                feeds.push(feed);
            }
            Err(head) => {
                assert!(head.starts_with("HTTP/1.1 503"), "{head}");
                thread::sleep(Duration::from_millis(10));
            }
        }
    }
    // No ghost is counted: the cap is exactly full again, and once every
    // client has gone, the feed counts no subscriber and the engine no
    // connection but the one asking.
    server
        .send("GET", "/healthz", &[], "")
        .assert_error(503, "connection limit");
    feeds.clear();
    let closed = Instant::now();
    let mut text = String::new();
    while closed.elapsed() < bound {
        let reply = server.send("GET", "/metrics", &[AUTH], "");
        text = reply.text();
        if reply.status == 200
            && text.contains("\nplantstore_feed_subscribers 0\n")
            && text.contains("\nplantstore_connections_open 1\n")
        {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("still counted {bound:?} after their clients closed: {text}");
}
