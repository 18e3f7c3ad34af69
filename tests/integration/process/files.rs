//! A token or webhook secret file that is not a regular file: a FIFO,
//! `/dev/zero` (the device itself or a link to it) or a directory is
//! refused at once, never read. At start-up: exit 2 naming the file and
//! what it is. On SIGHUP: the configuration in use stays, a later SIGHUP
//! still reloads, and SIGTERM still stops the server within its grace.
//!
//! Regressions pinned: a FIFO as the token file blocked the signal thread
//! forever after SIGHUP (later SIGHUPs ignored, SIGTERM no longer
//! stopping the server); at start a FIFO as `--token-file` or
//! `--webhook-secret-file` hung silently; a file pointing at `/dev/zero`
//! was read until memory ran out.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::binary::{Running, create, run_to_exit};
use crate::process::reload::logged;
use crate::support::TempDir;

/// Something at a file's path that is not a regular file.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Bad {
    Fifo,
    LinkToZero,
    Directory,
}

impl Bad {
    pub(crate) const ALL: [Bad; 3] = [Bad::Fifo, Bad::LinkToZero, Bad::Directory];

    /// Puts one at `path` (which must not exist).
    pub(crate) fn make(self, path: &Path) {
        match self {
            Bad::Fifo => {
                let made = Command::new("mkfifo").arg(path).status().unwrap();
                assert!(made.success(), "mkfifo {}", path.display());
            }
            Bad::LinkToZero => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
            Bad::Directory => fs::create_dir(path).unwrap(),
        }
    }

    /// Takes it away again.
    pub(crate) fn remove(self, path: &Path) {
        match self {
            Bad::Directory => fs::remove_dir(path).unwrap(),
            Bad::Fifo | Bad::LinkToZero => fs::remove_file(path).unwrap(),
        }
    }

    /// How the refusal names it.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Bad::Fifo => "it is a FIFO, not a regular file",
            Bad::LinkToZero => "it is a character device, not a regular file",
            Bad::Directory => "it is a directory, not a regular file",
        }
    }
}

pub(crate) fn text(path: &Path) -> &str {
    path.to_str().expect("temp paths are UTF-8")
}

#[test]
fn a_fifo_a_device_or_a_directory_as_token_or_secret_file_is_exit_2_at_once() {
    let dir = TempDir::new("bad-files");
    let mut cases: Vec<(PathBuf, &str)> = vec![(
        PathBuf::from("/dev/zero"),
        Bad::LinkToZero.reason(), // the device itself, not through a link
    )];
    for bad in Bad::ALL {
        let path = dir.join(&format!("{bad:?}"));
        bad.make(&path);
        cases.push((path, bad.reason()));
    }
    for (path, reason) in &cases {
        for flag in ["--token-file", "--webhook-secret-file"] {
            let env_token = (flag == "--webhook-secret-file").then_some("t");
            // A hang is killed after 10 s and fails here, as no exit code.
            let (code, stderr) =
                run_to_exit(&[flag, text(path)], env_token, Duration::from_secs(10));
            assert_eq!(code, Some(2), "{flag} {}: {stderr}", path.display());
            let named = format!("{}: {reason}", path.display());
            assert!(stderr.contains(&named), "{flag}: {stderr}");
            assert_eq!(stderr.trim().lines().count(), 1, "{flag}: {stderr}");
        }
    }
}

#[test]
fn sighup_keeps_the_tokens_when_the_file_is_a_fifo_a_device_or_a_directory() {
    let dir = TempDir::new("reload-bad");
    let path = dir.join("tokens");
    fs::write(&path, "old-token\n").unwrap();
    let mut server = Running::start(&["--token-file", text(&path)], None);
    let mut id = 0;
    // The FIFO first: after it, the later SIGHUPs must still be handled.
    for bad in Bad::ALL {
        fs::remove_file(&path).unwrap();
        bad.make(&path);
        server.signal("HUP");
        let refused = format!("{}: {}", path.display(), bad.reason());
        assert!(logged(&server, &refused), "{bad:?}: {:?}", server.log());
        id += 1;
        assert_eq!(create(server.addr, "old-token", id), 200, "{bad:?}");
        bad.remove(&path);
        fs::write(&path, "old-token\n").unwrap();
    }
    // Fixed: the next SIGHUP reloads.
    fs::write(&path, "new-token\n").unwrap();
    server.signal("HUP");
    let reloaded = format!("reloaded {}", path.display());
    assert!(logged(&server, &reloaded), "{:?}", server.log());
    assert_eq!(create(server.addr, "new-token", 100), 200);
    assert_eq!(create(server.addr, "old-token", 101), 401);

    let asked = Instant::now();
    server.signal("TERM");
    assert!(server.wait(Duration::from_secs(7)).success());
    assert!(asked.elapsed() < Duration::from_secs(5), "within its grace");
}
