//! The failure table, the proxy blocks and the forwarded client, on
//! their own (the table with a clock the tests set).

use std::net::IpAddr;

use super::forwarded::{self, Block};
use super::table::{BYTES, ENTRIES, Limit, Table, keys};
use super::*;

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// The seconds of a refusal, whichever limit made it.
fn secs(refused: Option<(u64, Limit)>) -> Option<u64> {
    refused.map(|(secs, _)| secs)
}

/// A table of 20 failures a minute per address, 1,000 globally.
fn table() -> Table {
    Table::new(20, 1000)
}

#[test]
fn ipv4_is_counted_by_address_and_ipv6_by_64_and_48() {
    assert_eq!(keys(ip("192.0.2.1")), keys(ip("::ffff:192.0.2.1")));
    assert_ne!(keys(ip("192.0.2.1")).0, keys(ip("192.0.2.2")).0);
    let (a, wide_a) = keys(ip("2001:db8:1:2::1"));
    let (b, wide_b) = keys(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"));
    let (c, wide_c) = keys(ip("2001:db8:1:3::1"));
    let (d, wide_d) = keys(ip("2001:db8:2:2::1"));
    assert_eq!((a, wide_a), (b, wide_b), "one /64");
    assert!(a != c && wide_a == wide_c, "two /64s of one /48");
    assert!(wide_a != wide_d && a != d, "another /48");
    // No /64, /48 or IPv4 key is another kind's.
    assert!(wide_a.is_some_and(|w| w != a) && keys(ip("0.0.0.1")).1.is_none());
    assert_ne!(keys(ip("::")).0, keys(ip("0.0.0.0")).0);
}

#[test]
fn an_address_is_refused_past_its_limit_until_one_more_failure_fits() {
    let table = table();
    let (guesser, other) = (ip("192.0.2.1"), ip("192.0.2.2"));
    for n in 0..20 {
        assert_eq!(
            secs(table.retry_after(guesser, 0)),
            None,
            "failure {n} is allowed"
        );
        table.failed(guesser, 0);
    }
    // One failure leaks each 3 s: the 21st fits after 3 s.
    assert_eq!(table.retry_after(guesser, 0), Some((3, Limit::Address)));
    assert_eq!(
        secs(table.retry_after(guesser, 1)),
        Some(3),
        "whole seconds, rounded up"
    );
    assert_eq!(secs(table.retry_after(guesser, 2001)), Some(1));
    assert_eq!(secs(table.retry_after(guesser, 2999)), Some(1));
    assert_eq!(secs(table.retry_after(guesser, 3000)), None);
    assert_eq!(
        secs(table.retry_after(other, 0)),
        None,
        "another address is not"
    );
    table.failed(guesser, 3000);
    assert_eq!(
        secs(table.retry_after(guesser, 3000)),
        Some(3),
        "then one each 3 s"
    );
    assert_eq!(secs(table.retry_after(guesser, 6000)), None);
}

#[test]
fn a_count_leaks_and_the_table_empties_itself() {
    let table = table();
    for _ in 0..19 {
        table.failed(ip("192.0.2.1"), 0);
    }
    table.failed(ip("2001:db8::1"), 0);
    assert_eq!(table.entries(), 3, "an address, a /64 and its /48");
    assert_eq!(
        secs(table.retry_after(ip("192.0.2.1"), 0)),
        None,
        "19 of 20"
    );
    table.failed(ip("192.0.2.1"), 30_000);
    // 19 - 10 leaked + 1 = 10 at 30 s: refused again only after 10 more.
    for _ in 0..10 {
        assert_eq!(secs(table.retry_after(ip("192.0.2.1"), 30_000)), None);
        table.failed(ip("192.0.2.1"), 30_000);
    }
    assert!(secs(table.retry_after(ip("192.0.2.1"), 30_000)).is_some());
    assert_eq!(table.entries(), 3);
    // A minute after the last failure every count is gone and the first
    // look frees the slots.
    assert_eq!(secs(table.retry_after(ip("192.0.2.9"), 90_000)), None);
    assert!(table.is_empty(), "{} entries", table.entries());
}

#[test]
fn more_than_four_64s_of_one_48_gain_nothing() {
    let table = table();
    for subnet in 0..4 {
        let guesser = ip(&format!("2001:db8:1:{subnet}::1"));
        for _ in 0..20 {
            assert_eq!(secs(table.retry_after(guesser, 0)), None);
            table.failed(guesser, 0);
        }
        assert!(secs(table.retry_after(guesser, 0)).is_some());
    }
    assert!(
        secs(table.retry_after(ip("2001:db8:1:99::1"), 0)).is_some(),
        "the /48 is full"
    );
    assert_eq!(
        secs(table.retry_after(ip("2001:db8:2::1"), 0)),
        None,
        "another /48"
    );
}

#[test]
fn past_the_global_limit_every_address_is_refused_until_it_leaks() {
    let table = table();
    for n in 0..1000u32 {
        let from = IpAddr::from((0x0a00_0000 + n).to_be_bytes());
        assert_eq!(secs(table.retry_after(from, 0)), None, "failure {n}");
        table.failed(from, 0);
    }
    // 1,000 a minute: one leaks each 60 ms.
    assert_eq!(
        table.retry_after(ip("192.0.2.1"), 0),
        Some((1, Limit::Everyone))
    );
    assert_eq!(secs(table.retry_after(ip("192.0.2.1"), 59)), Some(1));
    assert_eq!(secs(table.retry_after(ip("192.0.2.1"), 60)), None);
}

#[test]
fn failures_from_100000_addresses_stay_in_the_table_and_evict_no_flooder() {
    // The global limit out of the way: the eviction alone.
    let table = Table::new(20, u64::MAX / 1_000_000);
    let (flooder, halfway) = (ip("192.0.2.1"), ip("2001:db8::1"));
    for _ in 0..20 {
        table.failed(flooder, 0);
    }
    for _ in 0..10 {
        table.failed(halfway, 0);
    }
    let bytes = table.bytes();
    assert_eq!(bytes, BYTES, "the bytes the module header states");
    for n in 0..100_000u32 {
        let from = IpAddr::from((0x0a00_0000 + n).to_be_bytes());
        table.failed(from, 0);
        assert!(table.entries() <= ENTRIES);
    }
    assert_eq!(table.bytes(), bytes, "the table did not grow");
    assert_eq!(table.entries(), ENTRIES, "every slot in use");
    assert!(
        secs(table.retry_after(flooder, 0)).is_some(),
        "still refused"
    );
    // Half its limit: at most 10 more fit, whatever took its slots.
    let tries = (0..20)
        .take_while(|_| secs(table.retry_after(halfway, 0)).is_none())
        .inspect(|_| table.failed(halfway, 0))
        .count();
    assert!(tries <= 10, "{tries} more tries");
}

#[test]
fn keys_that_share_a_bucket_share_its_slots_and_gain_nothing_by_evicting() {
    let table = Table::new(20, u64::MAX / 1_000_000);
    // 16 addresses of one bucket, where 8 fit.
    let first = ip("10.0.0.0");
    let mut crowd = vec![first];
    let mut n = 1u32;
    while crowd.len() < 16 {
        let next = IpAddr::from((0x0a00_0000 + n).to_be_bytes());
        if table.bucket_of(next) == table.bucket_of(first) {
            crowd.push(next);
        }
        n += 1;
    }
    // Each guesses whenever it is let through, for a minute.
    let mut guesses = 0;
    for now in (0..60_000).step_by(100) {
        for &from in &crowd {
            if secs(table.retry_after(from, now)).is_none() {
                table.failed(from, now);
                guesses += 1;
            }
        }
    }
    // 8 slots of 20 at once, then 8 x 20 leaked in the minute: were an
    // evicted count forgotten, each eviction would hand out 20 more.
    assert!(guesses <= 8 * 20 * 2, "{guesses} guesses");
    assert!(guesses >= 8 * 20, "{guesses} guesses");
}

#[test]
fn the_same_flood_with_the_global_limit_refuses_everyone() {
    let table = table();
    for n in 0..100_000u32 {
        let from = IpAddr::from((0x0a00_0000 + n).to_be_bytes());
        if secs(table.retry_after(from, 0)).is_none() {
            table.failed(from, 0);
        }
    }
    assert!(table.entries() <= 1000);
    assert!(secs(table.retry_after(ip("192.0.2.1"), 0)).is_some());
}

#[test]
fn a_table_with_no_failures_allocates_nothing() {
    let table = table();
    assert_eq!(secs(table.retry_after(ip("192.0.2.1"), 0)), None);
    assert_eq!((table.bytes(), table.entries()), (0, 0));
}

#[test]
fn proxy_blocks_are_addresses_or_cidr() {
    for (text, inside, outside) in [
        ("10.0.0.1", "::ffff:10.0.0.1", "10.0.0.2"),
        ("10.1.2.3/8", "10.255.0.1", "11.0.0.1"),
        ("0.0.0.0/0", "203.0.113.1", "2001:db8::1"),
        ("2001:db8::/32", "2001:db8:ffff::1", "2001:db9::1"),
        ("::1", "::1", "127.0.0.1"),
    ] {
        let block = Block::parse(text).unwrap();
        assert!(block.contains(ip(inside)), "{inside} in {text}");
        assert!(!block.contains(ip(outside)), "{outside} not in {text}");
    }
    for bad in [
        "",
        "proxy",
        "10.0.0.1/33",
        "10.0.0/8",
        "::1/129",
        "10.0.0.1/",
        "10.0.0.1/-8",
        " 10.0.0.1",
    ] {
        assert!(Block::parse(bad).is_none(), "{bad:?}");
    }
    let refused = Guard::parse(20, &["10.0.0.1".into(), "nope/8".into()]).unwrap_err();
    assert_eq!(refused, ("nope/8".into(), NOT_A_BLOCK));
}

/// The client forwarded by lines of `X-Forwarded-For` and `Forwarded`,
/// behind the trusted proxies 10.0.0.0/8.
fn forwarded(xff: &[&str], fwd: &[&str]) -> Option<IpAddr> {
    let xff: Vec<&[u8]> = xff.iter().map(|l| l.as_bytes()).collect();
    let fwd: Vec<&[u8]> = fwd.iter().map(|l| l.as_bytes()).collect();
    forwarded_bytes(&xff, &fwd)
}

fn forwarded_bytes(xff: &[&[u8]], fwd: &[&[u8]]) -> Option<IpAddr> {
    let proxies = [Block::parse("10.0.0.0/8").unwrap()];
    forwarded::client(xff.iter().copied(), fwd.iter().copied(), &proxies)
}

#[test]
fn bytes_a_client_wrote_that_are_not_utf_8_spoil_only_their_own_element() {
    let client = Some(ip("198.51.100.7"));
    // What nginx makes of a client's own `X-Forwarded-For: \xff`: the
    // proxy's entry still counts, in the same line or the next.
    assert_eq!(forwarded_bytes(&[b"\xff, 198.51.100.7"], &[]), client);
    assert_eq!(
        forwarded_bytes(&[b"\xfe\xff", b"198.51.100.7"], &[]),
        client
    );
    assert_eq!(
        forwarded_bytes(&[b"1.2.3.4\x80", b"198.51.100.7, 10.0.0.2"], &[]),
        client
    );
    assert_eq!(
        forwarded_bytes(&[], &[b"for=\xc3\x28, for=198.51.100.7;proto=http"]),
        client
    );
    // Where the walk needs it, such an element names no client, like any
    // unreadable one: the peer is counted.
    assert_eq!(forwarded_bytes(&[b"198.51.100.7, \xff"], &[]), None);
}

#[test]
fn the_client_is_the_rightmost_address_no_trusted_proxy_wrote() {
    let client = Some(ip("198.51.100.7"));
    assert_eq!(forwarded(&["198.51.100.7"], &[]), client);
    // What the client wrote is left of what the proxies added.
    assert_eq!(forwarded(&["1.2.3.4, 198.51.100.7"], &[]), client);
    assert_eq!(
        forwarded(&["garbage", "198.51.100.7, 10.0.0.2"], &[]),
        client
    );
    assert_eq!(
        forwarded(&["1.2.3.4", " 198.51.100.7:5678 ,,10.9.9.9"], &[]),
        client
    );
    assert_eq!(
        forwarded(&["10.0.0.3, 10.0.0.2"], &[]),
        Some(ip("10.0.0.3"))
    );
    assert_eq!(
        forwarded(&["[2001:db8::7]:443"], &[]),
        Some(ip("2001:db8::7"))
    );
    // Forwarded, when there is no X-Forwarded-For.
    assert_eq!(
        forwarded(&[], &["for=1.2.3.4, For=198.51.100.7;proto=http"]),
        client
    );
    assert_eq!(
        forwarded(&[], &["for=\"[2001:db8::7]:4711\";by=10.0.0.1"]),
        Some(ip("2001:db8::7"))
    );
    assert_eq!(forwarded(&["198.51.100.7"], &["for=1.2.3.4"]), client);
    // Nothing to read where the walk needs it: the peer is counted.
    for (xff, fwd) in [
        (&["198.51.100.7, unknown"][..], &[][..]),
        (&["198.51.100.7, 10.0.0.2, _hidden"], &[]),
        (&[""], &[]),
        (&[], &["for=unknown"]),
        (&[], &["proto=http"]),
        (&[], &["for=198.51.100.7, for=_hidden"]),
        (&[], &[]),
    ] {
        assert_eq!(forwarded(xff, fwd), None, "{xff:?} {fwd:?}");
    }
}

#[test]
fn every_reason_is_rendered_in_its_order_zero_included() {
    let throttle = Throttle::new(Guard::default());
    throttle.refused(Refused::Ticket);
    throttle.refused(Refused::Ticket);
    throttle.refused(Refused::ReadOnly);
    let mut text = Exposition::new();
    throttle.render(&mut text);
    let text = text.into_text();
    let samples: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("plantstore_auth_"))
        .collect();
    assert_eq!(
        samples,
        [
            "plantstore_auth_refusals_total{reason=\"missing\"} 0",
            "plantstore_auth_refusals_total{reason=\"invalid\"} 0",
            "plantstore_auth_refusals_total{reason=\"ticket\"} 2",
            "plantstore_auth_refusals_total{reason=\"throttled\"} 0",
            "plantstore_auth_refusals_total{reason=\"throttled_global\"} 0",
            "plantstore_auth_refusals_total{reason=\"scope\"} 0",
            "plantstore_auth_refusals_total{reason=\"read_only\"} 1",
            "plantstore_auth_throttle_entries 0",
        ]
    );
}

#[test]
fn without_a_limit_nothing_is_counted_or_refused() {
    let throttle = Throttle::new(Guard::default());
    for _ in 0..100 {
        throttle.failed(ip("192.0.2.1"));
    }
    assert!(
        throttle
            .admit(ip("192.0.2.1"), None, Instant::now())
            .is_ok()
    );
    let limited = Throttle::new(Guard::parse(2, &[]).unwrap());
    limited.failed(ip("192.0.2.1"));
    limited.failed(ip("192.0.2.1"));
    let refused = limited.admit(ip("192.0.2.1"), None, Instant::now());
    assert!(
        matches!(
            refused,
            Err(ApiError::Throttled {
                retry_after: 30,
                everyone: false
            })
        ),
        "{refused:?}"
    );
}
