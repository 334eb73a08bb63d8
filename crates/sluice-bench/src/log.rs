//! The cost of a long log: publish latency (seal to visible) at table version ~10 against
//! version N, and restart-to-resume at both, on one table (local, or on S3 through a moto
//! server) built by sluice's own publish path (`sluice_publish::WindowTable`, a checkpoint every
//! `sluice_publish::CHECKPOINT_INTERVAL_DEFAULT` commits, as `sluice run` creates tables).
//!
//! The table holds a bounded set of windows (each publication swaps one of 24 hourly windows),
//! so the active file count stays at 24 while the log grows by one version per publication:
//! what is measured is the log's length, not a growing file list.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deltalake::arrow::array::{Int64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use sluice_publish::{TableOptions, WindowTable};
use sluice_stage::{StageOptions, Stager};
use sluice_window::{AddressLayout, EventTime, Window, WindowSize};

use crate::alternatives::BenchError;

/// Where the long log's table lives.
pub enum LogPlace<'a> {
    /// A directory under the bench's work directory.
    Local,
    /// `s3://<bucket>/log-table` on a moto server.
    S3(&'a crate::moto::Moto),
}

/// Publications measured at each end of the log (300 at ~0.5 ms each: a median that a
/// moment of noise on the machine does not move).
pub(crate) const SAMPLES: usize = 300;
/// Windows the publications cycle through.
const WINDOWS: i64 = 24;

/// What [`log_growth`] measured.
pub struct LogReport {
    /// Where the table was: `local`, `S3 (moto)`.
    pub place: &'static str,
    pub versions: u64,
    pub rows_per_window: usize,
    /// Publish latency (stage + commit, until the commit is in the log) near version 10.
    pub early: Latency,
    /// The same near the last version.
    pub late: Latency,
    /// `sluice run` over a new, empty source: process start to exit, at version ~10 and at
    /// the last version (medians of 3).
    pub restart_early: Duration,
    pub restart_late: Duration,
    /// `sluice status` of the table: process start to exit, at version ~10 and at the last
    /// version (medians of 3).
    pub status_early: Duration,
    pub status_late: Duration,
    /// The kernel's dentry cache (entries, negative entries: `/proc/sys/fs/dentry-state`)
    /// when the early and the late samples began: every file a publication creates or
    /// probes adds one, and a long local log leaves hundreds of thousands.
    pub dentries_early: Option<(u64, u64)>,
    pub dentries_late: Option<(u64, u64)>,
}

/// Entries and negative entries of the kernel's dentry cache (Linux), if readable.
fn dentry_state() -> Option<(u64, u64)> {
    let state = std::fs::read_to_string("/proc/sys/fs/dentry-state").ok()?;
    let mut n = state.split_whitespace().map(|f| f.parse::<u64>().ok());
    let entries = n.next()??;
    let negative = n.nth(3)??;
    Some((entries, negative))
}

pub struct Latency {
    pub median: Duration,
    pub p99: Duration,
}

impl Latency {
    fn of(mut samples: Vec<Duration>) -> Latency {
        samples.sort();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        Latency {
            median: at(0.5),
            p99: at(0.99),
        }
    }
}

