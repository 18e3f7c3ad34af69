//! How many event loops serve by default: the CPUs this process may run on
//! (its affinity mask), lowered to a cgroup v2 CPU quota (`cpu.max`) set on
//! its cgroup or one above it, so that a container given two CPUs of a
//! larger host runs two loops.
//!
//! In place of the standard library's `available_parallelism`, whose
//! parsing of mount tables and of both cgroup versions is about 8 KB of
//! the smallest build. What this does not honour, where that did: a cgroup
//! v1 quota (`cpu.cfs_quota_us`), and a cgroup v2 hierarchy mounted other
//! than at `/sys/fs/cgroup`; either way the affinity mask alone counts
//! (`--threads` sets the number outright).

use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Where cgroup v2 is mounted (the only place looked at).
const CGROUP: &str = "/sys/fs/cgroup";

/// The CPUs this process may use, at least 1.
pub fn available_cpus() -> usize {
    let cpus = affinity().max(1);
    quota().map_or(cpus, |quota| cpus.min(quota))
}

/// The CPUs in this thread's affinity mask, or online (on a host with
/// more than the 1,024 CPUs a `cpu_set_t` holds).
#[allow(unsafe_code)]
fn affinity() -> usize {
    // SAFETY: an all-zero `cpu_set_t` is an empty set, the kernel writes
    // at most the size it is given, and `CPU_COUNT` reads that set only;
    // `sysconf` has no preconditions.
    let count = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            usize::try_from(libc::CPU_COUNT(&set))
        } else {
            usize::try_from(libc::sysconf(libc::_SC_NPROCESSORS_ONLN))
        }
    };
    count.unwrap_or(1)
}

/// The smallest whole number of CPUs that a `cpu.max` grants, from this
/// process's cgroup up to the root; `None` where none limits it.
fn quota() -> Option<usize> {
    let cgroups = small(Path::new("/proc/self/cgroup"))?;
    let own = Path::new(cgroups.lines().find_map(|line| line.strip_prefix("0::"))?);
    if own.components().any(|c| c == Component::ParentDir) {
        return None; // outside this cgroup namespace's root
    }
    let mut dir = PathBuf::from(CGROUP);
    dir.extend(
        own.components()
            .filter(|c| matches!(c, Component::Normal(_))),
    );
    let mut least = None;
    while dir.starts_with(CGROUP) {
        if let Some(cpus) = small(&dir.join("cpu.max")).and_then(|text| cpu_max(&text)) {
            least = Some(least.map_or(cpus, |n: usize| n.min(cpus)));
        }
        if !dir.pop() {
            break;
        }
    }
    least
}

/// The CPUs a `cpu.max` ("QUOTA PERIOD" in microseconds, or "max PERIOD")
/// grants, rounded down but at least 1; `None` for no limit.
fn cpu_max(text: &str) -> Option<usize> {
    let mut words = text.split_whitespace();
    let quota: u64 = words.next()?.parse().ok()?;
    let period: u64 = words.next()?.parse().ok()?;
    let cpus = quota.checked_div(period)?;
    Some(usize::try_from(cpus).unwrap_or(usize::MAX).max(1))
}

/// The text of a small kernel file (its first 4 KiB); `None` if unreadable.
fn small(path: &Path) -> Option<String> {
    let mut text = String::new();
    File::open(path)
        .ok()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_is_the_quota_over_the_period_rounded_down_but_at_least_one() {
        assert_eq!(cpu_max("200000 100000\n"), Some(2));
        assert_eq!(cpu_max("250000 100000"), Some(2));
        assert_eq!(cpu_max("50000 100000"), Some(1));
        assert_eq!(cpu_max("max 100000\n"), None);
        assert_eq!(cpu_max("100000 0"), None);
        assert_eq!(cpu_max(""), None);
    }

    #[test]
    fn the_cpus_are_at_least_one_and_at_most_the_affinity_mask() {
        let cpus = available_cpus();
        assert!(cpus >= 1);
        assert!(cpus <= affinity().max(1));
        assert_eq!(cpus, affinity().max(1).min(quota().unwrap_or(usize::MAX)));
    }
}
