//! Every row of the endpoint table (`plantstore::api::ROUTES`) against a
//! running server and the OpenAPI document it serves.
//!
//! For each row: each method it lists answers (2xx), with and without a
//! token as the row says (401 without one where it needs one); every
//! other method is 405 with an `Allow` naming the row's methods in order;
//! a query parameter the method does not take is a 400 naming it and
//! those it takes, or is ignored where the method takes any; every request
//! is counted under the row's path in `/metrics`. The document's paths,
//! methods, security and query parameters are the table's, but for the
//! rows marked undocumented (the page's files). A row or a document that
//! drifts from the other, or from what the server does, fails here. The
//! server is plain HTTP: `/ca.pem`, a row only over HTTPS with
//! `--tls-auto`, is a 404 here, counted as `other`, and left out of the
//! document; `process/https/local_ca.rs` walks it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use plantstore::api::{Method, Params, ROUTES, Route};

use crate::support::{AUTH, JSON, Reply, TestServer, request};

/// Methods tried on every row: the API's, `OPTIONS` (no preflight: no
/// `Origin`) and two it never answers.
const TRIED: [&str; 8] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "BREW",
];
/// Methods `/metrics` counts by name; any other is `other`.
const COUNTED: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"];
/// A query parameter no method takes.
const UNKNOWN: &str = "zz-unknown";
/// The plant a `{id}` path names.
const ID: i64 = 7;

/// Counters of `plantstore_requests_total` by route, method and status.
type Counts = BTreeMap<(String, String, String), u64>;

/// A server, walked one request at a time, each checked against the
/// metrics' counters.
struct Walk {
    server: TestServer,
    /// Ids for `POST /plants`, fresh each time.
    next: i64,
}

impl Walk {
    /// The request counters, read from `/metrics` (that read is counted
    /// once it is answered).
    fn counts(&self) -> Counts {
        let reply = self.server.send("GET", "/metrics", &[AUTH], "");
        assert_eq!(reply.status, 200, "{}", reply.text());
        let mut counts = Counts::new();
        for line in reply.text().lines() {
            let Some(rest) = line.strip_prefix("plantstore_requests_total{route=\"") else {
                continue;
            };
            let (labels, count) = rest.rsplit_once("} ").expect("a sample");
            let labels = labels.replace("\",method=\"", "\u{0}");
            let labels = labels.replace("\",status=\"", "\u{0}");
            let mut parts = labels.trim_end_matches('"').split('\u{0}');
            let mut next = || parts.next().expect("a label").to_owned();
            let key = (next(), next(), next());
            counts.insert(key, count.parse().expect("a count"));
        }
        counts
    }

