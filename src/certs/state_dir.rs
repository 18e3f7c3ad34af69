//! A directory the server keeps its own state in (`--tls-auto`'s CA and
//! certificate, `--acme-dir`'s account and certificate), opened one way
//! and written one way, for both: the keys in it are worth the same care.
//!
//! Opening makes the directory 0700 if missing and refuses a symbolic
//! link (it could lead the keys anywhere), what is not a directory, a
//! directory writable by every user or owned by another user than the
//! one the server runs as (either could swap the keys kept in it), and a
//! directory this process cannot write (found at start, not at the first
//! renewal). It then claims the directory ([`Claim`]): an exclusive
//! `flock` on its file `lock`, which holds the claiming process's id, for
//! as long as the claim lives (the server's life). A second server given
//! the same directory is refused at start, naming the process that holds
//! it, instead of racing the first to make or renew the same files; the
//! kernel drops the lock of a process that ended, however it ended, so a
//! stale `lock` file is claimed again without a word.
//!
//! A file is replaced whole: written under a temporary name (its own name,
//! the process id and a number of the process's own, then `.tmp`, so that
//! no two writes ever share one), synced, renamed over the old, and the
//! directory synced, so that a crash leaves the old file or the new one,
//! never half of one, and the rename itself survives a power cut. A
//! temporary file a crash left behind is removed at the next claim.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The lock file of a state directory.
pub const LOCK: &str = "lock";

/// A state directory claimed by this process: its `lock` file, locked,
/// for as long as any clone of this lives.
#[derive(Debug, Clone)]
pub struct Claim(#[allow(dead_code)] Arc<File>);

/// Checks `dir` as a state directory, made (0700) if missing, and claims
/// it; refused, with why (without the path, but with the fix), if it is
/// a symbolic link, not a directory, writable by every user, another
/// user's, cannot be written, or is claimed by another process.
pub fn open(dir: &Path) -> Result<Claim, String> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(
                "is a symbolic link; give the directory itself (a link could lead the \
                        keys kept in it anywhere)"
                    .into(),
            );
        }
        Ok(meta) if !meta.is_dir() => return Err("is not a directory".into()),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot be made: {e}"))?,
        Err(e) => return Err(e.to_string()),
    }
    let meta = fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    if meta.mode() & 0o002 != 0 {
        return Err(format!(
            "is writable by every user (mode {:o}), who could swap the keys kept in it; \
             make it private: chmod 700 {}",
            meta.mode() & 0o7777,
            dir.display()
        ));
    }
    let me = own_uid(dir).map_err(|e| format!("cannot be written: {e}"))?;
    if meta.uid() != me {
        return Err(format!(
            "belongs to another user (uid {}) than the one this server runs as (uid {me}), \
             who could swap the keys kept in it; make it this user's: chown {me} {}",
            meta.uid(),
            dir.display()
        ));
    }
    let claim = claim(dir)?;
    remove_leftovers(dir);
    Ok(claim)
}

/// The user id this process makes files as: that of a file it makes in
/// `dir` (and removes). Proves `dir` writable too.
fn own_uid(dir: &Path) -> io::Result<u32> {
    let probe = temporary(&dir.join(".plantstore-probe"))?;
    let made = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&probe)
        .and_then(|file| file.metadata());
    let _ = fs::remove_file(&probe);
    made.map(|meta| meta.uid())
}

/// Locks `dir`'s `lock` file and writes this process's id into it.
fn claim(dir: &Path) -> Result<Claim, String> {
    let path = dir.join(LOCK);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| format!("cannot be written ({LOCK}: {e})"))?;
    match crate::os::claiming(|| file.try_lock()) {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let holder = match holder(&mut file) {
                Some(pid) => format!("process {pid}"),
                None => "another process".to_string(),
            };
            return Err(format!(
                "is in use by another server ({holder} holds its lock, {}); stop that \
                 server first, or give each server a directory of its own",
                path.display()
            ));
        }
        Err(fs::TryLockError::Error(e)) => return Err(format!("cannot be locked ({LOCK}: {e})")),
    }
    let written = file
        .set_len(0)
        .and_then(|()| file.write_all(format!("{}\n", std::process::id()).as_bytes()));
    written.map_err(|e| format!("cannot be written ({LOCK}: {e})"))?;
    Ok(Claim(Arc::new(file)))
}

