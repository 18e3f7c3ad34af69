//! Tests of a reset with a journal: a crash at each step of it (the files
//! copied as that step leaves them, then opened as a restart would) and
//! a failure at each step (the process going on) leave a whole state,
//! the old one or the reset one; changes made before it are answered and
//! gone, those after it kept; a running compaction refuses it.

use std::fs;
use std::io;

use super::journal::compact_path;
use super::test_support::{Journalled, Waited, contents, new, plant};
use super::*;
use crate::model::{Budget, NotDone, Unavailable};
use crate::os::temp::TempFile;

/// The journal's steps, in order: a crash or failure at the first three
/// is before the rename, at the last two after it.
const STEPS: [&str; 5] = [
    "header written",
    "records written",
    "file synced",
    "renamed",
    "directory synced",
];

fn seed() -> Vec<(i64, Plant)> {
    vec![(10, plant("x", Some("t"))), (11, plant("y", None))]
}

/// A store at `path` holding three plants; they as `contents` lists them.
fn old_store(path: &TempFile) -> (Store, Vec<(i64, Plant)>) {
    let (store, _) = path.open().unwrap();
    for (id, name) in [(1, "a"), (2, "b"), (3, "c")] {
        store.create(new(id, name)).unwrap();
    }
    store.delete(2).unwrap();
    let old = contents(&store);
    (store, old)
}

/// Copies the journal (and its `.compact`) as they are now to `to`.
fn copy_files(from: &TempFile, to: &TempFile) {
    fs::copy(&from.0, &to.0).unwrap();
    if compact_path(&from.0).exists() {
        fs::copy(compact_path(&from.0), compact_path(&to.0)).unwrap();
    }
}

#[test]
fn a_crash_at_each_step_recovers_the_old_state_or_the_reset_one() {
    for (at, step) in STEPS.iter().enumerate() {
        let (path, crashed) = (TempFile::new("reset-crash"), TempFile::new("reset-crashed"));
        let (store, old) = old_store(&path);
        let mut fault = |now: &'static str| {
            if now == *step {
                copy_files(&path, &crashed);
                return Err(io::Error::other("crashed here"));
            }
            Ok(())
        };
        assert!(store.shared.reset(&seed(), &mut fault).is_err(), "{step}");
        let (recovered, _) = crashed.open().unwrap();
        let want = if at < 3 { &old } else { &seed() };
        assert_eq!(&contents(&recovered), want, "crashed at {step}");
        assert!(
            !compact_path(&crashed.0).exists(),
            "{step}: leftover removed"
        );
    }
}

#[test]
fn a_failure_before_the_rename_changes_nothing_and_after_it_refuses_changes() {
    for (at, step) in STEPS.iter().enumerate() {
        let path = TempFile::new("reset-fails");
        let (store, old) = old_store(&path);
        let mut fault = |now: &'static str| match now == *step {
            true => Err(io::Error::other("injected")),
            false => Ok(()),
        };
        let refused = store.shared.reset(&seed(), &mut fault).unwrap_err();
        assert!(matches!(
            refused,
            NotDone::Unavailable(Unavailable::Reset(_))
        ));
        assert_eq!(contents(&store), old, "{step}: the store is as it was");
        assert!(!compact_path(&path.0).exists(), "{step}: no file left");
        if at < 3 {
            assert_eq!(store.failure(), None, "{step}");
            store.create(new(4, "later")).unwrap();
            drop(store);
            let (reopened, _) = path.open().unwrap();
            let mut want = old.clone();
            want.push((4, plant("later", None)));
            assert_eq!(contents(&reopened), want, "{step}");
        } else {
            assert!(store.failure().is_some(), "{step}: poisoned");
            assert!(matches!(
                store.create(new(4, "x")),
                Err(Refusal::Storage(_))
            ));
            drop(store);
            let (reopened, _) = path.open().unwrap();
            assert_eq!(
                contents(&reopened),
                seed(),
                "{step}: the file is the new one"
            );
        }
    }
}

#[test]
fn changes_before_a_reset_are_answered_and_gone_and_those_after_it_kept() {
    let path = TempFile::new("reset-order");
    let (store, _) = old_store(&path);
    // `--sync always`: the record waits, unwritten, until someone commits.
    let before = store
        .change(5, Edit::Create(plant("before", None)))
        .unwrap();
    assert_ne!(before, Durable::Now);
    store.reset(&seed()).unwrap();
    assert_eq!(store.wait(before), Ok(()), "answered by the reset");
    assert_eq!(contents(&store), seed());
    store.create(new(6, "after")).unwrap();
    store.replace(10, plant("x2", None)).unwrap();
    let crashed = TempFile::new("reset-order-copy");
    copy_files(&path, &crashed);
    drop(store);
    let want = vec![
        (6, plant("after", None)),
        (10, plant("x2", None)),
        (11, plant("y", None)),
    ];
    assert_eq!(contents(&path.open().unwrap().0), want);
    assert_eq!(
        contents(&crashed.open().unwrap().0),
        want,
        "as a crash left it"
    );
}

#[test]
fn a_running_compaction_refuses_a_reset_and_a_reset_without_a_journal_swaps() {
    let path = TempFile::new("reset-compacting");
    let (store, old) = old_store(&path);
    let mut refused = None;
    store
        .shared
        .compact_between_steps(|_| {
            refused.get_or_insert_with(|| store.reset(&seed()));
        })
        .unwrap();
    let want = NotDone::Unavailable(Unavailable::Reset(
        "a journal compaction is running; try the reset again shortly",
    ));
    assert_eq!(refused, Some(Err(want)));
    assert_eq!(contents(&store), old);
    store.reset(&seed()).unwrap();
    assert_eq!(contents(&store), seed(), "once the compaction is done");
    let memory = Store::new(Capacity::plants(10));
    memory.create(new(1, "a")).unwrap();
    memory.reset(&seed()).unwrap();
    assert_eq!((contents(&memory), memory.len()), (seed(), 2));
    assert_eq!(memory.data_bytes(), 3, "x, t and y");
}

#[test]
fn a_page_read_in_steps_is_wholly_before_a_reset_that_comes_meanwhile() {
    let store = std::sync::Arc::new(Store::new(Capacity::plants(1000)));
    for id in 0..200 {
        store.create(new(id, "old")).unwrap();
    }
    let query = crate::model::Query {
        limit: 1000,
        ..crate::model::Query::default()
    };
    let mut resetter = None;
    let mut steps = 0;
    let page = store.query_between_steps(&query, Budget::UNBOUNDED, || {
        steps += 1;
        if steps == 3 {
            let store = std::sync::Arc::clone(&store);
            resetter = Some(std::thread::spawn(move || store.reset(&seed())));
            // Time enough for the reset to swap, were it not held off.
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    });
    assert!(steps > 3, "the page was read in {steps} steps");
    let ids: Vec<i64> = page.items.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (0..200).collect::<Vec<_>>(), "all from before");
    resetter.unwrap().join().unwrap().unwrap();
    assert_eq!(contents(&store), seed(), "then the reset");
}
