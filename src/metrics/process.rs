//! The standard `process_*` metrics, read from `/proc/self` at each scrape.
//!
//! Linux only: where a file cannot be read or parsed (another OS, a
//! restricted `/proc`), its metric is left out, never guessed, and nothing
//! panics. CPU time in `/proc/self/stat` is in clock ticks of `USER_HZ`,
//! which the kernel's ABI fixes at 100 for `/proc` whatever the
//! configured tick rate (asking `sysconf` would need unsafe code, which
//! the crate forbids).

use std::fs;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{Exposition, Kind};

/// Clock ticks a second in `/proc/self/stat`.
const USER_HZ: u64 = 100;

/// Appends the process metrics; `started` is when the server started.
pub fn render(out: &mut Exposition, started: SystemTime) {
    if let Ok(since) = started.duration_since(UNIX_EPOCH) {
        let value = format!("{}.{:03}", since.as_secs(), since.subsec_millis());
        out.single(
            "process_start_time_seconds",
            Kind::Gauge,
            "Start time of the process since the Unix epoch, in seconds.",
            value,
        );
    }
    if let Some(ticks) = fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| cpu_ticks(&s))
    {
        let value = format!("{}.{:02}", ticks / USER_HZ, ticks % USER_HZ);
        out.single(
            "process_cpu_seconds_total",
            Kind::Counter,
            "User and system CPU time spent, in seconds.",
            value,
        );
    }
    let status = fs::read_to_string("/proc/self/status").ok();
    if let Some(bytes) = status.as_deref().and_then(resident_bytes) {
        out.single(
            "process_resident_memory_bytes",
            Kind::Gauge,
            "Resident memory size, in bytes.",
            bytes,
        );
    }
    if let Some(max) = fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| max_open_files(&l))
    {
        out.single(
            "process_max_fds",
            Kind::Gauge,
            "Maximum number of open file descriptors.",
            max,
        );
    }
    if let Ok(entries) = fs::read_dir("/proc/self/fd") {
        // The directory being read is itself open: counted, as other
        // exporters count it.
        let open = entries.filter(Result::is_ok).count();
        out.single(
            "process_open_fds",
            Kind::Gauge,
            "Open file descriptors.",
            open,
        );
    }
}

/// The soft limit of open files from the text of `/proc/self/limits`
/// (`Max open files  1024  524288  files`); `None` when unlimited or
/// unreadable.
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// User plus system time, in clock ticks, from the text of
/// `/proc/self/stat`: fields 14 and 15, counted after the command name,
/// which is in parentheses and may itself hold spaces and parentheses.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    // `rest` starts at field 3 (the state).
    let mut fields = rest.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    user.checked_add(system)
}

/// `VmRSS` from the text of `/proc/self/status`, in bytes (the file gives
/// KiB).
fn resident_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_fds_is_the_soft_limit_of_open_files() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max processes             95000                95000                processes\n\
                      Max open files            16384                524288               files\n";
        assert_eq!(max_open_files(limits), Some(16384));
        assert_eq!(
            max_open_files(
                "Max open files            unlimited            unlimited            files\n"
            ),
            None
        );
        assert_eq!(max_open_files("garbage"), None);
    }

    #[test]
    fn cpu_time_is_user_plus_system_after_any_command_name() {
        let fields = "S 1 2 3 4 5 6 7 8 9 10 250 31 0 0 20 0 1 0";
        assert_eq!(cpu_ticks(&format!("42 (plantstore) {fields}")), Some(281));
        assert_eq!(cpu_ticks(&format!("42 (a) (b c) {fields}")), Some(281));
        assert_eq!(cpu_ticks("42 (plantstore) S 1 2"), None);
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn resident_memory_is_read_in_kib() {
        let status = "Name:\tplantstore\nVmPeak:\t  9000 kB\nVmRSS:\t    2048 kB\n";
        assert_eq!(resident_bytes(status), Some(2048 * 1024));
        assert_eq!(resident_bytes("Name:\tx\n"), None);
        assert_eq!(resident_bytes("VmRSS:\tlots kB\n"), None);
    }

    #[test]
    fn this_process_reports_plausible_figures() {
        let mut out = Exposition::new();
        render(&mut out, SystemTime::now());
        let out = out.into_text();
        for name in [
            "process_start_time_seconds ",
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_open_fds ",
        ] {
            assert!(out.contains(&format!("\n{name}")), "{name} missing:\n{out}");
        }
    }
}
