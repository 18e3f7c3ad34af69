//! Listing benchmark: why the store is a `BTreeMap`.
//!
//! Fills 1,000,000 plants, then times one page (`limit=100`) taken from the
//! middle of the id range, as `GET /plants?after=500000&limit=100` does:
//! the real `Store::page` (a `BTreeMap` range walk) against what a
//! `HashMap` store would have to do (scan every entry, keep those past the
//! cursor, select the 100 smallest). Prints figures; asserts nothing.
//!
//! Run: cargo run --release --example list_bench

use std::collections::HashMap;
use std::time::Instant;

use plantstore::model::{Capacity, Edit, Plant};
use plantstore::store::{Durable, Store};

const PLANTS: i64 = 1_000_000;
const ROUNDS: u32 = 50;

fn plant(id: i64) -> Plant {
    Plant {
        name: format!("plant {id}"),
        tag: (id % 10 == 0).then(|| "ten".to_string()),
    }
}

fn main() {
    let store = Store::new(Capacity::plants(PLANTS as usize));
    let mut hash: HashMap<i64, Plant> = HashMap::new();
    for id in 0..PLANTS {
        let created = store.change(id, Edit::Create(plant(id)));
        assert_eq!(created, Ok(Durable::Now), "room, and no journal");
        hash.insert(id, plant(id));
    }
    let after = PLANTS / 2;

    let started = Instant::now();
    for _ in 0..ROUNDS {
        let page = store.page(Some(after), 100, None);
        assert_eq!(page.items.len(), 100);
    }
    let btree = started.elapsed() / ROUNDS;

    let started = Instant::now();
    for _ in 0..ROUNDS {
        let mut past: Vec<(i64, &Plant)> = hash
            .iter()
            .filter(|(id, _)| **id > after)
            .map(|(id, p)| (*id, p))
            .collect();
        let n = 100.min(past.len());
        past.select_nth_unstable_by_key(n, |(id, _)| *id);
        past.truncate(n);
        past.sort_unstable_by_key(|(id, _)| *id);
        let page: Vec<(i64, Plant)> = past.into_iter().map(|(id, p)| (id, p.clone())).collect();
        assert_eq!(page.len(), 100);
    }
    let hashed = started.elapsed() / ROUNDS;

    let started = Instant::now();
    for _ in 0..ROUNDS {
        let page = store.page(Some(after), 100, Some("ten"));
        assert_eq!(page.items.len(), 100);
    }
    let tagged = started.elapsed() / ROUNDS;

    println!("| store ({PLANTS} plants) | one page of 100 from the middle |");
    println!("|---|---|");
    println!("| BTreeMap range walk (Store::page) | {btree:?} |");
    println!("| HashMap scan + select + sort | {hashed:?} |");
    println!("| BTreeMap, tag filter matching 1 in 10 | {tagged:?} |");
}
