//! Listing queries while the store changes between their steps: the
//! promises of `listing.rs` in every order, with and without a search, and
//! writers that never wait for a page or a count.

use std::collections::{BTreeMap, HashSet};
use std::sync::mpsc;
use std::time::Duration;

use super::order::tests::Rng;
use super::query_tests::{ORDERS, position, query};
use super::test_support::{Waited, plant};
use super::walk::compare;
use super::*;
use crate::model::{Budget, NewPlant, Order, Query};

impl Rng {
    /// A name anywhere in the order, with "needle" in one of three.
    fn name(&mut self, what: &str, id: i64) -> String {
        let letter = char::from(b'a' + self.below(26) as u8);
        let needle = if self.below(3) == 0 { "NeedLe" } else { "" };
        format!("{letter} {what} {needle}{id}")
    }
}

/// One change among the churning plants (odd ids): a create, a delete or
/// a rename; and a replace of a stable plant (even id) that keeps its
/// name.
fn churn(store: &Store, rng: &mut Rng, stable: &BTreeMap<i64, Plant>) {
    let id = 2 * rng.below(1000) as i64 + 1;
    let name = rng.name("churn", id);
    match rng.below(3) {
        0 => drop(store.delete(id)),
        1 => drop(store.create(NewPlant {
            id,
            plant: plant(&name, None),
        })),
        _ => drop(store.replace(id, plant(&name, None))),
    }
    let id = 2 * rng.below(1000) as i64;
    let tag = (rng.below(2) == 0).then_some("t");
    store.replace(id, plant(&stable[&id].name, tag)).unwrap();
}

#[test]
fn pages_in_every_order_keep_their_promises_while_the_store_changes() {
    for order in ORDERS {
        for search in [None, Some("needle")] {
            let store = Store::new(Capacity::plants(10_000));
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
            let mut stable = BTreeMap::new();
            for id in 0..2000 {
                let name = rng.name(if id % 2 == 0 { "stable" } else { "churn" }, id);
                store
                    .create(NewPlant {
                        id,
                        plant: plant(&name, None),
                    })
                    .unwrap();
                if id % 2 == 0 {
                    stable.insert(id, plant(&name, None));
                }
            }
            let mut q = query(order, None, search, 37);
            let mut listed: Vec<(i64, Plant)> = Vec::new();
            loop {
                let page = store.query_between_steps(&q, Budget::UNBOUNDED, || {
                    churn(&store, &mut rng, &stable)
                });
                let ids: HashSet<i64> = page.items.iter().map(|(id, _)| *id).collect();
                assert_eq!(
                    ids.len(),
                    page.items.len(),
                    "{order:?}: an id twice on one page"
                );
                listed.extend(page.items.iter().cloned());
                match page.items.last() {
                    Some((id, p)) if page.more => q.after = Some(position(order, *id, &p.name)),
                    _ => break,
                }
            }
            let place = |(id, p): &(i64, Plant)| (p.name.as_bytes().to_vec(), *id);
            for pair in listed.windows(2) {
                let (a, b) = (place(&pair[0]), place(&pair[1]));
                let strictly = compare(order, (&a.0, a.1), (&b.0, b.1)).is_lt();
                assert!(strictly, "{order:?} {search:?}: {a:?} then {b:?}");
            }
            let seen: Vec<i64> = listed
                .iter()
                .map(|(id, _)| *id)
                .filter(|id| id % 2 == 0)
                .collect();
            let mut want: Vec<i64> = (stable.iter())
                .filter(|(_, p)| q.matches(&p.name, None))
                .map(|(id, _)| *id)
                .collect();
            let mut sorted = seen.clone();
            sorted.sort_unstable();
            want.sort_unstable();
            assert_eq!(
                sorted, want,
                "{order:?} {search:?}: every stable plant once"
            );
            assert!(want.len() > 200, "{}", want.len());
        }
    }
}

#[test]
fn writers_go_on_while_a_search_or_a_count_reads_the_store() {
    // A search that matches nothing reads every plant, a step at a time;
    // a writer of any shard finishes while it does, and no step examines
    // more than SCAN plants (each shard holds more than two steps' worth).
    let store = Arc::new(Store::new(Capacity::plants(100_000)));
    let plants = 40_000;
    for id in 0..plants {
        store
            .create(NewPlant {
                id,
                plant: plant("p", None),
            })
            .unwrap();
    }
    let mut next = 1_000_000;
    for order in ORDERS {
        let mut steps = 0;
        let q = Query {
            count: true,
            ..query(order, None, Some("absent"), 100)
        };
        let page = store.query_between_steps(&q, Budget::UNBOUNDED, || {
            steps += 1;
            let (writer, id) = (Arc::clone(&store), next);
            next += 1;
            let (done, finished) = mpsc::channel();
            thread::spawn(move || {
                let _ = done.send(writer.create(NewPlant {
                    id,
                    plant: plant("during", None),
                }));
            });
            let result = finished.recv_timeout(Duration::from_secs(5));
            assert_eq!(
                result,
                Ok(Ok(())),
                "a writer waited for a search (step {steps})"
            );
        });
        assert_eq!(
            (page.items.len(), page.more, page.total),
            (0, false, Some(0))
        );
        // Both the page and the count: a step may examine about a thousand
        // plants (`SCAN`), so each walk takes at least this many steps.
        let least = plants as usize / 1024;
        assert!(steps >= 2 * least, "{order:?}: {steps} steps");
    }
}

#[test]
fn a_plant_renamed_while_a_page_is_read_is_listed_once_on_it() {
    // Every plant in one shard, so that a page takes several rounds; the
    // first plant of the walk, read in the first round, is renamed to the
    // far end of the order before the second, which reads it again.
    let ids: Vec<i64> = (0..20_000i64)
        .filter(|&id| shard_of(id) == 3)
        .take(300)
        .collect();
    for order in [Order::Name, Order::NameDesc] {
        let store = Store::new(Capacity::plants(10_000));
        for (n, &id) in ids.iter().enumerate() {
            let name = format!("m {n:04}");
            store
                .create(NewPlant {
                    id,
                    plant: plant(&name, None),
                })
                .unwrap();
        }
        let (first, far) = match order {
            Order::Name => (ids[0], "z"),
            _ => (ids[299], "a"),
        };
        let mut steps = 0;
        let page =
            store.query_between_steps(&query(order, None, None, 1000), Budget::UNBOUNDED, || {
                steps += 1;
                if steps == SHARDS + 1 {
                    store.replace(first, plant(far, None)).unwrap();
                }
            });
        assert!(steps > 2 * SHARDS, "{steps} steps");
        let listed: Vec<i64> = page.items.iter().map(|(id, _)| *id).collect();
        assert_eq!(listed.len(), 300, "{order:?}: each plant once");
        assert_eq!(listed[0], first);
        assert_ne!(page.items[0].1.name, far, "listed as it was when read");
    }
}
