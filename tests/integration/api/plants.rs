//! POST /plants: success, every validation rule, and the status codes, on
//! each store. A full store (507) is the in-memory store's alone:
//! `--max-plants` and `--max-data` do not bound the database.

use plantstore::model::TextLimits;

use crate::support::{AUTH, JSON, Kind, TestServer, config};

fn create_answers_the_plant_without_id(kind: Kind) {
    let server = TestServer::on(kind);
    let reply = server.create(r#"{"id": 1, "name": "Fern", "tag": "green"}"#);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(
        reply.json(),
        serde_json::json!({"name": "Fern", "tag": "green"})
    );
}

fn absent_tag_is_omitted_not_null(kind: Kind) {
    let server = TestServer::on(kind);
    let reply = server.create(r#"{"id": 2, "name": "Moss"}"#);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), r#"{"name":"Moss"}"#);
}

fn valid_bodies_by_json_schema_meaning(kind: Kind) {
    let server = TestServer::on(kind);
    let cases = [
        (r#"{"id": 7.0, "name": "integral float"}"#, "integral float"),
        (r#"{"id": 8e0, "name": "exponent"}"#, "exponent"),
        (r#"{"id": -9223372036854775808, "name": "min"}"#, "min"),
        (r#"{"id": 9223372036854775807, "name": "max"}"#, "max"),
        (r#"{"id": 9, "name": "", "extra": {"a": [1, 2]}}"#, ""),
        (r#" {"name": "order", "id": 10} "#, "order"),
        (r#"{"id": 11, "name": "caf\u00e9 \ud83c\udf31"}"#, "café 🌱"),
    ];
    for (body, name) in cases {
        let reply = server.create(body);
        assert_eq!(reply.status, 200, "{body}: {}", reply.text());
        assert_eq!(reply.json()["name"], name, "{body}");
    }
}

fn every_invalid_body_is_400_naming_the_problem(kind: Kind) {
    let server = TestServer::on(kind);
    let cases = [
        ("", "not valid JSON"),
        ("{", "not valid JSON"),
        (r#"{"id": 1, "name": "a"} x"#, "not valid JSON"),
        ("[1, 2]", "JSON object"),
        (r#""plant""#, "JSON object"),
        ("null", "JSON object"),
        (r#"{"name": "a"}"#, r#""id""#),
        (r#"{"id": 1}"#, r#""name""#),
        (r#"{"id": "1", "name": "a"}"#, r#""id""#),
        (r#"{"id": 7.5, "name": "a"}"#, r#""id""#),
        (r#"{"id": null, "name": "a"}"#, r#""id""#),
        (r#"{"id": 9223372036854775808, "name": "a"}"#, r#""id""#),
        (r#"{"id": -9223372036854775809, "name": "a"}"#, r#""id""#),
        (r#"{"id": 1e19, "name": "a"}"#, r#""id""#),
        (r#"{"id": 1, "name": 5}"#, r#""name""#),
        (r#"{"id": 1, "name": null}"#, r#""name""#),
        (r#"{"id": 1, "name": "a", "tag": null}"#, r#""tag""#),
        (r#"{"id": 1, "name": "a", "tag": ["x"]}"#, r#""tag""#),
        (r#"{"id": 1, "name": "a", "id": 2}"#, "duplicate"),
        (r#"{"id": 1, "name": "a", "x": 1, "x": 2}"#, "duplicate"),
    ];
    for (body, needle) in cases {
        let reply = server.create(body);
        reply.assert_error(400, needle);
    }
    // Nothing above was stored: id 1 is still free.
    assert_eq!(server.create(r#"{"id": 1, "name": "a"}"#).status, 200);
}

fn existing_id_is_409_and_the_stored_plant_is_kept(kind: Kind) {
    let server = TestServer::on(kind);
    assert_eq!(server.create(r#"{"id": 5, "name": "first"}"#).status, 200);
    server
        .create(r#"{"id": 5, "name": "second"}"#)
        .assert_error(409, "5");
    server
        .create(r#"{"id": 5.0, "name": "third"}"#)
        .assert_error(409, "5");
}

fn content_type_must_be_json_when_there_is_a_body(kind: Kind) {
    let server = TestServer::on(kind);
    let body = r#"{"id": 1, "name": "a"}"#;
    let text = [AUTH, ("Content-Type", "text/plain")];
    server
        .send("POST", "/plants", &text, body)
        .assert_error(415, "application/json");
    server
        .send("POST", "/plants", &[AUTH], body)
        .assert_error(415, "application/json");
    let lookalike = [AUTH, ("Content-Type", "application/jsonx")];
    server
        .send("POST", "/plants", &lookalike, body)
        .assert_error(415, "application/json");
    let charset = [AUTH, ("Content-Type", "Application/JSON; charset=utf-8")];
    assert_eq!(server.send("POST", "/plants", &charset, body).status, 200);
}

fn body_over_max_body_is_413(kind: Kind) {
    let mut config = config();
    config.limits.max_body = 100;
    let server = TestServer::on_with(kind, config);
    let big = format!(r#"{{"id": 1, "name": "{}"}}"#, "a".repeat(100));
    server.create(&big).assert_error(413, "100 bytes");
    let fits = format!(r#"{{"id": 1, "name": "{}"}}"#, "a".repeat(70));
    assert_eq!(server.create(&fits).status, 200);
}

fn names_and_tags_past_their_limits_are_400_naming_field_and_limit(kind: Kind) {
    let mut config = config();
    config.text_limits = TextLimits { name: 5, tag: 3 };
    let server = TestServer::on_with(kind, config);
    // Characters, not bytes: five characters in eight bytes fit.
    let reply = server.create(r#"{"id": 1, "name": "ab\u00e9\ud83c\udf35e", "tag": "xyz"}"#);
    assert_eq!(reply.status, 200, "{}", reply.text());
    server
        .create(r#"{"id": 2, "name": "abcdef"}"#)
        .assert_error(400, r#"field "name" must be at most 5 characters"#);
    server
        .create(r#"{"id": 2, "name": "a", "tag": "wxyz"}"#)
        .assert_error(400, r#"field "tag" must be at most 3 characters"#);
    server
        .send("PUT", "/plants/1", &[AUTH, JSON], r#"{"name": "abcdef"}"#)
        .assert_error(400, "at most 5");
    let stored = server.send("GET", "/plants/1", &[AUTH], "").json();
    assert_eq!(
        stored["name"], "ab\u{e9}\u{1F335}e",
        "a refused replace changes nothing"
    );
    assert_eq!(server.send("GET", "/plants/2", &[AUTH], "").status, 404);
}

#[test]
fn full_store_is_507() {
    let mut config = config();
    config.max_plants = 2;
    let server = TestServer::with(config);
    assert_eq!(server.create(r#"{"id": 1, "name": "a"}"#).status, 200);
    assert_eq!(server.create(r#"{"id": 2, "name": "b"}"#).status, 200);
    server
        .create(r#"{"id": 3, "name": "c"}"#)
        .assert_error(507, "full");
    // A duplicate is still a 409, not a 507.
    server
        .create(r#"{"id": 1, "name": "a"}"#)
        .assert_error(409, "1");
}

#[test]
fn past_max_data_is_507_counted_in_bytes_of_names_and_tags() {
    let mut config = config();
    config.max_data = 20;
    let server = TestServer::with(config);
    // "é" is two bytes: 8 + 2 bytes of name, 2 of tag.
    assert_eq!(
        server
            .create(r#"{"id": 1, "name": "ééééé", "tag": "ab"}"#)
            .status,
        200
    );
    server
        .create(r#"{"id": 2, "name": "123456789"}"#)
        .assert_error(507, "bytes");
    let grow = r#"{"name": "ééééééééééé"}"#; // 22 bytes
    server
        .send("PUT", "/plants/1", &[AUTH, JSON], grow)
        .assert_error(507, "bytes");
    assert_eq!(
        server.create(r#"{"id": 2, "name": "12345678"}"#).status,
        200
    );
    // Shrinking or deleting frees room.
    assert_eq!(server.send("DELETE", "/plants/1", &[AUTH], "").status, 204);
    assert_eq!(
        server.create(r#"{"id": 3, "name": "abcdefghijkl"}"#).status,
        200
    );
}

fn unknown_route_is_404_and_wrong_method_is_405_with_allow(kind: Kind) {
    let server = TestServer::on(kind);
    server
        .send("GET", "/nowhere", &[AUTH], "")
        .assert_error(404, "no such");
    server
        .send("POST", "/plants/", &[AUTH, JSON], "{}")
        .assert_error(404, "no such");
    let reply = server.send("PATCH", "/plants", &[AUTH], "");
    reply.assert_error(405, "POST");
    assert!(reply.header("allow").unwrap().contains("POST"));
}

crate::on_each_store!(
    create_answers_the_plant_without_id,
    absent_tag_is_omitted_not_null,
    valid_bodies_by_json_schema_meaning,
    every_invalid_body_is_400_naming_the_problem,
    existing_id_is_409_and_the_stored_plant_is_kept,
    content_type_must_be_json_when_there_is_a_body,
    body_over_max_body_is_413,
    names_and_tags_past_their_limits_are_400_naming_field_and_limit,
    unknown_route_is_404_and_wrong_method_is_405_with_allow,
);
