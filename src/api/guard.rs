//! Throttled guessing: failed authentications counted per client address,
//! which is refused (429, `Retry-After`) past `--auth-failures` a minute
//! before any token is compared, so that a guesser cannot tell a hit from
//! a miss while refused; the client's address behind a trusted reverse
//! proxy; and the refusals at the gate, counted by reason for `/metrics`.
//!
//! Files (in `guard/`): `table.rs` (the failure table: its bounds, the
//! leaky counts, the eviction, the /48 and global limits), `forwarded.rs`
//! (the `--trusted-proxy` blocks and the client a trusted proxy's header
//! names). A request that needs no token is never counted or refused.
//! Without a limit (`--auth-failures 0`) there is no table: nothing is
//! counted, the refusals by reason still are.

mod forwarded;
mod table;
#[cfg(test)]
mod tests;

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use super::ApiError;
use crate::http::Request;
use crate::metrics::{Exposition, Kind};
use forwarded::Block;
use table::Table;

/// Why a request was refused at the gate, for `/metrics`
/// (`plantstore_auth_refusals_total{reason=...}`), rendered in this
/// order.
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

impl Refused {
    /// Every reason, in the order they are rendered.
    const ALL: [Refused; 6] = [
        Refused::Missing,
        Refused::Invalid,
        Refused::Ticket,
        Refused::Throttled,
        Refused::Scope,
        Refused::ReadOnly,
    ];

    /// The `reason` label (a match, not a table of strings: each string
    /// in a table costs the binary a relocation).
    fn label(self) -> &'static str {
        match self {
            Refused::Missing => "missing",
            Refused::Invalid => "invalid",
            Refused::Ticket => "ticket",
            Refused::Throttled => "throttled",
            Refused::Scope => "scope",
            Refused::ReadOnly => "read_only",
        }
    }
}

/// Every address together may fail this many times what one may (the
/// global limit).
const GLOBAL: u64 = 50;

/// Why a `--trusted-proxy` is refused.
const NOT_A_BLOCK: &str = "is not an address or a CIDR block \
    (ADDR, or ADDR/BITS with BITS at most 32 for IPv4, 128 for IPv6)";

/// The settings: `--auth-failures` and `--trusted-proxy`.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    /// Failed authentications a minute allowed from one address (0: no
    /// limit).
    pub failures_per_minute: u32,
    /// The proxies whose forwarded header names the client.
    proxies: Vec<Block>,
}

impl Guard {
    /// From the flags; a proxy that is not an address or a CIDR block is
    /// refused with the text as given and why.
    pub fn parse(
        failures_per_minute: u32,
        proxies: &[String],
    ) -> Result<Guard, (String, &'static str)> {
        let mut blocks = Vec::with_capacity(proxies.len());
        for proxy in proxies {
            let block = Block::parse(proxy).ok_or_else(|| (proxy.clone(), NOT_A_BLOCK))?;
            blocks.push(block);
        }
        Ok(Guard {
            failures_per_minute,
            proxies: blocks,
        })
    }
}

/// The failure table and the refusal counters, one per server.
pub struct Throttle {
    proxies: Vec<Block>,
    /// `None`: no limit (`--auth-failures 0`).
    table: Option<Table>,
    /// The table's clock starts here.
    started: Instant,
    /// By `Refused`.
    refusals: [AtomicU64; Refused::ALL.len()],
}

impl Throttle {
    /// A table for these settings.
    pub fn new(guard: Guard) -> Throttle {
        let per_minute = guard.failures_per_minute;
        Throttle {
            proxies: guard.proxies,
            table: (per_minute > 0).then(|| Table::new(per_minute, u64::from(per_minute) * GLOBAL)),
            started: Instant::now(),
            refusals: Default::default(),
        }
    }

    /// Milliseconds since start, the table's clock.
    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// The address a request is counted under: its peer, or the address a
    /// trusted proxy forwarded.
    pub fn client(&self, request: &Request<'_>) -> IpAddr {
        let peer = request.peer().ip();
        if self.proxies.is_empty() {
            return peer;
        }
        self.forwarded(request, peer)
    }

    /// `client` with proxies to trust: kept out of the path of a server
    /// without them.
    #[inline(never)]
    fn forwarded(&self, request: &Request<'_>, peer: IpAddr) -> IpAddr {
        if !forwarded::trusted(&self.proxies, peer) {
            return peer;
        }
        forwarded::client(
            request.headers("x-forwarded-for"),
            request.headers("forwarded"),
            &self.proxies,
        )
        .unwrap_or(peer)
    }

    /// Before any token is compared: `Err` (429) while `client` is
    /// refused.
    pub fn admit(&self, client: IpAddr) -> Result<(), ApiError> {
        match &self.table {
            Some(table) if !table.is_empty() => match table.retry_after(client, self.now()) {
                Some(retry_after) => Err(ApiError::Throttled { retry_after }),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// A failed authentication from `client`.
    pub fn failed(&self, client: IpAddr) {
        if let Some(table) = &self.table {
            table.failed(client, self.now());
        }
    }

    /// Counts a refusal at the gate, by reason.
    pub fn refused(&self, reason: Refused) {
        self.refusals[reason as usize].fetch_add(1, Relaxed);
    }

    /// The refusals counted, by reason, and the table's size.
    pub fn render(&self, text: &mut Exposition) {
        const REFUSALS: &str = "plantstore_auth_refusals_total";
        text.family(
            REFUSALS,
            Kind::Counter,
            "Requests refused at the gate, by reason.",
        );
        for reason in Refused::ALL {
            let count = self.refusals[reason as usize].load(Relaxed);
            text.sample(REFUSALS, &[("reason", reason.label())], count);
        }
        let entries = self.table.as_ref().map_or(0, |table| {
            table.quiet(self.now());
            table.entries()
        });
        text.single(
            "plantstore_auth_throttle_entries",
            Kind::Gauge,
            "Addresses (IPv6: /64s and /48s) whose failed authentications are counted.",
            entries,
        );
    }
}