/// The process id in a lock file another process holds. A holder that
/// has just taken the lock writes its id a moment later: read again for a
/// few milliseconds until it is there.
fn holder(file: &mut File) -> Option<u32> {
    for _ in 0..20 {
        let mut text = String::new();
        let read = io::Seek::rewind(file)
            .and_then(|()| io::Read::by_ref(file).take(32).read_to_string(&mut text));
        if let Some(pid) = read.ok().and_then(|_| text.trim().parse().ok()) {
            return Some(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    None
}

/// Removes the temporary files of writes a crash cut short (named as
/// [`temporary`] names them). Only under the claim: no write of another
/// process can be under way.
fn remove_leftovers(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let stamp = name
            .strip_suffix(".tmp")
            .and_then(|rest| rest.rsplit_once('.'))
            .and_then(|(_, stamp)| stamp.split_once('-'));
        let ours = stamp.is_some_and(|(pid, n)| {
            [pid, n]
                .iter()
                .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
        });
        if ours {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// A temporary name for `path`: `NAME.PID-N.tmp`, N counting this
/// process's writes, so that no two writes share one.
fn temporary(path: &Path) -> io::Result<PathBuf> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other("no file name"))?;
    let mut temporary = name.to_os_string();
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    temporary.push(format!(".{}-{n}.tmp", std::process::id()));
    Ok(path.with_file_name(temporary))
}

/// Replaces `path` whole with `bytes`, a new file of `mode`, or leaves the
/// old one.
pub fn write_file(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let temporary = temporary(path)?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let write = || -> io::Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, path)?;
        fs::File::open(dir)?.sync_all()
    };
    write().inspect_err(|_| {
        let _ = fs::remove_file(&temporary);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::temp::TempDir;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_missing_directory_is_made_private_and_files_are_replaced_whole() {
        let base = TempDir::new("state-dir");
        let dir = base.join("state");
        let _claim = open(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        // Two files whose names differ only after a dot: no shared temporary.
        write_file(&dir.join("ca.key"), b"key", 0o600).unwrap();
        write_file(&dir.join("ca.pem"), b"cert", 0o644).unwrap();
        write_file(&dir.join("ca.key"), b"key 2", 0o600).unwrap();
        assert_eq!(fs::read(dir.join("ca.key")).unwrap(), b"key 2");
        assert_eq!(fs::read(dir.join("ca.pem")).unwrap(), b"cert");
        assert_eq!(
            fs::metadata(dir.join("ca.key")).unwrap().mode() & 0o777,
            0o600
        );
        let mut left: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["ca.key", "ca.pem", LOCK]);
    }

    #[test]
    fn a_symlink_a_file_and_an_unwritable_place_are_refused() {
        let base = TempDir::new("state-dir-bad");
        let real = base.join("real");
        drop(open(&real).unwrap());
        let link = base.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(open(&link).unwrap_err().contains("symbolic link"));
        fs::write(real.join("file"), "x").unwrap();
        assert!(
            open(&real.join("file"))
                .unwrap_err()
                .contains("not a directory")
        );
        // Under a file nothing can be made or written.
        let under = real.join("file").join("state");
        assert!(open(&under).unwrap_err().contains("Not a directory"));
        assert!(write_file(&under.join("x"), b"", 0o600).is_err());
    }

    #[test]
    fn a_directory_every_user_may_write_is_refused_with_the_fix() {
        let base = TempDir::new("state-dir-open");
        let dir = base.join("state");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let refused = open(&dir).unwrap_err();
        assert!(refused.contains("writable by every user"), "{refused}");
        assert!(refused.contains("chmod 700 "), "{refused}");
        // With the sticky bit (as /tmp) too: others may still add files.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(open(&dir).is_err());
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o750)).unwrap();
        open(&dir).unwrap();
    }

    #[test]
    fn another_users_directory_is_refused_with_the_fix() {
        let base = TempDir::new("state-dir-owner");
        let dir = base.join("state");
        drop(open(&dir).unwrap());
        let me = own_uid(&dir).unwrap();
        if me != 0 {
            eprintln!("not root: a directory of another user's cannot be made here, not checked");
            return;
        }
        std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
        let refused = open(&dir).unwrap_err();
        assert!(refused.contains("another user (uid 65534)"), "{refused}");
        assert!(
            refused.contains(&format!("chown 0 {}", dir.display())),
            "{refused}"
        );
    }

    #[test]
    fn a_claimed_directory_is_refused_naming_the_holder_until_released() {
        let base = TempDir::new("state-dir-claim");
        let dir = base.join("state");
        let claim = open(&dir).unwrap();
        let held = fs::read_to_string(dir.join(LOCK)).unwrap();
        assert_eq!(held, format!("{}\n", std::process::id()));
        // A second claim (flock: another open file, even in this process).
        let refused = open(&dir).unwrap_err();
        let pid = format!("process {} holds its lock", std::process::id());
        assert!(refused.contains(&pid), "{refused}");
        assert!(refused.contains("in use by another server"), "{refused}");
        // Clones share the claim; the last one gone releases it.
        let clone = claim.clone();
        drop(claim);
        assert!(open(&dir).is_err());
        drop(clone);
        let _again = open(&dir).unwrap();
    }

    #[test]
    fn temporary_names_never_repeat_and_leftovers_go_at_the_next_claim() {
        let base = TempDir::new("state-dir-temporary");
        let dir = base.join("state");
        drop(open(&dir).unwrap());
        let a = temporary(&dir.join("ca.key")).unwrap();
        let b = temporary(&dir.join("ca.key")).unwrap();
        assert_ne!(a, b);
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(&format!("ca.key.{}-", std::process::id())),
            "{name}"
        );
        fs::write(&a, "cut short").unwrap();
        fs::write(dir.join("notes.tmp"), "someone's").unwrap();
        drop(open(&dir).unwrap());
        assert!(!a.exists());
        assert!(dir.join("notes.tmp").exists());
    }
}
