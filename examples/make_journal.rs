//! Writes a journal of N short plants, for the benchmarks:
//! `cargo run --release --example make_journal -- FILE N [--rare K] [--marked K] [--rewrites R]`.
//!
//! Plant `id` (0 to N-1) is named "plant {id}"; every 10th has the tag
//! "bench", the others none. `--rare K`: the plants with `id % K == K - 1`
//! (one in K, none of them a 10th) have the tag "rare" instead, for a
//! listing by a tag that almost nothing carries. `--marked K`: the plants
//! with `id % K == K - 1` are named "plant {id} fern" instead, for a search
//! (`?q=fern`) that matches one plant in K (no other name or tag contains
//! "fern"). `--rewrites R`: then every
//! plant is replaced R times by the same plant, so the file holds R + 1
//! records per live plant and a server started on it compacts it at its
//! first change (past `--compact-min` and twice the live size).
//!
//! It goes through the store itself (with `--sync never`), so the file is
//! exactly what a server that made those changes would have written.

use std::path::PathBuf;
use std::process::ExitCode;

use plantstore::model::{Capacity, Durability, Edit, Plant, SyncMode};
use plantstore::store::Store;

const USAGE: &str = "usage: make_journal FILE N [--rare K] [--marked K] [--rewrites R]";

/// The command line, as given.
struct Args {
    path: PathBuf,
    count: i64,
    rare: Option<i64>,
    marked: Option<i64>,
    rewrites: u32,
}

fn parse(mut args: impl Iterator<Item = String>) -> Option<Args> {
    let path = PathBuf::from(args.next()?);
    let count = args.next()?.parse().ok().filter(|&n: &i64| n >= 0)?;
    let (mut rare, mut marked, mut rewrites) = (None, None, 0);
    while let Some(flag) = args.next() {
        let value = args.next()?;
        match flag.as_str() {
            "--rare" => rare = Some(value.parse().ok().filter(|&k: &i64| k > 0)?),
            "--marked" => marked = Some(value.parse().ok().filter(|&k: &i64| k > 0)?),
            "--rewrites" => rewrites = value.parse().ok()?,
            _ => return None,
        }
    }
    Some(Args {
        path,
        count,
        rare,
        marked,
        rewrites,
    })
}

fn plant(id: i64, args: &Args) -> Plant {
    let one_in = |k: Option<i64>| k.is_some_and(|k| id % k == k - 1);
    let tag = if one_in(args.rare) {
        Some("rare")
    } else {
        (id % 10 == 0).then_some("bench")
    };
    let mark = if one_in(args.marked) { " fern" } else { "" };
    Plant {
        name: format!("plant {id}{mark}"),
        tag: tag.map(String::from),
    }
}

fn main() -> ExitCode {
    let Some(args) = parse(std::env::args().skip(1)) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let durability = Durability {
        path: args.path.clone(),
        sync: SyncMode::Never,
        compact_min: u64::MAX,
    };
    let store = match Store::open(Capacity::plants(args.count as usize), &durability) {
        Ok((store, _)) => store,
        Err(e) => {
            eprintln!("make_journal: {e}");
            return ExitCode::FAILURE;
        }
    };
    for id in 0..args.count {
        let plant = plant(id, &args);
        if let Err(e) = store
            .change(id, Edit::Create(plant))
            .and_then(|d| store.wait(d))
        {
            eprintln!("make_journal: plant {id}: {e}");
            return ExitCode::FAILURE;
        }
    }
    for _ in 0..args.rewrites {
        for id in 0..args.count {
            let replace = Edit::Replace(plant(id, &args));
            if let Err(e) = store.change(id, replace).and_then(|d| store.wait(d)) {
                eprintln!("make_journal: plant {id}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
