//! Catch-up over many windows: a backlog whose windows all seal at once, landed by `sluice
//! run` with group commits (the default) and with one commit per window
//! (`--group-windows-max 1`); the same year arriving in month blocks out of order (most of
//! it late); a derived table over its 366 daily windows; and the cost of one commit as the
//! table's window count grows.
//!
//! Inputs: a year of hourly temperatures in two cities (`data/seattle-temps.ndjson`, NOAA data,
//! and the same hours for a second city 2.5 °F colder: 17,518 lines, 8,760 hourly windows), its
//! first 10 days, and one day of one event per minute (1,440 one-minute windows).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deltalake::arrow::array::{Int64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use sluice_publish::{Coverage, Publication, Replace, TableOptions, WindowTable};
use sluice_stage::{StageOptions, Stager};
use sluice_window::{AddressLayout, EventTime, Window, WindowSize};

use crate::alternatives::BenchError;

/// One catch-up run: what it landed and how long it took.
pub struct CatchUp {
    pub what: String,
    pub windows: u64,
    pub commits: u64,
    pub wall: Duration,
}

/// Publish latency of one window's swap with few and with many windows in the table.
pub struct WindowCount {
    pub few: usize,
    pub many: usize,
    pub few_median: Duration,
    pub many_median: Duration,
}

/// Publications timed at each window count.
const SAMPLES: usize = 50;

