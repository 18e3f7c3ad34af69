//! What only the PostgreSQL store has for listings: the upgrade to schema
//! version 3, which fills the folded search columns of the plants already
//! there; the indexes a search and the name order read (trigram indexes
//! where `pg_trgm` can be created, as on the clusters
//! `scripts/with-postgres.sh` makes, and one line in the log where it
//! cannot); names too long for the `(name, id)` index, listed in name
//! order all the same. What every store answers alike is in `api`.

use serde_json::Value;

use plantstore::model::{Budget, Order, Plant, Position, Query, fold};

use super::orders::encoded;
use super::start::versions;
use crate::process::binary::Running;
use crate::support::{AUTH, FreshDatabase, JSON, TOKEN, TestServer, config, eventually, send_to};

/// Versions 1 and 2 as an older build made them, word for word.
const VERSION_2: &str = "
CREATE TABLE plantstore_schema (version integer NOT NULL);
CREATE TABLE plants (id bigint PRIMARY KEY, name bytea NOT NULL, tag bytea);
CREATE INDEX plants_tag_id ON plants (tag, id);
INSERT INTO plantstore_schema (version) VALUES (1);
CREATE TABLE plantstore_feed (
    one boolean PRIMARY KEY DEFAULT true CHECK (one), epoch bigint NOT NULL, last bigint NOT NULL
) WITH (fillfactor = 10);
INSERT INTO plantstore_feed (epoch, last)
VALUES ((extract(epoch FROM clock_timestamp()) * 1000)::bigint, 0);
CREATE TABLE plant_changes (
    seq bigint PRIMARY KEY, ids bigint[] NOT NULL, kinds smallint[] NOT NULL,
    names bytea[] NOT NULL, tags bytea[] NOT NULL
);
INSERT INTO plantstore_schema (version) VALUES (2);
";

/// The ids of a listing's page.
fn ids(page: &Value) -> Vec<i64> {
    let records = page.as_array().expect("a page is an array");
    records.iter().map(|p| p["id"].as_i64().unwrap()).collect()
}

/// The ids `GET target` lists, following `Link` to the end.
fn walk(addr: std::net::SocketAddr, target: &str) -> Vec<i64> {
    let mut seen = Vec::new();
    let mut next = Some(target.to_string());
    while let Some(target) = next.take() {
        let reply = send_to(addr, "GET", &target, &[AUTH], "");
        assert_eq!(reply.status, 200, "{target}: {}", reply.text());
        seen.extend(ids(&reply.json()));
        if let Some(link) = reply.header("link") {
            next = Some(link["<http://test".len()..link.find('>').unwrap()].to_string());
        }
        assert!(seen.len() <= 10_000, "{target}: a walk that does not end");
    }
    seen
}

