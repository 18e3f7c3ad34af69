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
//!
//! Files, one job each: this one the sender (its threads, publishing,
//! shutdown, its metrics); `target.rs` the URLs and how deliveries are
//! made; `event.rs` the payload (an event's id and body); `queue.rs` each
//! URL's bounded queue; `deliver.rs` the worker (attempts and retries,
//! through the outbound client, `outbound/`); `sign.rs` the key and the
//! signature.

mod deliver;
mod event;
mod queue;
mod sign;
mod target;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use log::warn;

use crate::lock::{lock, write};
use crate::metrics::{Exposition, Kind};
use event::{Announcement, id_prefix};
use queue::Endpoint;
use sign::Secret;

pub use sign::{read_secret, sign};
pub use target::{Target, WebhookConfig};

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
            let endpoint = Arc::new(Endpoint::new(target.clone()));
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
                    .spawn(move || deliver::deliver(&e, &c, &k, &s))?,
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
            if let Err(why) = endpoint.offer(&event, self.config.queue) {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                warn!(
                    "webhook event {} for {} dropped ({why})",
                    event.id, endpoint.target.url
                );
            }
        }
    }

    /// Stops taking events, lets the workers deliver for at most `grace`,
    /// then drops (logs and counts) what is left. An attempt still in
    /// flight at the deadline is cut: its worker is left behind (and ends
    /// with the process), counted as dropped.
    pub fn shutdown(&self, grace: Duration) {
        let until = Instant::now() + grace;
        for endpoint in &self.endpoints {
            endpoint.close(until);
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
                let left = 1 + endpoint.abandon();
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
