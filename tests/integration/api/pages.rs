//! Pages of `GET /plants` cut by bytes rather than by `limit`, on each
//! store: a page of long names holds what fits in its 256 KiB (the first
//! record however large) and `Link` leads on from its last plant, so a
//! walk with `limit=1000` sees every plant once, in order, whatever the
//! order and the fields shown.

use serde_json::{Value, json};

use crate::support::{AUTH, Kind, TestServer, allow_names_of, config};

/// The API's page budget, `api::PAGE_BYTES`.
const PAGE: usize = 256 * 1024;

/// Plant `id`'s name: 2,000 to 9,999 bytes, some of them escaped in JSON
/// (a quote takes two bytes, a control character six), so that pages
/// are cut where their JSON, not their names, fills them.
fn name(id: i64) -> String {
    let long = 2000 + (id as usize * 7919) % 8000;
    let odd = match id % 3 {
        0 => "\"",
        1 => "\u{1}",
        _ => "n",
    };
    format!(
        "{:03}{}{}",
        id % 97,
        odd.repeat(long / 10),
        "m".repeat(long - long / 10)
    )
}

/// Every page of a walk from `target` through its links: each page's
/// records, checked to fit in a page's bytes.
fn walk(server: &TestServer, target: &str) -> Vec<Vec<Value>> {
    let mut pages = Vec::new();
    let mut at = Some(target.to_owned());
    while let Some(target) = at.take() {
        let reply = server.send("GET", &target, &[AUTH], "");
        assert_eq!(reply.status, 200, "{target}");
        assert!(
            reply.body.len() <= PAGE,
            "{target}: {} bytes",
            reply.body.len()
        );
        pages.push(reply.json().as_array().expect("an array").clone());
        at = reply.header("link").map(|link| {
            let url = &link[1..link.find('>').expect("a link")];
            url.strip_prefix("http://test").unwrap_or(url).to_owned()
        });
        assert!(pages.len() < 1000, "the walk ends");
    }
    pages
}

/// The id of a record: shown, or found from its name.
fn id_of(record: &Value, count: i64) -> i64 {
    match record["id"].as_i64() {
        Some(id) => id,
        None => (0..count)
            .find(|&id| record["name"] == name(id))
            .expect("a plant's name"),
    }
}

/// Plant `id`'s tag.
fn tag(id: i64) -> String {
    format!("t{}", id % 2)
}

/// What plant `id` costs a page showing `fields`: its record's JSON, or
/// its name's and tag's bytes if more.
fn cost(id: i64, fields: &str) -> usize {
    let mut record = serde_json::Map::new();
    for (field, value) in [
        ("id", json!(id)),
        ("name", json!(name(id))),
        ("tag", json!(tag(id))),
    ] {
        if fields.split(',').any(|f| f == field) {
            record.insert(field.into(), value);
        }
    }
    let json = serde_json::to_vec(&record).unwrap().len();
    json.max(name(id).len() + tag(id).len())
}

fn a_page_cut_by_bytes_leads_on_to_every_plant_once(kind: Kind) {
    let mut config = config();
    allow_names_of(&mut config, 20_000);
    let server = TestServer::on_with(kind, config);
    let count = 150;
    for id in 0..count {
        let body = json!({"id": id, "name": name(id), "tag": tag(id)});
        assert_eq!(server.create(&body.to_string()).status, 200);
    }
    let key = |id: i64| (name(id).into_bytes(), id);
    for sort in ["id", "-id", "name", "-name"] {
        let mut want: Vec<i64> = (0..count).collect();
        if sort.ends_with("name") {
            want.sort_by_key(|&id| key(id));
        }
        if sort.starts_with('-') {
            want.reverse();
        }
        for fields in ["id,name,tag", "name", "id"] {
            let target = format!("/plants?limit=1000&sort={sort}&fields={fields}");
            let pages = walk(&server, &target);
            assert!(
                pages.len() > 2,
                "{target}: cut by bytes, {} pages",
                pages.len()
            );
            let mut seen: Vec<i64> = Vec::new();
            for (page, records) in pages.iter().enumerate() {
                let ids: Vec<i64> = records.iter().map(|r| id_of(r, count)).collect();
                // Each page but the last is full: with its next plant, its
                // records would pass the budget (each counted as its JSON
                // or its name and tag, whichever is longer).
                if let Some(&next) = want.get(seen.len() + ids.len()) {
                    let costs: usize = ids.iter().chain([&next]).map(|&id| cost(id, fields)).sum();
                    let full = 2 + costs + ids.len();
                    assert!(full > PAGE, "{target}: page {page} had room ({full} bytes)");
                }
                seen.extend(ids);
            }
            assert_eq!(seen, want, "{target}: every plant once, in order");
        }
    }
}

crate::on_each_store!(a_page_cut_by_bytes_leads_on_to_every_plant_once);
