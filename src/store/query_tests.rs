//! Listing queries: every order both ways, ties, cut names, search, tags,
//! counts and the byte cut, each against a brute-force answer.

use std::collections::BTreeMap;

use super::test_support::{Journalled, Waited, plant};
use super::*;
use crate::model::{Budget, CURSOR_NAME, NewPlant, Order, Page, Position, Query, fold};
use crate::os::temp::TempFile;

pub(super) const ORDERS: [Order; 4] = [Order::Id, Order::IdDesc, Order::Name, Order::NameDesc];

/// Where a page ends, as the API writes it into the next cursor: a name
/// longer than `CURSOR_NAME` bytes is cut at a char boundary.
pub(super) fn position(order: Order, id: i64, name: &str) -> Position {
    if !order.by_name() {
        return Position::Id(id);
    }
    Position::past_name(name, id)
}

pub(super) fn query(order: Order, tag: Option<&str>, search: Option<&str>, limit: usize) -> Query {
    Query {
        order,
        after: None,
        tag: tag.map(String::from),
        search: search.map(fold),
        limit,
        count: false,
    }
}

/// The ids `query` lists from the start, sorted by brute force.
pub(super) fn brute(plants: &BTreeMap<i64, Plant>, query: &Query) -> Vec<i64> {
    let mut found: Vec<(&[u8], i64)> = (plants.iter())
        .filter(|(_, p)| query.matches(&p.name, p.tag.as_deref()))
        .map(|(&id, p)| (p.name.as_bytes(), id))
        .collect();
    match query.order {
        Order::Id | Order::IdDesc => found.sort_by_key(|&(_, id)| id),
        Order::Name | Order::NameDesc => found.sort(),
    }
    if query.order.descending() {
        found.reverse();
    }
    found.into_iter().map(|(_, id)| id).collect()
}

/// Every page of `query`, each resuming where the last ended.
pub(super) fn pages(store: &Store, query: &Query, bytes: usize) -> Vec<Page> {
    let mut query = query.clone();
    let mut pages: Vec<Page> = Vec::new();
    loop {
        let page = store.query(&query, Budget::of(bytes));
        let (more, last) = (page.more, page.items.last().cloned());
        pages.push(page);
        match last {
            Some((id, plant)) if more => query.after = Some(position(query.order, id, &plant.name)),
            _ => return pages,
        }
    }
}

fn ids(pages: &[Page]) -> Vec<i64> {
    pages
        .iter()
        .flat_map(|p| p.items.iter().map(|(id, _)| *id))
        .collect()
}

/// A store and the same plants in a map.
fn filled(plants: &[(i64, &str, Option<&str>)]) -> (Store, BTreeMap<i64, Plant>) {
    let store = Store::new(Capacity::plants(100_000));
    let mut map = BTreeMap::new();
    for &(id, name, tag) in plants {
        let plant = plant(name, tag);
        store
            .create(NewPlant {
                id,
                plant: plant.clone(),
            })
            .unwrap();
        map.insert(id, plant);
    }
    (store, map)
}

#[test]
fn every_order_pages_through_in_order_with_ties_filters_and_counts() {
    let long = "x".repeat(CURSOR_NAME + 40);
    let names = [
        "fern",
        "Fern",
        "moss",
        "",
        "ärger",
        "\u{1F331}",
        &long,
        "fern",
    ];
    let tags = [None, Some("a"), Some("fern"), Some("b")];
    let spec: Vec<(i64, String, Option<&str>)> = (0..600i64)
        .map(|i| {
            let id = (i * 7919) % 600 - 300;
            let name = names[(i % 8) as usize];
            // Long names differ only past what a cursor holds.
            let name = if i % 8 == 6 {
                format!("{name}{}", i % 5)
            } else {
                name.into()
            };
            (id, name, tags[(i % 4) as usize])
        })
        .collect();
    let spec: Vec<(i64, &str, Option<&str>)> =
        spec.iter().map(|(i, n, t)| (*i, n.as_str(), *t)).collect();
    let (store, map) = filled(&spec);
    for order in ORDERS {
        for (tag, search) in [
            (None, None),
            (Some("a"), None),
            (None, Some("FERN")),
            (Some("fern"), Some("x")),
            (Some("a"), Some("FERN")),
        ] {
            let full = query(order, tag, search, 0);
            let want = brute(&map, &full);
            assert!(want.len() > 10, "{order:?} {tag:?} {search:?}");
            for limit in [1, 7, 1000] {
                let walked = pages(
                    &store,
                    &Query {
                        limit,
                        ..full.clone()
                    },
                    usize::MAX,
                );
                assert_eq!(ids(&walked), want, "{order:?} {tag:?} {search:?} {limit}");
                let sizes = walked.iter().map(|p| (p.items.len(), p.more));
                assert!(sizes.rev().skip(1).all(|(n, more)| n == limit && more));
            }
            let counted = store.query(
                &Query {
                    count: true,
                    limit: 3,
                    ..full
                },
                Budget::UNBOUNDED,
            );
            assert_eq!(counted.total, Some(want.len() as u64));
            assert_eq!(counted.items.len(), 3);
        }
    }
    let none = store.query(&query(Order::Name, None, None, 10), Budget::UNBOUNDED);
    assert_eq!(none.total, None, "nothing is counted unless asked");
    let all = Query {
        count: true,
        ..query(Order::Id, None, None, 0)
    };
    assert_eq!(store.query(&all, Budget::UNBOUNDED).total, Some(600));
}

