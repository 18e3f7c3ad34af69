//! Throttled guessing: failed authentications counted per client address,
//! which is refused (429, `Retry-After`) past `--auth-failures` a minute
//! before any token is compared, so that a guesser cannot tell a hit from
//! a miss while refused; the client's address behind a trusted reverse
//! proxy; and the refusals at the gate, counted by reason for `/metrics`.
//!
//! Past the server-wide limit (a flood of wrong tokens from many
//! addresses) every address is refused, except a request that carries a
//! token already proven right from its address within the hour: the
//! flood cannot lock out the clients that hold a right token, while a new
//! client, a ticket, or any other token from that address still meets the
//! 429. A connection notes the proof it last recorded (`Request::note`):
//! one is recorded again only when its client or token differs from the
//! last on that connection (a proxy's keep-alive connection carries many
//! clients), when ten minutes have passed, or while failures are being
//! counted. So with no failures a request's path gains a keyed hash and no
//! shared write.
//!
//! Files (in `guard/`): `table.rs` (the failure table: its bounds, the
//! leaky counts, the eviction, the /48 and global limits), `proofs.rs`
//! (the tokens proven right, by address), `forwarded.rs` (the
//! `--trusted-proxy` blocks and the client a trusted proxy's header
//! names). A request that needs no token is never counted or refused.
//! Without a limit (`--auth-failures 0`) there is no table: nothing is
//! counted, the refusals by reason still are.

mod forwarded;
mod proofs;
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
use proofs::Proofs;
use table::{Limit, Table, keys};

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
    /// The server-wide limit refused it (429).
    ThrottledGlobal,
    /// A read token (or its ticket) asked for a change (403).
    Scope,
    /// A change with `--read-only` (403).
    ReadOnly,
}

impl Refused {
    /// Every reason, in the order they are rendered.
    const ALL: [Refused; 7] = [
        Refused::Missing,
        Refused::Invalid,
        Refused::Ticket,
        Refused::Throttled,
        Refused::ThrottledGlobal,
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
            Refused::ThrottledGlobal => "throttled_global",
            Refused::Scope => "scope",
            Refused::ReadOnly => "read_only",
        }
    }
}

/// Every address together may fail this many times what one may (the
/// global limit).
const GLOBAL: u64 = 50;

/// A connection records its client's proof again after this long (ms),
/// so that a proof in use never lapses.
const REFRESH_MS: u64 = 10 * 60 * 1000;

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
    /// The tokens proven right (none kept without a limit).
    proofs: Proofs,
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
            proofs: Proofs::default(),
            started: Instant::now(),
            refusals: Default::default(),
        }
    }

    /// Milliseconds since start, the table's clock.
    fn now(&self) -> u64 {
        self.millis(Instant::now())
    }

    /// `at` on the table's clock.
    fn millis(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.started).as_millis() as u64
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

    /// The key `request`'s client is known by (its address, IPv6 by
    /// /64), for sharing what clients share fairly.
    pub fn key(&self, request: &Request<'_>) -> u128 {
        keys(self.client(request)).0
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

    /// Before any token is compared, for a request that arrived `at` (its
    /// head's time, which the engine has read already: no clock is read
    /// here): `Err` (429) while `client` is refused, by its own limit, or
    /// by the server-wide one unless the bearer `token` it presents was
    /// proven right from its address.
    pub fn admit(&self, client: IpAddr, token: Option<&[u8]>, at: Instant) -> Result<(), ApiError> {
        let Some(table) = self.table.as_ref().filter(|table| !table.is_empty()) else {
            return Ok(());
        };
        let now = self.millis(at);
        match table.retry_after(client, now) {
            None => Ok(()),
            Some((retry_after, Limit::Address)) => {
                self.refused(Refused::Throttled);
                Err(ApiError::Throttled {
                    retry_after,
                    everyone: false,
                })
            }
            Some(_) if token.is_some_and(|t| self.proofs.proven(self.tag(client, t), now)) => {
                Ok(())
            }
            Some((retry_after, Limit::Everyone)) => {
                self.refused(Refused::ThrottledGlobal);
                Err(ApiError::Throttled {
                    retry_after,
                    everyone: true,
                })
            }
        }
    }

    /// The bearer `token` was right from `client` on a request that
    /// arrived `at`, on a connection whose note (`Request::note`) is
    /// `note`: the proof is recorded unless the note says this connection
    /// recorded the same one in the last [`REFRESH_MS`] (and no failures
    /// are being counted); the connection's note after it. Without a
    /// limit nothing is recorded.
    pub fn proven(&self, client: IpAddr, token: &[u8], note: u128, at: Instant) -> u128 {
        let Some(table) = &self.table else {
            return note;
        };
        let tag = self.tag(client, token);
        let now = self.millis(at);
        let (noted, since) = (note as u64, (note >> 64) as u64);
        if noted == tag && now.saturating_sub(since) < REFRESH_MS && table.is_empty() {
            return note;
        }
        self.proofs.prove(tag, now);
        u128::from(now) << 64 | u128::from(tag)
    }

    /// The proof of `token` from `client`.
    fn tag(&self, client: IpAddr, token: &[u8]) -> u64 {
        self.proofs.tag(keys(client).0, token)
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
