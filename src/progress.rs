//! Progress of a long command where no bar is drawn: when stderr is not a terminal (a log
//! file, a CI job, a pipe), a line on stderr every 10 seconds, `sluice run: 41% of 31.1 MB
//! read, 139000 records, 2201 windows published, 10 s`, so a long quiet run is never silent.
//! On a terminal the commands draw a bar instead (indicatif). `SLUICE_PROGRESS_INTERVAL_MS`
//! sets the interval (tests use a few milliseconds).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// The interval between two progress lines unless `SLUICE_PROGRESS_INTERVAL_MS` sets one.
pub const INTERVAL_DEFAULT: Duration = Duration::from_secs(10);

/// Prints a progress line at most once per interval, when stderr is not a terminal.
#[derive(Debug)]
pub struct ProgressLines {
    command: &'static str,
    started: Instant,
    last: Instant,
    interval: Duration,
    enabled: bool,
}

impl ProgressLines {
    pub fn new(command: &'static str) -> Self {
        let now = Instant::now();
        ProgressLines {
            command,
            started: now,
            last: now,
            interval: interval(),
            enabled: !std::io::stderr().is_terminal(),
        }
    }

    /// Whether lines are printed (stderr is not a terminal); the bar is drawn otherwise.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Prints `sluice COMMAND: <state>, N s` if the interval has passed since the last line.
    pub fn tick(&mut self, state: impl FnOnce() -> String) {
        if !self.enabled || self.last.elapsed() < self.interval {
            return;
        }
        self.last = Instant::now();
        eprintln!(
            "sluice {}: {}, {} s",
            self.command,
            state(),
            self.started.elapsed().as_secs()
        );
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }
}

fn interval() -> Duration {
    std::env::var("SLUICE_PROGRESS_INTERVAL_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(INTERVAL_DEFAULT, Duration::from_millis)
}

/// `41% of 31.1 MB`: how far through `total` bytes `done` is.
pub fn share_of_bytes(done: u64, total: u64) -> String {
    let percent = done.saturating_mul(100).checked_div(total).unwrap_or(100);
    format!("{percent}% of {:.1} MB", total as f64 / 1e6)
}
