//! The `newPlant` webhook against a receiver inside the test: payload and
//! headers, a signature checked by an independent HMAC (Python's `hmac`),
//! retries with one `webhook-id`, timeouts, a full queue, shutdown, and a
//! create that never waits for the receiver. On each store: from the
//! database a new plant is announced by the worker that stored it.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use plantstore::webhook::{Target, WebhookConfig};

use crate::support::{AUTH, Kind, TestServer, config};

/// What the receiver does with the next delivery.
#[derive(Clone, Copy, Debug)]
enum Answer {
    Status(u16),
    /// Hold the connection, unanswered, until `release`.
    Stall,
}

#[derive(Debug, Clone)]
struct Delivery {
    request_line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Delivery {
    fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map_or("", |(_, v)| v.as_str())
    }
}

/// A webhook receiver on 127.0.0.1:0 that records every delivery and
/// answers from a plan (204 once the plan is used up).
struct Receiver {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<Delivery>>>,
    plan: Arc<Mutex<VecDeque<Answer>>>,
    released: Arc<AtomicBool>,
}

impl Receiver {
    fn start(plan: &[Answer]) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let receiver = Receiver {
            addr: listener.local_addr().unwrap(),
            received: Arc::default(),
            plan: Arc::new(Mutex::new(plan.iter().copied().collect())),
            released: Arc::default(),
        };
        let (received, plan, released) = (
            Arc::clone(&receiver.received),
            Arc::clone(&receiver.plan),
            Arc::clone(&receiver.released),
        );
        thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let (received, plan, released) = (
                    Arc::clone(&received),
                    Arc::clone(&plan),
                    Arc::clone(&released),
                );
                thread::spawn(move || answer(stream, &received, &plan, &released));
            }
        });
        receiver
    }

    fn url(&self) -> String {
        format!("http://{}/hooks/new-plant", self.addr)
    }

    fn deliveries(&self) -> Vec<Delivery> {
        self.received.lock().unwrap().clone()
    }

    /// Waits (bounded) until `n` deliveries have arrived.
    fn wait_for(&self, n: usize) -> Vec<Delivery> {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.deliveries();
            if got.len() >= n {
                return got;
            }
            assert!(
                Instant::now() < until,
                "only {} of {n} deliveries",
                got.len()
            );
            thread::sleep(Duration::from_millis(5));
        }
    }

    fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
    }
}

fn answer(
    stream: TcpStream,
    received: &Mutex<Vec<Delivery>>,
    plan: &Mutex<VecDeque<Answer>>,
    released: &AtomicBool,
) {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.trim_end().split_once(':') {
            headers.push((name.to_string(), value.trim().to_string()));
        }
    }
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    received.lock().unwrap().push(Delivery {
        request_line: request_line.trim_end().to_string(),
        headers,
        body,
    });
    let next = plan
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Answer::Status(204));
    let mut stream = reader.into_inner();
    match next {
        Answer::Status(status) => {
            let reply =
                format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = stream.write_all(reply.as_bytes());
        }
        Answer::Stall => {
            let until = Instant::now() + Duration::from_secs(30);
            while !released.load(Ordering::SeqCst) && Instant::now() < until {
                thread::sleep(Duration::from_millis(5));
            }
            let _ = stream.write_all(b"HTTP/1.1 204 X\r\nConnection: close\r\n\r\n");
        }
    }
}

/// A server on `kind`'s store announcing to `receiver`, retrying quickly.
fn server_for(
    kind: Kind,
    receiver: &Receiver,
    secret: Option<&[u8]>,
    tune: impl FnOnce(&mut WebhookConfig),
) -> TestServer {
    let mut webhook = WebhookConfig::new(
        vec![Target::parse(&receiver.url()).unwrap()],
        secret.map(<[u8]>::to_vec),
        1024,
    );
    webhook.backoff = Duration::from_millis(10);
    tune(&mut webhook);
    TestServer::on_with(
        kind,
        plantstore::config::Config {
            webhook,
            ..config()
        },
    )
}