#[test]
fn a_cut_name_resumes_at_its_plant_or_at_its_prefix() {
    let cut = "x".repeat(CURSOR_NAME);
    let (a, b, c) = (format!("{cut}a"), format!("{cut}b"), format!("{cut}c"));
    let spec = [
        (0, "w", None),
        (1, &*a, None),
        (2, &*b, None),
        (3, &*c, None),
        (4, "y", None),
    ];
    let (store, _) = filled(&spec);
    let from_two = |order: Order| {
        let after = Some(position(order, 2, &b));
        assert!(matches!(after, Some(Position::Name { cut: Some(_), .. })));
        let page = store.query(
            &Query {
                after,
                ..query(order, None, None, 10)
            },
            Budget::UNBOUNDED,
        );
        page.items.iter().map(|(id, _)| *id).collect::<Vec<_>>()
    };
    assert_eq!(
        (from_two(Order::Name), from_two(Order::NameDesc)),
        (vec![3, 4], vec![1, 0])
    );
    // Renamed, then gone: the page resumes at the first name starting as
    // the cursor's does, so the plants sharing it may come again, and
    // none is skipped.
    store.replace(2, plant("zz", None)).unwrap();
    assert_eq!(
        (from_two(Order::Name), from_two(Order::NameDesc)),
        (vec![1, 3, 4, 2], vec![3, 1, 0])
    );
    store.delete(2).unwrap();
    assert_eq!(
        (from_two(Order::Name), from_two(Order::NameDesc)),
        (vec![1, 3, 4], vec![3, 1, 0])
    );
}

#[test]
fn search_folds_case_and_unicode_matches_name_or_tag_and_takes_wildcards_literally() {
    let spec = [
        (1, "Monstera", None),
        (2, "MONSTERA deliciosa", Some("big")),
        (3, "Ärger", None),
        (4, "50%_off", None),
        (5, "5000 off", Some("sale")),
        (6, "pot", Some("Fern")),
        (7, "KELVIN", None),
        (8, "a\\b", None),
        (9, "a\0b", None),
        (10, "\u{212A}elvin \u{1F331}", None),
    ];
    let (store, map) = filled(&spec);
    let found = |search: &str, tag: Option<&str>| {
        let q = query(Order::Id, tag, Some(search), 100);
        let page = store.query(
            &Query {
                count: true,
                ..q.clone()
            },
            Budget::UNBOUNDED,
        );
        let got: Vec<i64> = page.items.iter().map(|(id, _)| *id).collect();
        assert_eq!(got, brute(&map, &q), "{search:?}");
        assert_eq!(page.total, Some(got.len() as u64));
        got
    };
    assert_eq!(found("monSTERA", None), [1, 2]);
    assert_eq!(found("monstera", Some("big")), [2]);
    assert_eq!(found("ärg", None), [3]);
    assert_eq!(found("ÄRGER", None), [3]);
    assert_eq!(found("%_", None), [4]);
    assert_eq!(found("0%", None), [4]);
    assert_eq!(found("%", None), [4]);
    assert_eq!(found("\\", None), [8]);
    assert_eq!(found("fern", None), [6], "the tag matches");
    assert_eq!(found("SALE", None), [5]);
    let kelvin = found("\u{212A}elvin", None);
    assert_eq!(kelvin, [7, 10], "the Kelvin sign folds to k");
    assert_eq!(found("kelvin", None), [7, 10]);
    assert_eq!(found("\u{FFFD}", None), [9], "NUL folds to U+FFFD");
    assert_eq!(found("A\0", None), [9], "and so does one searched for");
    assert_eq!(found("off", Some("sale")), [5]);
    assert_eq!(found("nothing", None), Vec::<i64>::new());
}

#[test]
fn a_page_in_name_order_within_a_byte_budget_stops_early() {
    let names: Vec<String> = (0..10).map(|i| format!("{i}{}", "n".repeat(99))).collect();
    let spec: Vec<(i64, &str, Option<&str>)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (100 - i as i64, n.as_str(), None))
        .collect();
    let (store, _) = filled(&spec);
    let walked = pages(&store, &query(Order::Name, None, None, 100), 370);
    let sizes: Vec<usize> = walked.iter().map(|p| p.items.len()).collect();
    assert_eq!(sizes, [3, 3, 3, 1]);
    assert_eq!(ids(&walked), (91..=100).rev().collect::<Vec<_>>());
    let one = store.query(&query(Order::NameDesc, None, None, 100), Budget::of(0));
    assert_eq!((one.items.len(), one.items[0].0, one.more), (1, 91, true));
}

