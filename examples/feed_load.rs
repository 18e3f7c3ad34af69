//! Load for the change feed (bench/run.sh's feed section): subscribers on
//! `GET /plants/changes`, writers making changes at a paced rate, and a
//! check that every subscriber got every event, in order.
//!
//!   feed_load ADDR TOKEN SUBSCRIBERS RATE SECONDS
//!   feed_load ADDR TOKEN SUBSCRIBERS --hold [TAG]
//!
//! The first form opens SUBSCRIBERS streams, then creates plants for
//! SECONDS at RATE a second (4 keep-alive writer connections, paced), then
//! waits up to 10 s for the streams to catch up, and prints
//!
//!   RESULT changes subscribers complete min_events max_events p50_ms p99_ms max_ms
//!
//! `complete` counts the subscribers that got every acknowledged change,
//! numbered without a gap; the delays run from a create's answer reaching
//! its writer to its event reaching the first subscriber. `--hold` opens
//! the streams (following only TAG's plants, if given), prints `ready`,
//! and reads them until it is killed.
//! Standard library only: a native reader, so the figures are the
//! server's, not an interpreter's.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const WRITERS: u64 = 4;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: feed_load ADDR TOKEN SUBSCRIBERS (RATE SECONDS | --hold)";
    let hold = args.get(3).map(String::as_str) == Some("--hold");
    let query = match args.get(4) {
        Some(tag) if hold => format!("?tag={tag}"),
        _ => String::new(),
    };
    let (addr, token, count) = match &args[..] {
        [addr, token, count, ..] => (addr.clone(), token.clone(), count.parse().expect(usage)),
        _ => panic!("{usage}"),
    };
    let stop = Arc::new(AtomicBool::new(false));
    // Each stream ends once it has this many events (set once known).
    let target = Arc::new(AtomicU64::new(u64::MAX));
    let ready = Arc::new(Barrier::new(count + 1));
    // Receive times of the first subscriber's events, by plant id.
    let seen: Arc<Mutex<HashMap<i64, Instant>>> = Arc::default();
    let subscribers: Vec<_> = (0..count)
        .map(|n| {
            let (addr, token, query) = (addr.clone(), token.clone(), query.clone());
            let (stop, ready) = (Arc::clone(&stop), Arc::clone(&ready));
            let target = Arc::clone(&target);
            let seen = (n == 0).then(|| Arc::clone(&seen));
            thread::Builder::new()
                .stack_size(128 << 10)
                .spawn(move || subscribe(&addr, &token, &query, &ready, &stop, &target, seen))
                .expect("thread")
        })
        .collect();
    ready.wait();
    if hold {
        println!("ready");
        std::io::stdout().flush().unwrap();
        // Held (and read) until the process is killed.
        loop {
            thread::sleep(Duration::from_secs(3600));
        }
    }
    let rate: f64 = args.get(3).and_then(|r| r.parse().ok()).expect(usage);
    let seconds: f64 = args.get(4).and_then(|s| s.parse().ok()).expect(usage);
    let answered: Arc<Mutex<HashMap<i64, Instant>>> = Arc::default();
    let made = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (addr, token) = (addr.clone(), token.clone());
            let (answered, made) = (Arc::clone(&answered), Arc::clone(&made));
            thread::spawn(move || write(&addr, &token, w, rate, seconds, &answered, &made))
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let changes = made.load(Ordering::Relaxed);
    target.store(changes, Ordering::Relaxed);
    // Catching up: every stream ends once it has `changes` events.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && caught_up(&subscribers) < count {
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    let got: Vec<Stream> = subscribers.into_iter().map(|s| s.join().unwrap()).collect();
    let complete = got
        .iter()
        .filter(|s| s.events == changes && s.in_order)
        .count();
    let events = got.iter().map(|s| s.events);
    let (min, max) = (events.clone().min().unwrap_or(0), events.max().unwrap_or(0));
    let seen = seen.lock().unwrap();
    let mut delays: Vec<f64> = answered
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(id, at)| {
            let got = seen.get(id)?;
            Some(got.saturating_duration_since(*at).as_secs_f64() * 1000.0)
        })
        .collect();
    delays.sort_by(f64::total_cmp);
    let at = |q: f64| {
        delays
            .get(((delays.len() as f64 * q) as usize).min(delays.len().saturating_sub(1)))
            .copied()
            .unwrap_or(f64::NAN)
    };
    println!(
        "RESULT {changes} {count} {complete} {min} {max} {:.2} {:.2} {:.2}",
        at(0.5),
        at(0.99),
        delays.last().copied().unwrap_or(f64::NAN)
    );
}

/// How many subscriber threads have ended (each ends when stopped, cut,
/// or at the end of its stream).
fn caught_up(subscribers: &[thread::JoinHandle<Stream>]) -> usize {
    subscribers.iter().filter(|s| s.is_finished()).count()
}