/// A `plantstore_webhook_events_total` counter from `/metrics`.
fn counter(server: &TestServer, result: &str) -> u64 {
    let metrics = server.send("GET", "/metrics", &[AUTH], "");
    let text = String::from_utf8(metrics.body).unwrap();
    let prefix = format!("plantstore_webhook_events_total{{result=\"{result}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {result} counter in {text}"))
        .parse()
        .unwrap()
}

/// Waits (bounded) until a counter reaches `value`.
fn wait_counter(server: &TestServer, result: &str, value: u64) {
    let until = Instant::now() + Duration::from_secs(20);
    while counter(server, result) < value {
        assert!(Instant::now() < until, "{result} stayed below {value}");
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(counter(server, result), value, "{result}");
}

/// The signature computed by Python's standard library, independently of
/// the server's HMAC code.
fn python_signature(key: &[u8], id: &str, timestamp: &str, body: &[u8]) -> String {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let script = "import base64,hashlib,hmac,sys\n\
                  key, msg = bytes.fromhex(sys.argv[1]), bytes.fromhex(sys.argv[2])\n\
                  print('v1,' + base64.b64encode(hmac.new(key, msg, hashlib.sha256).digest()).decode())";
    let message = [id.as_bytes(), b".", timestamp.as_bytes(), b".", body].concat();
    let out = Command::new("python3")
        .args(["-c", script, &hex(key), &hex(&message)])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn a_create_is_delivered_signed_with_the_plant_as_posted(kind: Kind) {
    let receiver = Receiver::start(&[]);
    let key = b"a secret key, 32 bytes or not at all";
    let server = server_for(kind, &receiver, Some(key), |_| {});
    let reply = server.create(r#"{"id":7,"name":"Fern","tag":"green","extra":[1]}"#);
    assert_eq!(reply.status, 200);
    let delivery = receiver.wait_for(1).remove(0);
    assert_eq!(delivery.request_line, "POST /hooks/new-plant HTTP/1.1");
    assert_eq!(delivery.header("content-type"), "application/json");
    assert_eq!(
        delivery.header("user-agent"),
        concat!("plantstore/", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(delivery.header("host"), receiver.addr.to_string());
    let body: serde_json::Value = serde_json::from_slice(&delivery.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"id": 7, "name": "Fern", "tag": "green"})
    );

    let id = delivery.header("webhook-id");
    assert!(id.starts_with("msg_") && id.len() > 10, "{id}");
    let timestamp = delivery.header("webhook-timestamp");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let sent: u64 = timestamp.parse().unwrap();
    assert!(sent.abs_diff(now) < 60, "timestamp {sent}, now {now}");
    assert_eq!(
        delivery.header("webhook-signature"),
        python_signature(key, id, timestamp, &delivery.body)
    );

    // A second event has another id; an unsigned server sends no webhook-*.
    assert_eq!(server.create(r#"{"id":8,"name":"Moss"}"#).status, 200);
    let second = receiver.wait_for(2).remove(1);
    assert_ne!(second.header("webhook-id"), id);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&second.body).unwrap(),
        serde_json::json!({"id": 8, "name": "Moss"})
    );
    // A refused create (409) is not announced: the next delivery is the
    // create after it.
    server
        .create(r#"{"id":8,"name":"again"}"#)
        .assert_error(409, "8");
    assert_eq!(server.create(r#"{"id":9,"name":"Ivy"}"#).status, 200);
    let third = receiver.wait_for(3).remove(2);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&third.body).unwrap(),
        serde_json::json!({"id": 9, "name": "Ivy"})
    );
    let plain_receiver = Receiver::start(&[]);
    let plain = server_for(kind, &plain_receiver, None, |_| {});
    assert_eq!(plain.create(r#"{"id":1,"name":"x"}"#).status, 200);
    let unsigned = plain_receiver.wait_for(1).remove(0);
    assert!(
        unsigned
            .headers
            .iter()
            .all(|(n, _)| !n.starts_with("webhook-"))
    );
}

fn failed_deliveries_are_retried_with_the_same_id(kind: Kind) {
    let receiver = Receiver::start(&[Answer::Status(500), Answer::Status(503)]);
    let server = server_for(kind, &receiver, Some(b"k"), |_| {});
    assert_eq!(server.create(r#"{"id":1,"name":"x"}"#).status, 200);
    let tries = receiver.wait_for(3);
    wait_counter(&server, "delivered", 1);
    assert_eq!(counter(&server, "retried"), 2);
    assert_eq!(counter(&server, "failed"), 0);
    let id = tries[0].header("webhook-id");
    assert!(tries.iter().all(|t| t.header("webhook-id") == id));
    assert!(tries.iter().all(|t| t.body == tries[0].body));
    assert_eq!(counter(&server, "dropped"), 0);
}

fn after_every_attempt_fails_the_event_counts_as_failed(kind: Kind) {
    let receiver = Receiver::start(&[Answer::Status(500); 10]);
    let server = server_for(kind, &receiver, None, |_| {});
    assert_eq!(server.create(r#"{"id":1,"name":"x"}"#).status, 200);
    wait_counter(&server, "failed", 1);
    assert_eq!(receiver.deliveries().len(), 5, "5 attempts");
    assert_eq!(counter(&server, "retried"), 4);
    assert_eq!(counter(&server, "delivered"), 0);
}

fn a_stalled_receiver_times_out_and_the_event_is_retried(kind: Kind) {
    let receiver = Receiver::start(&[Answer::Stall]);
    let server = server_for(kind, &receiver, None, |w| {
        w.timeout = Duration::from_millis(300)
    });
    assert_eq!(server.create(r#"{"id":1,"name":"x"}"#).status, 200);
    wait_counter(&server, "delivered", 1);
    assert_eq!(counter(&server, "retried"), 1);
    assert_eq!(receiver.deliveries().len(), 2);
    receiver.release();
}

fn creates_never_wait_for_the_receiver_and_a_full_queue_drops_the_newest(kind: Kind) {
    let receiver = Receiver::start(&[Answer::Stall]);
    let server = server_for(kind, &receiver, None, |w| {
        w.timeout = Duration::from_secs(60);
        w.queue = 2;
    });
    // The first delivery is taken from the queue and stalls...
    assert_eq!(server.create(r#"{"id":1,"name":"x"}"#).status, 200);
    receiver.wait_for(1);
    // ...while every create is still answered (the client would time out
    // after 10 s if a create waited for it): two fill the queue, the rest
    // are dropped.
    for id in 2..=6 {
        let reply = server.create(&format!(r#"{{"id":{id},"name":"x"}}"#));
        assert_eq!(reply.status, 200);
    }
    assert_eq!(receiver.deliveries().len(), 1, "still stalled");
    assert_eq!(counter(&server, "dropped"), 3);
    receiver.release();
    wait_counter(&server, "delivered", 3);
    let ids: Vec<i64> = receiver
        .deliveries()
        .iter()
        .map(|d| {
            serde_json::from_slice::<serde_json::Value>(&d.body).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(
        ids,
        vec![1, 2, 3],
        "the newest events were the ones dropped"
    );
}

fn shutdown_gives_pending_deliveries_a_grace_period_then_drops_them(kind: Kind) {
    let receiver = Receiver::start(&[Answer::Stall]);
    let url = receiver.url();
    let mut server = crate::process::binary::Running::on(
        kind,
        &["--webhook", &url, "--log-level", "info"],
        Some("t"),
    );
    for id in 1..=3 {
        assert_eq!(crate::process::binary::create(server.addr, "t", id), 200);
    }
    receiver.wait_for(1);
    let stopping = Instant::now();
    server.signal("TERM");
    let status = server.wait(Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    let took = stopping.elapsed();
    assert!(
        took >= Duration::from_millis(1900),
        "grace was cut short: {took:?}"
    );
    let log = server.log().join("\n");
    assert!(log.contains("undelivered webhook events"), "{log}");
    receiver.release();
}

#[test]
fn a_malformed_webhook_url_is_a_start_up_error() {
    for url in [
        "https://user@example.com/hook",
        "http://host:99999/",
        "not a url",
    ] {
        let out = crate::process::binary::command()
            .args(["--addr", "127.0.0.1:0", "--webhook", url])
            .env("PLANTSTORE_TOKEN", "t")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--webhook"), "{stderr}");
    }
}

fn sighup_rereads_the_webhook_secret_and_keeps_it_when_the_file_is_refused(kind: Kind) {
    let receiver = Receiver::start(&[]);
    let url = receiver.url();
    let file = crate::support::TempFile::new("secret");
    std::fs::write(&file.0, "first key\n").unwrap();
    let path = file.0.to_str().unwrap();
    let mut server = crate::process::binary::Running::on(
        kind,
        &["--webhook", &url, "--webhook-secret-file", path],
        Some("t"),
    );
    let signed_with = |n: usize, key: &[u8]| {
        let delivery = receiver.wait_for(n).remove(n - 1);
        let (id, timestamp) = (
            delivery.header("webhook-id"),
            delivery.header("webhook-timestamp"),
        );
        delivery.header("webhook-signature") == python_signature(key, id, timestamp, &delivery.body)
    };
    assert_eq!(crate::process::binary::create(server.addr, "t", 1), 200);
    assert!(signed_with(1, b"first key"));

    std::fs::write(&file.0, "whsec_c2Vjb25kIGtleQ==\n").unwrap(); // "second key"
    server.signal("HUP");
    assert!(
        crate::process::reload::logged(&server, "webhook deliveries signed"),
        "{:?}",
        server.log()
    );
    assert_eq!(crate::process::binary::create(server.addr, "t", 2), 200);
    assert!(signed_with(2, b"second key"));

    // A refused file (not base64 after whsec_) keeps the second key.
    std::fs::write(&file.0, "whsec_!!!\n").unwrap();
    server.signal("HUP");
    assert!(
        crate::process::reload::logged(&server, "webhook secret in use stays"),
        "{:?}",
        server.log()
    );
    assert_eq!(crate::process::binary::create(server.addr, "t", 3), 200);
    assert!(signed_with(3, b"second key"));

    // So does one that is not a regular file, refused without reading it
    // (a FIFO blocked the reload for good, /dev/zero never ended).
    let mut n = 3;
    for bad in crate::process::files::Bad::ALL {
        std::fs::remove_file(&file.0).unwrap();
        bad.make(&file.0);
        server.signal("HUP");
        let refused = format!("{path}: {}", bad.reason());
        assert!(
            crate::process::reload::logged(&server, &refused),
            "{bad:?}: {:?}",
            server.log()
        );
        n += 1;
        assert_eq!(
            crate::process::binary::create(server.addr, "t", n as i64),
            200
        );
        assert!(signed_with(n, b"second key"), "{bad:?}");
        bad.remove(&file.0);
        std::fs::write(&file.0, "second key\n").unwrap();
    }
    // And SIGTERM still stops it.
    server.signal("TERM");
    assert!(server.wait(Duration::from_secs(7)).success());
}

/// The seed's plants, at start and at `POST /plants/reset`, are not new:
/// the receiver's first delivery is the create after the reset.
fn a_reset_announces_none_of_the_seeds_plants(kind: Kind) {
    let receiver = Receiver::start(&[]);
    let webhook = WebhookConfig::new(vec![Target::parse(&receiver.url()).unwrap()], None, 1024);
    let (config, _seed) = crate::api::reset::resettable(plantstore::config::Config {
        webhook,
        ..config()
    });
    let server = TestServer::on_with(kind, config);
    let reset = server.send("POST", "/plants/reset", &[AUTH], "");
    assert_eq!(reset.status, 200, "{}", reset.text());
    assert_eq!(server.create(r#"{"id":9,"name":"Ivy"}"#).status, 200);
    let first = receiver.wait_for(1).remove(0);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&first.body).unwrap(),
        serde_json::json!({"id": 9, "name": "Ivy"})
    );
    wait_counter(&server, "delivered", 1);
    assert_eq!(receiver.deliveries().len(), 1);
}

crate::on_each_store!(
    a_reset_announces_none_of_the_seeds_plants,
    a_create_is_delivered_signed_with_the_plant_as_posted,
    failed_deliveries_are_retried_with_the_same_id,
    after_every_attempt_fails_the_event_counts_as_failed,
    a_stalled_receiver_times_out_and_the_event_is_retried,
    creates_never_wait_for_the_receiver_and_a_full_queue_drops_the_newest,
    shutdown_gives_pending_deliveries_a_grace_period_then_drops_them,
    sighup_rereads_the_webhook_secret_and_keeps_it_when_the_file_is_refused,
);
