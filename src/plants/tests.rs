//! Tests of the door over the memory store: outcomes ready or pending,
//! and the change hook reporting each change once it is durable.

use super::*;
use crate::model::{Budget, ChangeKind, PlantChange, Query, Reply, Unavailable};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

fn new(id: i64, name: &str) -> NewPlant {
    let plant = Plant {
        name: name.into(),
        tag: None,
    };
    NewPlant { id, plant }
}

fn setup(journal: Option<Durability>) -> Setup {
    Setup {
        capacity: Capacity::plants(100),
        limits: TextLimits::default(),
        journal,
        seed: None,
        allow_reset: false,
        database: None,
    }
}

fn hook(plants: &Plants) -> Arc<Mutex<Vec<PlantChange>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let into = Arc::clone(&seen);
    assert!(plants.set_change_hook(Box::new(move |c| into.lock().unwrap().push(c.clone()))));
    seen
}

#[test]
fn in_memory_every_outcome_is_ready_and_each_change_is_reported_at_once() {
    let plants = Plants::open(&setup(None)).unwrap();
    let seen = hook(&plants);
    assert!(matches!(
        plants.create(new(1, "fern")),
        Outcome::Ready(Ok(()))
    ));
    let again = plants.create(new(1, "moss"));
    let refused = NotDone::Refused(Refusal::Exists(1));
    assert!(matches!(again, Outcome::Ready(Err(e)) if e == refused));
    assert!(matches!(plants.get(1), Outcome::Ready(Ok(Some(p))) if p.name == "fern"));
    assert!(matches!(plants.delete(1), Outcome::Ready(Ok(()))));
    let kinds: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|c| (c.seq, c.kind))
        .collect();
    assert_eq!(kinds, [(1, ChangeKind::Created), (2, ChangeKind::Deleted)]);
    assert!(plants.describe().starts_with("in memory only"));
}

#[test]
fn with_a_synced_journal_a_change_is_pending_until_its_record_is_written() {
    let file = crate::os::temp::TempFile::new("door.journal");
    let journal = Durability {
        path: file.0.clone(),
        sync: SyncMode::Always,
        compact_min: u64::MAX,
    };
    let plants = Plants::open(&setup(Some(journal))).unwrap();
    let seen = hook(&plants);
    let Outcome::Pending(pending) = plants.create(new(7, "fern")) else {
        panic!("a change waiting for the disk is answered later");
    };
    assert!(
        seen.lock().unwrap().is_empty(),
        "reported before it is durable"
    );
    let (tx, rx) = mpsc::channel();
    pending.then(Box::new(move |answer| tx.send(answer).unwrap()));
    plants.flush();
    let answer = rx.recv_timeout(Duration::from_secs(5)).expect("answered");
    assert_eq!(answer, Ok(()));
    let change = seen.lock().unwrap()[0].clone();
    assert_eq!(
        (change.seq, change.id, change.kind),
        (1, 7, ChangeKind::Created)
    );
    // Reads are answered at once; the page is bounded in bytes too.
    let query = Query {
        limit: 10,
        ..Query::default()
    };
    let Outcome::Ready(Ok(page)) = plants.page(1, query, Budget::of(1024)) else {
        panic!("a page from memory is ready");
    };
    assert_eq!((page.items.len(), page.more), (1, false));
    assert!(plants.describe().contains("(sync always), 1 plant"));
    drop(plants);
}

