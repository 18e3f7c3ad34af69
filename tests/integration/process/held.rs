//! `--delay` at scale, on the built binary: 10,000 answers held at once
//! wait on the event loops' timers, not on threads: the process has as
//! many threads while they are held as before, spends next to no CPU
//! holding them, and then answers every one. On each store; what is asked
//! is a feed ticket, made on the loop whatever the store, so that the
//! test measures the holding and not 10,000 database queries (a debug
//! build's listing on PostgreSQL answers a few hundred a second at most).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::on_each_store;
use crate::process::binary::Running;
use crate::support::{AUTH, Client, Kind, TOKEN, eventually, request, send_to};

const HELD: usize = 10_000;
/// The holds tried, shortest first: the first must outlast sending every
/// request and checking the process (about 2 s with a debug build on a
/// quiet machine). A run whose holds end before the checks are done shows
/// nothing either way, and is made again with the next, longer hold; one
/// that finds a thread added or a spinning loop fails at once.
const HOLDS: [Duration; 3] = [
    Duration::from_secs(4),
    Duration::from_secs(10),
    Duration::from_secs(25),
];

fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .count()
}

/// User and system CPU time the process has used, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command's closing parenthesis; utime and stime
    // are the 14th and 15th of the whole line.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// One store's run at a time: two would need twice the descriptors.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn ten_thousand_held_answers_add_no_thread(kind: Kind) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // This process holds the client end of every connection.
    let needed = HELD as u64 + 1000;
    plantstore::http::raise_open_file_limit();
    let soft = plantstore::os::open_file_limit();
    assert!(
        soft.is_none_or(|soft| soft as u64 >= needed),
        "this test needs an open-file limit of at least {needed} (soft limit is {soft:?}); \
         raise it with `ulimit -n {needed}`"
    );
    for hold in HOLDS {
        match held_for(kind, hold) {
            Ok(()) => return,
            Err(late) => eprintln!("{late}; again with a longer hold"),
        }
    }
    panic!(
        "the holds ended before they were checked, even at {:?}",
        HOLDS[2]
    );
}

/// One run with answers held for `hold`: Err when the holds ended before
/// the process was checked (the run showed nothing).
fn held_for(kind: Kind, hold: Duration) -> Result<(), String> {
    let held = hold;
    let hold = hold.as_millis().to_string();
    let args = ["--delay", &hold, "--max-connections", "12000"];
    let server = Running::on(kind, &args, Some(TOKEN));
    let pid = server.child.id();
    let ask = request("POST", "/plants/changes/tickets", &[AUTH], "");
    // Whatever starts lazily has started before the count (an answer
    // that is not held).
    let mut first = Client::connect(server.addr);
    first.send(&request("GET", "/healthz", &[], ""));
    assert_eq!(first.reply().status, 200);
    let before = threads(pid);

    let start = Instant::now();
    let mut streams: Vec<TcpStream> = (0..HELD)
        .map(|_| {
            let mut stream = TcpStream::connect(server.addr).unwrap();
            stream.write_all(&ask).unwrap();
            stream
        })
        .collect();
    let sent = start.elapsed();
    // All in flight at once: none answered yet.
    for stream in &mut streams {
        stream.set_nonblocking(true).unwrap();
        let read = stream.read(&mut [0u8; 1]);
        if read.is_ok() && start.elapsed() >= held {
            return Err(format!(
                "the {held:?} holds ended while the requests were sent"
            ));
        }
        assert!(
            read.as_ref()
                .is_err_and(|e| e.kind() == ErrorKind::WouldBlock),
            "answered within {:?} of the first request (all sent in {sent:?}): {read:?}",
            start.elapsed()
        );
        stream.set_nonblocking(false).unwrap();
    }
    // Every request has been handled (and counted), its answer parked.
    let counted = || {
        let text = send_to(server.addr, "GET", "/metrics", &[AUTH], "").text();
        let count = text.lines().find_map(|l| {
            l.strip_prefix(
                r#"plantstore_requests_total{route="/plants/changes/tickets",method="POST",status="200"} "#,
            )
        });
        count.and_then(|n| n.parse::<usize>().ok())
    };
    assert!(
        eventually(|| counted() == Some(HELD)),
        "the {HELD} requests were never all handled: {:?} counted",
        counted()
    );
    let ticks = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(1));
    let busy = cpu_ticks(pid) - ticks;
    let threads_held = threads(pid);
    // Answering (once the holds end) costs CPU: what was measured must
    // have been holding alone.
    if start.elapsed() >= held {
        return Err(format!(
            "the {held:?} holds ended before they were checked ({:?})",
            start.elapsed()
        ));
    }
    assert_eq!(
        threads_held, before,
        "threads while {HELD} answers are held"
    );
    // A tick is 10 ms: holding 10,000 answers for a second costs less
    // than a tenth of one core (a loop that spun would cost all of it).
    assert!(busy < 10, "{busy} ticks of CPU in a second of holding");
    eprintln!("{HELD} sent in {sent:?}; {busy} ticks of CPU in a second of holding them");

    for stream in streams {
        let reply = Client::from_stream(stream).reply();
        assert_eq!(reply.status, 200);
    }
    assert!(start.elapsed() >= held);
    Ok(())
}

on_each_store!(ten_thousand_held_answers_add_no_thread);
