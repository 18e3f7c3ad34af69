//! Queries of `GET /plants` on each store: search (`q`), order (`sort`),
//! the total (`count`) and the fields shown (`fields`), with the cursor in
//! `Link` through concurrent writes. The same assertions run on both
//! stores: they must answer alike.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use serde_json::{Value, json};

use crate::support::{
    AUTH, Client, JSON, Kind, Reply, TestServer, allow_names_of, config, eventually, request,
};

/// Creates `(id, name, tag)` plants.
fn plant(server: &TestServer, id: i64, name: &str, tag: Option<&str>) {
    let body = json!({"id": id, "name": name, "tag": tag});
    let body = match tag {
        Some(_) => body,
        None => json!({"id": id, "name": name}),
    };
    let reply = server.create(&body.to_string());
    assert_eq!(reply.status, 200, "{}", reply.text());
}

fn get(server: &TestServer, target: &str) -> Reply {
    let reply = server.send("GET", target, &[AUTH], "");
    assert_eq!(reply.status, 200, "{target}: {}", reply.text());
    reply
}

fn ids(reply: &Reply) -> Vec<i64> {
    let records = reply.json();
    records
        .as_array()
        .expect("an array")
        .iter()
        .map(|r| r["id"].as_i64().expect("an id"))
        .collect()
}