#[test]
fn a_reset_is_pending_reported_once_and_cuts_an_export_short() {
    let plants = Plants::open(&Setup {
        capacity: Capacity::plants(1000),
        allow_reset: true,
        ..setup(None)
    })
    .unwrap();
    assert!(plants.resettable());
    let seen = hook(&plants);
    for id in 0..600 {
        assert!(matches!(
            plants.create(new(id, "p")),
            Outcome::Ready(Ok(()))
        ));
    }
    let mut export = plants.export(None).unwrap();
    let Piece::Plants {
        plants: first,
        last,
    } = export.next(usize::MAX)
    else {
        panic!("a first piece");
    };
    assert_eq!((first.len(), last), (PIECE_PLANTS, false));
    // Off the caller's thread: pending. No --seed: none left.
    let Outcome::Pending(reset) = plants.reset() else {
        panic!("a reset is answered later");
    };
    assert_eq!(reset.wait(), Ok(0));
    assert!(
        matches!(export.next(usize::MAX), Piece::Failed),
        "never mixed"
    );
    let last = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!((last.seq, last.id, last.kind), (601, 0, ChangeKind::Reset));
    // Without --allow-reset the door refuses it.
    let plain = Plants::open(&setup(None)).unwrap();
    assert!(!plain.resettable());
    assert!(matches!(plain.reset(), Outcome::Ready(Err(_))));
}

/// A reply that says whether anyone waits, and passes on what it gets.
struct Asked {
    wanted: bool,
    to: mpsc::Sender<Result<Page, NotDone>>,
}

impl Reply<Page> for Asked {
    fn answer(self: Box<Self>, answer: Result<Page, NotDone>) {
        let _ = self.to.send(answer);
    }

    fn wanted(&self) -> bool {
        self.wanted
    }
}

#[test]
fn a_search_no_one_waits_for_is_not_run() {
    let plants = Plants::open(&setup(None)).unwrap();
    assert!(matches!(
        plants.create(new(1, "fern")),
        Outcome::Ready(Ok(_))
    ));
    let search = || Query {
        limit: 10,
        search: Some("fern".into()),
        ..Query::default()
    };
    let (to, answers) = mpsc::channel();
    for wanted in [false, true] {
        let Outcome::Pending(pending) = plants.page(1, search(), Budget::of(1024)) else {
            panic!("a search is answered from the scan thread");
        };
        let to = to.clone();
        pending.then(Box::new(Asked { wanted, to }));
        let answer = answers.recv_timeout(Duration::from_secs(10)).unwrap();
        match (wanted, answer) {
            (false, Err(NotDone::Unavailable(Unavailable::Gone))) => {}
            (true, Ok(page)) => assert_eq!(page.items.len(), 1),
            (wanted, other) => panic!("wanted {wanted}: {other:?}"),
        }
    }
}

/// A reply that holds the scan thread until the test lets it go, then
/// says which search it answered.
struct Held {
    name: &'static str,
    go: Arc<(Mutex<bool>, std::sync::Condvar)>,
    to: mpsc::Sender<&'static str>,
}

impl Reply<Page> for Held {
    fn answer(self: Box<Self>, _: Result<Page, NotDone>) {
        let (open, opened) = &*self.go;
        let mut open = open.lock().unwrap();
        while !*open {
            open = opened.wait(open).unwrap();
        }
        let _ = self.to.send(self.name);
    }
}

#[test]
fn one_askers_queued_searches_do_not_go_before_anothers() {
    let plants = Plants::open(&setup(None)).unwrap();
    let search = || Query {
        limit: 10,
        search: Some("fern".into()),
        ..Query::default()
    };
    let go = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let (to, answered) = mpsc::channel();
    // The hog's first search holds the thread; five more of its own wait,
    // then the other asker's one.
    let asks = [
        ("hog", 1),
        ("hog", 1),
        ("hog", 1),
        ("hog", 1),
        ("hog", 1),
        ("hog", 1),
    ];
    for (name, asker) in asks.into_iter().chain([("other", 2)]) {
        let Outcome::Pending(pending) = plants.page(asker, search(), Budget::of(1024)) else {
            panic!("a search is answered from the scan thread");
        };
        let (go, to) = (Arc::clone(&go), to.clone());
        pending.then(Box::new(Held { name, go, to }));
    }
    let (open, opened) = &*go;
    *open.lock().unwrap() = true;
    opened.notify_all();
    let order: Vec<&str> = (0..7)
        .map(|_| answered.recv_timeout(Duration::from_secs(10)).unwrap())
        .collect();
    // Past the one running, the other asker's comes after at most one of
    // the hog's.
    let at = order.iter().position(|&n| n == "other").unwrap();
    assert!(at <= 2, "{order:?}");
}
