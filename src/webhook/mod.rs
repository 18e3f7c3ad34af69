//! The `newPlant` webhook: after each successful create, the NewPlant is
//! POSTed to every `--webhook` URL from background threads, never delaying
//! the client's response.
//!
//! Each URL has its own worker thread and its own bounded queue
//! (`--webhook-queue` events, counting those waiting for a retry), so a slow
//! or dead subscriber never holds up another. A full queue drops the newest
//! event (logged, counted as `dropped`). An attempt has 5 s for connect,
//! send and the response head; any 2xx is success; otherwise it is retried
//! after 1, 2, 4 and 8 s (5 attempts), then counted as `failed`. Events may
//! arrive out of order once retries happen.
//!
//! With `--webhook-secret-file`, deliveries are signed the Standard Webhooks
//! way: `webhook-id` (one per event: the same for every URL and every retry),
//! `webhook-timestamp` (Unix seconds of the attempt, so a retry is still
//! fresh) and `webhook-signature: v1,<base64 of HMAC-SHA256(key,
//! "<id>.<timestamp>.<body>")>`. A secret written `whsec_<base64>` (the
//! Standard Webhooks form) means the decoded bytes; any other file content
//! (trimmed) is the key as it is.
//!
//! On shutdown, queued deliveries get a grace period (`WEBHOOK_GRACE`, 2 s,
//! given by the instance once the server and the store have stopped); what
//! is left after it is logged and counted as dropped. Announcing is the
//! API's call (it announces a create once acknowledged); this module knows
//! neither the API nor the store.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::lock::{lock, read, wait, wait_timeout, write};
use crate::metrics::{Exposition, Kind};
use crate::outbound::{self, Bounds, Outgoing, Url};
use crate::transport::{self, ClientTls};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use log::{info, warn};
use sha2::Sha256;

/// A subscriber URL: `http://host[:port][/path]`, or `https://` (the HTTPS
/// build only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    at: Url,
}

impl Target {
    /// Whether deliveries go over TLS (`https://`).
    pub fn is_https(&self) -> bool {
        self.at.https
    }

    /// Parses an `http://` (or `https://`) URL; the error says what is
    /// wrong.
    pub fn parse(url: &str) -> Result<Target, String> {
        if url.starts_with("https://") && !transport::WITH_TLS {
            return Err("is https, which this plain build cannot send".into());
        }
        Ok(Target {
            url: url.to_string(),
            at: Url::parse(url)?,
        })
    }
}

/// How deliveries are made.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Where to deliver.
    pub targets: Vec<Target>,
    /// HMAC key; `None` sends unsigned deliveries.
    pub secret: Option<Vec<u8>>,
    /// Events queued per URL, retries included.
    pub queue: usize,
    /// Time allowed per attempt.
    pub timeout: Duration,
    /// Wait before the first retry; doubled for each further one.
    pub backoff: Duration,
    /// Attempts per event and URL.
    pub attempts: u32,
    /// How https targets are verified (`--webhook-ca` and the system's CA
    /// certificates); `None` when no target is https (always, in a build
    /// without TLS).
    pub tls: Option<ClientTls>,
}

impl WebhookConfig {
    /// The defaults: 5 s per attempt, 5 attempts, retries after 1, 2, 4, 8 s.
    pub fn new(targets: Vec<Target>, secret: Option<Vec<u8>>, queue: usize) -> WebhookConfig {
        WebhookConfig {
            targets,
            secret,
            queue,
            timeout: Duration::from_secs(5),
            backoff: Duration::from_secs(1),
            attempts: 5,
            tls: None,
        }
    }
}

/// Reads a `--webhook-secret-file`: `whsec_<base64>` or raw text.
pub fn read_secret(text: &str) -> Result<Vec<u8>, String> {
    let text = text.trim();
    let key = match text.strip_prefix("whsec_") {
        Some(encoded) => BASE64
            .decode(encoded)
            .map_err(|e| format!("whsec_ secret is not base64: {e}"))?,
        None => text.as_bytes().to_vec(),
    };
    if key.is_empty() {
        return Err("the secret is empty".into());
    }
    Ok(key)
}

