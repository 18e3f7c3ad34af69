//! Throttled guessing: failed authentications counted per client address,
//! and the client's address behind a trusted reverse proxy.
//!
//! (Skeleton: the settings are parsed; nothing is counted yet.)

use std::net::IpAddr;

use super::ApiError;
use crate::http::Request;
use crate::metrics::Exposition;

/// Why a request was refused at the gate, for `/metrics`
/// (`plantstore_auth_refusals_total{reason=...}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No credentials (401).
    Missing,
    /// A token that is not accepted (401).
    Invalid,
    /// A feed ticket that is not valid: altered, expired, or its token
    /// gone (401).
    Ticket,
    /// The client's address is throttled (429).
    Throttled,
    /// A read token (or its ticket) asked for a change (403).
    Scope,
    /// A change with `--read-only` (403).
    ReadOnly,
}

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

    /// Counts a refusal at the gate, by reason.
    pub fn refused(&self, reason: Refused) {
        let _ = reason;
    }

    /// The refusals counted, by reason, and the table's size.
    pub fn render(&self, text: &mut Exposition) {
        let _ = text;
    }
}
