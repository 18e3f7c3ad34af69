//! The store's own rules: limits, ordering, listing, compaction under
//! writers, the change hook.

use super::*;
use crate::model::{Budget, NewPlant, Page, Query};
use test_support::Waited;

fn new_plant(id: i64, name: &str) -> NewPlant {
    NewPlant {
        id,
        plant: Plant {
            name: name.to_string(),
            tag: None,
        },
    }
}

#[test]
fn create_refuses_existing_id_and_keeps_the_first() {
    let store = Store::new(Capacity::plants(10));
    store.create(new_plant(1, "fern")).unwrap();
    assert_eq!(store.create(new_plant(1, "moss")), Err(Refusal::Exists(1)));
    assert_eq!(store.get(1).unwrap().name, "fern");
}

#[test]
fn page_walks_from_the_cursor_and_filters_by_tag() {
    let store = Store::new(Capacity::plants(100));
    for id in [5, 1, 3, 2, 4] {
        let tag = (id % 2 == 0).then(|| "even".to_string());
        store
            .create(NewPlant {
                id,
                plant: Plant {
                    name: format!("p{id}"),
                    tag,
                },
            })
            .unwrap();
    }
    let ids = |page: &Page| page.items.iter().map(|(id, _)| *id).collect::<Vec<_>>();
    let first = store.page(None, 2, None);
    assert_eq!((ids(&first), first.more), (vec![1, 2], true));
    let last = store.page(Some(3), 2, None);
    assert_eq!((ids(&last), last.more), (vec![4, 5], false));
    let even = store.page(None, 10, Some("even"));
    assert_eq!((ids(&even), even.more), (vec![2, 4], false));
    assert_eq!(store.page(Some(i64::MAX), 10, None), Page::default());
    assert!(
        !store.page(None, 0, None).more,
        "limit 0 never promises more"
    );
}

#[test]
fn pages_merge_every_shard_in_id_order() {
    let store = Store::new(Capacity::plants(10_000));
    // Ids in a scrambled order, negative and positive, across shards.
    let ids: Vec<i64> = (0..1000i64).map(|i| (i * 7919) % 1000 - 500).collect();
    for &id in &ids {
        let tag = (id % 3 == 0).then(|| "three".to_string());
        let plant = Plant {
            name: format!("p{id}"),
            tag,
        };
        store.create(NewPlant { id, plant }).unwrap();
    }
    let walk = |tag: Option<&str>| {
        let (mut seen, mut after) = (Vec::new(), None);
        loop {
            let page = store.page(after, 7, tag);
            seen.extend(page.items.iter().map(|(id, _)| *id));
            after = seen.last().copied();
            if !page.more {
                return seen;
            }
        }
    };
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(walk(None), sorted);
    let threes: Vec<i64> = sorted.iter().copied().filter(|id| id % 3 == 0).collect();
    assert_eq!(walk(Some("three")), threes);
    assert_eq!(store.len(), 1000);
}

#[test]
fn pages_are_whole_when_every_id_is_in_one_shard() {
    // A page reads each shard a step at a time; here one shard holds
    // every plant, so the page takes many steps of that shard.
    let store = Store::new(Capacity::plants(10_000));
    let ids: Vec<i64> = (0..20_000i64).filter(|&id| shard_of(id) == 3).collect();
    for &id in &ids {
        let tag = (id % 5 == 0).then(|| "five".to_string());
        let plant = Plant {
            name: format!("p{id}"),
            tag,
        };
        store.create(NewPlant { id, plant }).unwrap();
    }
    let page = store.page(None, 1000, None);
    let got: Vec<i64> = page.items.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        (got.as_slice(), page.more),
        (&ids[..ids.len().min(1000)], ids.len() > 1000)
    );
    let fives: Vec<i64> = ids.iter().copied().filter(|id| id % 5 == 0).collect();
    let page = store.page(Some(fives[2]), 10_000, Some("five"));
    let got: Vec<i64> = page.items.iter().map(|(id, _)| *id).collect();
    assert_eq!((got.as_slice(), page.more), (&fives[3..], false));
    assert_eq!(store.page(None, 10, Some("none")), Page::default());
}

#[test]
fn a_page_within_a_byte_budget_stops_early_and_says_more_follow() {
    let store = Store::new(Capacity::plants(100));
    for id in 0..10 {
        let plant = Plant {
            name: "n".repeat(100),
            tag: None,
        };
        store.create(NewPlant { id, plant }).unwrap();
    }
    let ids = |page: &Page| page.items.iter().map(|(id, _)| *id).collect::<Vec<_>>();
    let page = store.page_within(None, 100, None, Budget::of(370));
    assert_eq!((ids(&page), page.more), (vec![0, 1, 2], true));
    let page = store.page_within(Some(7), 100, None, Budget::of(370));
    assert_eq!((ids(&page), page.more), (vec![8, 9], false));
    let page = store.page_within(None, 100, None, Budget::of(0));
    assert_eq!((ids(&page), page.more), (vec![0], true), "one at least");
}