/// Delivery outcomes, for `/metrics`.
#[derive(Debug, Default)]
pub struct Counters {
    /// Events a subscriber accepted (2xx).
    pub delivered: AtomicU64,
    /// Events given up after every attempt failed.
    pub failed: AtomicU64,
    /// Attempts that failed and were scheduled again.
    pub retried: AtomicU64,
    /// Events never attempted to the end: queue full, or shutdown.
    pub dropped: AtomicU64,
}

/// One event as announced: its id and JSON body (the same in every
/// attempt).
struct Announcement {
    id: String,
    body: Vec<u8>,
}

/// An attempt to deliver an announcement, due at `due`.
struct Attempt {
    event: Arc<Announcement>,
    attempt: u32,
    due: Instant,
}

struct Endpoint {
    target: Target,
    queue: Mutex<Outbox>,
    changed: Condvar,
}

#[derive(Default)]
struct Outbox {
    pending: VecDeque<Attempt>,
    /// Set by `shutdown`: deliver until then, drop what is left.
    closing: Option<Instant>,
}

/// The signing key shared by the workers; `None` sends unsigned deliveries.
type Secret = RwLock<Option<Arc<[u8]>>>;

/// The webhook sender: queues and worker threads, one per URL.
pub struct Webhooks {
    config: Arc<WebhookConfig>,
    /// The signing key now (`config.secret` at start; a reload replaces
    /// it, and the next attempt of every delivery signs with the new one).
    secret: Arc<Secret>,
    endpoints: Vec<Arc<Endpoint>>,
    counters: Arc<Counters>,
    id_prefix: String,
    next_id: AtomicU64,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhooks")
            .field("targets", &self.config.targets)
            .finish_non_exhaustive()
    }
}

impl Webhooks {
    /// Starts one worker per target (none without targets).
    pub fn start(config: WebhookConfig) -> std::io::Result<Webhooks> {
        let secret: Arc<Secret> = Arc::new(RwLock::new(config.secret.as_deref().map(Arc::from)));
        let config = Arc::new(config);
        let counters = Arc::new(Counters::default());
        let mut endpoints = Vec::new();
        let mut workers = Vec::new();
        for target in &config.targets {
            let endpoint = Arc::new(Endpoint {
                target: target.clone(),
                queue: Mutex::default(),
                changed: Condvar::new(),
            });
            let (e, c, k, s) = (
                Arc::clone(&endpoint),
                Arc::clone(&config),
                Arc::clone(&counters),
                Arc::clone(&secret),
            );
            workers.push(
                thread::Builder::new()
                    .name("webhook".into())
                    .stack_size(256 * 1024)
                    .spawn(move || deliver(&e, &c, &k, &s))?,
            );
            endpoints.push(endpoint);
        }
        Ok(Webhooks {
            config,
            secret,
            endpoints,
            counters,
            id_prefix: id_prefix(),
            next_id: AtomicU64::new(1),
            workers: Mutex::new(workers),
        })
    }

    /// Signs every attempt from now on with `key` (a reloaded
    /// `--webhook-secret-file`).
    pub fn set_secret(&self, key: Vec<u8>) {
        *write(&self.secret) = Some(Arc::from(key));
    }

    /// Whether any URL is configured (else there is nothing to build).
    pub fn enabled(&self) -> bool {
        !self.endpoints.is_empty()
    }

    /// The delivery counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Writes the sender's lines of `/metrics`.
    pub fn render(&self, out: &mut Exposition) {
        const EVENTS: &str = "plantstore_webhook_events_total";
        out.family(
            EVENTS,
            Kind::Counter,
            "Webhook events by outcome: delivered, failed (after every attempt), retried \
             (attempts scheduled again), dropped (queue full or shutdown).",
        );
        let counters = &self.counters;
        for (result, count) in [
            ("delivered", &counters.delivered),
            ("failed", &counters.failed),
            ("retried", &counters.retried),
            ("dropped", &counters.dropped),
        ] {
            out.sample(EVENTS, &[("result", result)], count.load(Ordering::Relaxed));
        }
    }