/// The target of a reply's `Link: rel="next"`, if any.
fn next(reply: &Reply) -> Option<String> {
    let link = reply.header("link")?;
    assert!(link.ends_with(r#">; rel="next""#), "{link}");
    let url = &link[1..link.find('>').unwrap()];
    Some(url.strip_prefix("http://test").unwrap_or(url).to_owned())
}

/// Every record of a walk from `target` through its links, page by page.
fn walk(server: &TestServer, target: &str) -> Vec<Vec<Value>> {
    walk_between(server, target, || {})
}

/// A walk that calls `between` before each page.
fn walk_between(server: &TestServer, target: &str, mut between: impl FnMut()) -> Vec<Vec<Value>> {
    let mut pages = Vec::new();
    let mut at = Some(target.to_owned());
    while let Some(target) = at.take() {
        between();
        let reply = get(server, &target);
        pages.push(reply.json().as_array().unwrap().clone());
        at = next(&reply);
        assert!(pages.len() < 10_000, "the walk ends");
    }
    pages
}

fn walked_ids(pages: &[Vec<Value>]) -> Vec<i64> {
    pages
        .iter()
        .flatten()
        .map(|r| r["id"].as_i64().unwrap())
        .collect()
}

fn search_matches_name_or_tag_case_insensitively_and_literally(kind: Kind) {
    let server = TestServer::on(kind);
    plant(&server, 1, "Monstera Deliciosa", Some("Tropical"));
    plant(&server, 2, "FERN", None);
    plant(&server, 3, "plain", Some("ferny"));
    plant(&server, 4, "ÄRGER", None);
    plant(&server, 5, "50%_off", None);
    plant(&server, 6, "a\\b", Some("x"));
    plant(&server, 7, "5000 off", Some("Ärger"));
    plant(&server, 8, "ΑΣΤΡΟ", None);
    for (q, want) in [
        ("fern", vec![2, 3]),
        ("FeRn", vec![2, 3]),
        ("%C3%A4rg", vec![4, 7]), // ä: Unicode, name or tag
        ("%C3%84R", vec![4, 7]),
        ("trop", vec![1]),
        // ΑΣ, as typed mid-word, finds ΑΣΤΡΟ (no final sigma); σ too.
        ("%CE%91%CE%A3", vec![8]),
        ("%CF%83", vec![8]),
        ("%25", vec![5]), // % is literal, not "anything"
        ("_", vec![5]),   // _ is literal, not "one character"
        ("%25_", vec![5]),
        ("0%25", vec![5]),
        ("%5C", vec![6]), // a backslash, literal
        ("a%5Cb", vec![6]),
        ("osa+d", vec![]), // a space is a character like any other
        ("ra+d", vec![1]),
        ("nothing", vec![]),
    ] {
        let reply = get(&server, &format!("/plants?q={q}"));
        assert_eq!(ids(&reply), want, "q={q}");
        let counted = get(&server, &format!("/plants?q={q}&count=true&limit=0"));
        assert_eq!(
            counted.header("x-total-count"),
            Some(want.len().to_string().as_str()),
            "q={q}"
        );
    }
    // With a tag, a sort and a limit.
    let reply = get(&server, "/plants?q=fern&tag=ferny");
    assert_eq!(ids(&reply), [3]);
    let reply = get(&server, "/plants?q=r&sort=-name&limit=2");
    assert_eq!(
        ids(&reply),
        [4, 3],
        "by bytes, Ä (0xC3) is above every ASCII letter"
    );
    let all: Vec<i64> = walked_ids(&walk(&server, "/plants?q=r&sort=-name&limit=2"));
    assert_eq!(all, [4, 3, 1, 2, 7], "descending bytes: Ä, p, M, F, 5");
}

/// Names with ties, in byte order ("B" before "a"), both ways, walked a
/// page of two at a time through the links.
fn sort_goes_both_ways_ties_by_id(kind: Kind) {
    let server = TestServer::on(kind);
    for (id, name) in [
        (1, "b"),
        (2, "a"),
        (3, "b"),
        (4, "c"),
        (5, "a"),
        (6, "B"),
        (-7, "a"),
    ] {
        plant(&server, id, name, None);
    }
    let up = [6, -7, 2, 5, 1, 3, 4];
    let down: Vec<i64> = up.iter().rev().copied().collect();
    for (sort, want) in [
        ("name", up.to_vec()),
        ("-name", down),
        ("id", vec![-7, 1, 2, 3, 4, 5, 6]),
        ("-id", vec![6, 5, 4, 3, 2, 1, -7]),
    ] {
        assert_eq!(
            ids(&get(&server, &format!("/plants?sort={sort}"))),
            want,
            "{sort}"
        );
        let pages = walk(&server, &format!("/plants?sort={sort}&limit=2"));
        assert_eq!(walked_ids(&pages), want, "{sort}, paged");
        assert_eq!(pages.len(), 4, "{sort}: three full pages and one");
    }
    let first = get(&server, "/plants?sort=-name&limit=2");
    assert_eq!(
        first.header("link"),
        Some(r#"<http://test/plants?after=-name%3A3%3A%3Db&limit=2&sort=-name>; rel="next""#)
    );
}

/// One change from a writer; a lost race (404, 409) is fine.
fn send(client: &mut Client, method: &str, path: &str, body: String) {
    client.send(&request(method, path, &[AUTH, JSON], &body));
    let status = client.reply().status;
    assert!(
        matches!(status, 200 | 204 | 404 | 409),
        "{method} {path}: {status}"
    );
}

/// A plant's name, as the walks below check their order.
fn key(record: &Value) -> (Vec<u8>, i64) {
    let name = record["name"].as_str().unwrap().as_bytes().to_vec();
    (name, record["id"].as_i64().unwrap())
}

/// Four writers create, delete, and replace (same name, new tag) while
/// walks page through every order: each plant that exists throughout is
/// seen exactly once, in order; a plant renamed meanwhile is never twice
/// on one page.
fn paging_under_concurrent_writers_sees_each_lasting_plant_once(kind: Kind) {
    let server = TestServer::on(kind);
    // Lasting: 0..300; 300..400 are deleted during the walk; 400..450
    // are renamed back and forth.
    for id in 0..450 {
        plant(&server, id, &format!("n{}", (id * 7919) % 211), None);
    }
    let stop = Arc::new(AtomicBool::new(false));
    // Changes made so far: each page waits for a few more, so that the
    // writes fall between the pages of every walk.
    let made = Arc::new(AtomicU64::new(0));
    let writer = |job: fn(&mut Client, u64)| {
        let (addr, stop, made) = (server.addr, Arc::clone(&stop), Arc::clone(&made));
        thread::spawn(move || {
            let mut client = Client::connect(addr);
            let mut turn = 0;
            // Bounded in time by the walks, which stop them.
            while !stop.load(Ordering::Relaxed) {
                job(&mut client, turn);
                made.fetch_add(1, Ordering::Relaxed);
                turn += 1;
            }
        })
    };
    let writers = [
        // Plants come and go: 10,000 and up, each created then deleted.
        writer(|c, t| {
            let id = 10_000 + (t / 2 % 100) as i64;
            if t % 2 == 0 {
                // Always the same name: never seen twice, even in name
                // order.
                let body = format!(r#"{{"id":{id},"name":"n{}"}}"#, id % 211);
                send(c, "POST", "/plants", body);
            } else {
                send(c, "DELETE", &format!("/plants/{id}"), String::new());
            }
        }),
        writer(|c, t| {
            let id = 300 + (t % 100) as i64;
            send(c, "DELETE", &format!("/plants/{id}"), String::new());
        }),
        writer(|c, t| {
            let id = (t % 300) as i64;
            let body = format!(r#"{{"name":"n{}","tag":"t{t}"}}"#, (id * 7919) % 211);
            send(c, "PUT", &format!("/plants/{id}"), body);
        }),
        writer(|c, t| {
            let id = 400 + (t % 50) as i64;
            send(
                c,
                "PUT",
                &format!("/plants/{id}"),
                format!(r#"{{"name":"n{}"}}"#, t % 211),
            );
        }),
    ];
    for sort in ["name", "-name", "-id", "id"] {
        let paced = || {
            let from = made.load(Ordering::Relaxed);
            assert!(
                eventually(|| made.load(Ordering::Relaxed) >= from + 8),
                "stuck at {from} writes ({sort})"
            );
        };
        let pages = walk_between(&server, &format!("/plants?sort={sort}&limit=13"), paced);
        check_walk(sort, &pages);
    }
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
}

/// What a walk in `sort` under the writers must show: each lasting plant
/// (0..300) once, no id twice except the renamed ones (400..450), none
/// twice on one page, the lasting ones in order.
fn check_walk(sort: &str, pages: &[Vec<Value>]) {
    let mut seen: HashMap<i64, usize> = HashMap::new();
    for page in pages {
        let on_page: HashSet<i64> = page.iter().map(|r| r["id"].as_i64().unwrap()).collect();
        assert_eq!(on_page.len(), page.len(), "{sort}: an id twice on one page");
        for id in on_page {
            *seen.entry(id).or_default() += 1;
        }
    }
    for id in 0..300 {
        assert_eq!(seen.get(&id), Some(&1), "{sort}: lasting plant {id}");
    }
    for (id, times) in &seen {
        assert!(
            *times == 1 || (400..450).contains(id),
            "{sort}: {id} seen {times} times"
        );
    }
    // Strictly monotone over the lasting plants (the renamed ones may
    // move across the cursor).
    let lasting: Vec<(Vec<u8>, i64)> = pages
        .iter()
        .flatten()
        .filter(|r| r["id"].as_i64().unwrap() < 400)
        .map(|r| match sort {
            "name" | "-name" => key(r),
            _ => (Vec::new(), r["id"].as_i64().unwrap()),
        })
        .collect();
    let ordered = lasting.windows(2).all(|w| match sort {
        "name" | "id" => w[0] < w[1],
        _ => w[0] > w[1],
    });
    assert!(ordered, "{sort}: in order");
}

fn count_is_what_a_full_walk_returns(kind: Kind) {
    let server = TestServer::on(kind);
    for id in 0..230 {
        let tag = (id % 3 == 0).then_some("three");
        plant(&server, id, &format!("Plant {id}"), tag);
    }
    for query in [
        "",
        "tag=three",
        "q=plant+1",
        "q=7&tag=three",
        "q=none",
        "sort=-name&q=2",
    ] {
        let first = get(&server, &format!("/plants?{query}&count=true&limit=17"));
        let total: usize = first
            .header("x-total-count")
            .expect("counted")
            .parse()
            .unwrap();
        let all = walked_ids(&walk(
            &server,
            &format!("/plants?{query}&count=true&limit=17"),
        ));
        assert_eq!(total, all.len(), "{query}");
        let uncounted = get(&server, &format!("/plants?{query}"));
        assert_eq!(
            uncounted.header("x-total-count"),
            None,
            "counted only when asked"
        );
    }
    assert_eq!(
        get(&server, "/plants?count=true").header("x-total-count"),
        Some("230")
    );
    assert_eq!(
        get(&server, "/plants?count=false").header("x-total-count"),
        None
    );
    // The next page keeps counting.
    let link = get(&server, "/plants?count=true&limit=5")
        .header("link")
        .unwrap()
        .to_owned();
    assert!(link.contains("count=true"), "{link}");
}

fn fields_select_what_each_record_shows(kind: Kind) {
    let server = TestServer::on(kind);
    plant(&server, 1, "fern", Some("green"));
    plant(&server, 2, "moss", None);
    for (fields, want) in [
        ("id", json!([{"id": 1}, {"id": 2}])),
        ("name", json!([{"name": "fern"}, {"name": "moss"}])),
        ("tag", json!([{"tag": "green"}, {}])),
        ("tag,id", json!([{"id": 1, "tag": "green"}, {"id": 2}])),
        (
            "id,name,tag",
            json!([{"id": 1, "name": "fern", "tag": "green"}, {"id": 2, "name": "moss"}]),
        ),
    ] {
        let reply = get(&server, &format!("/plants?fields={fields}"));
        assert_eq!(reply.json(), want, "fields={fields}");
        let text = reply.text();
        if fields == "tag,id" {
            assert!(
                text.starts_with(r#"[{"id":1,"tag":"green"}"#),
                "id first: {text}"
            );
        }
    }
    let first = get(&server, "/plants?fields=name&limit=1&sort=name");
    assert_eq!(first.json(), json!([{"name": "fern"}]));
    let link = next(&first).expect("more");
    assert!(link.contains("fields=name"), "{link}");
    assert_eq!(get(&server, &link).json(), json!([{"name": "moss"}]));
}

fn each_bad_query_is_a_400_naming_its_rule(kind: Kind) {
    let server = TestServer::on(kind);
    plant(&server, 1, "fern", None);
    let long = "a".repeat(257);
    for (query, needle) in [
        ("q=".to_owned(), "q (1 to 256 bytes of UTF-8)"),
        (format!("q={long}"), "q (1 to 256 bytes of UTF-8)"),
        ("q=%ff".to_owned(), "q"),
        (
            "sort=price".to_owned(),
            "sort (one of id, -id, name, -name)",
        ),
        ("sort=NAME".to_owned(), "sort"),
        (
            "sort=name&after=5".to_owned(),
            "after (a cursor of this sort",
        ),
        (
            "sort=-name&after=name%3A1%3A%3Dfern".to_owned(),
            "after (a cursor of this sort",
        ),
        (
            "sort=-id&after=5".to_owned(),
            "after (a cursor of this sort",
        ),
        ("after=-id%3A5".to_owned(), "after (an int64)"),
        ("sort=name&after=name%3Ax%3A%3Dfern".to_owned(), "after"),
        ("sort=name&after=name%3A1%3Afern".to_owned(), "after"),
        ("count=yes".to_owned(), "count (true or false)"),
        ("fields=".to_owned(), "fields"),
        (
            "fields=id,price".to_owned(),
            "fields (a comma-separated list of id, name, tag",
        ),
        ("fields=id,id".to_owned(), "fields"),
        ("q=a&q=b".to_owned(), "q"),
    ] {
        server
            .send("GET", &format!("/plants?{query}"), &[AUTH], "")
            .assert_error(400, needle);
    }
    let reply = get(&server, &format!("/plants?q={}", "a".repeat(256)));
    assert_eq!(ids(&reply), Vec::<i64>::new(), "256 bytes is a search");
}

/// Names past the cursor's 256 bytes: the cursor is cut, stays short, and
/// a walk still sees each plant once; a cut cursor whose plant was renamed
/// since resumes at the first name with its prefix (a repeat, no skip).
fn long_names_keep_the_cursor_short(kind: Kind) {
    let mut config = config();
    allow_names_of(&mut config, 1000);
    let server = TestServer::on_with(kind, config);
    let stem = "ü".repeat(200); // 400 bytes
    for id in 0..12 {
        plant(&server, id, &format!("{stem}{:02}", 11 - id), None);
    }
    for sort in ["name", "-name"] {
        let first = get(&server, &format!("/plants?sort={sort}&limit=5"));
        let link = first.header("link").unwrap();
        assert!(link.len() < 1000, "{} bytes: {link}", link.len());
        assert!(link.contains("%5E"), "cut: {link}");
        let all = walked_ids(&walk(&server, &format!("/plants?sort={sort}&limit=5")));
        let mut want: Vec<i64> = (0..12).rev().collect();
        if sort == "-name" {
            want.reverse();
        }
        assert_eq!(all, want, "{sort}");
    }
    // The last plant of the first page is renamed: away from the stem, or
    // within the cursor's 256 bytes (past every other name). Either way
    // the next page starts again at the first name with those bytes: a
    // repeat, never a skip.
    for to in ["zz".to_owned(), format!("{stem}99")] {
        let body = json!({"name": format!("{stem}04")}).to_string();
        assert_eq!(
            server.send("PUT", "/plants/7", &[AUTH, JSON], &body).status,
            200
        );
        let first = get(&server, "/plants?sort=name&limit=5");
        assert_eq!(ids(&first), [11, 10, 9, 8, 7]);
        let body = json!({"name": to}).to_string();
        assert_eq!(
            server.send("PUT", "/plants/7", &[AUTH, JSON], &body).status,
            200
        );
        let again = get(&server, &next(&first).unwrap());
        assert_eq!(ids(&again), [11, 10, 9, 8, 6], "renamed to {to:.3}...");
    }
}

/// Each byte of `text` percent-encoded.
fn encoded(text: &str) -> String {
    text.bytes().map(|b| format!("%{b:02X}")).collect()
}

/// At the longest `--max-tag` the server starts with, the next-page `Link`
/// of the longest query (a tag and a search of four-byte characters, a
/// cut name-order cursor, every other parameter) is a target the server
/// takes: following it is a page, never a 414. It comes within a few bytes
/// of the limit (the worst case counts an id of 20 digits).
fn the_longest_next_link_is_followed_without_a_414(kind: Kind) {
    const WIDEST: char = '\u{10FFFF}';
    let most = (plantstore::http::MAX_TARGET - plantstore::api::longest_next_target(1)) / 12 + 1;
    assert_eq!(
        plantstore::api::longest_next_target(most + 1) - plantstore::api::longest_next_target(most),
        12
    );
    let mut config = config();
    config.text_limits.tag = most;
    config.text_limits.name = 300;
    config.limits.max_body = 16 * 1024;
    let server = TestServer::on_with(kind, config);
    let tag = WIDEST.to_string().repeat(most);
    for id in 0..3 {
        let name = format!("{}{id}", WIDEST.to_string().repeat(299));
        plant(&server, id, &name, Some(&tag));
    }
    let search = WIDEST.to_string().repeat(64);
    let first = get(
        &server,
        &format!(
            "/plants?sort=-name&count=true&fields=name,tag&limit=1&q={}&tag={}",
            encoded(&search),
            encoded(&tag)
        ),
    );
    let link = next(&first).expect("a next page");
    assert!(
        link.len() <= plantstore::http::MAX_TARGET
            && link.len() + 32 > plantstore::http::MAX_TARGET,
        "{} bytes",
        link.len()
    );
    let second = get(&server, &link);
    assert_eq!(second.json().as_array().map(Vec::len), Some(1));
    assert!(next(&second).is_some());
}

crate::on_each_store!(
    search_matches_name_or_tag_case_insensitively_and_literally,
    sort_goes_both_ways_ties_by_id,
    paging_under_concurrent_writers_sees_each_lasting_plant_once,
    count_is_what_a_full_walk_returns,
    fields_select_what_each_record_shows,
    each_bad_query_is_a_400_naming_its_rule,
    long_names_keep_the_cursor_short,
    the_longest_next_link_is_followed_without_a_414,
);
