//! Where a run's time goes: the time its threads spent in each phase of the path from input
//! line to committed window, summed over threads (phases run at once on different threads, so
//! the sum exceeds the wall time on a busy run). Read it to find what to speed up; `sluice run
//! --format json` reports it as `busy_seconds`.
//!
//! Measured with the monotonic clock around each phase's work (a chunk decoded, a file
//! encoded), never per row: a handful of clock reads per chunk and per file. The timings only
//! report; no decision of a run depends on them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A phase of a run's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Input records decoded into rows (JSON parsing, event times, the schema's checks).
    Decode,
    /// Decoded rows routed to their windows (late-row checks, per-window takes).
    Route,
    /// Rows deduped by row key (one winner per key), the table's rows merged in.
    Dedupe,
    /// Rows encoded as Parquet (columns aligned to the file schema, compression).
    Encode,
    /// Delta statistics of a staged file (numRecords, min/max, null counts).
    Stats,
    /// Staged files written to the store.
    Upload,
    /// Staged parts and published files read back (for a dedupe or a rewrite).
    ReadBack,
    /// Commits: the Delta log (and dead-letter) commits, from staged files to a new version.
    Commit,
}

impl Phase {
    pub const ALL: [Phase; 8] = [
        Phase::Decode,
        Phase::Route,
        Phase::Dedupe,
        Phase::Encode,
        Phase::Stats,
        Phase::Upload,
        Phase::ReadBack,
        Phase::Commit,
    ];

    /// The phase's name in reports (`busy_seconds` keys, bench tables).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Decode => "decode",
            Phase::Route => "route",
            Phase::Dedupe => "dedupe",
            Phase::Encode => "encode",
            Phase::Stats => "stats",
            Phase::Upload => "upload",
            Phase::ReadBack => "read_back",
            Phase::Commit => "commit",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Busy time per [`Phase`], shared by the threads of one run (cloning shares it).
#[derive(Debug, Clone, Default)]
pub struct Busy {
    nanos: Arc<[AtomicU64; Phase::ALL.len()]>,
}

impl Busy {
    pub fn new() -> Busy {
        Busy::default()
    }

    /// Adds `spent` to `phase`.
    pub fn add(&self, phase: Phase, spent: Duration) {
        let nanos = u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX);
        self.nanos[phase.index()].fetch_add(nanos, Ordering::Relaxed);
    }

    /// Runs `work`, counting its time to `phase`.
    pub fn time<T>(&self, phase: Phase, work: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = work();
        self.add(phase, started.elapsed());
        out
    }

    /// Awaits `work`, counting the time until it is done to `phase` (time the task waited
    /// included: use it for I/O, where waiting is the work).
    pub async fn time_async<T>(
        &self,
        phase: Phase,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        let started = Instant::now();
        let out = work.await;
        self.add(phase, started.elapsed());
        out
    }

    /// Seconds spent in `phase` so far.
    pub fn seconds(&self, phase: Phase) -> f64 {
        self.nanos[phase.index()].load(Ordering::Relaxed) as f64 / 1e9
    }

    /// Every phase with its seconds so far, in [`Phase::ALL`] order.
    pub fn split(&self) -> Vec<(Phase, f64)> {
        Phase::ALL.iter().map(|&p| (p, self.seconds(p))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_adds_to_its_phase_only_and_clones_share() {
        let busy = Busy::new();
        let other = busy.clone();
        other.add(Phase::Encode, Duration::from_millis(1500));
        busy.add(Phase::Encode, Duration::from_millis(500));
        let got = busy.time(Phase::Decode, || 7);
        assert_eq!(got, 7);
        assert_eq!(busy.seconds(Phase::Encode), 2.0);
        assert!(busy.seconds(Phase::Decode) >= 0.0);
        assert_eq!(busy.seconds(Phase::Commit), 0.0);
        let split = busy.split();
        assert_eq!(split.len(), Phase::ALL.len());
        assert_eq!(split[3], (Phase::Encode, 2.0));
        let names: Vec<&str> = split.iter().map(|(p, _)| p.name()).collect();
        assert_eq!(
            names,
            [
                "decode",
                "route",
                "dedupe",
                "encode",
                "stats",
                "upload",
                "read_back",
                "commit"
            ]
        );
    }
}
