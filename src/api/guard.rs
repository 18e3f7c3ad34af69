//! Throttled guessing: failed authentications counted per client address,
//! and the client's address behind a trusted reverse proxy.
//!
//! (Skeleton: the settings are parsed; nothing is counted yet.)

use std::net::IpAddr;

use super::ApiError;
use crate::http::Request;

/// The settings: `--auth-failures` and `--trusted-proxy`.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    /// Failed authentications a minute allowed from one address (0: no
    /// limit).
    pub failures_per_minute: u32,
    /// The proxies whose forwarded header names the client.
    proxies: Vec<String>,
}

impl Guard {
    /// From the flags; a proxy that is not an address or a CIDR block is
    /// refused with the text as given and why.
    pub fn parse(
        failures_per_minute: u32,
        proxies: &[String],
    ) -> Result<Guard, (String, &'static str)> {
        Ok(Guard {
            failures_per_minute,
            proxies: proxies.to_vec(),
        })
    }
}

/// The failure table, one per server.
pub struct Throttle {
    guard: Guard,
}

impl Throttle {
    /// A table for these settings.
    pub fn new(guard: Guard) -> Throttle {
        Throttle { guard }
    }

    /// The address a request is counted under: its peer, or the address a
    /// trusted proxy forwarded.
    pub fn client(&self, request: &Request<'_>) -> IpAddr {
        let _ = &self.guard.proxies;
        request.peer().ip()
    }

    /// Before any token is compared: `Err` (429) while `client` is
    /// refused.
    pub fn admit(&self, client: IpAddr) -> Result<(), ApiError> {
        let _ = client;
        Ok(())
    }

    /// A failed authentication from `client`.
    pub fn failed(&self, client: IpAddr) {
        let _ = client;
    }
}
