//! Small helpers shared by every module: time stamps, process identity, executables.

use std::time::SystemTime;

/// Now, as RFC 3339 with milliseconds (UTC).
pub fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A process's start time in clock ticks since boot (`/proc/PID/stat` field 22), with its
/// process group. Together with the pid it names one process, even after the pid is recycled.
pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); pgrp is field 5, starttime field 22.
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub state: char,
    pub pgrp: i32,
    pub start_time: u64,
}

/// True when `pid` still runs and is the process that started at `start_time`.
pub fn same_process_alive(pid: i32, start_time: u64) -> bool {
    matches!(proc_stat(pid), Some(s) if s.start_time == start_time && s.state != 'Z')
}

/// True for a regular file with an execute bit.
pub fn is_executable(p: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// This process's pid and start time.
pub fn self_identity() -> (i32, u64) {
    let pid = std::process::id() as i32;
    (pid, proc_stat(pid).map(|s| s.start_time).unwrap_or(0))
}

/// Every live process in group `pgid` that started no earlier than `not_before`.
pub fn group_members(pgid: i32, not_before: u64) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(
            |&pid| matches!(proc_stat(pid), Some(s) if s.pgrp == pgid && s.start_time >= not_before && s.state != 'Z'),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_identity() {
        let (pid, start) = self_identity();
        assert!(start > 0);
        assert!(same_process_alive(pid, start));
        assert!(!same_process_alive(pid, start + 1));
    }
}
