//! Locks and child processes. A child holds a copy of every descriptor of
//! this process from its fork to its exec (close-on-exec closes them only
//! then), and with them every `flock` this process held at the fork. A
//! lock this process gives up in that window is still held until the
//! child execs, and the process's next claim of it fails as if another
//! server held it.
//!
//! Nor is `spawn` returning the end of it: the parent resumes once the
//! child has begun its exec, and the child's copies are closed a moment
//! later (their last close runs as the child returns to user space).
//!
//! So a claim of a lock ([`claiming`]: the journal, the state directory)
//! is made while no child is alive, and a child ([`run`]) is run, start
//! to end, while no claim is in progress. The server starts no child;
//! the unit tests do (`openssl` checks the local CA), on threads beside
//! tests that close a journal and open it again.

use std::sync::RwLock;

/// Held for reading while a lock is claimed, for writing while a child
/// is alive.
static CHILDREN: RwLock<()> = RwLock::new(());

/// `claim()` run while no child of this process is alive.
pub fn claiming<T>(claim: impl FnOnce() -> T) -> T {
    let _no_child_alive = CHILDREN.read().unwrap_or_else(|e| e.into_inner());
    claim()
}

/// `command` run to its end, its output gathered, while no lock is
/// being claimed.
#[cfg(test)]
pub fn run(command: &mut std::process::Command) -> std::io::Result<std::process::Output> {
    let _no_claim = CHILDREN.write().unwrap_or_else(|e| e.into_inner());
    command.output()
}

#[cfg(test)]
mod tests {
    use std::fs::{File, OpenOptions};
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    use super::*;
    use crate::os::temp::TempFile;

    /// A child that, between its fork and its exec, says so on a pipe and
    /// then waits 300 ms: a window in which it holds this process's locks.
    /// A lock given up in that window is claimed once the child is gone.
    #[test]
    fn a_lock_given_up_while_a_child_starts_is_claimed_once_the_child_is_gone() {
        let path = TempFile::new("children-lock");
        let lock = || {
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path.0)
        };
        let held = lock().unwrap();
        held.try_lock().unwrap();
        let (mut forked, told) = std::io::pipe().unwrap();
        let told_fd = told.as_raw_fd();
        let mut command = Command::new("true");
        #[allow(unsafe_code)]
        // SAFETY: the closure runs in the child between fork and exec and
        // makes only async-signal-safe calls (write, nanosleep).
        unsafe {
            command.pre_exec(move || {
                libc::write(told_fd, b"f".as_ptr().cast(), 1);
                let wait = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 300_000_000,
                };
                libc::nanosleep(&wait, std::ptr::null_mut());
                Ok(())
            });
        }
        let starting = std::thread::spawn(move || run(&mut command).unwrap().status);
        let mut byte = [0u8; 1];
        forked.read_exact(&mut byte).unwrap();
        // The child has forked and holds a copy of `held`.
        drop(held);
        let again: File = lock().unwrap();
        claiming(|| again.try_lock()).expect("the lock is free once the child is gone");
        drop(told);
        assert!(starting.join().unwrap().success());
    }
}
