//! The built `plantstore` executable: flags, start-up line, generated
//! token, signals, and memory under hostile Content-Length values.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::support::{Client, Keep, Kind, PATIENCE, eventually, request, store_args};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_plantstore");

/// The binary, without the `PLANTSTORE_*` variables of the environment the
/// tests run in: each is a flag to it (or a warning), so one set by chance
/// would change what a test checks.
pub(crate) fn command() -> Command {
    let mut command = Command::new(BIN);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PLANTSTORE_") {
            command.env_remove(name);
        }
    }
    command
}

/// The binary on `127.0.0.1:0` with `args`, and `PLANTSTORE_TOKEN` if a
/// token is given.
pub(crate) fn server_command(args: &[&str], env_token: Option<&str>) -> Command {
    let mut command = command();
    command.args(["--addr", "127.0.0.1:0"]).args(args);
    if let Some(token) = env_token {
        command.env("PLANTSTORE_TOKEN", token);
    }
    command
}

/// Runs the binary with `args` (and `PLANTSTORE_TOKEN` if given) until it
/// exits, or for `within` and then stops it: its exit code (`None`: it was
/// still running) and what it wrote to stderr.
pub(crate) fn run_to_exit(
    args: &[&str],
    env_token: Option<&str>,
    within: Duration,
) -> (Option<i32>, String) {
    command_to_exit(server_command(args, env_token), within)
}

/// As [`run_to_exit`], for a command made with [`server_command`].
pub(crate) fn command_to_exit(mut command: Command, within: Duration) -> (Option<i32>, String) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + within;
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    (code, stderr)
}

/// A running binary; its stderr is collected line by line.
pub(crate) struct Running {
    pub(crate) child: Child,
    pub(crate) addr: SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
    /// The thread collecting `lines`: it ends at the end of stderr, once
    /// the binary has exited.
    reader: Option<JoinHandle<()>>,
    /// Its store's database, if any: dropped after the binary is killed.
    keep: Option<Keep>,
}

impl Running {
    pub(crate) fn start(args: &[&str], token: Option<&str>) -> Running {
        Running::start_within(args, token, PATIENCE)
    }

    /// As `start`, on `kind`'s store (a fresh database of its own for
    /// PostgreSQL, kept while the binary runs).
    pub(crate) fn on(kind: Kind, args: &[&str], token: Option<&str>) -> Running {
        let (store, keep) = store_args(kind);
        let mut all: Vec<&str> = store.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        let mut running = Running::start(&all, token);
        running.keep = keep;
        running
    }

    /// As `start`, for a start-up that may take up to `within` (a large
    /// `--seed` in a debug build).
    pub(crate) fn start_within(args: &[&str], token: Option<&str>, within: Duration) -> Running {
        Running::spawn(server_command(args, token), within)
    }