#[test]
fn a_position_of_another_kind_or_past_the_end_lists_nothing() {
    let (store, _) = filled(&[
        (i64::MIN, "a", Some("t")),
        (0, "b", Some("t")),
        (i64::MAX, "c", Some("t")),
    ]);
    let name = Position::Name {
        name: "a".into(),
        id: 0,
        cut: None,
    };
    for (order, after) in [
        (Order::Id, name.clone()),
        (Order::IdDesc, name),
        (Order::Name, Position::Id(0)),
    ] {
        let page = store.query(
            &Query {
                after: Some(after),
                ..query(order, None, None, 10)
            },
            Budget::UNBOUNDED,
        );
        assert_eq!(page, Page::default());
    }
    for tag in [None, Some("t")] {
        for (order, at) in [(Order::Id, i64::MAX), (Order::IdDesc, i64::MIN)] {
            let after = Some(Position::Id(at));
            let page = store.query(
                &Query {
                    after,
                    ..query(order, tag, None, 10)
                },
                Budget::UNBOUNDED,
            );
            assert_eq!(page, Page::default(), "{order:?} {tag:?}");
        }
    }
    let top = Position::Name {
        name: "\u{10FFFF}".into(),
        id: 0,
        cut: Some(0),
    };
    let page = store.query(
        &Query {
            after: Some(top),
            ..query(Order::NameDesc, None, None, 10)
        },
        Budget::UNBOUNDED,
    );
    assert_eq!(
        page.items.len(),
        3,
        "below a cut name above every name: all of them"
    );
}

#[test]
fn the_name_order_follows_puts_renames_deletes_and_replay() {
    let path = TempFile::new("name-order");
    let mut map = BTreeMap::new();
    {
        let (store, _) = path.open().unwrap();
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..3000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let id = (rng % 400) as i64;
            let name = format!(
                "{}{}",
                ["Fern ", "fern", "a long name of some kind "][(rng >> 20) as usize % 3],
                rng >> 40 & 7
            );
            let tag = (rng >> 30 & 1 == 0).then_some("t");
            let kept = map.get(&id).map(|p: &Plant| p.name.clone());
            match (rng >> 50 & 3, kept) {
                (0, _) => {
                    let _ = store.delete(id);
                    map.remove(&id);
                }
                // A replace that keeps the name, then one that renames.
                (1, Some(name)) => {
                    store.replace(id, plant(&name, tag)).unwrap();
                    map.insert(id, plant(&name, tag));
                }
                (_, Some(_)) => {
                    store.replace(id, plant(&name, tag)).unwrap();
                    map.insert(id, plant(&name, tag));
                }
                (_, None) => {
                    store
                        .create(NewPlant {
                            id,
                            plant: plant(&name, tag),
                        })
                        .unwrap();
                    map.insert(id, plant(&name, tag));
                }
            }
        }
        for order in ORDERS {
            let full = query(order, None, None, 1000);
            assert_eq!(ids(&pages(&store, &full, usize::MAX)), brute(&map, &full));
        }
    }
    let (store, _) = path.open().unwrap();
    for order in [Order::Name, Order::NameDesc] {
        for (tag, search) in [(None, None), (Some("t"), Some("FERN"))] {
            let full = query(order, tag, search, 13);
            assert_eq!(
                ids(&pages(&store, &full, usize::MAX)),
                brute(&map, &full),
                "replayed"
            );
        }
    }
}

#[test]
fn pages_that_take_many_rounds_miss_nothing_in_any_order() {
    // Shards hold more than a step examines, so a selective search stops
    // every shard at a different place, and a page takes many rounds,
    // each final only up to the least advanced of them. The ids are
    // scattered, so that shards are uneven (consecutive ids spread over
    // them too evenly to tell).
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let names: Vec<(i64, String, Option<&str>)> = (0..20_000u64)
        .map(|n| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let rare = if n % 20 == 7 { "Rare " } else { "" };
            let name = format!("{rare}{} {}", ["fern", "moss"][n as usize % 2], n % 7919);
            // Distinct: the low bits count.
            let id = (seed & !0xFFFF) as i64 | n as i64;
            (id, name, (n % 5 == 0).then_some("five"))
        })
        .collect();
    let spec: Vec<(i64, &str, Option<&str>)> =
        names.iter().map(|(i, n, t)| (*i, n.as_str(), *t)).collect();
    let (store, map) = filled(&spec);
    for order in ORDERS {
        for (tag, search, limit) in [
            (None, Some("rare"), 1000),
            (None, None, 1000),
            (Some("five"), Some("fern 1"), 500),
            (None, Some("moss 7"), 100),
        ] {
            let full = query(order, tag, search, limit);
            let want = brute(&map, &full);
            assert!(want.len() > 10, "{order:?} {search:?}: {}", want.len());
            let walked = pages(&store, &full, usize::MAX);
            assert_eq!(ids(&walked), want, "{order:?} {tag:?} {search:?}");
        }
    }
}
