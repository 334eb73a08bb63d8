//! Where (c)'s time goes: `sluice run --format json` reports the seconds its threads spent in
//! each phase (`busy_seconds`: decode, route, dedupe, encode, stats, upload, read back,
//! commit), summed over threads. This runs (c) with it a few times and reports the medians
//! beside the process's CPU time and wall time from the same runs.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::alternatives::BenchError;
use crate::usage::run_usage;

/// Medians of a few runs of one command with `--format json`.
pub struct Split {
    pub runs: usize,
    /// Phase name and median busy seconds, in the order of a row's way through the run.
    pub phases: Vec<(String, f64)>,
    pub wall: Duration,
    /// User plus system CPU time of the process.
    pub cpu: Duration,
}

/// Runs `command` (a `sluice run`, to which `--format json` is added) `runs` times; `log`
/// holds each run's output while it is parsed.
pub fn busy_split(
    command: impl Fn() -> Command,
    runs: usize,
    log: &Path,
) -> Result<Split, BenchError> {
    let mut walls = Vec::with_capacity(runs);
    let mut cpus = Vec::with_capacity(runs);
    let mut by_phase: Vec<(String, Vec<f64>)> = Vec::new();
    for run in 1..=runs {
        let mut c = command();
        c.args(["--format", "json"]);
        let usage = run_usage(c, log)?;
        let text = std::fs::read_to_string(log)?;
        let summary: serde_json::Value = text
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .ok_or("no JSON summary in the run's output")?;
        let busy = summary["busy_seconds"]
            .as_object()
            .ok_or("the run's summary has no busy_seconds")?;
        for (phase, secs) in busy {
            let secs = secs
                .as_f64()
                .ok_or("a busy_seconds value is not a number")?;
            match by_phase.iter_mut().find(|(p, _)| p == phase) {
                Some((_, v)) => v.push(secs),
                None => by_phase.push((phase.clone(), vec![secs])),
            }
        }
        eprintln!(
            "split run {run}: {:.2} s, CPU {:.2} s",
            usage.wall.as_secs_f64(),
            usage.cpu.as_secs_f64()
        );
        walls.push(usage.wall);
        cpus.push(usage.cpu);
    }
    // In the order of a row's way through the run (JSON objects may come sorted by name).
    let order = sluice_stage::Phase::ALL.map(sluice_stage::Phase::name);
    by_phase.sort_by_key(|(p, _)| order.iter().position(|o| o == p).unwrap_or(order.len()));
    walls.sort();
    cpus.sort();
    Ok(Split {
        runs,
        phases: by_phase
            .into_iter()
            .map(|(p, mut v)| {
                v.sort_by(f64::total_cmp);
                (p, v[v.len() / 2])
            })
            .collect(),
        wall: walls[walls.len() / 2],
        cpu: cpus[cpus.len() / 2],
    })
}

/// Appends the split's table to `r`.
pub fn report(r: &mut String, split: &Split) {
    let busy: f64 = split.phases.iter().map(|(_, s)| s).sum();
    let _ = writeln!(
        r,
        "\nWhere (c)'s time goes: seconds its threads spent in each phase (`busy_seconds` of `sluice run --format json`), summed over threads, medians of {} more runs of (c). \
         decode runs on the reader thread, route and commit on the runner's, dedupe, encode and stats on staging threads, all at once: the phases add up to more than the wall time. \
         upload, read back and commit are the time their awaits took (waiting on the store included), the others CPU work.\n",
        split.runs
    );
    let _ = writeln!(r, "| phase | busy | share of the phases |");
    let _ = writeln!(r, "| --- | --- | --- |");
    for (phase, secs) in &split.phases {
        let _ = writeln!(
            r,
            "| {phase} | {secs:.2} s | {:.0}% |",
            if busy > 0.0 { secs / busy * 100.0 } else { 0.0 }
        );
    }
    let _ = writeln!(r, "| all phases | {busy:.2} s | |");
    let _ = writeln!(
        r,
        "| process CPU time (user + system) | {:.2} s | |",
        split.cpu.as_secs_f64()
    );
    let _ = writeln!(r, "| wall time | {:.2} s | |", split.wall.as_secs_f64());
}