    /// Starts `command` (see [`server_command`]) and waits up to `within`
    /// for its start-up line.
    pub(crate) fn spawn(mut command: Command, within: Duration) -> Running {
        let mut child = command
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let collected = Arc::clone(&lines);
        let reader = thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let addr = line.split("listening on ").nth(1).and_then(|rest| {
                    let rest = rest
                        .strip_prefix("http://")
                        .or(rest.strip_prefix("https://"))?;
                    Some(rest.split(',').next().unwrap_or_default().to_string())
                });
                collected.lock().unwrap().push(line);
                if let Some(addr) = addr {
                    let _ = tx.send(addr);
                }
            }
        });
        let addr = match rx.recv_timeout(within) {
            Ok(addr) => addr,
            Err(e) => {
                // Not left running behind the failed test.
                let _ = child.kill();
                let _ = child.wait();
                panic!("no start-up line within {within:?}: {e:?}");
            }
        };
        Running {
            child,
            addr: addr.parse().expect("start-up line shows a real address"),
            lines,
            reader: Some(reader),
            keep: None,
        }
    }

    pub(crate) fn log(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    pub(crate) fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args(["-s", name, &self.child.id().to_string()])
            .status();
        assert!(status.unwrap().success());
    }

    /// Waits up to `limit` for the binary to exit; its log is then whole.
    pub(crate) fn wait(&mut self, limit: Duration) -> ExitStatus {
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.take_the_last_lines();
                return status;
            }
            assert!(Instant::now() < until, "did not exit within {limit:?}");
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, and the log up to the kill.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.take_the_last_lines();
    }

    /// Lines the binary wrote just before it exited may still be in the
    /// pipe: the reader has them all when it ends.
    fn take_the_last_lines(&mut self) {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }

    pub(crate) fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn create(addr: SocketAddr, token: &str, id: i64) -> u16 {
    let auth = format!("Bearer {token}");
    let mut client = Client::connect(addr);
    let body = format!(r#"{{"id":{id},"name":"a"}}"#);
    client.send(&request(
        "POST",
        "/plants",
        &[("Authorization", &auth), crate::support::JSON],
        &body,
    ));
    client.reply().status
}

#[test]
fn generated_token_is_printed_once_works_and_is_never_logged() {
    let mut server = Running::start(&[], None);
    let printed = |log: &[String]| log.iter().any(|l| l.contains("bearer token for this run"));
    assert!(eventually(|| printed(&server.log())), "{:?}", server.log());
    let log = server.log();
    let token_lines: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("bearer token for this run"))
        .collect();
    assert_eq!(token_lines.len(), 1, "{log:?}");
    let token = token_lines[0].rsplit(' ').next().unwrap().to_string();
    assert_eq!(token.len(), 64);
    assert_eq!(create(server.addr, &token, 1), 200);
    assert_eq!(create(server.addr, "wrong", 2), 401);
    assert!(
        log.iter().any(|l| l.contains("in memory")),
        "start-up line names the storage"
    );
    server.signal("TERM");
    assert!(server.wait(PATIENCE).success());
    let log = server.log();
    assert!(
        log.iter().any(|l| l.contains("POST /plants 200")),
        "access line: {log:?}"
    );
    let leaks = log
        .iter()
        .filter(|l| l.contains(&token) && !l.contains("bearer token for this run"));
    assert_eq!(leaks.count(), 0, "token leaked into the log");
}

