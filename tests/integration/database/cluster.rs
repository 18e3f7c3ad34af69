//! Two instances on one PostgreSQL database behind Debian's nginx, as
//! `contrib/nginx-plantstore.conf` sets it up: plants created through the
//! balancer are read back from each instance, racing creates of the same
//! ids get exactly one 200 each, a killed instance leaves the balancer's
//! clients served, and PostgreSQL stopped mid-run gives 503s within a
//! second, then service again with every acknowledged plant present.
//!
//! Needs `nginx` on the PATH (or in /usr/sbin) and the cluster of
//! `scripts/with-postgres.sh` (`PLANTSTORE_TEST_DATABASE`,
//! `PLANTSTORE_TEST_PG_STOP`, `PLANTSTORE_TEST_PG_START`); fails without
//! them.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::process::binary::{Running, server_command};
use crate::support::{FreshDatabase, Reply, TempDir, Turn, request, send_to};

const TOKEN: &str = "cluster-token";

/// Two instances on one fresh database, and nginx in front of them.
struct Cluster {
    balancer: SocketAddr,
    instances: Vec<Running>,
    _nginx: Nginx,
    database: FreshDatabase,
}

impl Cluster {
    fn start() -> Cluster {
        Cluster::on(FreshDatabase::new())
    }

    fn on(database: FreshDatabase) -> Cluster {
        let instances: Vec<Running> = (0..2).map(|_| instance(&database)).collect();
        let nginx = Nginx::start(instances[0].addr, instances[1].addr);
        Cluster {
            balancer: nginx.addr,
            instances,
            _nginx: nginx,
            database,
        }
    }
}

fn instance(database: &FreshDatabase) -> Running {
    let args = ["--database", &database.url, "--database-pool", "4"];
    Running::spawn(server_command(&args, Some(TOKEN)), Duration::from_secs(10))
}

/// nginx from the contrib template, in a directory of its own; stopped
/// when dropped.
struct Nginx {
    child: Child,
    addr: SocketAddr,
    /// nginx's prefix (its config and logs), removed once it has
    /// stopped: the `Drop` below runs before the fields drop.
    _prefix: TempDir,
}

impl Nginx {
    fn start(a: SocketAddr, b: SocketAddr) -> Nginx {
        let template = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/contrib/nginx-plantstore.conf"
        ))
        .expect("the contrib config");
        let addr = free_port();
        let prefix = TempDir::new("nginx");
        std::fs::create_dir_all(prefix.join("logs")).unwrap();
        let config = template
            .replace("@LISTEN@", &addr.to_string())
            .replace("@INSTANCE_A@", &a.to_string())
            .replace("@INSTANCE_B@", &b.to_string());
        let file = prefix.join("nginx.conf");
        std::fs::write(&file, config).unwrap();
        let binary = ["/usr/sbin/nginx", "nginx"]
            .into_iter()
            .find(|b| Command::new(b).arg("-v").output().is_ok())
            .expect("nginx is installed (apt-get install nginx-light)");
        let child = Command::new(binary)
            .arg("-c")
            .arg(&file)
            .arg("-p")
            .arg(&prefix.0)
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "nginx did not listen on {addr}");
            thread::sleep(Duration::from_millis(20));
        }
        Nginx {
            child,
            addr,
            _prefix: prefix,
        }
    }
}

impl Drop for Nginx {
    /// SIGTERM, nginx's fast shutdown: the master stops its workers and
    /// then exits (a SIGKILL would leave the workers running). SIGKILL only
    /// if it has not exited within 10 s.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-s", "TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback address no one listens on now.
fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// One request with the token on a fresh connection; `None` if the
/// connection failed or no answer came within 8 s.
fn call(addr: SocketAddr, method: &str, path: &str, body: &str) -> Option<Reply> {
    let auth = format!("Bearer {TOKEN}");
    let mut headers = vec![("Authorization", auth.as_str())];
    if !body.is_empty() {
        headers.push(crate::support::JSON);
    }
    let bytes = request(method, path, &headers, body);
    let stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(8)))
        .unwrap();
    let mut client = crate::support::Client::from_stream(stream);
    client.try_send(&bytes).ok()?;
    client.try_reply()
}

