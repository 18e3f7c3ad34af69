//! The PostgreSQL store's listings against what the rule says they are:
//! for every order, filter and page size, a walk through the `Link`
//! headers lists exactly the plants the filter keeps (`Query::matches`,
//! the one rule of both stores), in the order of their ids or of their
//! names' bytes (ties by id, the same way round), and `X-Total-Count`
//! counts them. Names that fold alike, that differ only by case, that
//! hold `%`, `_` or `\` (literal in a search), or NUL.

use serde_json::json;

use plantstore::model::{Query, fold};

use crate::support::{AUTH, FreshDatabase, TestServer, config, send_to};

/// The plants: (id, name, tag).
const PLANTS: &[(i64, &str, Option<&str>)] = &[
    (1, "fern", Some("green")),
    (2, "Fern", None),
    (3, "FERN", Some("green")),
    (4, "fern", Some("Green")),
    (5, "Ärger", Some("green")),
    (6, "ärger", None),
    (7, "ΣΑΣ", Some("greek")),
    (8, "σας", Some("greek")),
    (9, "50% off", Some("sale")),
    (10, "5000 off", Some("sale")),
    (11, "a_b", None),
    (12, "axb", None),
    (13, "back\\slash", Some("x\\y")),
    (14, "backslash", Some("xy")),
    (15, "nul\0fern", Some("green")),
    (16, "", Some("fern")),
    (-3, "zebra fern", Some("green")),
    (i64::MAX, "fern", Some("green")),
    (i64::MIN, "Zz", None),
];

/// Percent-encodes every byte but ASCII letters and digits, for a query
/// string.
pub(super) fn encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The ids of the plants that `tag` and `search` keep, in `sort` order.
fn expected(sort: &str, tag: Option<&str>, search: Option<&str>) -> Vec<i64> {
    let query = Query {
        tag: tag.map(str::to_owned),
        search: search.map(fold),
        ..Query::default()
    };
    let mut kept: Vec<&(i64, &str, Option<&str>)> = PLANTS
        .iter()
        .filter(|(_, name, tag)| query.matches(name, *tag))
        .collect();
    match sort.trim_start_matches('-') {
        "id" => kept.sort_by_key(|p| p.0),
        _ => kept.sort_by(|a, b| a.1.as_bytes().cmp(b.1.as_bytes()).then(a.0.cmp(&b.0))),
    }
    if sort.starts_with('-') {
        kept.reverse();
    }
    kept.iter().map(|p| p.0).collect()
}

#[test]
fn every_order_filter_and_page_size_walks_what_the_filter_keeps_in_order() {
    let database = FreshDatabase::new();
    let server = TestServer::with(database.config(config()));
    for (id, name, tag) in PLANTS {
        let mut body = json!({"id": id, "name": name});
        if let Some(tag) = tag {
            body["tag"] = json!(tag);
        }
        let body = body.to_string();
        assert_eq!(server.create(&body).status, 200, "{body}");
    }
    let searches = [
        None,
        Some("FERN"),
        Some("ärg"),
        Some("Σ"),
        Some("%"),
        Some("_"),
        Some("\\"),
        Some("0%"),
        Some("\0"),
        Some("nothing like it"),
    ];
    let mut walks = 0;
    for sort in ["id", "-id", "name", "-name"] {
        for tag in [None, Some("green")] {
            for search in searches {
                let want = expected(sort, tag, search);
                for limit in [1, 3, 100] {
                    let mut target = format!("/plants?sort={sort}&limit={limit}&count=true");
                    if let Some(tag) = tag {
                        target.push_str(&format!("&tag={tag}"));
                    }
                    if let Some(search) = search {
                        target.push_str(&format!("&q={}", encoded(search)));
                    }
                    let mut seen = Vec::new();
                    let mut next = Some(target.clone());
                    while let Some(page) = next.take() {
                        let reply = server.send("GET", &page, &[AUTH], "");
                        assert_eq!(reply.status, 200, "{page}: {}", reply.text());
                        let total = reply.header("x-total-count").map(str::to_owned);
                        assert_eq!(total, Some(want.len().to_string()), "{page}");
                        let records = reply.json();
                        let records = records.as_array().unwrap();
                        assert!(records.len() <= limit, "{page}");
                        seen.extend(records.iter().map(|r| r["id"].as_i64().unwrap()));
                        next = reply
                            .header("link")
                            .map(|l| l["<http://test".len()..l.find('>').unwrap()].to_string());
                        assert!(seen.len() <= PLANTS.len(), "{target}: {seen:?}");
                    }
                    assert_eq!(seen, want, "{target}");
                    walks += 1;
                }
            }
        }
    }
    assert_eq!(walks, 4 * 2 * 10 * 3);
    // Without count=true nothing is counted.
    let plain = send_to(server.addr, "GET", "/plants?q=fern", &[AUTH], "");
    assert_eq!(plain.header("x-total-count"), None);
}