#[test]
fn a_page_full_by_bytes_copies_about_what_it_holds_whatever_its_limit() {
    // A listing once took plants until it had `limit` of them and only
    // then cut its page by bytes: with limit=1000 over long names it
    // copied 1,312 plants (82 a shard) to answer the 31 that fit.
    use super::query_tests::{ORDERS, query};
    use super::walk::COPIED;
    let store = Store::new(Capacity::plants(2000));
    for id in 0..2000 {
        let name = format!("{id:05}{}", "n".repeat(2043));
        store.create(new_plant(id, &name)).unwrap();
    }
    let budget = Budget::of(64 * 1024);
    for order in ORDERS {
        for limit in [4, 40, 1000] {
            COPIED.set(0);
            let page = store.query(&query(order, None, None, limit), budget);
            let copied = COPIED.get();
            let array = page.items.iter().fold(Budget::EMPTY, |array, (id, p)| {
                array + budget.record_len(*id, &p.name, p.tag.as_deref()) + 1
            }) - 1;
            // Full: 31 records of about 2,070 bytes fit in 64 KiB.
            let held = page.items.len();
            assert_eq!((held, page.more), (limit.min(31), true), "{order:?}");
            assert!(array <= budget.bytes, "{order:?} {limit}: {array} bytes");
            // The steps of 16 shards merge: each copies a share of the
            // room left, and what passes a round's frontier is read again.
            assert!(
                copied <= 6 * budget.bytes,
                "{order:?} limit={limit}: {copied} bytes copied for a page of {array}"
            );
        }
    }
    // Names not shown are not copied (in id order nothing needs them),
    // but count as they would (the database reads them).
    let ids = Budget {
        name: false,
        tag: false,
        ..budget
    };
    COPIED.set(0);
    let page = store.query(&query(crate::model::Order::IdDesc, None, None, 1000), ids);
    assert_eq!((page.items.len(), page.more), (31, true));
    assert_eq!(page.items[0].0, 1999);
    assert_eq!(COPIED.get(), 0);
}

#[test]
fn writers_of_every_shard_go_on_while_a_page_is_read() {
    // A listing once held every shard's read lock for the whole page;
    // now between its steps it holds none, so a writer on any shard
    // (here: from another thread, waited for from inside the page)
    // finishes at once.
    let store = Arc::new(Store::new(Capacity::plants(10_000)));
    for id in 0..2000 {
        store.create(new_plant(id, "p")).unwrap();
    }
    let mut next = 10_000;
    let mut steps = 0;
    let query = Query {
        limit: 1000,
        ..Query::default()
    };
    let page = store.query_between_steps(&query, Budget::UNBOUNDED, || {
        steps += 1;
        let (writer, id) = (Arc::clone(&store), next);
        next += 1;
        let (done, finished) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let _ = done.send(writer.create(new_plant(id, "during")));
        });
        let result = finished.recv_timeout(std::time::Duration::from_secs(5));
        assert_eq!(
            result,
            Ok(Ok(())),
            "a writer waited for a page (step {steps})"
        );
    });
    assert!(steps >= SHARDS, "{steps} steps");
    let ids: Vec<i64> = page.items.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (0..1000).collect::<Vec<_>>());
    assert_eq!(store.len(), 2000 + steps);
}

#[test]
fn reading_all_plants_while_they_change_keeps_the_listing_promises() {
    // Even ids exist throughout; odd ones are deleted, created and
    // renamed between pieces, ahead of and behind the read.
    let store = Store::new(Capacity::plants(100_000));
    for id in 0..5000 {
        store.create(new_plant(id, "before")).unwrap();
    }
    let mut all = store.all_plants();
    let mut read: Vec<i64> = Vec::new();
    let mut pieces = 0;
    while !all.is_done() {
        let piece = all.next_piece(97, usize::MAX);
        assert!(!piece.is_empty() || all.is_done());
        read.extend(piece.iter().map(|(id, _)| *id));
        pieces += 1;
        let at = 100 * pieces;
        for id in [at + 1, at + 2001, 7001 + at] {
            let _ = store.delete(id);
            let _ = store.create(new_plant(id + 2, "during"));
            let _ = store.replace(
                id - 2,
                Plant {
                    name: "renamed".into(),
                    tag: None,
                },
            );
        }
    }
    assert!(pieces > 50, "{pieces} pieces");
    assert!(read.windows(2).all(|w| w[0] < w[1]), "strictly ascending");
    let evens: Vec<i64> = read.iter().copied().filter(|id| id % 2 == 0).collect();
    assert_eq!(evens, (0..5000).step_by(2).collect::<Vec<_>>());
    assert!(all.next_piece(97, usize::MAX).is_empty(), "done stays done");
}