/// Runs the catch-up cases with `sluice` in `work`, input from `temps`.
pub fn catch_up(
    sluice: &Path,
    temps: &Path,
    work: &Path,
    many_windows: usize,
) -> Result<(Vec<CatchUp>, WindowCount), BenchError> {
    let dir = work.join("catchup");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    let text = std::fs::read_to_string(temps)
        .map_err(|e| format!("{}: {e} (run from the repository root)", temps.display()))?;
    let seattle: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let second = seattle
        .iter()
        .map(|l| colder_city(l))
        .collect::<Result<Vec<String>, BenchError>>()?;
    let mut year = String::new();
    for (a, b) in seattle.iter().zip(&second) {
        let _ = writeln!(year, "{a}\n{b}");
    }
    write_input(&dir.join("year"), &year)?;
    write_input(&dir.join("year-blocks"), &month_blocks(&year))?;
    let ten_days: String = year
        .lines()
        .take(10 * 24 * 2)
        .map(|l| format!("{l}\n"))
        .collect();
    write_input(&dir.join("ten-days"), &ten_days)?;
    let mut minutes = String::new();
    for m in 0..1440 {
        let _ = writeln!(
            minutes,
            "{{\"ts\":\"2026-10-03T{:02}:{:02}:30Z\",\"sensor\":\"s1\",\"value\":{m}}}",
            m / 60,
            m % 60
        );
    }
    write_input(&dir.join("minutes"), &minutes)?;

    let temps_args = [
        "--time-field",
        "date",
        "--time-format",
        "%Y/%m/%d %H:%M",
        "--time-zone",
        "America/Los_Angeles",
    ];
    let cases: Vec<(String, PathBuf, Vec<&str>)> =
        vec![
        (
            "a year of hourly temperatures, two cities, `--window 1h` (group commits, the default)"
                .into(),
            dir.join("year"),
            [&temps_args[..], &["--window", "1h"]].concat(),
        ),
        (
            "one day of one event per minute, `--window 1m` (group commits)".into(),
            dir.join("minutes"),
            vec!["--window", "1m"],
        ),
        (
            "the year in month blocks (Jan, Oct, Nov, Dec, Feb, ..., Sep: 9 of 12 months late), `--window 1h`"
                .into(),
            dir.join("year-blocks"),
            [&temps_args[..], &["--window", "1h"]].concat(),
        ),
        (
            "the year, `--window 1d` (366 daily windows)".into(),
            dir.join("year"),
            [&temps_args[..], &["--window", "1d"]].concat(),
        ),
        (
            "the first 10 days of the year, `--window 1h` (group commits)".into(),
            dir.join("ten-days"),
            [&temps_args[..], &["--window", "1h"]].concat(),
        ),
        (
            "the same 10 days, `--group-windows-max 1` (one commit per window)".into(),
            dir.join("ten-days"),
            [&temps_args[..], &["--window", "1h", "--group-windows-max", "1"]].concat(),
        ),
    ];
    let mut runs = Vec::new();
    for (i, (what, input, args)) in cases.into_iter().enumerate() {
        let table = dir.join(format!("table-{i}"));
        let started = Instant::now();
        let out = Command::new(sluice)
            .arg("run")
            .arg("--source")
            .arg(format!("ndjson:{}", input.display()))
            .arg("--table")
            .arg(&table)
            .args(&args)
            .args(["--format", "json"])
            .output()?;
        let wall = started.elapsed();
        if !out.status.success() {
            return Err(format!(
                "sluice run ({what}) failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("sluice run ({what}): its JSON summary: {e}"))?;
        let count = |k: &str| summary[k].as_u64().unwrap_or(0);
        eprintln!(
            "catch-up: {what}: {:.2} s, {} windows in {} commits",
            wall.as_secs_f64(),
            count("window_publications"),
            count("commits")
        );
        runs.push(CatchUp {
            what,
            windows: count("window_publications"),
            commits: count("commits"),
            wall,
        });
    }
    runs.push(derive_daily(
        sluice,
        &dir.join(format!("table-{DAILY}")),
        &dir,
    )?);
    let counts = window_count(&dir, 10, many_windows)?;
    Ok((runs, counts))
}

/// The case whose table holds the year's daily windows.
const DAILY: usize = 3;

/// `sluice derive` of one query over every daily window of `raw`, into a new table.
fn derive_daily(sluice: &Path, raw: &Path, dir: &Path) -> Result<CatchUp, BenchError> {
    let derived = dir.join("derived-daily");
    let started = Instant::now();
    let out = Command::new(sluice)
        .arg("derive")
        .arg("--table")
        .arg(raw)
        .arg("--derive")
        .arg(format!("daily={}", derived.display()))
        .args([
            "--derive-sql",
            "daily=SELECT city, count(*) AS hours, max(temp) AS high FROM window GROUP BY city",
            "--from",
            "2009-01-01T00:00:00Z",
            "--to",
            "2012-01-01T00:00:00Z",
            "--format",
            "json",
        ])
        .output()?;
    let wall = started.elapsed();
    if !out.status.success() {
        return Err(format!(
            "sluice derive failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("sluice derive: its JSON summary: {e}"))?;
    let count = |k: &str| summary[k].as_u64().unwrap_or(0);
    eprintln!(
        "catch-up: derive: {:.2} s, {} windows in {} commits",
        wall.as_secs_f64(),
        count("derived_windows_published"),
        count("commits")
    );
    Ok(CatchUp {
        what: "a derived table over those daily windows (`sluice derive`, one query, from an empty table)".into(),
        windows: count("derived_windows_published"),
        commits: count("commits"),
        wall,
    })
}

/// The year's lines with its months in blocks out of order (Jan, Oct, Nov, Dec, Feb, Mar,
/// ..., Sep), each month in time order: how a backfill of monthly exports arrives.
fn month_blocks(year: &str) -> String {
    let month_of = |line: &str| -> u32 {
        let at = line.find("\"date\":\"").map_or(0, |i| i + 8);
        line.get(at + 5..at + 7)
            .and_then(|m| m.parse().ok())
            .unwrap_or(0)
    };
    let mut out = String::new();
    for month in [1, 10, 11, 12, 2, 3, 4, 5, 6, 7, 8, 9] {
        for line in year.lines().filter(|l| month_of(l) == month) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The same line for a second city: its name, and 2.5 degrees colder.
fn colder_city(line: &str) -> Result<String, BenchError> {
    let mut value: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| format!("a temperatures line is not JSON ({e}): {line}"))?;
    value["city"] = serde_json::json!("Portland");
    if let Some(t) = value["temp"].as_f64() {
        value["temp"] = serde_json::json!(((t - 2.5) * 10.0).round() / 10.0);
    }
    Ok(value.to_string())
}

fn write_input(dir: &Path, text: &str) -> Result<(), BenchError> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("part-0.ndjson"), text)?;
    Ok(())
}

/// Median publish latency (stage + commit) of one window's swap in a table holding `few`
/// windows, then in one holding `many` (filled by group commits of 250 windows).
fn window_count(dir: &Path, few: usize, many: usize) -> Result<WindowCount, BenchError> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let few_median = publish_latency(&dir.join("few-windows"), few).await?;
        let many_median = publish_latency(&dir.join("many-windows"), many).await?;
        Ok(WindowCount {
            few,
            many,
            few_median,
            many_median,
        })
    })
}

async fn publish_latency(dir: &Path, windows: usize) -> Result<Duration, BenchError> {
    let size = WindowSize::parse("1h")?;
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, true)]));
    let location = dir.to_str().ok_or("table path is not UTF-8")?.to_string();
    let mut table = WindowTable::open_or_create(
        &TableOptions::new(location),
        Some(&schema),
        AddressLayout::DtHour,
        size,
    )
    .await?;
    let mut stager = Stager::new(table.store(), "bench", StageOptions::default());
    let start_us: i64 = 1_600_000_000_000_000 / 3_600_000_000 * 3_600_000_000;
    let window_at = |i: usize| {
        Window::containing(
            size,
            EventTime::from_micros(start_us + i as i64 * 3_600_000_000),
        )
    };
    let mut offset = 0i64;
    let mut filled = 0;
    while filled < windows {
        let mut group = Vec::new();
        for i in filled..windows.min(filled + 250) {
            offset += 1;
            group.push(staged(&mut stager, &table, window_at(i), offset).await?);
        }
        filled += group.len();
        table.publish_group(group).await?;
    }
    let mut samples = Vec::with_capacity(SAMPLES);
    for s in 0..SAMPLES {
        let window = window_at(s % windows);
        let t = Instant::now();
        offset += 1;
        let publication = staged(&mut stager, &table, window, offset).await?;
        table.publish(publication).await?;
        samples.push(t.elapsed());
    }
    samples.sort();
    Ok(samples[samples.len() / 2])
}

