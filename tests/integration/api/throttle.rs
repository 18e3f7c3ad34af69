//! Throttled guessing through the server: a guesser's address is refused
//! (429, `Retry-After`) while a correct client from another is served;
//! behind a trusted proxy guessers are told apart by the address it
//! forwarded, and an untrusted peer's forwarded header is ignored; the
//! table stays bounded under failures from thousands of addresses.
//!
//! Clients are told apart by source address: each connection is bound to
//! its own `127.x.y.z` (all loopback on Linux) before it connects. The
//! throttle sits before any store, so these run on the memory store only.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;

use plantstore::api::Guard;
use socket2::{Domain, Socket, Type};

use crate::support::{AUTH, Client, Reply, TestServer, config, request};

const WRONG: (&str, &str) = ("Authorization", "Bearer test-tokem");

/// A server that allows `per_minute` failures a minute per address,
/// trusting the `proxies`.
fn server(per_minute: u32, proxies: &[&str]) -> TestServer {
    let proxies: Vec<String> = proxies.iter().map(|p| p.to_string()).collect();
    let mut config = config();
    config.guard = Guard::parse(per_minute, &proxies).unwrap();
    TestServer::with(config)
}

/// A connection to `server` from the loopback address `source`.
fn client_from(source: &str, server: SocketAddr) -> Client {
    let source: IpAddr = source.parse().unwrap();
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(source, 0).into()).unwrap();
    socket.connect(&server.into()).unwrap();
    let stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    Client::from_stream(stream)
}

/// `GET /plants` on `client` with `headers`.
fn get(client: &mut Client, headers: &[(&str, &str)]) -> Reply {
    client.send(&request("GET", "/plants", headers, ""));
    client.reply()
}

/// The whole seconds a 429 says to wait, checked to be 1 to `most`.
fn retry_after(reply: &Reply, most: u64) -> u64 {
    reply.assert_error(429, "too many failed authentications");
    let seconds: u64 = reply.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=most).contains(&seconds), "Retry-After {seconds}");
    seconds
}

/// A sample of `/metrics`, asked from `source`.
fn metric(server: &TestServer, source: &str, sample: &str) -> u64 {
    let text = get_metrics(server, source);
    let line = text.lines().find_map(|l| l.strip_prefix(sample));
    line.and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {sample} in {text}"))
}

fn get_metrics(server: &TestServer, source: &str) -> String {
    let mut client = client_from(source, server.addr);
    client.send(&request("GET", "/metrics", &[AUTH], ""));
    let reply = client.reply();
    assert_eq!(reply.status, 200);
    reply.text()
}

#[test]
fn a_guesser_is_refused_while_a_correct_client_elsewhere_is_served() {
    let server = server(20, &[]);
    let addr = server.addr;
    let correct = thread::spawn(move || {
        let mut client = client_from("127.0.0.3", addr);
        (0..300)
            .map(|_| get(&mut client, &[AUTH]).status)
            .collect::<Vec<u16>>()
    });
    let mut guesser = client_from("127.0.0.2", addr);
    for n in 0..20 {
        let reply = get(&mut guesser, &[WRONG]);
        assert_eq!(reply.status, 401, "guess {n}");
    }
    for _ in 0..100 {
        retry_after(&get(&mut guesser, &[WRONG]), 3);
    }
    // Refused before the token is compared: the right one gets the same.
    let seconds = retry_after(&get(&mut guesser, &[AUTH]), 3);
    let statuses = correct.join().unwrap();
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    assert_eq!(
        metric(
            &server,
            "127.0.0.3",
            "plantstore_auth_refusals_total{reason=\"invalid\"}"
        ),
        20
    );
    assert_eq!(
        metric(
            &server,
            "127.0.0.3",
            "plantstore_auth_refusals_total{reason=\"throttled\"}"
        ),
        101
    );
    assert_eq!(
        metric(&server, "127.0.0.3", "plantstore_auth_throttle_entries"),
        1
    );
    let answered = "plantstore_requests_total{route=\"/plants\",method=\"GET\",status=\"429\"}";
    assert_eq!(metric(&server, "127.0.0.3", answered), 101);
    let mut raw = client_from("127.0.0.2", addr).stream;
    raw.write_all(&request("GET", "/plants", &[AUTH], ""))
        .unwrap();
    let mut head = [0; 32];
    raw.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 429 Too Many Requests\r\n");
    // For a while only: once it has waited, it may try again.
    thread::sleep(Duration::from_secs(seconds));
    assert_eq!(get(&mut guesser, &[AUTH]).status, 200);
}