    /// Queues one delivery of `body` per URL; never blocks on a subscriber.
    pub fn publish(&self, body: Vec<u8>) {
        if self.endpoints.is_empty() {
            return;
        }
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let event = Arc::new(Announcement {
            id: format!("msg_{}{n:016x}", self.id_prefix),
            body,
        });
        for endpoint in &self.endpoints {
            let mut queue = lock(&endpoint.queue);
            if queue.closing.is_some() || queue.pending.len() >= self.config.queue {
                let why = if queue.closing.is_some() {
                    "shutting down"
                } else {
                    "queue full"
                };
                drop(queue);
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                warn!(
                    "webhook event {} for {} dropped ({why})",
                    event.id, endpoint.target.url
                );
                continue;
            }
            queue.pending.push_back(Attempt {
                event: Arc::clone(&event),
                attempt: 0,
                due: Instant::now(),
            });
            drop(queue);
            endpoint.changed.notify_one();
        }
    }

    /// Stops taking events, lets the workers deliver for at most `grace`,
    /// then drops (logs and counts) what is left. An attempt still in
    /// flight at the deadline is cut: its worker is left behind (and ends
    /// with the process), counted as dropped.
    pub fn shutdown(&self, grace: Duration) {
        let until = Instant::now() + grace;
        for endpoint in &self.endpoints {
            lock(&endpoint.queue).closing = Some(until);
            endpoint.changed.notify_one();
        }
        let workers = std::mem::take(&mut *lock(&self.workers));
        while Instant::now() < until && workers.iter().any(|w| !w.is_finished()) {
            thread::sleep(Duration::from_millis(5));
        }
        for (worker, endpoint) in workers.into_iter().zip(&self.endpoints) {
            if worker.is_finished() {
                let _ = worker.join();
            } else {
                // The attempt in flight, and whatever waits behind it.
                let left = 1 + std::mem::take(&mut lock(&endpoint.queue).pending).len();
                self.counters
                    .dropped
                    .fetch_add(left as u64, Ordering::Relaxed);
                warn!(
                    "shutting down: dropped {left} undelivered webhook events for {} \
                     (one attempt was still in flight)",
                    endpoint.target.url
                );
            }
        }
    }
}

impl Endpoint {
    /// The next delivery due, waiting for it; `None` once closed and done.
    fn next(&self, counters: &Counters) -> Option<(Attempt, Option<Instant>)> {
        let mut queue = lock(&self.queue);
        loop {
            let now = Instant::now();
            if let Some(until) = queue.closing
                && (now >= until || queue.pending.is_empty())
            {
                let left = queue.pending.len();
                if left > 0 {
                    counters.dropped.fetch_add(left as u64, Ordering::Relaxed);
                    warn!(
                        "shutting down: dropped {left} undelivered webhook events for {}",
                        self.target.url
                    );
                }
                return None;
            }
            let soonest = (0..queue.pending.len()).min_by_key(|&i| queue.pending[i].due);
            let wait_until = match soonest {
                Some(i) if queue.pending[i].due <= now => {
                    let pending = queue.pending.remove(i)?;
                    return Some((pending, queue.closing));
                }
                Some(i) => Some(queue.pending[i].due),
                None => None,
            };
            let wait_until = match (wait_until, queue.closing) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            queue = match wait_until {
                Some(at) => {
                    let left = at.saturating_duration_since(now);
                    wait_timeout(&self.changed, queue, left).0
                }
                None => wait(&self.changed, queue),
            };
        }
    }
}

