//! One command run to its end, measured: its wall time, peak resident set and CPU time.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::alternatives::BenchError;

/// Runs `command` to completion; its wall time and peak resident set (KiB, from `wait4`).
/// Output goes to `log`, shown if the command fails.
pub(crate) fn run_measured(command: Command, log: &Path) -> Result<(Duration, u64), BenchError> {
    let usage = run_usage(command, log)?;
    Ok((usage.wall, usage.rss_kib))
}

/// What one process used.
pub(crate) struct Usage {
    pub wall: Duration,
    /// Peak resident set, KiB.
    pub rss_kib: u64,
    /// User plus system CPU time.
    pub cpu: Duration,
}

/// As [`run_measured`], with the process's CPU time too.
pub(crate) fn run_usage(mut command: Command, log: &Path) -> Result<Usage, BenchError> {
    let out = std::fs::File::create(log)?;
    command
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    let started = Instant::now();
    let child = command.spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is plain old data, zeroed is a valid value; `wait4` fills it for the
    // child we just spawned (and reaps it, so `child` is not waited on again).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    drop(child);
    if reaped != pid {
        return Err(format!("wait4 failed: {}", std::io::Error::last_os_error()).into());
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        return Err(format!("{command:?} failed (status {status}):\n{text}").into());
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Ok(Usage {
        wall,
        rss_kib: usage.ru_maxrss as u64,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
    })
}