#[test]
fn behind_a_trusted_proxy_guessers_are_told_apart_by_the_forwarded_address() {
    let server = server(20, &["127.0.0.1"]);
    let mut proxy = client_from("127.0.0.1", server.addr);
    // The client wrote the left address; the proxy added the right one.
    let guess = [WRONG, ("X-Forwarded-For", "203.0.113.5, 198.51.100.7")];
    for _ in 0..20 {
        assert_eq!(get(&mut proxy, &guess).status, 401);
    }
    retry_after(&get(&mut proxy, &guess), 3);
    // The same client, whatever it writes left of its address, and named
    // in a Forwarded header instead.
    for forwarded in [
        ("X-Forwarded-For", "203.0.113.99, 198.51.100.7"),
        ("Forwarded", "for=203.0.113.99, for=198.51.100.7;proto=http"),
    ] {
        retry_after(&get(&mut proxy, &[AUTH, forwarded]), 3);
    }
    // Another client behind the same proxy, and the proxy itself.
    let other = ("X-Forwarded-For", "198.51.100.8");
    assert_eq!(get(&mut proxy, &[AUTH, other]).status, 200);
    assert_eq!(get(&mut proxy, &[AUTH]).status, 200);
}

#[test]
fn an_untrusted_peers_forwarded_header_is_ignored() {
    let server = server(20, &["127.0.0.1"]);
    let mut peer = client_from("127.0.0.2", server.addr);
    for n in 0..20 {
        let forwarded = format!("198.51.100.{n}");
        let reply = get(&mut peer, &[WRONG, ("X-Forwarded-For", &forwarded)]);
        assert_eq!(reply.status, 401);
    }
    // A fresh address in its header does not make it a fresh client.
    let fresh = ("X-Forwarded-For", "198.51.100.200");
    retry_after(&get(&mut peer, &[AUTH, fresh]), 3);
    let mut proxy = client_from("127.0.0.1", server.addr);
    assert_eq!(get(&mut proxy, &[AUTH, fresh]).status, 200);
}

#[test]
fn failures_from_thousands_of_addresses_keep_the_table_bounded() {
    // 200 a minute per address puts the global limit at 10,000: the
    // table alone.
    let server = server(200, &[]);
    let mut flooder = client_from("127.0.0.2", server.addr);
    for _ in 0..200 {
        assert_eq!(get(&mut flooder, &[WRONG]).status, 401);
    }
    retry_after(&get(&mut flooder, &[WRONG]), 1);
    // 5,000 addresses, more than the table's 4,096 entries, one failure
    // each.
    let started = std::time::Instant::now();
    for n in 0..5000u32 {
        let source = format!("127.1.{}.{}", n / 250, n % 250 + 1);
        let mut client = client_from(&source, server.addr);
        assert_eq!(get(&mut client, &[WRONG]).status, 401, "{source}");
    }
    // Slots whose one failure has leaked away are taken again: fewer
    // entries than addresses, and never more than the table holds.
    let entries = metric(&server, "127.0.0.3", "plantstore_auth_throttle_entries");
    assert!((1..=4096).contains(&entries), "{entries} entries");
    // The flooder was not pushed out: it gets back only what leaked
    // meanwhile (200 a minute), not a fresh 200.
    let leaked = started.elapsed().as_secs() * 200 / 60 + 4;
    let tries = (0..200)
        .take_while(|_| get(&mut flooder, &[WRONG]).status == 401)
        .count() as u64;
    assert!(
        tries <= leaked && leaked < 100,
        "{tries} tries, {leaked} leaked"
    );
    let mut correct = client_from("127.0.0.3", server.addr);
    assert_eq!(get(&mut correct, &[AUTH]).status, 200);
}

