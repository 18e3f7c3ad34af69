//! `Date` on every answer (RFC 9110 §6.6.1): the API's, errors, a 304,
//! a streamed answer's head, the engine's own refusals and the 503 past
//! the connection cap, each the time it was sent. (HTTPS:
//! `process/https/connections.rs`.)

use std::time::{SystemTime, UNIX_EPOCH};

use crate::support::{AUTH, Client, Reply, TestServer, config, request};

/// The seconds since the epoch an IMF-fixdate names
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), checked field by field.
pub fn imf_fixdate(text: &str) -> Option<u64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (weekday, rest) = text.split_once(", ")?;
    let fields: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, "GMT"] = fields[..] else {
        return None;
    };
    let number = |s: &str, width: usize| {
        (s.len() == width && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<i64>().ok())
            .flatten()
    };
    let (day, year) = (number(day, 2)?, number(year, 4)?);
    let month = MONTHS.iter().position(|m| *m == month)? as i64 + 1;
    let hms: Vec<i64> = time
        .split(':')
        .map(|t| number(t, 2))
        .collect::<Option<_>>()?;
    let [h, m, s] = hms[..] else { return None };
    // Days from the civil date (Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    (weekdays[days.rem_euclid(7) as usize] == weekday).then_some(())?;
    u64::try_from(days * 86_400 + h * 3600 + m * 60 + s).ok()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `reply` carries one `Date`, the time it was answered: between
/// `before` and now (the formatted second may trail the clock by one).
pub fn assert_dated(reply: &Reply, before: u64, what: &str) {
    let dates: Vec<&str> = reply
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("date"))
        .map(|(_, value)| value.as_str())
        .collect();
    let [date] = dates[..] else {
        panic!("{what}: one Date header, not {dates:?}: {reply:?}");
    };
    let at = imf_fixdate(date).unwrap_or_else(|| panic!("{what}: {date:?} is not IMF-fixdate"));
    assert!(
        at + 1 >= before && at <= now(),
        "{what}: {date} is not the time it was sent"
    );
}

#[test]
fn the_test_reads_imf_fixdate() {
    assert_eq!(
        imf_fixdate("Sun, 06 Nov 1994 08:49:37 GMT"),
        Some(784_111_777)
    );
    assert_eq!(
        imf_fixdate("Tue, 29 Feb 2000 00:00:00 GMT"),
        Some(951_782_400)
    );
    assert_eq!(imf_fixdate("Mon, 06 Nov 1994 08:49:37 GMT"), None);
    assert_eq!(imf_fixdate("Sunday, 06-Nov-94 08:49:37 GMT"), None);
}

#[test]
fn every_answer_carries_the_date_it_was_sent() {
    let before = now();
    let server = TestServer::start();
    let created = server.create(r#"{"id":1,"name":"a"}"#);
    assert_dated(&created, before, "a created plant");
    assert_dated(&server.send("GET", "/plants/9", &[AUTH], ""), before, "404");
    assert_dated(&server.send("GET", "/plants", &[], ""), before, "401");
    // A 304, and a streamed body's head (the export).
    let page = server.send("GET", "/", &[], "");
    let etag = page.header("etag").unwrap().to_string();
    let unchanged = server.send("GET", "/", &[("If-None-Match", &etag)], "");
    assert_eq!(unchanged.status, 304);
    assert_dated(&unchanged, before, "304");
    let export = server.send("GET", "/export", &[AUTH], "");
    assert_eq!((export.status, export.chunks > 0), (200, true));
    assert_dated(&export, before, "a streamed answer");
    // The engine's own answers: a refused head, and the 503 of a
    // connection past the cap.
    let mut client = server.client();
    client.send(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
    let refused = client.reply();
    assert_eq!(refused.status, 400);
    assert_dated(&refused, before, "a refused head");

    let mut config = config();
    config.limits.max_connections = 1;
    let capped = TestServer::with(config);
    let mut held = capped.client();
    held.send(&request("GET", "/healthz", &[], ""));
    assert_eq!(held.reply().status, 200);
    let mut past = Client::connect(capped.addr);
    past.send(&request("GET", "/healthz", &[], ""));
    let reply = past.reply();
    assert_eq!(reply.status, 503);
    assert_dated(&reply, before, "the 503 past the cap");
}
