//! The subscribers and how deliveries to them are made: each `--webhook`
//! URL checked once, at start, and the attempts' timeout, retries, queue
//! and TLS.

use std::time::Duration;

use crate::outbound::Url;
use crate::transport::{self, ClientTls};

/// A subscriber URL: `http://host[:port][/path]`, or `https://` (the HTTPS
/// build only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    at: Url,
}

impl Target {
    /// The URL taken apart.
    pub(super) fn url(&self) -> &Url {
        &self.at
    }

    /// Whether deliveries go over TLS (`https://`).
    pub fn is_https(&self) -> bool {
        self.at.https
    }

    /// Parses an `http://` (or `https://`) URL; the error says what is
    /// wrong.
    pub fn parse(url: &str) -> Result<Target, String> {
        Ok(Target {
            url: url.to_string(),
            at: Url::parse(url, transport::WITH_TLS)?,
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
}
