//! Versions in memory: each change of a plant gives it a version higher
//! than any the store gave before, so a plant deleted and created again
//! never gets an earlier one back; a reset and a new store are lineages
//! of their own. What the journal keeps of them is tested in
//! `journal/tests/versions.rs`.

use super::Store;
use super::test_support::{Waited, new, plant};
use crate::model::{Capacity, Refusal};

fn version(store: &Store, id: i64) -> u64 {
    store.get_versioned(id).expect("the plant is there").version
}

#[test]
fn each_change_gives_the_plant_a_version_higher_than_any_before() {
    let store = Store::new(Capacity::plants(10));
    store.create(new(1, "fern")).unwrap();
    let created = version(&store, 1);
    store.create(new(2, "moss")).unwrap();
    store.replace(1, plant("fern", Some("green"))).unwrap();
    let replaced = version(&store, 1);
    assert!(created < version(&store, 2) && version(&store, 2) < replaced);
    let found = store.get_versioned(1).unwrap();
    assert_eq!(found.plant, plant("fern", Some("green")));
    // A replace that changes nothing is still a change.
    store.replace(1, plant("fern", Some("green"))).unwrap();
    assert!(version(&store, 1) > replaced);
}

#[test]
fn a_plant_deleted_and_created_again_never_gets_an_earlier_version_back() {
    let store = Store::new(Capacity::plants(10));
    let mut seen = Vec::new();
    for _ in 0..3 {
        store.create(new(1, "fern")).unwrap();
        seen.push(version(&store, 1));
        store.delete(1).unwrap();
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
}

#[test]
fn a_refused_change_leaves_the_version_as_it_was() {
    let store = Store::new(Capacity::plants(1));
    store.create(new(1, "fern")).unwrap();
    let before = version(&store, 1);
    assert!(matches!(
        store.create(new(1, "moss")),
        Err(Refusal::Exists(1))
    ));
    assert!(matches!(
        store.create(new(2, "moss")),
        Err(Refusal::Full(1))
    ));
    assert_eq!(version(&store, 1), before);
    assert_eq!(store.get_versioned(2), None);
}

#[test]
fn a_reset_and_a_new_store_are_lineages_of_their_own() {
    let store = Store::new(Capacity::plants(10));
    let other = Store::new(Capacity::plants(10));
    assert_ne!(store.nonce(), other.nonce());
    store.create(new(1, "fern")).unwrap();
    let (before, nonce) = (version(&store, 1), store.nonce());
    store.reset(&[(1, plant("seed", None))]).unwrap();
    assert_ne!(store.nonce(), nonce);
    assert!(version(&store, 1) > before, "versions go on past a reset");
}
