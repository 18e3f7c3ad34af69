//! Tests of loading a seed through the door: into an empty memory store,
//! into a journal once, and refused the same way whether checked whole or
//! applied record by record. Reading the file is tested in `seed/tests.rs`.

use std::path::Path;

use super::seed::{BATCH, Before, into_memory};
use crate::model::{Capacity, Durability, Edit, Plant, SyncMode, TextLimits};
use crate::os::temp::TempFile;
use crate::seed::{Fault, check};
use crate::store::Store;

const LIMITS: TextLimits = TextLimits { name: 256, tag: 64 };

fn store(plants: usize, data: u64) -> Store {
    Store::new(Capacity { plants, data })
}

fn load_in_memory(contents: &[u8], capacity: Capacity) -> Result<Store, String> {
    let file = TempFile::with("load", contents);
    let store = Store::new(capacity);
    let name = file.0.display().to_string();
    match into_memory(&file.0, &store, Before::InMemory, LIMITS, capacity) {
        Ok(loaded) => {
            assert_eq!(loaded, Some(store.len() as u64));
            Ok(store)
        }
        Err(e) => Err(e.to_string().replace(&name, "FILE")),
    }
}

#[test]
fn a_seed_is_loaded_into_an_empty_store() {
    let store = load_in_memory(
        b"{\"id\":3,\"name\":\"Fern\"}\n{\"id\":-1,\"name\":\"Monstera\",\"tag\":\"tropical\"}\n",
        Capacity::plants(10),
    )
    .unwrap();
    assert_eq!(store.len(), 2);
    assert_eq!(store.get(3).unwrap().name, "Fern");
    assert_eq!(store.get(-1).unwrap().tag.as_deref(), Some("tropical"));
}

/// The same seeds refused the same way by both paths: checked whole (with
/// a journal) and applied record by record (in memory).
#[test]
fn duplicates_and_limits_stop_a_seed_naming_both_positions() {
    let capacity = Capacity {
        plants: 3,
        data: 10,
    };
    let cases: [(&[u8], &str); 5] = [
        (
            b"{\"id\":1,\"name\":\"a\"}\n\n{\"id\":2,\"name\":\"b\"}\n{\"id\":1,\"name\":\"c\"}\n",
            "--seed FILE: line 4: id 1 repeats line 1",
        ),
        (
            b"[{\"id\":1,\"name\":\"a\"},\n {\"id\":7,\"name\":\"b\"},\n {\"id\":7,\"name\":\"b\"}]",
            "--seed FILE: record 3 (line 3, column 2): id 7 repeats record 2 (line 2, column 2)",
        ),
        (
            b"[{\"id\":1,\"name\":\"a\"},{\"id\":2,\"name\":\"b\"},{\"id\":3,\"name\":\"c\"},{\"id\":4,\"name\":\"d\"}]",
            "--seed FILE: record 4 (line 1, column 62): more than --max-plants 3 plants",
        ),
        (
            b"{\"id\":1,\"name\":\"abcd\",\"tag\":\"ef\"}\n{\"id\":2,\"name\":\"12345\"}\n",
            "--seed FILE: line 2: names and tags take more than --max-data 10 bytes",
        ),
        (
            b"{\"id\":1,\"name\":\"a\"}\n{\"id\":2,\"name\":1}\n",
            "--seed FILE: line 2: name: must be a string",
        ),
    ];
    for (text, message) in cases {
        assert_eq!(
            load_in_memory(text, capacity).err().as_deref(),
            Some(message),
            "in memory"
        );
        let file = TempFile::with("check", text);
        let name = file.0.display().to_string();
        let checked = check(&file.0, LIMITS, capacity).unwrap_err();
        assert_eq!(checked.to_string().replace(&name, "FILE"), message, "check");
        assert!(checked.is_in_seed());
    }
    // Exactly at both limits is fine.
    let full =
        b"{\"id\":1,\"name\":\"abcd\"}\n{\"id\":2,\"name\":\"efg\"}\n{\"id\":3,\"name\":\"hij\"}";
    assert_eq!(load_in_memory(full, capacity).unwrap().data_bytes(), 10);
    let file = TempFile::with("full", full);
    assert_eq!(check(&file.0, LIMITS, capacity).unwrap(), 3);
}