/// What one subscriber got.
struct Stream {
    events: u64,
    /// Every event numbered one more than the last.
    in_order: bool,
}

/// Reads one stream until `stop` (checked at least every 100 ms) or until
/// it has `target` events.
fn subscribe(
    addr: &str,
    token: &str,
    query: &str,
    ready: &Barrier,
    stop: &AtomicBool,
    target: &AtomicU64,
    seen: Option<Arc<Mutex<HashMap<i64, Instant>>>>,
) -> Stream {
    let mut socket = TcpStream::connect(addr).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    write!(
        socket,
        "GET /plants/changes{query} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    let mut stream = Stream {
        events: 0,
        in_order: true,
    };
    let mut raw = Vec::new();
    let mut body = Vec::new();
    let mut head = false;
    let mut last: Option<u64> = None;
    let mut opened = false;
    let mut buf = vec![0; 64 << 10];
    loop {
        if opened
            && (stop.load(Ordering::Relaxed) || stream.events >= target.load(Ordering::Relaxed))
        {
            return stream;
        }
        match socket.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => break,
        }
        if !head {
            let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            assert!(
                raw.starts_with(b"HTTP/1.1 200"),
                "the feed answered {:?}",
                &raw[..12]
            );
            raw.drain(..end + 4);
            head = true;
        }
        dechunk(&mut raw, &mut body);
        while let Some(end) = body.windows(2).position(|w| w == b"\n\n") {
            let message = std::str::from_utf8(&body[..end]).unwrap();
            let id = field(message, "id").and_then(|id| id.rsplit_once('-')?.1.parse().ok());
            if field(message, "event").is_some() {
                stream.events += 1;
                if let (Some(id), Some(last)) = (id, last) {
                    stream.in_order &= id == last + 1;
                }
                if let Some(seen) = &seen
                    && let Some(plant) = field(message, "data").and_then(plant_id)
                {
                    seen.lock().unwrap().insert(plant, Instant::now());
                }
            }
            if let Some(id) = id {
                last = Some(id);
            }
            if !opened && id.is_some() {
                opened = true;
                ready.wait();
            }
            body.drain(..end + 2);
        }
    }
    if !opened {
        ready.wait();
    }
    stream
}

/// Moves the complete chunks of `raw` into `body`.
fn dechunk(raw: &mut Vec<u8>, body: &mut Vec<u8>) {
    while let Some(line) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&raw[..line])
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .expect("chunk size");
        if raw.len() < line + 2 + size + 2 {
            return;
        }
        body.extend_from_slice(&raw[line + 2..line + 2 + size]);
        raw.drain(..line + 2 + size + 2);
    }
}

fn field<'a>(message: &'a str, name: &str) -> Option<&'a str> {
    message
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
}

fn plant_id(data: &str) -> Option<i64> {
    let rest = data.strip_prefix("{\"id\":")?;
    let end = rest.find(|c: char| c != '-' && !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}

/// Where this run's ids start: runs on one server never share an id.
fn run_ids() -> i64 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    (secs % 1_000_000) as i64 * 10_000_000_000
}

/// Creates plants at `rate / WRITERS` a second for `seconds`, recording
/// when each answer came.
fn write(
    addr: &str,
    token: &str,
    writer: u64,
    rate: f64,
    seconds: f64,
    answered: &Mutex<HashMap<i64, Instant>>,
    made: &AtomicU64,
) {
    let mut socket = TcpStream::connect(addr).expect("connect");
    socket.set_nodelay(true).unwrap();
    let interval = Duration::from_secs_f64(WRITERS as f64 / rate);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let mut reply = Vec::new();
    let mut buf = [0; 4096];
    let mut n: u64 = 0;
    let base = run_ids();
    loop {
        let due = start + interval * u32::try_from(n).unwrap_or(u32::MAX);
        if due >= end {
            return;
        }
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
        let id = base + (writer * 1_000_000_000 + n) as i64;
        let body = format!("{{\"id\":{id},\"name\":\"plant {id}\"}}");
        write!(
            socket,
            "POST /plants HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        reply.clear();
        // Every answer here has a Content-Length and a short body.
        loop {
            let got = socket.read(&mut buf).expect("answer");
            assert!(got > 0, "the server closed a writer");
            reply.extend_from_slice(&buf[..got]);
            if let Some(end) = reply.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = std::str::from_utf8(&reply[..end])
                    .unwrap()
                    .to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if reply.len() >= end + 4 + length {
                    assert!(head.starts_with("http/1.1 200"), "create answered {head}");
                    break;
                }
            }
        }
        answered.lock().unwrap().insert(id, Instant::now());
        made.fetch_add(1, Ordering::Relaxed);
        n += 1;
    }
}
