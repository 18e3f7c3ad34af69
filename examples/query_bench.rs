//! Listing query benchmark on the memory store: 1,000,000 plants named
//! "plant 0" to "plant 999999", one in 10,000 tagged "needle".
//!
//! Prints what filling the store costs (time a create, resident bytes a
//! plant), the time of a page of 100 from random places in each order, of
//! a search matching one plant in 10,000 (its first page reads the whole
//! store), of counting it, and a writer's latency while one and four
//! threads loop that search. Each time is given as wall-clock time and as
//! the thread's CPU time (which the kernel may count in ticks of a few
//! ms), since the cores may be shared. Figures only; asserts nothing but
//! the answers' sizes.
//!
//! Run: cargo run --release --example query_bench

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use plantstore::model::{Budget, Capacity, Edit, Order, Plant, Position, Query, fold};
use plantstore::store::Store;

const PLANTS: i64 = 1_000_000;

/// Bytes resident (Linux), for what the plants cost.
fn resident() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split(' ')
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn plant(id: i64) -> Plant {
    Plant {
        name: format!("plant {id}"),
        tag: (id % 10_000 == 0).then(|| "needle".to_string()),
    }
}

/// Nanoseconds this thread has run on a CPU (Linux): what a query costs
/// when other processes share the cores.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let nanos: u64 = stat
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(nanos)
}

/// Runs `f`, taking its wall-clock and CPU time.
fn timed<T>(times: &mut Vec<(Duration, Duration)>, f: impl FnOnce() -> T) -> T {
    let (used, started) = (cpu(), Instant::now());
    let answer = f();
    let wall = started.elapsed();
    times.push((wall, cpu().saturating_sub(used)));
    answer
}

/// "p50 p99 max" of the wall-clock times, and of the CPU times.
fn spread(times: Vec<(Duration, Duration)>) -> String {
    let line = |mut times: Vec<Duration>| {
        times.sort_unstable();
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        format!(
            "p50 {:.2?} p99 {:.2?} max {:.2?}",
            at(0.5),
            at(0.99),
            at(1.0)
        )
    };
    let (wall, cpu): (Vec<_>, Vec<_>) = times.into_iter().unzip();
    format!("wall {}; cpu {}", line(wall), line(cpu))
}

/// Times `query` `rounds` times, resuming after pseudo-random plants.
fn pages(store: &Store, query: &Query, rounds: u64) -> String {
    let mut times = Vec::new();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..rounds {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let id = (seed >> 33) as i64 % PLANTS;
        let after = match query.order {
            Order::Id | Order::IdDesc => Position::Id(id),
            Order::Name | Order::NameDesc => Position::past_name(&plant(id).name, id),
        };
        let query = Query {
            after: Some(after),
            ..query.clone()
        };
        let page = timed(&mut times, || store.query(&query, Budget::UNBOUNDED));
        assert!(page.items.len() == query.limit || !page.more);
    }
    spread(times)
}

/// Times `query` from the start, `rounds` times.
fn firsts(store: &Store, query: &Query, rounds: u32, want: usize) -> String {
    let mut times = Vec::new();
    for _ in 0..rounds {
        let page = timed(&mut times, || store.query(query, Budget::UNBOUNDED));
        assert_eq!(page.items.len(), want);
    }
    spread(times)
}

/// Creates `count` plants from id `from`, timing each.
fn writes(store: &Store, from: i64, count: i64) -> String {
    let mut times = Vec::new();
    for id in from..from + count {
        let plant = plant(id);
        let created = timed(&mut times, || store.change(id, Edit::Create(plant)));
        assert!(created.is_ok());
        thread::sleep(Duration::from_micros(200));
    }
    spread(times)
}

fn main() {
    let store = Arc::new(Store::new(Capacity::plants(2 * PLANTS as usize)));
    let before = resident();
    let (used, started) = (cpu(), Instant::now());
    for id in 0..PLANTS {
        let created = store.change(id, Edit::Create(plant(id)));
        assert!(created.is_ok());
    }
    let (fill, fill_cpu) = (started.elapsed(), cpu().saturating_sub(used));
    let heap = resident().saturating_sub(before);
    println!(
        "{PLANTS} plants: {:?} a create (cpu {:?}), {:.1} bytes resident a plant",
        fill / PLANTS as u32,
        fill_cpu / PLANTS as u32,
        heap as f64 / PLANTS as f64
    );
    let page = |order| Query {
        order,
        limit: 100,
        ..Query::default()
    };
    for order in [Order::Id, Order::IdDesc, Order::Name, Order::NameDesc] {
        println!(
            "{order:?}, limit 100, 1000 random places: {}",
            pages(&store, &page(order), 1000)
        );
    }
    let search = |order| Query {
        search: Some(fold("NEEDLE")),
        ..page(order)
    };
    println!(
        "q (1 in 10,000), first page: {}",
        firsts(&store, &search(Order::Id), 50, 100)
    );
    println!(
        "q, sort=name, first page: {}",
        firsts(&store, &search(Order::Name), 10, 100)
    );
    let count = Query {
        count: true,
        limit: 0,
        ..search(Order::Id)
    };
    println!("q, count only: {}", firsts(&store, &count, 20, 0));
    println!("writer alone: {}", writes(&store, PLANTS, 2000));
    let mut next = PLANTS + 2000;
    for searchers in [1, 4] {
        let answer = beside(&store, searchers, &search(Order::Id), next);
        println!("writer, {searchers} threads searching: {answer}");
        next += 2000;
    }
}

/// A writer's latency while `searchers` threads loop `query`.
fn beside(store: &Arc<Store>, searchers: usize, query: &Query, from: i64) -> String {
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..searchers)
        .map(|_| {
            let (store, stop, query) = (Arc::clone(store), Arc::clone(&stop), query.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    store.query(&query, Budget::UNBOUNDED);
                }
            })
        })
        .collect();
    let answer = writes(store, from, 2000);
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        let _ = thread.join();
    }
    answer
}