#[test]
fn a_missing_file_a_directory_a_fifo_or_a_device_is_refused() {
    let missing = TempFile::new("missing");
    let (store, capacity) = (store(10, 100), Capacity::plants(10));
    let refused =
        |path: &Path| into_memory(path, &store, Before::InMemory, LIMITS, capacity).unwrap_err();
    let e = refused(&missing.0);
    assert!(matches!(e.fault, Fault::Io(_)), "{e}");
    assert!(e.is_in_seed());
    let scratch = crate::os::temp::TempDir::new("seed-kinds");
    // A FIFO with no writer: an open that blocked would hang the test.
    for (path, kind) in [
        (scratch.0.clone(), "a directory"),
        (scratch.fifo("seed"), "a FIFO"),
        (Path::new("/dev/zero").to_path_buf(), "a character device"),
    ] {
        let (e, want) = (
            refused(&path),
            format!(": it is {kind}, not a regular file"),
        );
        assert!(e.to_string().ends_with(&want), "{e}");
    }
}

fn journal(path: &Path) -> (Store, u64) {
    let durability = Durability {
        path: path.to_path_buf(),
        sync: SyncMode::Always,
        compact_min: u64::MAX,
    };
    let (store, recovery) = Store::open(Capacity::plants(100_000), &durability).unwrap();
    (store, recovery.records)
}

#[test]
fn a_journal_is_seeded_once_and_keeps_its_changes() {
    let data = TempFile::new("journal");
    let mut text = String::new();
    // More than one batch.
    let plants = BATCH as i64 + 5;
    for id in 0..plants {
        text.push_str(&format!("{{\"id\":{id},\"name\":\"p{id}\"}}\n"));
    }
    let seed = TempFile::with("seed.ndjson", text.as_bytes());
    let capacity = Capacity::plants(100_000);
    {
        let (store, records) = journal(&data.0);
        assert_eq!(records, 0);
        let loaded = into_memory(&seed.0, &store, Before::Journal(records), LIMITS, capacity);
        assert_eq!(loaded.unwrap(), Some(plants as u64));
        store.wait(store.change(0, Edit::Delete).unwrap()).unwrap();
        let changed = Plant {
            name: "changed".into(),
            tag: None,
        };
        let durable = store.change(1, Edit::Replace(changed)).unwrap();
        store.wait(durable).unwrap();
    }
    let (store, records) = journal(&data.0);
    assert_eq!(records, plants as u64 + 2, "every plant journalled");
    assert_eq!(store.len(), plants as usize - 1);
    let loaded = into_memory(&seed.0, &store, Before::Journal(records), LIMITS, capacity);
    assert_eq!(loaded.unwrap(), None, "skipped");
    assert_eq!(store.len(), plants as usize - 1);
    assert_eq!(store.get(0), None);
    assert_eq!(store.get(1).unwrap().name, "changed");
}

#[test]
fn a_journal_whose_plants_were_all_deleted_is_not_seeded_again() {
    let data = TempFile::new("emptied");
    let seed = TempFile::with("seed.json", b"[{\"id\":1,\"name\":\"a\"}]");
    {
        let (store, records) = journal(&data.0);
        into_memory(
            &seed.0,
            &store,
            Before::Journal(records),
            LIMITS,
            Capacity::plants(10),
        )
        .unwrap();
        store.wait(store.change(1, Edit::Delete).unwrap()).unwrap();
    }
    let (store, records) = journal(&data.0);
    assert_eq!((store.len(), records), (0, 2));
    assert_eq!(
        into_memory(
            &seed.0,
            &store,
            Before::Journal(records),
            LIMITS,
            Capacity::plants(10)
        )
        .unwrap(),
        None
    );
    assert!(store.is_empty());
}

#[test]
fn a_bad_seed_leaves_the_journal_untouched() {
    let data = TempFile::new("untouched");
    // The fault is in the last record: every plant before it is valid.
    let mut text = String::new();
    for id in 0..100 {
        text.push_str(&format!("{{\"id\":{id},\"name\":\"p\"}}\n"));
    }
    text.push_str("{\"id\":100,\"name\":null}\n");
    let seed = TempFile::with("bad.ndjson", text.as_bytes());
    {
        let (store, records) = journal(&data.0);
        let e = into_memory(
            &seed.0,
            &store,
            Before::Journal(records),
            LIMITS,
            Capacity::plants(1000),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .ends_with(": line 101: name: must be a string"),
            "{e}"
        );
        assert!(!e.partial);
        assert!(store.is_empty());
    }
    let (store, records) = journal(&data.0);
    assert_eq!((store.len(), records), (0, 0));
}
