//! Where a server bound to every address (`0.0.0.0` or `[::]`) can be
//! reached, for the start-up log: "listening on http://0.0.0.0:8080"
//! names an address no browser can open; and the host's name and
//! addresses that `--tls-auto`'s certificate names.
//!
//! The host's addresses come from the kernel's own tables, read as text
//! (no `getifaddrs`, which would need unsafe code): IPv4 from
//! `/proc/self/net/fib_trie` (each `/32 host LOCAL` entry), IPv6 from
//! `/proc/self/net/if_inet6` (link-local ones left out: a URL for them
//! needs the interface). Through `/proc/self`: the unit's `ProcSubset=pid`
//! hides `/proc/net` but not a process's own view of it. A socket bound to
//! `[::]` also takes IPv4 (Linux's default, `bindv6only` 0), so both
//! families are listed for it. Anything unreadable lists nothing more; the
//! log then says only the port.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The host's name (`/proc/sys/kernel/hostname`, else `/etc/hostname`),
/// if it has one. The fallback is for the packaged unit: its
/// `ProcSubset=pid` hides `/proc/sys`, and without it the certificate of
/// `--tls-auto` would leave out the host's names. `/etc/hostname` is what
/// the kernel's name is set from at boot, so the two agree but for a name
/// changed since without editing the file.
pub fn host_name() -> Option<String> {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|path| host_name_in(&std::fs::read_to_string(path).ok()?))
}

/// The host name a file such as `/etc/hostname` gives: its first line,
/// trimmed, unless empty or the kernel's `(none)`.
fn host_name_in(text: &str) -> Option<String> {
    let name = text.lines().next()?.trim();
    (!name.is_empty() && name != "(none)").then(|| name.to_string())
}

/// The host's addresses, IPv4 and IPv6, loopback first; not IPv6
/// temporary addresses (they change within hours, and no client dials
/// them).
pub fn addresses() -> Vec<IpAddr> {
    let text = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let table = text("/proc/self/net/if_inet6");
    let temporary = ipv6_temporary(&table);
    let v6 = ipv6_local(&table)
        .into_iter()
        .filter(|ip| !temporary.contains(ip));
    let v4 = ipv4_local(&text("/proc/self/net/fib_trie"));
    in_order(
        v4.into_iter()
            .map(IpAddr::V4)
            .chain(v6.map(IpAddr::V6))
            .collect(),
    )
}

/// The addresses of `if_inet6` flagged temporary (`IFA_F_TEMPORARY`,
/// 0x01, in the fifth field), apart from `ipv6_local`, which the start-up
/// line of every build uses.
fn ipv6_temporary(table: &str) -> Vec<Ipv6Addr> {
    let temporary = |line: &str| {
        let flags = line.split_whitespace().nth(4)?;
        let low = flags.get(flags.len().checked_sub(2)?..)?;
        u8::from_str_radix(low, 16).ok().filter(|f| f & 0x01 != 0)
    };
    table
        .lines()
        .filter(|line| temporary(line).is_some())
        .flat_map(ipv6_local)
        .collect()
}

/// The URLs (with `scheme`, `http` or `https`) a server listening on
/// `addr` (unspecified) can be reached at, loopback first.
pub fn urls(scheme: &str, addr: SocketAddr) -> Vec<String> {
    let text = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let mut found: Vec<IpAddr> = ipv4_local(&text("/proc/self/net/fib_trie"))
        .into_iter()
        .map(IpAddr::V4)
        .collect();
    if addr.is_ipv6() {
        found.extend(
            ipv6_local(&text("/proc/self/net/if_inet6"))
                .into_iter()
                .map(IpAddr::V6),
        );
    }
    in_order(found)
        .into_iter()
        .map(|ip| format!("{scheme}://{}", SocketAddr::new(ip, addr.port())))
        .collect()
}

/// `found` once each, loopback first, then IPv4 before IPv6, each in
/// address order. Sorted by insertion: a host has a few addresses, and
/// std's sort for them costs about 4 KiB of binary.
fn in_order(found: Vec<IpAddr>) -> Vec<IpAddr> {
    let order = |ip: &IpAddr| (!ip.is_loopback(), ip.is_ipv6(), *ip);
    let mut ips: Vec<IpAddr> = Vec::with_capacity(found.len());
    for ip in found {
        if let Err(at) = ips.binary_search_by_key(&order(&ip), order) {
            ips.insert(at, ip);
        }
    }
    ips
}

/// The addresses of `fib_trie` (under `/proc/self/net`) marked
/// `/32 host LOCAL` (the same address may appear more than once).
fn ipv4_local(trie: &str) -> Vec<Ipv4Addr> {
    let mut found = Vec::new();
    let mut last: Option<Ipv4Addr> = None;
    for line in trie.lines() {
        let line = line.trim();
        if let Some(ip) = line.strip_prefix("|-- ") {
            last = dotted(ip.trim());
        } else if line.starts_with("/32 host LOCAL") {
            found.extend(last.take());
        }
    }
    found
}