#[test]
fn a_version_2_database_is_upgraded_to_3_and_its_plants_are_found_by_search() {
    let database = FreshDatabase::new();
    let mut client = database.client();
    client.batch_execute(VERSION_2).unwrap();
    // Three pieces of the upgrade's fill, and the ids at both ends.
    client
        .batch_execute(
            "INSERT INTO plants SELECT i, convert_to('plant ' || i, 'UTF8'), NULL \
             FROM generate_series(1000, 3499) AS i",
        )
        .unwrap();
    let odd: [(i64, &str, Option<&str>); 5] = [
        (i64::MIN, "the first one", None),
        (7, "ÄRGER im Garten", Some("Ärger")),
        (8, "fern", Some("ΣΊΣΥΦΟΣ")),
        (9, "nul\0HERE", None),
        (i64::MAX, "the last one", Some("END")),
    ];
    for (id, name, tag) in odd {
        client
            .execute(
                "INSERT INTO plants VALUES ($1, $2, $3)",
                &[&id, &name.as_bytes(), &tag.map(str::as_bytes)],
            )
            .unwrap();
    }
    let server = Running::start(&["--database", &database.url], Some(TOKEN));
    assert_eq!(versions(&mut client), [1, 2, 3, 4, 5, 6]);
    // Every row filled, each as `fold` folds it.
    let unfilled: i64 = client
        .query_one(
            "SELECT count(*) FROM plants \
             WHERE name_folded IS NULL OR (tag IS NULL) <> (tag_folded IS NULL)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(unfilled, 0);
    for (id, name, tag) in odd {
        let row = client
            .query_one(
                "SELECT name_folded, tag_folded FROM plants WHERE id = $1",
                &[&id],
            )
            .unwrap();
        let folded: (String, Option<String>) = (row.get(0), row.get(1));
        assert_eq!(folded, (fold(name), tag.map(fold)), "{id}");
    }
    let search = |q: &str| {
        let reply = send_to(
            server.addr,
            "GET",
            &format!("/plants?q={}", encoded(q)),
            &[AUTH],
            "",
        );
        assert_eq!(reply.status, 200, "{q}: {}", reply.text());
        ids(&reply.json())
    };
    assert_eq!(search("ärger"), [7], "name and tag, Unicode folded");
    assert_eq!(search("σίσυφος"), [8], "a tag only, final sigma and all");
    assert_eq!(search("L\0h"), [9], "NUL as U+FFFD on both sides");
    assert_eq!(search("FIRST"), [i64::MIN]);
    assert_eq!(search("last one"), [i64::MAX]);
    assert_eq!(search("plant 1000"), [1000]);
    assert_eq!(search("plant 3499"), [3499]);
    assert_eq!(search("t 2"), (2000..2100).collect::<Vec<i64>>());
    // And the writes of the new build fill them too.
    let created = send_to(
        server.addr,
        "POST",
        "/plants",
        &[AUTH, JSON],
        r#"{"id":10,"name":"Neuer FARN"}"#,
    );
    assert_eq!(created.status, 200, "{}", created.text());
    assert_eq!(search("farn"), [10]);
    let log = server.log().join("\n");
    assert!(!log.contains("search scans"), "{log}");
}

/// The number of scans PostgreSQL counted on `index`.
fn scans(client: &mut postgres::Client, index: &str) -> i64 {
    client
        .query_one(
            "SELECT coalesce(sum(idx_scan), 0)::bigint FROM pg_stat_user_indexes \
             WHERE indexrelname = $1",
            &[&index],
        )
        .unwrap()
        .get(0)
}

#[test]
fn searches_and_the_name_order_read_their_indexes_where_pg_trgm_exists() {
    let database = FreshDatabase::new();
    let server = Running::start(&["--database", &database.url], Some(TOKEN));
    let mut client = database.client();
    let definitions: Vec<String> = client
        .query(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'plants' ORDER BY indexname",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    for (index, part) in [
        ("plants_name_trgm", "gin (name_folded gin_trgm_ops)"),
        ("plants_tag_trgm", "gin (tag_folded gin_trgm_ops)"),
        ("plants_name_id", "btree (name, id)"),
    ] {
        assert!(
            definitions
                .iter()
                .any(|d| d.contains(index) && d.contains(part)),
            "{definitions:#?}"
        );
    }
    // Enough plants that a scan costs more than the index (ASCII, which
    // lower() folds as fold does), one of them rare; the trigram index's
    // pending entries merged, and statistics for the planner.
    client
        .batch_execute(
            "INSERT INTO plants SELECT i, convert_to('Plant ' || i, 'UTF8'), NULL, 'plant ' || i, NULL \
             FROM generate_series(1, 50000) AS i;
             UPDATE plants SET name = 'Rare Quokka', name_folded = 'rare quokka' WHERE id = 4321;",
        )
        .unwrap();
    client.batch_execute("VACUUM ANALYZE plants").unwrap();
    let before = (
        scans(&mut client, "plants_name_trgm"),
        scans(&mut client, "plants_name_id"),
    );
    let get = |target: &str| {
        let reply = send_to(server.addr, "GET", target, &[AUTH], "");
        assert_eq!(reply.status, 200, "{target}: {}", reply.text());
        ids(&reply.json())
    };
    assert_eq!(get("/plants?q=QUOKKA"), [4321]);
    assert_eq!(get("/plants?sort=name&limit=3"), [1, 10, 100]);
    // The server's counters reach the statistics within a few seconds.
    assert!(
        eventually(|| scans(&mut client, "plants_name_trgm") > before.0),
        "the search read the trigram index"
    );
    assert!(
        eventually(|| scans(&mut client, "plants_name_id") > before.1),
        "the name order read the (name, id) index"
    );
    let log = server.log().join("\n");
    assert!(!log.contains("search scans"), "{log}");
}

/// A role of the test cluster that may log in, dropped (after the
/// databases that hold its tables) at the end.
struct Role {
    name: String,
    admin: String,
}

impl Drop for Role {
    fn drop(&mut self) {
        if let Ok(mut admin) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = admin.batch_execute(&format!("DROP ROLE IF EXISTS {}", self.name));
        }
    }
}