/// Publishes `versions` windows of `rows` rows into a new table under `dir`.
pub fn log_growth(
    dir: &Path,
    versions: u64,
    rows: usize,
    sluice: &Path,
    place: LogPlace<'_>,
) -> Result<LogReport, BenchError> {
    let runtime = tokio::runtime::Runtime::new()?;
    let empty = dir.join("log-empty-source");
    std::fs::create_dir_all(&empty)?;
    std::fs::write(empty.join("new.ndjson"), b"")?;
    let (location, options, place_name) = match place {
        LogPlace::Local => {
            let table_dir = dir.join("log-table");
            if table_dir.exists() {
                std::fs::remove_dir_all(&table_dir)?;
            }
            std::fs::create_dir_all(&table_dir)?;
            let location = table_dir
                .to_str()
                .ok_or("table path is not UTF-8")?
                .to_string();
            (location, Vec::new(), "local")
        }
        LogPlace::S3(moto) => (
            format!("s3://{}/log-table", moto.bucket),
            moto.options(),
            "S3 (moto)",
        ),
    };
    // A command of the real binary (the object store options in its environment): process
    // start to exit, median of 3.
    let timed = |what: &str, args: &[String]| -> Result<Duration, BenchError> {
        let mut times = Vec::new();
        for _ in 0..3 {
            let started = Instant::now();
            let out = Command::new(sluice)
                .args(args)
                .envs(options.iter().map(|(k, v)| (k, v)))
                .output()?;
            if !out.status.success() {
                return Err(format!(
                    "sluice {what} failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
                .into());
            }
            times.push(started.elapsed());
        }
        times.sort();
        Ok(times[1])
    };
    let restart_args: Vec<String> = [
        "run",
        "--pipeline",
        "bench",
        "--window",
        "1h",
        "--source",
        &format!("ndjson:{}", empty.display()),
        "--table",
        &location,
    ]
    .map(String::from)
    .to_vec();
    let status_args: Vec<String> = ["status", "--table", &location, "--format", "json"]
        .map(String::from)
        .to_vec();
    let local = matches!(place, LogPlace::Local);
    let dentries = || if local { dentry_state() } else { None };
    let restart = || timed("run (restart)", &restart_args);
    let status = || timed("status", &status_args);
    runtime.block_on(async {
        let size = WindowSize::parse("1h")?;
        let schema = Arc::new(Schema::new(vec![
            Field::new("event_id", DataType::Utf8, true),
            Field::new("ts", DataType::Utf8, true),
        ]));
        let mut table = WindowTable::open_or_create(
            &TableOptions {
                storage_options: options.iter().cloned().collect(),
                ..TableOptions::new(location.clone())
            },
            Some(&schema),
            AddressLayout::DtHour,
            size,
        )
        .await?;
        let mut stager = Stager::new(table.store(), "bench", StageOptions::default());
        let start = EventTime::from_micros(1_790_000_000_000_000 / 3_600_000_000 * 3_600_000_000);
        let mut early = Vec::new();
        let mut late = Vec::new();
        let mut restart_early = Duration::ZERO;
        let mut status_early = Duration::ZERO;
        let mut dentries_early = None;
        let mut dentries_late = None;
        let started = Instant::now();
        for v in 1..=versions {
            let hour = (v as i64) % WINDOWS;
            let window = Window::containing(
                size,
                EventTime::from_micros(start.as_micros() + hour * 3_600_000_000),
            );
            if v == 10 {
                dentries_early = dentries();
            }
            if v == versions.saturating_sub(SAMPLES as u64) + 1 {
                dentries_late = dentries();
            }
            let batch = window_rows(&table, rows, v, window)?;
            let t = Instant::now();
            let address = table.address(window);
            let file = stager
                .stage(&address, table.file_schema(), vec![batch])
                .await?;
            table
                .publish(crate::catchup::publication(window, file, v as i64))
                .await?;
            let took = t.elapsed();
            if (10..10 + SAMPLES as u64).contains(&v) {
                early.push(took);
            }
            if v > versions.saturating_sub(SAMPLES as u64) {
                late.push(took);
            }
            if v == 10 {
                restart_early = restart()?;
                status_early = status()?;
                // The restarted run may commit (its pipeline's contract, on a table it
                // meets for the first time): read the table again, as any writer would.
                table.reload().await?;
            }
            if v % 1000 == 0 {
                eprintln!(
                    "log ({place_name}): version {v} after {:.0} s (last publish {:.1} ms)",
                    started.elapsed().as_secs_f64(),
                    took.as_secs_f64() * 1e3
                );
            }
        }
        Ok::<_, BenchError>(LogReport {
            place: place_name,
            versions,
            rows_per_window: rows,
            early: Latency::of(early),
            late: Latency::of(late),
            restart_early,
            restart_late: restart()?,
            status_early,
            status_late: status()?,
            dentries_early,
            dentries_late,
        })
    })
}

/// `rows` rows of `window`, with positions after publication `v`'s.
fn window_rows(
    table: &WindowTable,
    rows: usize,
    v: u64,
    window: Window,
) -> Result<RecordBatch, BenchError> {
    let ts = window.start().to_rfc3339();
    let first = (v as i64) * rows as i64;
    Ok(RecordBatch::try_new(
        table.file_schema().clone(),
        vec![
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| format!("e{v}-{i}")),
            )),
            Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
                ts.as_str(),
                rows,
            ))),
            Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
                "in.ndjson",
                rows,
            ))),
            Arc::new(Int64Array::from_iter_values(first..first + rows as i64)),
        ],
    )?)
}