    /// Sends `method` to `route`'s path (a plant's, for `{id}`, which then
    /// exists) with `query`, with a token if `auth`, and checks that it
    /// alone was counted, under the row's path. `whole`: read the body
    /// too (not for a stream that never ends: the change feed's).
    fn send(&mut self, route: &Route, method: &str, query: &str, auth: bool, whole: bool) -> Reply {
        let path = route.path.replace("{id}", &ID.to_string());
        if path != route.path {
            let created = self
                .server
                .create(&format!(r#"{{"id":{ID},"name":"walked"}}"#));
            assert!(matches!(created.status, 200 | 409), "{}", created.text());
        }
        let body = match find(route, method) {
            Some(m) if m.body && method == "POST" => {
                self.next += 1;
                format!(r#"{{"id":{},"name":"walked"}}"#, self.next)
            }
            Some(m) if m.body => r#"{"name":"walked again"}"#.to_owned(),
            _ => String::new(),
        };
        let headers: &[(&str, &str)] = if auth { &[AUTH, JSON] } else { &[JSON] };
        let before = self.counts();
        let mut client = self.server.client();
        client.send(&request(method, &format!("{path}{query}"), headers, &body));
        let reply = if whole && method != "HEAD" {
            client.reply()
        } else {
            client.reply_head()
        };
        let label = if COUNTED.contains(&method) {
            method
        } else {
            "other"
        };
        let key = |route: &str, method: &str, status: u16| {
            (route.to_owned(), method.to_owned(), status.to_string())
        };
        let mut want = before.clone();
        *want
            .entry(key(route.path, label, reply.status))
            .or_default() += 1;
        // The first read of the counters, answered after it was made.
        *want.entry(key("/metrics", "GET", 200)).or_default() += 1;
        let got = self.counts();
        let keys: BTreeSet<_> = got.keys().chain(want.keys()).collect();
        let wrong: Vec<_> = keys
            .into_iter()
            .filter(|k| got.get(*k) != want.get(*k))
            .map(|k| (k, got.get(k), want.get(k)))
            .collect();
        assert!(
            wrong.is_empty(),
            "{method} {path}{query}: counted wrong (counter, got, want): {wrong:?}"
        );
        reply
    }
}

/// The row's method named `name`.
fn find<'a>(route: &'a Route, name: &str) -> Option<&'a Method> {
    route.methods.iter().find(|m| m.name == name)
}

/// What `Allow` says for `route`: its methods, in its order.
fn allow(route: &Route) -> String {
    let names: Vec<&str> = route.methods.iter().map(|m| m.name).collect();
    names.join(", ")
}

/// Whether the row is served over HTTPS with `--tls-auto` only, which
/// this server (plain HTTP) is not: `/ca.pem`, walked over HTTPS in
/// `process/https/local_ca.rs`.
fn over_tls_only(route: &Route) -> bool {
    route.path == "/ca.pem"
}

/// Whether the change feed's stream answers: it never ends.
fn endless(route: &Route) -> bool {
    route.path == "/plants/changes"
}

#[test]
fn every_route_row_answers_its_methods_refuses_the_others_and_is_counted() {
    // `--allow-reset`: its row is walked too (a 404 without).
    let mut walk = Walk {
        server: TestServer::with(plantstore::config::Config {
            allow_reset: true,
            ..crate::support::config()
        }),
        next: 1000,
    };
    for route in ROUTES.iter().filter(|r| !over_tls_only(r)) {
        for method in route.methods {
            answers(&mut walk, route, method);
            reads_its_query(&mut walk, route, method);
        }
        refuses_other_methods(&mut walk, route);
    }
}

/// `method` answers with a token, and without one unless the row needs it.
fn answers(walk: &mut Walk, route: &Route, method: &Method) {
    let (name, path) = (method.name, route.path);
    let reply = walk.send(route, name, "", true, !endless(route));
    assert!(
        (200..300).contains(&reply.status),
        "{name} {path}: {} {}",
        reply.status,
        reply.text()
    );
    let reply = walk.send(route, name, "", false, true);
    if route.auth {
        assert_eq!(reply.status, 401, "{name} {path} without a token");
        assert!(reply.header("www-authenticate").is_some(), "{name} {path}");
    } else {
        assert!(
            (200..300).contains(&reply.status),
            "{name} {path} needs no token"
        );
    }
}

/// A parameter `method` does not take is a 400 naming those it takes, or
/// ignored where it takes any; each it takes is taken.
fn reads_its_query(walk: &mut Walk, route: &Route, method: &Method) {
    let (name, path) = (method.name, route.path);
    let query = format!("?{UNKNOWN}=1");
    let reply = walk.send(route, name, &query, true, true);
    let names = match method.params {
        Params::Any => {
            assert!(
                (200..300).contains(&reply.status),
                "{name} {path}{query}: ignored"
            );
            return;
        }
        Params::Only(names) => names,
    };
    assert_eq!(reply.status, 400, "{name} {path}{query}");
    if name != "HEAD" {
        let accepted = if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        };
        let message = format!("unknown query parameter \"{UNKNOWN}\"; accepted here: {accepted}");
        assert_eq!(reply.json()["message"], message.as_str());
    }
    for taken in names {
        // A value each takes: `1` is no sort, count or field.
        let value = match *taken {
            "sort" | "fields" => "id",
            "count" => "true",
            _ => "1",
        };
        let query = format!("?{taken}={value}");
        let reply = walk.send(route, name, &query, true, !endless(route));
        assert!(
            (200..300).contains(&reply.status),
            "{name} {path}{query}: taken"
        );
    }
}

/// Every other method is 405 with the row's `Allow`, before auth.
fn refuses_other_methods(walk: &mut Walk, route: &Route) {
    let path = route.path;
    for name in TRIED.iter().filter(|&&m| find(route, m).is_none()) {
        let reply = walk.send(route, name, "", false, true);
        assert_eq!(reply.status, 405, "{name} {path}");
        let allow = allow(route);
        assert_eq!(reply.header("allow"), Some(allow.as_str()), "{name} {path}");
        // A 405 to HEAD (a row without GET) has no body.
        if *name != "HEAD" {
            let message = format!("method not allowed here; allowed: {allow}");
            assert_eq!(reply.json()["message"], message.as_str(), "{name} {path}");
        }
    }
}

/// The operations the document describes: path and method.
fn documented(document: &Value) -> BTreeSet<(String, String)> {
    let paths = document["paths"].as_object().expect("paths");
    let mut operations = BTreeSet::new();
    for (path, item) in paths {
        for method in item.as_object().expect("a path item").keys() {
            if OPERATIONS.contains(&method.as_str()) {
                operations.insert((path.clone(), method.to_uppercase()));
            }
        }
    }
    operations
}

