//! A worker: each attempt of its URL's events POSTed through the outbound
//! client (signed when a key is set), any 2xx a delivery, anything else
//! retried after a backoff that doubles (1, 2, 4 and 8 s by default) until
//! the attempts run out.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use log::{info, warn};

use super::Counters;
use super::queue::Endpoint;
use super::sign::{Secret, sign};
use super::target::{Target, WebhookConfig};
use crate::lock::read;
use crate::outbound::{self, Bounds, Outgoing};

/// A worker: delivers its endpoint's events until shut down.
pub(super) fn deliver(
    endpoint: &Endpoint,
    config: &WebhookConfig,
    counters: &Counters,
    secret: &Secret,
) {
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
            endpoint.again(pending);
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
        // The body is never read.
        body: 0,
    };
    let request = Outgoing {
        method: "POST",
        fields: headers,
        body,
    };
    outbound::status(target.url(), &request, config.tls.as_ref(), &bounds)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_shown_as_its_debug_shows_it() {
        for ms in [
            0, 1, 10, 160, 999, 1000, 1001, 1280, 1500, 2000, 16_000, 61_010,
        ] {
            let wait = Duration::from_millis(ms);
            assert_eq!(shown(wait), format!("{wait:?}"), "{ms} ms");
        }
    }
}
