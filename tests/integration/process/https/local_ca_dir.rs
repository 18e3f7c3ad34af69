//! `--tls-auto DIR` on the built binary: who may hold `DIR`. A directory
//! every user may write, or another user's, is refused at start with the
//! command that fixes it; two servers started at once on one fresh `DIR`
//! do not race to make the CA: one serves, the other stops at start
//! naming the process that holds `DIR`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::TOKEN;
use crate::process::binary::{run_to_exit, server_command};
use crate::support::{PATIENCE, TempDir};

/// The public key of a PEM key or certificate, as openssl prints it.
fn public_key(args: &[&str], file: &Path) -> String {
    let out = Command::new("openssl")
        .args(args)
        .arg(file)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two servers started at once with `--tls-auto DIR`, their stderr in
/// files beside `DIR`: (exit code of the one that stopped, its stderr,
/// the stderr of the one still running once it listens), or a panic
/// with both if that is not how it went within `PATIENCE`.
fn race(dir: &Path) -> (Option<i32>, String, String) {
    let dir_text = dir.display().to_string();
    let spawn = |name: &str| {
        let log = dir.with_file_name(name);
        let mut command = server_command(&["--tls-auto", &dir_text], Some(TOKEN));
        command.stdout(Stdio::null());
        command.stderr(std::fs::File::create(&log).unwrap());
        (command.spawn().unwrap(), log)
    };
    let mut servers = [spawn("a.log"), spawn("b.log")];
    let read = |log: &Path| std::fs::read_to_string(log).unwrap_or_default();
    let started = Instant::now();
    let result = loop {
        let exited: Vec<usize> = (0..2)
            .filter(|&i| servers[i].0.try_wait().unwrap().is_some())
            .collect();
        if let [stopped] = exited[..] {
            let running = &servers[1 - stopped].1;
            if read(running).contains("listening on https://") {
                let code = servers[stopped].0.wait().unwrap().code();
                break Some((code, read(&servers[stopped].1), read(running)));
            }
        }
        if exited.len() == 2 || started.elapsed() > PATIENCE {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    for (child, _) in &mut servers {
        let _ = child.kill();
        let _ = child.wait();
    }
    result.unwrap_or_else(|| {
        let (a, b) = (read(&servers[0].1), read(&servers[1].1));
        panic!("not one serving and one stopped:\n{a}\n{b}")
    })
}

/// Regression: two servers on one fresh `DIR` shared temporary names and
/// no lock; some rounds left a `ca.key` beside another key's `ca.pem`,
/// others had neither serve.
#[test]
fn two_servers_on_one_dir_at_once_leave_one_serving_and_one_ca() {
    for round in 0..3 {
        let scratch = TempDir::new("tls-auto-race");
        let dir = scratch.join("tls");
        let (code, refused, served) = race(&dir);
        assert_eq!(code, Some(2), "round {round}: {refused}");
        assert!(
            refused.contains("is in use by another server (process "),
            "{refused}"
        );
        assert!(refused.contains("stop that server first"), "{refused}");
        assert!(served.contains("(made now)"), "{served}");
        let ca = public_key(&["x509", "-noout", "-pubkey", "-in"], &dir.join("ca.pem"));
        let key = public_key(&["pkey", "-pubout", "-in"], &dir.join("ca.key"));
        assert_eq!(
            ca, key,
            "round {round}: ca.pem is not the certificate of ca.key"
        );
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "round {round}: {left:?}");
    }
}

/// Regression: a `DIR` every user may write, or another user's, was used
/// without a word, though its owner or anyone could swap the CA's key.
#[test]
fn a_dir_others_may_write_or_own_is_refused_with_the_fix() {
    let scratch = TempDir::new("tls-auto-open");
    let dir = scratch.join("tls");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let dir_text = dir.display().to_string();
    let start = || run_to_exit(&["--tls-auto", &dir_text], Some(TOKEN), PATIENCE);
    let (code, stderr) = start();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("is writable by every user"), "{stderr}");
    assert!(
        stderr.contains(&format!("chmod 700 {dir_text}")),
        "{stderr}"
    );
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let me = std::fs::metadata(&scratch.0).unwrap();
    if std::os::unix::fs::MetadataExt::uid(&me) != 0 {
        eprintln!("not root: a directory of another user's cannot be made here, not checked");
        return;
    }
    std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
    let (code, stderr) = start();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("belongs to another user (uid 65534)"),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("chown 0 {dir_text}")), "{stderr}");
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
}