/// `a.b.c.d`, read by hand: std's address parser costs kilobytes of
/// binary for what the kernel writes one way only.
fn dotted(text: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = text.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *octet = u8::try_from(part.bytes().fold(0u16, |n, b| n * 10 + u16::from(b - b'0'))).ok()?;
    }
    parts.next().is_none().then_some(Ipv4Addr::from(octets))
}

/// The addresses of `if_inet6` (under `/proc/self/net`) that are not link-local.
fn ipv6_local(table: &str) -> Vec<Ipv6Addr> {
    table
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let hex = fields.next()?.as_bytes();
            let scope = fields.nth(2)?;
            if hex.len() != 32 || scope == "20" {
                // Scope 0x20 is link-local.
                return None;
            }
            let mut octets = [0u8; 16];
            for (octet, pair) in octets.iter_mut().zip(hex.chunks(2)) {
                let digit = |b: u8| (b as char).to_digit(16);
                *octet = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()?;
            }
            Some(Ipv6Addr::from(octets))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRIE: &str = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n\
        \x20    +-- 127.0.0.0/8 2 0 2\n           |-- 127.0.0.0\n              /8 host LOCAL\n\
        \x20          |-- 127.0.0.1\n              /32 host LOCAL\n        |-- 127.255.255.255\n\
        \x20          /32 link BROADCAST\n           |-- 192.0.2.2\n              /32 host LOCAL\n\
        Local:\n           |-- 127.0.0.1\n              /32 host LOCAL\n";

    #[test]
    fn local_ipv4_addresses_are_the_host_entries() {
        let want: Vec<Ipv4Addr> = ["127.0.0.1", "192.0.2.2", "127.0.0.1"]
            .iter()
            .map(|ip| ip.parse().unwrap())
            .collect();
        assert_eq!(ipv4_local(TRIE), want);
        for bad in [
            "1.2.3",
            "1.2.3.4.5",
            "256.1.1.1",
            "1..2.3",
            "a.b.c.d",
            "1.2.3.4 ",
        ] {
            assert_eq!(dotted(bad), None, "{bad}");
        }
        assert_eq!(dotted("10.0.255.1"), Some(Ipv4Addr::new(10, 0, 255, 1)));
        assert!(ipv4_local("garbage\n/32 host LOCAL\n|-- x\n").is_empty());
    }

    #[test]
    fn link_local_ipv6_addresses_are_left_out() {
        let table = "fd000000000000000000000000000002 04 40 00 82     eth0\n\
                     fe8000000000000000fc00fffe000001 04 40 20 80     eth0\n\
                     00000000000000000000000000000001 01 80 10 80       lo\n\
                     short 01 80 10 80 lo\n";
        let want: Vec<Ipv6Addr> = ["fd00::2", "::1"]
            .iter()
            .map(|ip| ip.parse().unwrap())
            .collect();
        assert_eq!(ipv6_local(table), want);
    }

    #[test]
    fn temporary_ipv6_addresses_are_told_apart() {
        let table = "fd000000000000000000000000000002 04 40 00 80     eth0\n\
                     fd000000000000000000000000000003 04 40 00 01     eth0\n\
                     fd000000000000000000000000000004 04 40 00 201    eth0\n\
                     short\n";
        let want: Vec<Ipv6Addr> = ["fd00::3", "fd00::4"]
            .iter()
            .map(|ip| ip.parse().unwrap())
            .collect();
        assert_eq!(ipv6_temporary(table), want);
        let all = addresses();
        assert_eq!(all.first(), Some(&IpAddr::V4(Ipv4Addr::LOCALHOST)));
    }

    #[test]
    fn a_host_name_is_the_first_line_trimmed_and_not_none() {
        assert_eq!(host_name_in("board\n").as_deref(), Some("board"));
        assert_eq!(host_name_in("  pi-4 \nsecond\n").as_deref(), Some("pi-4"));
        for none in ["", "\n", "   \n", "(none)\n", "\nboard\n"] {
            assert_eq!(host_name_in(none), None, "{none:?}");
        }
    }

    #[test]
    fn addresses_come_once_each_loopback_first_then_ipv4() {
        let ips =
            |list: &[&str]| -> Vec<IpAddr> { list.iter().map(|ip| ip.parse().unwrap()).collect() };
        let found = ips(&[
            "fd00::2",
            "192.0.2.9",
            "127.0.0.1",
            "10.0.0.1",
            "::1",
            "192.0.2.9",
            "127.0.0.1",
        ]);
        assert_eq!(
            in_order(found),
            ips(&["127.0.0.1", "::1", "10.0.0.1", "192.0.2.9", "fd00::2"])
        );
    }

    #[test]
    fn urls_put_loopback_first_and_keep_the_port() {
        let urls = urls("http", "0.0.0.0:8080".parse().unwrap());
        // Every Linux host has 127.0.0.1.
        assert_eq!(
            urls.first().map(String::as_str),
            Some("http://127.0.0.1:8080")
        );
        assert!(
            urls.iter()
                .all(|u| u.ends_with(":8080") && !u.contains("0.0.0.0"))
        );
    }
}