/// A worker: delivers its endpoint's events until shut down.
fn deliver(endpoint: &Endpoint, config: &WebhookConfig, counters: &Counters, secret: &Secret) {
    let agent = concat!("plantstore/", env!("CARGO_PKG_VERSION"));
    while let Some((mut pending, closing)) = endpoint.next(counters) {
        let event = &pending.event;
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            .to_string();
        let key = read(secret).clone();
        let signature = key.map(|key| sign(&key, &event.id, &timestamp, &event.body));
        let mut headers = vec![("Content-Type", "application/json"), ("User-Agent", agent)];
        if let Some(signature) = &signature {
            headers.extend([
                ("webhook-id", event.id.as_str()),
                ("webhook-timestamp", timestamp.as_str()),
                ("webhook-signature", signature.as_str()),
            ]);
        }
        let timeout = match closing {
            Some(until) => config
                .timeout
                .min(until.saturating_duration_since(Instant::now())),
            None => config.timeout,
        };
        let outcome = post(&endpoint.target, config, &headers, &event.body, timeout);
        let url = &endpoint.target.url;
        let why = match outcome {
            Ok(status) if (200..300).contains(&status) => {
                counters.delivered.fetch_add(1, Ordering::Relaxed);
                info!("webhook {} delivered to {url} ({status})", event.id);
                continue;
            }
            Ok(status) => format!("answered {status}"),
            Err(e) => e.to_string(),
        };
        pending.attempt += 1;
        if pending.attempt < config.attempts {
            let backoff = config.backoff * 2u32.saturating_pow(pending.attempt - 1);
            warn!(
                "webhook {} to {url} failed ({why}); attempt {} of {} in {}",
                event.id,
                pending.attempt + 1,
                config.attempts,
                shown(backoff)
            );
            counters.retried.fetch_add(1, Ordering::Relaxed);
            pending.due = Instant::now() + backoff;
            lock(&endpoint.queue).pending.push_back(pending);
        } else {
            warn!(
                "webhook {} to {url} failed ({why}) after {} attempts; giving up",
                event.id, config.attempts
            );
            counters.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One attempt: `body` POSTed with `headers` to `target`, everything
/// (connect, a TLS handshake, write, read) within `timeout`; the answer's
/// status (its body is never read), or why there is none.
fn post(
    target: &Target,
    config: &WebhookConfig,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> std::io::Result<u16> {
    let bounds = Bounds {
        connect: timeout,
        io: timeout,
        exchange: timeout,
        head: MAX_HEAD,
        body: usize::MAX,
    };
    let request = Outgoing {
        method: "POST",
        fields: headers,
        body,
    };
    Ok(outbound::open(&target.at, &request, config.tls.as_ref(), &bounds)?.status())
}

/// Largest answer head read.
const MAX_HEAD: usize = 16 * 1024;

/// `wait` as its `Debug` writes a whole number of milliseconds ("1s",
/// "10ms", "1.28s"), without that formatter's general decimals (1 KB of
/// the binary); finer parts are dropped.
fn shown(wait: Duration) -> String {
    let ms = wait.as_millis() as u64;
    let (secs, rest) = (ms / 1000, ms % 1000);
    match (secs, rest) {
        (0, 0) => "0ns".into(),
        (0, _) => format!("{rest}ms"),
        (_, 0) => format!("{secs}s"),
        _ => format!("{secs}.{}s", format!("{rest:03}").trim_end_matches('0')),
    }
}
/// `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`.
pub fn sign(key: &[u8], id: &str, timestamp: &str, body: &[u8]) -> String {
    // HMAC takes a key of any length; this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
}

/// A prefix that makes event ids unique across restarts: random from the
/// OS, or the clock if the OS source is unavailable.
fn id_prefix() -> String {
    crate::os::random_hex(8).unwrap_or_else(|_| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{:016x}", nanos as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_urls_are_refused_only_by_the_plain_build() {
        let https = Target::parse("https://hooks.example/new");
        if transport::WITH_TLS {
            assert!(https.unwrap().is_https());
            assert!(!Target::parse("http://a/").unwrap().is_https());
        } else {
            assert!(https.unwrap_err().contains("plain build"));
        }
        assert!(Target::parse("http://host/a b").is_err());
    }

    #[test]
    fn a_wait_is_shown_as_its_debug_shows_it() {
        for ms in [
            0, 1, 10, 160, 999, 1000, 1001, 1280, 1500, 2000, 16_000, 61_010,
        ] {
            let wait = Duration::from_millis(ms);
            assert_eq!(shown(wait), format!("{wait:?}"), "{ms} ms");
        }
    }

    #[test]
    fn secrets_are_whsec_base64_or_raw() {
        assert_eq!(read_secret("whsec_aGVsbG8=\n").unwrap(), b"hello");
        assert_eq!(read_secret("  plain secret \n").unwrap(), b"plain secret");
        assert!(read_secret("whsec_!!!").is_err());
        assert!(read_secret(" \n").is_err());
    }

    #[test]
    fn signature_matches_the_standard_webhooks_example() {
        // The example in the Standard Webhooks specification.
        let key = read_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }
}