/// 100 rows of `window` staged, as its publication with the source read to `offset`.
async fn staged(
    stager: &mut Stager,
    table: &WindowTable,
    window: Window,
    offset: i64,
) -> Result<Publication, BenchError> {
    let file = stager
        .stage(
            &table.address(window),
            table.file_schema(),
            vec![rows(table, offset)?],
        )
        .await?;
    Ok(publication(window, file, offset))
}

/// The publication of `file` as the whole of `window`, the source read to `offset`.
pub(crate) fn publication(
    window: Window,
    file: sluice_stage::StagedFile,
    offset: i64,
) -> Publication {
    Publication {
        pipeline: "bench".into(),
        window,
        files: vec![file],
        replace: Replace::Window,
        coverage: Coverage {
            partition: "in.ndjson".into(),
            offset,
        },
        txns: vec![("in.ndjson".into(), offset)],
        position_ranges: serde_json::json!([]),
        published_at_ms: offset,
    }
}

/// 100 rows of a window (value, then the position columns).
fn rows(table: &WindowTable, offset: i64) -> Result<RecordBatch, BenchError> {
    let n = 100;
    Ok(RecordBatch::try_new(
        table.file_schema().clone(),
        vec![
            Arc::new(Int64Array::from((0..n).collect::<Vec<i64>>())),
            Arc::new(StringArray::from(vec!["in.ndjson"; n as usize])),
            Arc::new(Int64Array::from(
                (0..n).map(|i| offset * 1000 + i).collect::<Vec<i64>>(),
            )),
        ],
    )?)
}

/// The report's catch-up section.
pub fn report(r: &mut String, runs: &[CatchUp], counts: &WindowCount) {
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let _ = writeln!(
        r,
        "\nCatch-up over many windows: a backlog whose windows all seal together, landed by one \
         `sluice run` each (process start to exit, once each). Windows sealed together are \
         published by group commits of up to 256 windows (`--group-windows-max`).\n"
    );
    let _ = writeln!(
        r,
        "| what | windows | commits | wall | windows/s | target | |"
    );
    let _ = writeln!(r, "| --- | --- | --- | --- | --- | --- | --- |");
    let sorted_s = runs.first().map_or(0.0, |r| r.wall.as_secs_f64());
    for (i, run) in runs.iter().enumerate() {
        let s = run.wall.as_secs_f64();
        let (target, ok) = match i {
            0 => ("< 10 s".to_string(), Some(s < 10.0)),
            1 => ("< 5 s".to_string(), Some(s < 5.0)),
            2 => (
                format!("< 3x the first row (now {:.2}x)", s / sorted_s),
                Some(s < 3.0 * sorted_s),
            ),
            _ if i + 1 == runs.len() => ("≤ 5 commits".to_string(), Some(run.commits <= 5)),
            _ => (String::new(), None),
        };
        let _ = writeln!(
            r,
            "| {} | {} | {} | {s:.2} s | {:.0} | {target} | {} |",
            run.what,
            run.windows,
            run.commits,
            run.windows as f64 / s,
            ok.map_or("", verdict)
        );
    }
    if let [.., grouped, alone, _derived] = runs {
        let _ = writeln!(
            r,
            "| speed-up of group commits on the 10 days | | | {:.1}x | | | |",
            alone.wall.as_secs_f64() / grouped.wall.as_secs_f64()
        );
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let ratio = ms(counts.many_median) / ms(counts.few_median);
    let _ = writeln!(
        r,
        "\n| one window's publication (stage + commit), median of {SAMPLES} | {} windows in the table | {} windows | ratio | target | |",
        counts.few, counts.many
    );
    let _ = writeln!(r, "| --- | --- | --- | --- | --- | --- |");
    let _ = writeln!(
        r,
        "| publish latency | {:.1} ms | {:.1} ms | {ratio:.2} | ≤ 1.5 | {} |",
        ms(counts.few_median),
        ms(counts.many_median),
        verdict(ratio <= 1.5)
    );
}