fn create(addr: SocketAddr, id: i64) -> Option<Reply> {
    call(
        addr,
        "POST",
        "/plants",
        &format!(r#"{{"id":{id},"name":"p{id}"}}"#),
    )
}

#[test]
fn plants_created_through_the_balancer_are_read_back_from_each_instance() {
    let cluster = Cluster::start();
    for id in 0..100 {
        let reply = create(cluster.balancer, id).expect("an answer");
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    for instance in &cluster.instances {
        for id in 0..100 {
            let reply = call(instance.addr, "GET", &format!("/plants/{id}"), "").unwrap();
            assert_eq!(reply.status, 200, "id {id} from {}", instance.addr);
            assert_eq!(reply.json()["name"], format!("p{id}"));
        }
        let page = send_to(
            instance.addr,
            "GET",
            "/plants?limit=1000",
            &[("Authorization", "Bearer cluster-token")],
            "",
        );
        assert_eq!(page.json().as_array().unwrap().len(), 100);
    }
}

#[test]
fn clients_racing_for_the_same_ids_get_one_200_each() {
    let cluster = Cluster::start();
    let outcomes = Arc::new(Mutex::new(HashMap::<i64, Vec<u16>>::new()));
    let clients: Vec<_> = (0..16)
        .map(|n| {
            // Half on each instance, each in its own order.
            let addr = cluster.instances[n % 2].addr;
            let outcomes = Arc::clone(&outcomes);
            thread::spawn(move || {
                for k in 0..1000 {
                    let id = (k * 7 + n as i64 * 131) % 1000;
                    let status = create(addr, id).map_or(0, |r| r.status);
                    outcomes.lock().unwrap().entry(id).or_default().push(status);
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    let outcomes = outcomes.lock().unwrap();
    assert_eq!(outcomes.len(), 1000);
    for (id, statuses) in outcomes.iter() {
        let ok = statuses.iter().filter(|&&s| s == 200).count();
        let conflicts = statuses.iter().filter(|&&s| s == 409).count();
        assert_eq!((ok, conflicts), (1, 15), "id {id}: {statuses:?}");
    }
    let mut client = cluster.database.client();
    let count: i64 = client
        .query_one("SELECT count(*) FROM plants", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 1000);
}

/// Polls `/healthz` at `addr` every 20 ms until it answers `status`, for
/// at most 5 s from `since`.
fn health_turns(addr: SocketAddr, status: u16, since: Instant) -> Reply {
    loop {
        if let Some(reply) = call(addr, "GET", "/healthz", "")
            && reply.status == status
        {
            return reply;
        }
        assert!(
            since.elapsed() < Duration::from_secs(5),
            "/healthz at {addr} not {status} 5 s on"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// A create's id, status (0: no answer), when it came, and its
/// `Retry-After`.
type Seen = (i64, u16, Instant, Option<String>);

/// Creates ids from `from` through the balancer until `stop`, recording
/// every answer.
fn writer(addr: SocketAddr, from: i64, stop: Arc<AtomicBool>) -> thread::JoinHandle<Vec<Seen>> {
    thread::spawn(move || {
        let mut seen = Vec::new();
        let mut id = from;
        while !stop.load(Ordering::Relaxed) {
            let reply = create(addr, id);
            let status = reply.as_ref().map_or(0, |r| r.status);
            let retry = reply.and_then(|r| r.header("retry-after").map(str::to_string));
            seen.push((id, status, Instant::now(), retry));
            id += 1;
            thread::sleep(Duration::from_millis(5));
        }
        seen
    })
}

#[test]
fn a_killed_instance_leaves_the_balancers_clients_served() {
    let mut cluster = Cluster::start();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|n| writer(cluster.balancer, n * 1_000_000, Arc::clone(&stop)))
        .collect();
    thread::sleep(Duration::from_millis(500));
    cluster.instances[1].child.kill().unwrap();
    let _ = cluster.instances[1].child.wait();
    thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let survivor = cluster.instances[0].addr;
    for writer in writers {
        let seen = writer.join().unwrap();
        assert!(seen.len() > 20, "the writer made progress: {}", seen.len());
        for (id, status, _, _) in seen {
            // A create the killed instance applied but could not answer is
            // sent again to the other: 409, never a duplicate.
            assert!(
                status == 200 || status == 409,
                "id {id}: {status} through the balancer"
            );
            if status == 200 {
                let reply = call(survivor, "GET", &format!("/plants/{id}"), "").unwrap();
                assert_eq!(reply.status, 200, "acknowledged id {id} is stored");
            }
        }
    }
}

#[test]
fn postgres_stopped_mid_run_gives_503_within_a_second_then_service_again() {
    // Stopping the cluster would fail every other test using it meanwhile.
    let alone = Turn::alone();
    let cluster = Cluster::on(FreshDatabase::within(&alone));
    let stop_pg = std::env::var("PLANTSTORE_TEST_PG_STOP").expect("PLANTSTORE_TEST_PG_STOP");
    let start_pg = std::env::var("PLANTSTORE_TEST_PG_START").expect("PLANTSTORE_TEST_PG_START");
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|n| writer(cluster.balancer, n * 1_000_000, Arc::clone(&stop)))
        .collect();
    thread::sleep(Duration::from_millis(500));
    let sh = |line: &str| {
        let status = Command::new("sh").args(["-c", line]).status().unwrap();
        assert!(status.success(), "{line}");
    };
    sh(&stop_pg);
    let stopped = Instant::now();
    // Both instances say why on /healthz: within 1 s is the goal (the
    // benchmark reports it), 5 s the bound here.
    for instance in &cluster.instances {
        let health = health_turns(instance.addr, 503, stopped);
        assert!(health.text().contains("database"), "{}", health.text());
    }
    let down = stopped.elapsed();
    thread::sleep(Duration::from_millis(1000));
    sh(&start_pg);
    let started = Instant::now();
    for instance in &cluster.instances {
        health_turns(instance.addr, 200, started);
    }
    let up = started.elapsed();
    // Service again: a create through the balancer succeeds.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut probe = 9_000_000;
    loop {
        let status = create(cluster.balancer, probe).map_or(0, |r| r.status);
        if status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no service 15 s after the restart: {status}"
        );
        probe += 1;
        thread::sleep(Duration::from_millis(50));
    }
    let recovered = started.elapsed();
    thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let mut acknowledged = Vec::new();
    let mut first_503: Option<Duration> = None;
    for writer in writers {
        for (id, status, at, retry) in writer.join().unwrap() {
            assert!(
                matches!(status, 200 | 409 | 503),
                "id {id}: {status}, never a hang or another error"
            );
            if status == 503 {
                assert_eq!(retry.as_deref(), Some("1"), "503 carries Retry-After");
                if at >= stopped {
                    let after = at - stopped;
                    first_503 = Some(first_503.map_or(after, |f| f.min(after)));
                }
            }
            if status == 200 {
                acknowledged.push(id);
            }
        }
    }
    let first_503 = first_503.expect("503s while PostgreSQL was stopped");
    assert!(
        first_503 < Duration::from_secs(1),
        "first 503 {first_503:?} after the stop"
    );
    eprintln!(
        "first 503 {first_503:?} after the stop, /healthz 503 on both within {down:?}; \
         /healthz 200 on both {up:?} and service {recovered:?} after the start"
    );
    let mut client = cluster.database.client();
    for id in acknowledged {
        let row = client
            .query_opt("SELECT 1 FROM plants WHERE id = $1", &[&id])
            .unwrap();
        assert!(row.is_some(), "acknowledged id {id} is in the database");
    }
}
