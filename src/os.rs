//! Small questions to the operating system that several layers ask:
//! random bytes for tokens, keys and webhook ids, the open-file limit, the
//! CPUs this process may use ([`available_cpus`], in `cpus.rs`), and the
//! text of a file a flag names, read so that it cannot hang or bloat
//! ([`read_text`], in `file.rs`), and such a file opened ([`open_regular`]);
//! and a background thread's scheduling ([`batch_scheduling`]); and a
//! lock claimed while no child process is alive ([`claiming`],
//! in `children.rs`).
//!
//! A leaf: imports nothing of the crate, keeps no state but the one lock
//! in `children.rs`.

mod children;
mod cpus;
mod file;

pub use children::claiming;
#[cfg(test)]
pub use children::run;
pub use cpus::available_cpus;
pub use file::{FileError, MAX_FILE_BYTES, kind_of, open_regular, read_text};

/// Fresh files and directories for the unit tests: the file the
/// integration tests include too, so that there is one such helper.
#[cfg(test)]
#[path = "../tests/shared/temp.rs"]
pub(crate) mod temp;

use std::io::{self, Read};

/// 2026-01-01 (seconds since the epoch): a clock before it is wrong (a
/// board without a real-time clock, not yet set by NTP). Nothing is signed
/// with such a clock, and no answer carries its `Date`.
pub const CLOCK_FLOOR: u64 = 1_767_225_600;

/// `bytes` random bytes from the OS, as hex (tokens, webhook ids).
pub fn random_hex(bytes: usize) -> io::Result<String> {
    let mut buf = vec![0u8; bytes];
    random_fill(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Fills `buf` with random bytes from the OS (keys).
pub fn random_fill(buf: &mut [u8]) -> io::Result<()> {
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

/// Schedules the calling thread as batch work (Linux's `SCHED_BATCH`): it
/// still gets its fair share of the CPU, but waking it no longer
/// preempts a thread that is running: it runs once that thread blocks
/// (an event loop waiting in `poll`) or has had its time slice. For a
/// background thread that serves the event loops (the journal's
/// committer): on a CPU it shares with a loop, each of its wake-ups (a
/// kick, the disk's answer) otherwise cut the loop's turn in two, and
/// with `--sync always` those switches were a large share of what a
/// durable request cost beyond one in memory (`bench/run.sh durable`).
/// Whether the kernel took it; where it did not, the thread keeps the
/// default policy.
#[allow(unsafe_code)]
pub fn batch_scheduling() -> bool {
    // The kernel's `struct sched_param` is one int, the priority (0 for
    // this policy); the C libraries' may be larger (musl's is).
    let priority: libc::c_int = 0;
    // SAFETY: the kernel only reads `priority`, which outlives the call;
    // pid 0 is the calling thread. The system call itself: musl's wrapper
    // answers ENOSYS on purpose (POSIX means the whole process).
    let set = unsafe {
        libc::syscall(
            libc::SYS_sched_setscheduler,
            0,
            libc::SCHED_BATCH,
            &raw const priority,
        )
    };
    set == 0
}

/// This process's soft open-file limit; `None` where it cannot be read or
/// is unlimited.
pub fn open_file_limit() -> Option<usize> {
    let (soft, _) = rlimit::getrlimit(rlimit::Resource::NOFILE).ok()?;
    (soft != rlimit::INFINITY)
        .then(|| usize::try_from(soft).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_hex_is_hex_of_the_length_asked_and_differs_each_time() {
        let (a, b) = (random_hex(16).unwrap(), random_hex(16).unwrap());
        assert_eq!(a.len(), 32);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
    }

    /// The scheduling policy of the calling thread, from its `stat` (the
    /// 41st field; the name, in parentheses, may hold spaces).
    fn policy() -> u32 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        after_name.split(' ').nth(41 - 3).unwrap().parse().unwrap()
    }

    #[test]
    fn batch_scheduling_sets_the_calling_thread_and_no_other() {
        let before = policy();
        let batch = std::thread::spawn(|| (batch_scheduling(), policy()));
        assert_eq!(batch.join().unwrap(), (true, libc::SCHED_BATCH as u32));
        assert_eq!(policy(), before);
    }
}
