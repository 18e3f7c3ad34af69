//! A PostgreSQL server that stops answering without closing its
//! connections (its backends frozen with SIGSTOP, as a hung process or a
//! machine gone without a reset would look): no client timeout fires, so
//! the pool's watchdog must answer the requests held by it (503), count
//! those workers down, start others, and let the server stop in time.
//! With the whole server frozen, the heartbeat turns `/healthz` 503, and
//! 200 again after the thaw.

use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::process::binary::Running;
use crate::support::{Client, FreshDatabase, Reply, Turn, request};

const TOKEN: &str = "frozen-token";

/// GET `path` with the token, waiting at most 20 s; `None` if no answer.
fn get(addr: SocketAddr, path: &str) -> Option<Reply> {
    let stream = TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut client = Client::from_stream(stream);
    let auth = format!("Bearer {TOKEN}");
    client
        .try_send(&request("GET", path, &[("Authorization", &auth)], ""))
        .ok()?;
    client.try_reply()
}

/// Sends `signal` to the backends `pids`.
fn signal_backends(signal: &str, pids: &[i32]) {
    for pid in pids {
        let status = Command::new("kill")
            .args(["-s", signal, &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {pid}");
    }
}

#[test]
fn requests_held_by_a_frozen_database_are_answered_503_and_the_server_recovers_and_stops() {
    let database = FreshDatabase::new();
    let args = ["--database", &database.url, "--database-pool", "2"];
    let mut server = Running::start(&args, Some(TOKEN));
    let addr = server.addr;
    assert_eq!(get(addr, "/plants/1").map(|r| r.status), Some(404));
    let mut client = database.client();
    // The watchdog answers the requests the frozen backends hold. When
    // both workers' idle pings are in flight at the freeze (a loaded
    // machine: CI's PostgreSQL 18 run), their own timeouts meet it first
    // and the requests are refused from the queue instead: answered too,
    // but not by the watchdog, so the freeze is tried again, up to three
    // times, until the watchdog has answered once.
    let mut by_watchdog = false;
    for _ in 0..3 {
        let logged = server.log().len();
        let statuses = freeze_both_workers(&mut client, &database, addr);
        let log = server.log()[logged..].join("\n");
        by_watchdog = log.contains("the database stopped answering");
        assert!(
            by_watchdog || log.contains("connection lost: timeout waiting for server"),
            "{log}"
        );
        // Service again: the replacements are connected.
        let deadline = Instant::now() + Duration::from_secs(10);
        while get(addr, "/plants/1").map(|r| r.status) != Some(404) {
            assert!(Instant::now() < deadline, "no service after the freeze");
            thread::sleep(Duration::from_millis(50));
        }
        if by_watchdog {
            // The requests the watchdog answered are counted as failed
            // (the pings' tries count theirs as down).
            let metrics = get(addr, "/metrics").expect("metrics").text();
            let failed = metrics
                .lines()
                .find_map(|l| {
                    l.strip_prefix("plantstore_database_refused_total{reason=\"failed\"} ")
                })
                .and_then(|n| n.parse::<u64>().ok());
            let held = statuses.iter().filter(|s| **s == Some(503)).count() as u64;
            assert!(failed.is_some_and(|n| n >= 1 && n <= held + 1), "{metrics}");
            break;
        }
    }
    assert!(by_watchdog, "three freezes, and the watchdog answered none");
    server.signal("TERM");
    assert!(server.wait(Duration::from_secs(12)).success());
}

/// Freezes the backends of both pool workers (connected and idle) while
/// three requests are asked, then thaws them: the requests' statuses, each
/// answered, within the watchdog's limit and a little, some 503.
fn freeze_both_workers(
    client: &mut postgres::Client,
    database: &FreshDatabase,
    addr: SocketAddr,
) -> Vec<Option<u16>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let pids: Vec<i32> = loop {
        let rows = client
            .query(
                "SELECT pid FROM pg_stat_activity WHERE datname = $1 \
                 AND application_name = 'plantstore'",
                &[&database.name()],
            )
            .unwrap();
        if rows.len() == 2 || Instant::now() > deadline {
            break rows.iter().map(|r| r.get(0)).collect();
        }
        thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(pids.len(), 2, "two pool connections");
    signal_backends("STOP", &pids);
    let frozen = Instant::now();
    let askers: Vec<_> = (0..3)
        .map(|_| thread::spawn(move || get(addr, "/plants/1").map(|r| r.status)))
        .collect();
    let statuses: Vec<Option<u16>> = askers.into_iter().map(|a| a.join().unwrap()).collect();
    let waited = frozen.elapsed();
    signal_backends("CONT", &pids);
    assert!(statuses.iter().all(Option::is_some), "{statuses:?}");
    assert!(statuses.contains(&Some(503)), "{statuses:?}");
    assert!(
        waited < Duration::from_secs(10),
        "answered after {waited:?}"
    );
    statuses
}

/// The whole PostgreSQL server frozen (the postmaster and every process
/// of it, as a hung host looks: connections open, nothing answered) and
/// thawed again on drop, whatever the test's outcome.
struct Frozen {
    pids: Vec<i32>,
}

impl Frozen {
    fn server(client: &mut postgres::Client) -> Frozen {
        let data: String = client.query_one("SHOW data_directory", &[]).unwrap().get(0);
        let pid_file = std::fs::read_to_string(format!("{data}/postmaster.pid")).unwrap();
        let postmaster: i32 = pid_file.lines().next().unwrap().trim().parse().unwrap();
        let children = Command::new("pgrep")
            .args(["-P", &postmaster.to_string()])
            .output()
            .unwrap();
        let mut pids: Vec<i32> = String::from_utf8_lossy(&children.stdout)
            .split_whitespace()
            .map(|pid| pid.parse().unwrap())
            .collect();
        pids.push(postmaster);
        signal_backends("STOP", &pids);
        Frozen { pids }
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        signal_backends("CONT", &self.pids);
    }
}

/// Polls `/healthz` every 20 ms until it answers `status`, for at most
/// `limit`: how long that took.
fn health_turns(addr: SocketAddr, status: u16, limit: Duration) -> Duration {
    let since = Instant::now();
    loop {
        if get(addr, "/healthz").map(|r| r.status) == Some(status) {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < limit,
            "/healthz not {status} within {limit:?}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_whole_frozen_server_turns_healthz_503_and_back_and_requests_held_are_answered() {
    // Freezing the cluster would hold every other test using it.
    let alone = Turn::alone();
    let database = FreshDatabase::within(&alone);
    let args = ["--database", &database.url, "--database-pool", "2"];
    let server = Running::start(&args, Some(TOKEN));
    let addr = server.addr;
    assert_eq!(get(addr, "/healthz").map(|r| r.status), Some(200));
    let mut client = database.admin();
    let frozen = Frozen::server(&mut client);
    // A request sent now is held by the frozen server, then answered.
    let asker = thread::spawn(move || {
        let asked = Instant::now();
        (get(addr, "/plants/1").map(|r| r.status), asked.elapsed())
    });
    // The goal is 1 s (bench/run.sh postgres reports the figure); 5 s
    // here, for a busy machine.
    let down = health_turns(addr, 503, Duration::from_secs(5));
    let (status, held) = asker.join().unwrap();
    assert_eq!(status, Some(503));
    assert!(held < Duration::from_secs(5), "held {held:?}");
    // Refused at once while it is frozen.
    let asked = Instant::now();
    assert_eq!(get(addr, "/plants/1").map(|r| r.status), Some(503));
    assert!(asked.elapsed() < Duration::from_secs(1));
    drop(frozen);
    let up = health_turns(addr, 200, Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(5);
    while get(addr, "/plants/1").map(|r| r.status) != Some(404) {
        assert!(Instant::now() < deadline, "no service after the thaw");
        thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "frozen: /healthz 503 after {down:?}, a held request answered after {held:?}, 200 again {up:?} after the thaw"
    );
    drop(client);
    drop(server);
}