#[test]
fn all_plants_come_in_pieces_bounded_in_bytes() {
    let store = Store::new(Capacity::plants(100));
    for id in 0..10 {
        store.create(new_plant(id, &"n".repeat(100))).unwrap();
    }
    let mut all = store.all_plants();
    let sizes: Vec<usize> =
        std::iter::from_fn(|| Some(all.next_piece(100, 370).len()).filter(|&n| n > 0)).collect();
    assert_eq!(sizes, [3, 3, 3, 1]);
    assert!(
        Store::new(Capacity::plants(1))
            .all_plants()
            .next_piece(100, 1)
            .is_empty()
    );
}

#[test]
fn retagging_and_deleting_keep_tag_pages_right() {
    let store = Store::new(Capacity::plants(100));
    let plant = |tag: Option<&str>| Plant {
        name: "p".into(),
        tag: tag.map(String::from),
    };
    for id in 0..10 {
        store
            .create(NewPlant {
                id,
                plant: plant(Some("a")),
            })
            .unwrap();
    }
    store.replace(3, plant(Some("b"))).unwrap();
    store.replace(4, plant(None)).unwrap();
    store.delete(5).unwrap();
    let ids = |tag| {
        let page = store.page(None, 100, Some(tag));
        page.items.iter().map(|(id, _)| *id).collect::<Vec<_>>()
    };
    assert_eq!(ids("a"), vec![0, 1, 2, 6, 7, 8, 9]);
    assert_eq!(ids("b"), vec![3]);
}

#[test]
fn data_is_bounded_in_bytes_of_names_and_tags() {
    let store = Store::new(Capacity {
        plants: 100,
        data: 10,
    });
    let plant = |name: &str, tag: Option<&str>| Plant {
        name: name.into(),
        tag: tag.map(String::from),
    };
    store
        .create(NewPlant {
            id: 1,
            plant: plant("abcd", Some("ef")),
        })
        .unwrap();
    assert_eq!(store.data_bytes(), 6);
    assert_eq!(
        store.create(NewPlant {
            id: 2,
            plant: plant("12345", None)
        }),
        Err(Refusal::DataFull(10))
    );
    assert_eq!(
        store.replace(1, plant("abcdefghijk", None)),
        Err(Refusal::DataFull(10))
    );
    assert_eq!(
        store.get(1),
        Some(plant("abcd", Some("ef"))),
        "refused: unchanged"
    );
    store
        .create(NewPlant {
            id: 2,
            plant: plant("1234", None),
        })
        .unwrap();
    store.replace(1, plant("a", None)).unwrap();
    store.delete(2).unwrap();
    assert_eq!((store.len(), store.data_bytes()), (1, 1));
}

#[test]
fn replace_and_delete_need_an_existing_plant() {
    let store = Store::new(Capacity::plants(10));
    let plant = Plant {
        name: "x".into(),
        tag: None,
    };
    assert_eq!(store.replace(1, plant.clone()), Err(Refusal::NotFound(1)));
    assert_eq!(store.delete(1), Err(Refusal::NotFound(1)));
    store.create(new_plant(1, "a")).unwrap();
    store.replace(1, plant.clone()).unwrap();
    assert_eq!(store.get(1), Some(plant));
    store.delete(1).unwrap();
    assert!(store.get(1).is_none());
}

#[test]
fn create_refuses_past_the_cap() {
    let store = Store::new(Capacity::plants(2));
    store.create(new_plant(1, "a")).unwrap();
    store.create(new_plant(2, "b")).unwrap();
    assert_eq!(store.create(new_plant(3, "c")), Err(Refusal::Full(2)));
    assert_eq!(store.len(), 2);
    assert!(store.get(3).is_none());
}

#[test]
fn without_a_journal_the_change_hook_reports_each_change_as_it_is_applied() {
    let store = Store::new(Capacity::plants(10));
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let into = std::sync::Arc::clone(&seen);
    store.set_change_hook(Box::new(move |c| {
        into.lock().unwrap().push((c.seq, c.id, c.kind))
    }));
    store.create(new_plant(1, "fern")).unwrap();
    let _ = store.create(new_plant(1, "again")); // refused: not a change
    store.replace(1, new_plant(1, "moss").plant).unwrap();
    store.delete(1).unwrap();
    use crate::model::ChangeKind::*;
    assert_eq!(
        *seen.lock().unwrap(),
        [(1, 1, Created), (2, 1, Replaced), (3, 1, Deleted)]
    );
}
