//! The journal file's identity and its disk: `--data` through a symlink,
//! a journal that is not a regular file, deleted or replaced while the
//! server runs, its mode across a compaction, and a disk too full for a
//! compaction.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::process::binary::{Running, run_to_exit};
use crate::support::{Client, JSON, TempDir, eventually, request};

const TOKEN: &str = "t";
const AUTH: (&str, &str) = ("Authorization", "Bearer t");

fn text(path: &Path) -> &str {
    path.to_str().expect("temp paths are UTF-8")
}

/// One request on a kept-alive connection; the status.
fn status(client: &mut Client, method: &str, path: &str, body: &str) -> u16 {
    let headers: &[(&str, &str)] = if body.is_empty() {
        &[AUTH]
    } else {
        &[AUTH, JSON]
    };
    client.send(&request(method, path, headers, body));
    client.reply().status
}

fn put(client: &mut Client, id: i64, name: &str) -> u16 {
    let body = format!(r#"{{"name":"{name}"}}"#);
    status(client, "PUT", &format!("/plants/{id}"), &body)
}

fn create(client: &mut Client, id: i64, name: &str) -> u16 {
    let body = format!(r#"{{"id":{id},"name":"{name}"}}"#);
    status(client, "POST", "/plants", &body)
}

/// Waits until a log line contains `needle`.
fn wait_for_log(server: &Running, needle: &str) {
    assert!(
        eventually(|| server.log().iter().any(|line| line.contains(needle))),
        "no log line with {needle:?}: {:#?}",
        server.log()
    );
}

/// Grows the journal of a server with `--compact-min 4096` past twice its
/// live data, and waits for the background compaction.
fn compact(server: &Running) {
    let mut client = Client::connect(server.addr);
    assert_eq!(create(&mut client, 1, "kept"), 200);
    assert_eq!(create(&mut client, 2, "churn"), 200);
    for n in 0..300 {
        assert_eq!(put(&mut client, 2, &format!("churn {n}")), 200);
    }
    wait_for_log(server, "journal compacted");
}

/// `plantstore --data PATH` run to its end (at most 10 s): exit code and
/// stderr.
fn refused_start(path: &Path) -> (Option<i32>, String) {
    let (code, stderr) = run_to_exit(
        &["--data", text(path)],
        Some(TOKEN),
        Duration::from_secs(10),
    );
    assert!(
        code.is_some(),
        "plantstore --data {} did not exit within 10 s",
        path.display()
    );
    (code, stderr)
}

#[test]
fn a_symlinked_journal_stays_a_link_to_the_real_locked_file_after_compaction() {
    let dir = TempDir::new("symlink");
    fs::create_dir(dir.join("real")).unwrap();
    let real = dir.join("real/plants.journal");
    let link = dir.join("plants.journal");
    std::os::unix::fs::symlink("real/plants.journal", &link).unwrap();
    let server = Running::start(
        &["--data", text(&link), "--compact-min", "4096"],
        Some(TOKEN),
    );
    compact(&server);

    let meta = fs::symlink_metadata(&link).unwrap();
    assert!(meta.file_type().is_symlink(), "the link was replaced");
    assert_eq!(
        fs::read_link(&link).unwrap(),
        Path::new("real/plants.journal")
    );
    let mut bytes = fs::read(&real).unwrap();
    // The records, without the zeros written ahead of them.
    let end = plantstore::store::journal::scan(&bytes, |_| {})
        .unwrap()
        .valid_len;
    bytes.truncate(end as usize);
    // 302 records of about 40 bytes: 12 KB had it never been compacted.
    assert!(
        bytes.len() < 5000,
        "the real file is compacted: {} bytes",
        bytes.len()
    );
    let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    assert!(
        has(b"kept") && has(b"churn 299"),
        "the real file has the data"
    );
    for leftover in [
        dir.join("plants.journal.compact"),
        dir.join("real/plants.journal.compact"),
    ] {
        assert!(!leftover.exists(), "{} left behind", leftover.display());
    }
    for path in [&real, &link] {
        let (code, stderr) = refused_start(path);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains("locked by another process"), "{stderr}");
    }
}

#[test]
fn compaction_keeps_the_journal_mode_and_owner() {
    let dir = TempDir::new("mode");
    let path = dir.join("plants.journal");
    fs::write(&path, b"").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    // Only root may give a file away; elsewhere the owner is the test's.
    let owner = match std::os::unix::fs::chown(&path, Some(65534), Some(65534)) {
        Ok(()) => (65534, 65534),
        Err(_) => {
            let meta = fs::metadata(&path).unwrap();
            (meta.uid(), meta.gid())
        }
    };
    let server = Running::start(
        &["--data", text(&path), "--compact-min", "4096"],
        Some(TOKEN),
    );
    compact(&server);
    let meta = fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    assert_eq!((meta.uid(), meta.gid()), owner);
}

#[test]
fn a_fifo_as_the_journal_is_refused_at_once_naming_it() {
    let dir = TempDir::new("fifo");
    let path = dir.join("plants.journal");
    let made = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(made.success(), "mkfifo");
    let started = Instant::now();
    let (code, stderr) = refused_start(&path);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(text(&path)), "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// With the journal gone from under a running server: a change is a 500
/// and every later one too, `/healthz` is 503 with `reason`, reads are
/// served, and the log names the file.
fn assert_refuses_changes(server: &Running, journal: &Path, reason: &str, health_first: bool) {
    let mut client = Client::connect(server.addr);
    let health = |client: &mut Client| {
        client.send(&request("GET", "/healthz", &[], ""));
        let reply = client.reply();
        assert_eq!(reply.status, 503, "{}", reply.text());
        let got = reply.json()["reason"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(got.contains(reason), "{got:?} should say {reason:?}");
    };
    if health_first {
        health(&mut client);
    }
    assert_eq!(create(&mut client, 2, "lost"), 500);
    assert_eq!(put(&mut client, 1, "lost"), 500);
    health(&mut client);
    assert_eq!(status(&mut client, "GET", "/plants/1", ""), 200);
    assert_eq!(status(&mut client, "GET", "/plants", ""), 200);
    let named = fs::canonicalize(journal.parent().unwrap())
        .unwrap()
        .join(journal.file_name().unwrap());
    // The log is read on another thread: the line may come a little after
    // the answers.
    let names = |log: &[String]| {
        log.iter()
            .any(|l| l.contains("ERROR") && l.contains(text(&named)) && l.contains(reason))
    };
    eventually(|| names(&server.log()));
    let log = server.log();
    assert!(names(&log), "{log:#?}");
}

#[test]
fn a_journal_deleted_while_serving_refuses_changes_and_fails_health() {
    for sync in ["always", "never"] {
        let dir = TempDir::new("deleted");
        let path = dir.join("plants.journal");
        let args = ["--data", text(&path), "--sync", sync];
        let server = Running::start(&args, Some(TOKEN));
        let mut client = Client::connect(server.addr);
        assert_eq!(create(&mut client, 1, "kept"), 200);
        fs::remove_file(&path).unwrap();
        assert_refuses_changes(&server, &path, "deleted", false);
    }
}

#[test]
fn a_journal_replaced_while_serving_refuses_changes_and_fails_health() {
    for (sync, health_first) in [("always", true), ("always", false), ("never", false)] {
        let dir = TempDir::new("replaced");
        let path = dir.join("plants.journal");
        let args = ["--data", text(&path), "--sync", sync];
        let server = Running::start(&args, Some(TOKEN));
        let mut client = Client::connect(server.addr);
        assert_eq!(create(&mut client, 1, "kept"), 200);
        let other = dir.join("other");
        fs::copy(&path, &other).unwrap();
        fs::rename(&other, &path).unwrap();
        assert_refuses_changes(&server, &path, "replaced", health_first);
    }
}

/// A tmpfs mounted for one test; unmounted (and its directory removed)
/// when dropped.
struct Tmpfs(TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = TempDir::new("tmpfs");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir.0)
            .output();
        match out {
            Ok(out) if out.status.success() => Tmpfs(dir),
            Ok(out) => panic!(
                "this test needs to mount a tmpfs (run it as root): mount failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => panic!("this test needs to mount a tmpfs: cannot run mount: {e}"),
        }
    }

    /// Bytes an unprivileged writer may still use.
    fn free(&self) -> u64 {
        let out = Command::new("stat")
            .args(["-f", "--format=%a %S"])
            .arg(&self.0.0)
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().unwrap());
        fields.next().unwrap() * fields.next().unwrap()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(&self.0.0).status();
        if !unmounted.is_ok_and(|s| s.success()) {
            let _ = Command::new("umount").arg("-l").arg(&self.0.0).status();
        }
    }
}

#[test]
fn a_compaction_that_cannot_fit_fails_alone_and_client_writes_go_on() {
    let disk = Tmpfs::mount("4m");
    let path = disk.0.join("plants.journal");
    let server = Running::start(
        &["--data", text(&path), "--compact-min", "65536"],
        Some(TOKEN),
    );
    let mut client = Client::connect(server.addr);
    // 3000 plants of about 200 bytes: 600 KB live, as much journal.
    let name = |id: i64, round: u32| format!("{round:03} {id:05} {}", "x".repeat(170));
    for id in 0..3000 {
        assert_eq!(create(&mut client, id, &name(id, 0)), 200);
    }
    let live = fs::metadata(&path).unwrap().len();
    // Leave room for one more copy of the live data and 300 KB: once the
    // journal is twice the live data, a compaction would take the last
    // free bytes and more.
    let filler = disk.0.join("filler");
    let keep = live + 300 * 1024;
    fs::write(&filler, vec![0u8; (disk.free() - keep) as usize]).unwrap();
    // Rewriting every plant doubles the journal: from then on every change
    // asks for a compaction, which would need the last free bytes and
    // more. 1000 more changes (200 KB) over 2.5 s span its first retry.
    for id in 0..3000 {
        let status = put(&mut client, id, &name(id, 1));
        assert_eq!(status, 200, "change {id}, {} bytes free", disk.free());
    }
    for n in 0..1000 {
        let id = n % 3000;
        let status = put(&mut client, id, &name(id, 2));
        assert_eq!(status, 200, "late change {n}, {} bytes free", disk.free());
        thread::sleep(Duration::from_micros(2500));
    }
    assert!(disk.free() > 0, "the writes above fitted");
    assert!(
        !disk.0.join("plants.journal.compact").exists(),
        "temp file left"
    );
    client.send(&request("GET", "/healthz", &[], ""));
    assert_eq!(client.reply().status, 200);
    let log = server.log();
    let failed: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("journal compaction failed"))
        .collect();
    assert_eq!(failed.len(), 1, "logged once while backing off: {log:#?}");
    assert!(
        !failed[0].contains("os error 28"),
        "the compaction must not fill the disk to find out: {}",
        failed[0]
    );
    assert!(
        !log.iter().any(|l| l.contains("journal compacted")),
        "{log:#?}"
    );
    drop(client);
    drop(server);
}
