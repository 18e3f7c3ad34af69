//! Writes a journal of N short plants, for the start-up benchmark:
//! `cargo run --release --example make_journal -- FILE N`.
//!
//! It goes through the store itself (with `--sync never`), so the file is
//! exactly what a server that stored those plants would have written.

use std::path::PathBuf;
use std::process::ExitCode;

use plantstore::store::{Capacity, Durability, NewPlant, Plant, Store, SyncMode};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(Ok(count))) = (args.next(), args.next().map(|n| n.parse::<i64>())) else {
        eprintln!("usage: make_journal FILE N");
        return ExitCode::from(2);
    };
    let durability = Durability {
        path: PathBuf::from(&path),
        sync: SyncMode::Never,
        compact_min: u64::MAX,
    };
    let store = match Store::open(Capacity::plants(count as usize), &durability) {
        Ok((store, _)) => store,
        Err(e) => {
            eprintln!("make_journal: {e}");
            return ExitCode::FAILURE;
        }
    };
    for id in 0..count {
        let plant = Plant {
            name: format!("plant {id}"),
            tag: (id % 10 == 0).then(|| "bench".to_string()),
        };
        if let Err(e) = store.create(NewPlant { id, plant }) {
            eprintln!("make_journal: plant {id}: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