/// The keys of a path item that are operations (OpenAPI 3.1).
const OPERATIONS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The names of the query parameters an operation declares (its own and
/// its path's), sorted.
fn query_names(document: &Value, path: &str, method: &str) -> Vec<String> {
    let item = &document["paths"][path];
    let declared = [&item["parameters"], &item[method]["parameters"]];
    let mut names: Vec<String> = declared
        .iter()
        .filter_map(|list| list.as_array())
        .flatten()
        .map(|p| match p["$ref"].as_str() {
            Some(at) => at
                .trim_start_matches("#/")
                .split('/')
                .fold(document, |v, key| &v[key]),
            None => p,
        })
        .filter(|p| p["in"] == "query")
        .map(|p| p["name"].as_str().expect("a name").to_owned())
        .collect();
    names.sort();
    names
}

/// Whether an operation needs a token: its `security`, else the
/// document's, names a scheme.
fn secured(document: &Value, path: &str, method: &str) -> bool {
    let operation = &document["paths"][path][method];
    let security = match operation.get("security") {
        Some(own) => own,
        None => &document["security"],
    };
    let requirements = security.as_array().map(Vec::as_slice).unwrap_or_default();
    requirements
        .iter()
        .any(|r| r.as_object().is_some_and(|r| !r.is_empty()))
}

#[test]
fn the_openapi_document_describes_every_route_row_served_but_the_pages_files() {
    // The reset's row only where `--allow-reset` serves it.
    for allow_reset in [false, true] {
        let server = TestServer::with(plantstore::config::Config {
            allow_reset,
            ..crate::support::config()
        });
        let reply = server.send("GET", "/openapi.json", &[], "");
        assert_eq!(reply.status, 200);
        let served = |r: &&Route| {
            r.documented && (allow_reset || r.path != "/plants/reset") && !over_tls_only(r)
        };
        let rows: BTreeSet<(String, String)> = ROUTES
            .iter()
            .filter(served)
            .flat_map(|r| {
                r.methods
                    .iter()
                    .map(|m| (r.path.to_owned(), m.name.to_owned()))
            })
            .collect();
        assert_eq!(
            documented(&reply.json()),
            rows,
            "the document's operations are the table's (--allow-reset {allow_reset})"
        );
        let reset = server.send("POST", "/plants/reset", &[AUTH], "");
        assert_eq!(reset.status == 404, !allow_reset, "{}", reset.text());
    }
    let server = TestServer::with(plantstore::config::Config {
        allow_reset: true,
        ..crate::support::config()
    });
    let document = server.send("GET", "/openapi.json", &[], "").json();
    for route in ROUTES.iter().filter(|r| r.documented && !over_tls_only(r)) {
        for method in route.methods {
            let (path, name) = (route.path, method.name.to_lowercase());
            assert_eq!(
                secured(&document, path, &name),
                route.auth,
                "{name} {path}: security"
            );
            let mut taken: Vec<String> = match method.params {
                Params::Only(names) => names.iter().map(|&n| n.to_owned()).collect(),
                // The document has no word for "any": it declares none.
                Params::Any => Vec::new(),
            };
            taken.sort();
            assert_eq!(
                query_names(&document, path, &name),
                taken,
                "{name} {path}: query"
            );
        }
    }
    // The undocumented rows are the page's files, which the page serves
    // to a browser and `--no-ui` removes: not part of the API.
    let undocumented: Vec<&str> = ROUTES
        .iter()
        .filter(|r| !r.documented)
        .map(|r| r.path)
        .collect();
    assert_eq!(undocumented, ["/", "/ui.css", "/ui.js", "/ui.svg"]);
}

#[test]
fn the_cas_row_is_a_404_counted_as_other_without_tls_auto() {
    // Over plain HTTP, without `--tls-auto`: as any unknown path.
    let server = TestServer::start();
    let ca = server.send("GET", "/ca.pem", &[], "");
    assert_eq!(ca.status, 404, "{}", ca.text());
    assert!(ca.header("x-ca-fingerprint").is_none());
    let metrics = server.send("GET", "/metrics", &[AUTH], "").text();
    let other = "plantstore_requests_total{route=\"other\",method=\"GET\",status=\"404\"} 1\n";
    assert!(metrics.contains(other), "{metrics}");
    assert!(!metrics.contains("route=\"/ca.pem\""), "{metrics}");
    let health = server.send("GET", "/healthz", &[], "");
    assert!(health.header("x-ca-fingerprint").is_none());
}
