//! Behind a reverse proxy: the `--trusted-proxy` blocks, and the client
//! address a trusted proxy forwarded.
//!
//! Only a peer inside a trusted block is asked; an untrusted peer's
//! headers are ignored, whatever they say. `X-Forwarded-For` is read when
//! the peer sent one (the header nginx, HAProxy, Caddy, Traefik and Envoy
//! write), else `Forwarded`'s `for=`. Either is a list that each proxy
//! appends to, in one line or several: the client is its rightmost
//! address that is not itself a trusted proxy (an address left of it was
//! written by someone the proxies do not vouch for). When every address is
//! a trusted proxy, the leftmost. A list with an element that cannot be
//! read where the walk needs it (`unknown`, an obfuscated node, not an
//! address) names no client: the peer is counted instead. The lines are
//! split into elements as bytes, each read on its own: bytes that are not
//! UTF-8 (a client may write anything left of what the proxies add) make
//! only their own element unreadable.

use std::net::{IpAddr, SocketAddr};

/// An address block: the network and its prefix, in the IPv6 space
/// (IPv4 as IPv4-mapped IPv6, `a.b.c.d/n` as `::ffff:a.b.c.d/96+n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Block {
    net: u128,
    bits: u32,
}

/// `ip` in the IPv6 space (IPv4 as IPv4-mapped).
fn wide(ip: IpAddr) -> u128 {
    match ip.to_canonical() {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The mask of a prefix of `bits` (0 to 128).
fn mask(bits: u32) -> u128 {
    u128::MAX.checked_shl(128 - bits).unwrap_or(0)
}

impl Block {
    /// `ADDR` (a block of one) or `ADDR/BITS`; bits past the prefix are
    /// dropped (`10.1.2.3/8` is `10.0.0.0/8`).
    pub(super) fn parse(text: &str) -> Option<Block> {
        let (addr, bits) = match text.split_once('/') {
            Some((addr, bits)) => (addr, Some(bits)),
            None => (text, None),
        };
        let ip: IpAddr = addr.parse().ok()?;
        let max = if ip.to_canonical().is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            Some(bits) => bits.parse().ok().filter(|&b| b <= max)?,
            None => max,
        } + (128 - max);
        Some(Block {
            net: wide(ip) & mask(bits),
            bits,
        })
    }

    /// Whether `ip` is inside.
    pub(super) fn contains(&self, ip: IpAddr) -> bool {
        wide(ip) & mask(self.bits) == self.net
    }
}

/// Whether `ip` is inside one of `blocks`.
pub(super) fn trusted(blocks: &[Block], ip: IpAddr) -> bool {
    blocks.iter().any(|b| b.contains(ip))
}

/// A node of either header: an address, with or without a port
/// (`192.0.2.1:80`, `[2001:db8::1]:80`), brackets (`[2001:db8::1]`) or
/// quotes (`Forwarded`'s `"[2001:db8::1]:80"`).
fn node(text: &str) -> Option<IpAddr> {
    let text = text.trim_matches('"');
    let bare = text.strip_prefix('[').and_then(|t| t.strip_suffix(']'));
    let ip = bare.unwrap_or(text).parse().ok();
    ip.or_else(|| text.parse::<SocketAddr>().ok().map(|a| a.ip()))
}

/// A `Forwarded` element's `for=` node (the parameter name in any case).
fn forwarded_for(element: &str) -> Option<IpAddr> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        name.eq_ignore_ascii_case("for").then(|| node(value))?
    })
}

/// The client a list header's `lines` name (see the module header), each
/// element read by `read`: `None` when there are no lines; `Some(None)`
/// when they name no client.
fn walk<'a>(
    lines: impl Iterator<Item = &'a [u8]>,
    read: fn(&str) -> Option<IpAddr>,
    proxies: &[Block],
) -> Option<Option<IpAddr>> {
    let mut seen = false;
    // The rightmost element so far that is not a trusted proxy (`None`
    // inside: one that cannot be read), and the leftmost address.
    let mut client: Option<Option<IpAddr>> = None;
    let mut leftmost = None;
    for line in lines {
        seen = true;
        for element in line.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
            if element.is_empty() {
                continue;
            }
            match std::str::from_utf8(element).ok().and_then(read) {
                Some(ip) if trusted(proxies, ip) => {
                    leftmost.get_or_insert(ip);
                }
                read => client = Some(read),
            }
        }
    }
    seen.then(|| client.unwrap_or(leftmost))
}

/// The client a trusted proxy named, from the values of its
/// `X-Forwarded-For` and `Forwarded` headers, behind the `proxies`;
/// `None`: count the peer.
pub(super) fn client<'a>(
    x_forwarded_for: impl Iterator<Item = &'a [u8]>,
    forwarded: impl Iterator<Item = &'a [u8]>,
    proxies: &[Block],
) -> Option<IpAddr> {
    walk(x_forwarded_for, node, proxies)
        .or_else(|| walk(forwarded, forwarded_for, proxies))
        .flatten()
}