#[test]
fn refused_tickets_are_counted_but_do_not_throttle_their_address() {
    // Expired or foreign tickets are what a page left open meets: they
    // must not lock its address out, however many.
    let server = server(2, &[]);
    let mut page = client_from("127.0.0.9", server.addr);
    for _ in 0..6 {
        page.send(&request("GET", "/plants/changes?ticket=AAAA", &[], ""));
        let reply = page.reply();
        assert_eq!(reply.status, 401, "{}", reply.text());
    }
    assert_eq!(get(&mut page, &[AUTH]).status, 200, "not throttled");
    let sample = "plantstore_auth_refusals_total{reason=\"ticket\"}";
    assert_eq!(metric(&server, "127.0.0.9", sample), 6);
    // A wrong token from the same address is a guess, and counts.
    for _ in 0..2 {
        assert_eq!(get(&mut page, &[WRONG]).status, 401);
    }
    retry_after(&get(&mut page, &[AUTH]), 60);
}

/// Wrong tokens from fresh addresses (`127.2.x.y`, from `*next` on) until
/// the server-wide limit refuses one: the limit is full now.
fn fill_global_limit(server: &TestServer, next: &mut u32) {
    for _ in 0..1000 {
        *next += 1;
        let source = format!("127.2.{}.{}", *next / 250, *next % 250 + 1);
        let reply = get(&mut client_from(&source, server.addr), &[WRONG]);
        if reply.status == 429 {
            reply.assert_error(429, "server-wide");
            return;
        }
        assert_eq!(reply.status, 401, "{}", reply.text());
    }
    panic!("the server-wide limit never refused");
}

#[test]
fn a_flood_from_many_addresses_does_not_lock_out_a_token_proven_right() {
    // 2 a minute per address: 100 a minute from everyone.
    let server = server(2, &[]);
    let mut known = client_from("127.0.0.3", server.addr);
    assert_eq!(get(&mut known, &[AUTH]).status, 200);
    let mut guesser = client_from("127.0.0.5", server.addr);
    assert_eq!(get(&mut guesser, &[AUTH]).status, 200);
    for _ in 0..2 {
        assert_eq!(get(&mut guesser, &[WRONG]).status, 401);
    }
    let mut next = 0;
    fill_global_limit(&server, &mut next);
    // The right token, proven from this address: on the same connection
    // and on a new one.
    assert_eq!(get(&mut known, &[AUTH]).status, 200);
    fill_global_limit(&server, &mut next);
    let mut again = client_from("127.0.0.3", server.addr);
    assert_eq!(get(&mut again, &[AUTH]).status, 200);
    // Any other token from that address is no guess past the limit, and
    // a client new to the server meets the limit, right token or not.
    fill_global_limit(&server, &mut next);
    let refused = get(&mut again, &[WRONG]);
    refused.assert_error(429, "server-wide");
    fill_global_limit(&server, &mut next);
    let mut new = client_from("127.0.0.4", server.addr);
    get(&mut new, &[AUTH]).assert_error(429, "server-wide");
    // Its own limit still refuses a proven client that guessed: the 429
    // then says it is this address.
    assert_eq!(get(&mut guesser, &[AUTH]).status, 429);
    get(&mut guesser, &[AUTH]).assert_error(429, "from this address");
    let global = "plantstore_auth_refusals_total{reason=\"throttled_global\"}";
    assert!(metric(&server, "127.0.0.3", global) >= 6);
    let own = "plantstore_auth_refusals_total{reason=\"throttled\"}";
    assert_eq!(metric(&server, "127.0.0.3", own), 2);
}

#[test]
fn behind_a_proxy_each_client_on_its_keep_alive_connection_is_proven() {
    // One connection from the proxy carries two clients' requests, as
    // nginx's upstream keep-alive does: each client's token is proven.
    let server = server(2, &["127.0.0.1"]);
    let mut proxy = client_from("127.0.0.1", server.addr);
    for forwarded in ["198.51.100.7", "198.51.100.8"] {
        let reply = get(&mut proxy, &[AUTH, ("X-Forwarded-For", forwarded)]);
        assert_eq!(reply.status, 200);
    }
    let mut next = 0;
    fill_global_limit(&server, &mut next);
    for forwarded in ["198.51.100.7", "198.51.100.8"] {
        let reply = get(&mut proxy, &[AUTH, ("X-Forwarded-For", forwarded)]);
        assert_eq!(reply.status, 200, "{forwarded}: {}", reply.text());
    }
    // A client the proxy never carried before meets the limit.
    get(&mut proxy, &[AUTH, ("X-Forwarded-For", "198.51.100.9")]).assert_error(429, "server-wide");
}