#[test]
fn without_pg_trgm_a_search_scans_says_so_once_and_a_later_start_makes_the_index() {
    let admin_url = std::env::var("PLANTSTORE_TEST_DATABASE").unwrap();
    let role = Role {
        name: format!("plantstore_notrgm_{}", std::process::id()),
        admin: admin_url,
    };
    let database = FreshDatabase::new();
    let password = "not-secret-test-password";
    database
        .admin()
        .batch_execute(&format!(
            "CREATE ROLE {} LOGIN PASSWORD '{password}'",
            role.name
        ))
        .unwrap();
    // Tables in `public`, but no CREATE on the database, which a trusted
    // extension such as pg_trgm needs.
    let mut client = database.client();
    client
        .batch_execute(&format!("GRANT CREATE ON SCHEMA public TO {}", role.name))
        .unwrap();
    let (scheme, rest) = database.url.split_once("://").unwrap();
    let (_, place) = rest.split_once('@').unwrap();
    let url = format!("{scheme}://{}:{password}@{place}", role.name);
    let server = Running::start(&["--database", &url], Some(TOKEN));
    for (id, name) in [(1, "Quokka fern"), (2, "ivy"), (3, "QUOKKA rose")] {
        let body = format!(r#"{{"id":{id},"name":"{name}"}}"#);
        let reply = send_to(server.addr, "POST", "/plants", &[AUTH, JSON], &body);
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    let found = send_to(server.addr, "GET", "/plants?q=quokka", &[AUTH], "");
    assert_eq!(ids(&found.json()), [1, 3], "a scan finds them all the same");
    let log = server.log();
    let said: Vec<&String> = log.iter().filter(|l| l.contains("search scans")).collect();
    assert_eq!(said.len(), 1, "{log:#?}");
    assert!(said[0].contains("pg_trgm not available"), "{said:?}");
    assert!(said[0].contains("permission denied"), "{said:?}");
    assert!(!said[0].contains(password), "{said:?}");
    drop(server);
    client
        .batch_execute(&format!(
            "GRANT CREATE ON DATABASE {} TO {}",
            database.name(),
            role.name
        ))
        .unwrap();
    let server = Running::start(&["--database", &url], Some(TOKEN));
    let made: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE indexname IN ('plants_name_trgm', 'plants_tag_trgm')",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(made, 2);
    let log = server.log().join("\n");
    assert!(!log.contains("search scans"), "{log}");
    let found = send_to(server.addr, "GET", "/plants?q=quokka", &[AUTH], "");
    assert_eq!(ids(&found.json()), [1, 3]);
}

/// Names of 3,000 characters that do not compress (a btree index entry
/// holds at most 2,704 bytes) and others around the 1,024 bytes the
/// `(name, id)` index takes, listed in name order both ways, a page of two
/// at a time (every cursor past the first page cut at 256 bytes), with and
/// without a search: as the order of their bytes, ties by id.
#[test]
fn names_too_long_for_the_name_index_are_listed_in_name_order_all_the_same() {
    let database = FreshDatabase::new();
    let mut settings = config();
    settings.text_limits.name = 3000;
    let server = TestServer::with(database.config(settings));
    // Letters and digits from a fixed generator (no compression, no JSON
    // escapes).
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut random = |n: usize| -> String {
        const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                CHARS[(state % CHARS.len() as u64) as usize] as char
            })
            .collect()
    };
    let shared = random(1100);
    let tail = random(1900);
    let names: Vec<String> = vec![
        format!("{shared}{}", random(1900)),
        format!("{shared}{tail}"),
        format!("{shared}{}", random(1900)),
        format!("{shared}{tail}"),
        random(3000),
        random(3000),
        shared[..1024].to_string(),
        format!("{}!", &shared[..1024]),
        format!("{}!", &shared[..1023]),
        shared[..200].to_string(),
        "fern".into(),
        "fern".into(),
        "zebra".into(),
    ];
    let mut plants: Vec<(i64, &str)> = Vec::new();
    for (at, name) in names.iter().enumerate() {
        // Ids out of the names' order, so that ties show.
        let id = 100 - at as i64 * 7;
        let body = format!(r#"{{"id":{id},"name":"{name}"}}"#);
        assert_eq!(server.create(&body).status, 200, "{}", name.len());
        plants.push((id, name));
    }
    plants.sort_by(|a, b| a.1.as_bytes().cmp(b.1.as_bytes()).then(a.0.cmp(&b.0)));
    let ascending: Vec<i64> = plants.iter().map(|p| p.0).collect();
    let descending: Vec<i64> = ascending.iter().rev().copied().collect();
    assert_eq!(walk(server.addr, "/plants?sort=name&limit=2"), ascending);
    assert_eq!(walk(server.addr, "/plants?sort=-name&limit=2"), descending);
    assert_eq!(walk(server.addr, "/plants?sort=name&limit=1000"), ascending);
    // A search for a piece of the shared part, in capitals.
    let piece = &shared[1010..1016];
    let q = format!("&q={}", encoded(&piece.to_uppercase()));
    let matching = |ids: &[i64]| -> Vec<i64> {
        let has = |id: &i64| {
            let name = plants.iter().find(|p| p.0 == *id).unwrap().1;
            fold(name).contains(&fold(piece))
        };
        ids.iter().copied().filter(has).collect()
    };
    let found = walk(server.addr, &format!("/plants?sort=name&limit=2{q}"));
    assert_eq!(found, matching(&ascending));
    assert!(found.len() >= 6, "{found:?}");
    let found = walk(server.addr, &format!("/plants?sort=-name&limit=3{q}"));
    assert_eq!(found, matching(&descending));
}

/// A page of long names from the database holds what its budget holds,
/// and pages on from its last plant: it once fetched `limit` rows, whole
/// names and all (with `limit=1000` and names of 64 KiB, 65 MB for the
/// three plants a page can send), and left the cut to the API.
#[test]
fn a_page_of_long_names_fetches_no_more_than_its_budget_holds() {
    let database = FreshDatabase::new();
    let mut connection = super::reset::connect(&database);
    let name = |id: i64| format!("{:02}{}", (id * 7) % 40, "n".repeat(65_534));
    let plants: Vec<(i64, Plant)> = (0..40)
        .map(|id| {
            (
                id,
                Plant {
                    name: name(id),
                    tag: None,
                },
            )
        })
        .collect();
    connection.reset(&plants).expect("the plants are stored");
    let budget = Budget::of(256 * 1024);
    for order in [Order::Id, Order::Name, Order::NameDesc] {
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let query = Query {
                order,
                after,
                limit: 1000,
                ..Query::default()
            };
            let page = connection.query(&query, budget).expect("a page");
            // 65,555 bytes of JSON a record: three fit in 256 KiB, not four.
            let fit = (40 - seen.len()).min(3);
            assert_eq!(page.items.len(), fit, "{order:?}");
            assert_eq!(page.more, seen.len() + page.items.len() < 40, "{order:?}");
            seen.extend(page.items.iter().map(|(id, _)| *id));
            let Some((id, plant)) = page.items.last().filter(|_| page.more) else {
                break;
            };
            after = Some(match order {
                Order::Id | Order::IdDesc => Position::Id(*id),
                _ => Position::past_name(&plant.name, *id),
            });
        }
        let mut want: Vec<i64> = (0..40).collect();
        if order != Order::Id {
            want.sort_by_key(|&id| name(id));
        }
        if order == Order::NameDesc {
            want.reverse();
        }
        assert_eq!(seen, want, "{order:?}: every plant once, in order");
    }
}