#[test]
fn huge_content_length_keeps_memory_flat() {
    // 100 wrong tokens from one address: not a test of the auth-failure
    // limit, which would refuse the right token too after 20.
    let server = Running::start(&["--auth-failures", "0"], Some("t0k3n"));
    assert_eq!(create(server.addr, "t0k3n", 1), 200);
    let before = server.rss_kib();
    for i in 0..200 {
        let auth = if i % 2 == 0 {
            "Bearer t0k3n"
        } else {
            "Bearer nope"
        };
        let mut client = Client::connect(server.addr);
        client.send(format!(
            "POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\n\
             Content-Length: 1000000000000\r\n\r\n"
        ).as_bytes());
        let status = client.reply().status;
        assert!(status == 413 || status == 401, "{status}");
    }
    let after = server.rss_kib();
    assert!(
        after < before + 8 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
    assert_eq!(create(server.addr, "t0k3n", 2), 200);
}

#[test]
fn the_openapi_document_declares_the_lengths_the_flags_set() {
    let server = Running::start(&["--max-name", "1000", "--max-tag", "10"], Some("t0k3n"));
    let mut client = Client::connect(server.addr);
    client.send(&request("GET", "/openapi.json", &[], ""));
    let document = client.reply().json();
    let schemas = &document["components"]["schemas"];
    for schema in ["Plant", "PlantRecord"] {
        let properties = &schemas[schema]["properties"];
        assert_eq!(properties["name"]["maxLength"], 1000, "{schema}");
        assert_eq!(properties["tag"]["maxLength"], 10, "{schema}");
    }
    let body = |name: usize| format!(r#"{{"id":1,"name":"{}"}}"#, "n".repeat(name));
    let auth = [("Authorization", "Bearer t0k3n"), crate::support::JSON];
    client.send(&request("POST", "/plants", &auth, &body(1001)));
    client.reply().assert_error(400, "at most 1000 characters");
    client.send(&request("POST", "/plants", &auth, &body(1000)));
    assert_eq!(client.reply().status, 200);
}

#[test]
fn sigterm_finishes_the_request_in_flight_then_exits_0() {
    let mut server = Running::start(&[], Some("t0k3n"));
    let mut client = Client::connect(server.addr);
    let body = r#"{"id":9,"name":"in flight"}"#;
    let head = format!(
        "POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t0k3n\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        body.len()
    );
    client.send(head.as_bytes());
    // The 100 Continue shows the request is in flight: its handler asked
    // for the body.
    assert_eq!(client.reply().status, 100);
    client.send(&body.as_bytes()[..10]);
    server.signal("TERM");
    // Every loop has begun stopping once none of them listens any more.
    let addr = server.addr;
    assert!(
        eventually(|| std::net::TcpStream::connect(addr).is_err()),
        "still accepting after SIGTERM"
    );
    client.send(&body.as_bytes()[10..]);
    let reply = client.reply();
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("connection"),
        Some("close"),
        "stopping: no more requests here"
    );
    assert!(server.wait(PATIENCE).success());
}

#[test]
fn sigint_stops_an_idle_server_promptly() {
    let mut server = Running::start(&[], Some("t0k3n"));
    // Answered once, so served and now idle.
    let mut idle = Client::connect(server.addr);
    idle.send(&request("GET", "/healthz", &[], ""));
    assert_eq!(idle.reply().status, 200);
    let started = Instant::now();
    server.signal("INT");
    assert!(server.wait(Duration::from_secs(7)).success());
    // Not the 5 s a request in flight would get: an idle connection is
    // closed at once (milliseconds; the bound allows for a loaded machine).
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn bad_flag_values_are_one_line_errors_with_exit_2() {
    for args in [
        &["--max-connections", "abc"][..],
        &["--max-connections", "0"],
        &["--addr", "not-an-address"],
        &["--log-level", "loud"],
        &["--token-file", "/nonexistent/tokens"],
        &["--max-name", "0"],
        &["--max-tag", "0"],
        &["--max-data", "0"],
        &["--max-name", "20000"],
        &["--max-tag", "100", "--max-body", "512"],
        &["--no-such-flag"],
    ] {
        let out = command().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn version_and_help() {
    let out = command().arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        crate::process::firstrun::version_line()
    );
    let out = command().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--addr",
        "--max-connections",
        "--max-body",
        "--max-plants",
        "--max-name",
        "--max-tag",
        "--max-data",
        "--token-file",
        "--token",
        "--log-level",
    ] {
        assert!(help.contains(flag), "{flag} documented");
    }
}

/// The scheduling policy of each of a process's threads, by name, from
/// `/proc/PID/task/TID/stat` (the 41st field; the name, in parentheses,
/// may hold spaces).
fn thread_policies(pid: u32) -> Vec<(String, u32)> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let Ok(stat) = std::fs::read_to_string(task.unwrap().path().join("stat")) else {
            continue; // a thread that ended meanwhile
        };
        let (open, close) = (stat.find('(').unwrap(), stat.rfind(')').unwrap());
        let name = stat[open + 1..close].to_string();
        let policy = stat[close + 2..].split(' ').nth(41 - 3).unwrap();
        threads.push((name, policy.parse().unwrap()));
    }
    threads
}

/// With `--data`, the journal's committer is scheduled as batch work
/// (`SCHED_BATCH`, 3): its wake-ups wait for an event loop on its CPU to
/// end its turn. The loops keep the default policy (0).
#[test]
fn the_committer_is_scheduled_as_batch_work_and_the_event_loops_are_not() {
    let journal = crate::support::TempFile::new("batch-scheduling.journal");
    let data = journal.0.to_str().unwrap();
    let server = Running::start(
        &["--data", data, "--threads", "2"],
        Some("s3cret-token-of-16"),
    );
    const BATCH: u32 = 3;
    let pid = server.child.id();
    let loops = || -> Vec<u32> {
        thread_policies(pid)
            .into_iter()
            .filter(|(name, _)| name == "plantstore" || name.starts_with("loop-"))
            .map(|(_, policy)| policy)
            .collect()
    };
    // The server answers once its first loop runs; the second may start
    // a moment later.
    let started = || {
        loops().len() >= 2
            && thread_policies(pid)
                .iter()
                .any(|(name, policy)| name == "committer" && *policy == BATCH)
    };
    assert!(eventually(started), "{:?}", thread_policies(pid));
    let loops = loops();
    assert!(loops.iter().all(|&p| p == 0), "{loops:?}");
}
