//! Integers are read exactly from their decimal text, by the built binary,
//! in bodies, paths and queries alike. Regression: values were read
//! through an f64, so `2.0000000000000001` was stored as id 2 and
//! `limit=0.99999999999999999` read as 1. On each store: the database's
//! statements must see exactly the ids the memory store sees.

use std::net::SocketAddr;

use serde_json::json;

use crate::process::binary::Running;
use crate::support::{Client, JSON, Kind, Reply, request};

const TOKEN: &str = "n0mb3rs";

fn send(addr: SocketAddr, method: &str, path: &str, body: &str) -> Reply {
    let auth = format!("Bearer {TOKEN}");
    let mut client = Client::connect(addr);
    let headers = [("Authorization", auth.as_str()), JSON];
    let headers = if body.is_empty() {
        &headers[..1]
    } else {
        &headers[..]
    };
    client.send(&request(method, path, headers, body));
    client.reply()
}

fn a_body_id_that_is_not_an_integer_is_400_and_nothing_is_stored(kind: Kind) {
    let server = Running::on(kind, &[], Some(TOKEN));
    for id in [
        "2.0000000000000001",
        "-9007199254740992.5",
        "1e-400",
        "0.99999999999999999",
    ] {
        let body = format!(r#"{{"id":{id},"name":"x"}}"#);
        send(server.addr, "POST", "/plants", &body).assert_error(400, r#""id""#);
    }
    let listed = send(server.addr, "GET", "/plants", "");
    assert_eq!(listed.json(), json!([]), "nothing stored");
}

fn integral_spellings_are_exact_over_the_whole_int64_range(kind: Kind) {
    let server = Running::on(kind, &[], Some(TOKEN));
    for (text, id) in [
        ("70e-1", 7),
        ("1.000000000000000000000000e2", 100),
        ("-0", 0),
        ("9007199254740993.0", (1 << 53) + 1),
        ("9223372036854775807.0", i64::MAX),
        ("-9223372036854775808e0", i64::MIN),
    ] {
        let body = format!(r#"{{"id":{text},"name":"{text}"}}"#);
        let reply = send(server.addr, "POST", "/plants", &body);
        assert_eq!(reply.status, 200, "{text}: {}", reply.text());
        let stored = send(server.addr, "GET", &format!("/plants/{id}"), "");
        assert_eq!(stored.json(), json!({"id": id, "name": text}), "{text}");
    }
    for text in ["9223372036854775808.0", "-9223372036854775809e0", "1e400"] {
        let body = format!(r#"{{"id":{text},"name":"x"}}"#);
        send(server.addr, "POST", "/plants", &body).assert_error(400, r#""id""#);
    }
}

fn a_query_value_that_is_not_an_integer_is_400(kind: Kind) {
    let server = Running::on(kind, &[], Some(TOKEN));
    for query in [
        "limit=0.99999999999999999",
        "limit=1e-400",
        "after=2.0000000000000001",
    ] {
        let name = query.split('=').next().unwrap();
        send(server.addr, "GET", &format!("/plants?{query}"), "").assert_error(400, name);
    }
    let reply = send(server.addr, "GET", "/plants?limit=10e-1&after=-0.0", "");
    assert_eq!(reply.status, 200, "{}", reply.text());
}

fn a_path_id_that_is_not_an_integer_is_400(kind: Kind) {
    let server = Running::on(kind, &[], Some(TOKEN));
    let reply = send(server.addr, "POST", "/plants", r#"{"id":2,"name":"two"}"#);
    assert_eq!(reply.status, 200);
    for method in ["GET", "DELETE"] {
        send(server.addr, method, "/plants/2.0000000000000001", "").assert_error(400, "plant id");
    }
    let reply = send(server.addr, "GET", "/plants/20e-1", "");
    assert_eq!(
        reply.json(),
        json!({"id": 2, "name": "two"}),
        "still stored"
    );
}

crate::on_each_store!(
    a_body_id_that_is_not_an_integer_is_400_and_nothing_is_stored,
    integral_spellings_are_exact_over_the_whole_int64_range,
    a_query_value_that_is_not_an_integer_is_400,
    a_path_id_that_is_not_an_integer_is_400,
);
