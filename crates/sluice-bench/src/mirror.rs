//! What a batch of changes costs a large mirror, and whether it grows with the table.
//!
//! A mirror (`--mode merge --merge-scope table --sequence-field lsn --delete-when "op = 'd'"`)
//! of each size in `rows` is built as a change log builds it: creates in key order, 100,000
//! an hour (so a file holds a run of keys, as a table filled by a serial key does). Then one
//! batch of `changed` keys (the same count for every size: 80% updates, 10% deletes, 10%
//! inserts of new keys) is applied by one `sluice run`, on a fresh copy of the built table,
//! `runs` times; the median wall time is reported with what the Delta log's commit says: the
//! files the MERGE read (`num_target_files_scanned`), those the key ranges left out, and
//! the files removed (rewritten) and added.
//!
//! The updated and deleted keys are drawn three ways: `recent`, among the newest 2 x
//! `changed` keys (where an OLTP table's changes gather: open orders, active sessions);
//! `mixed`, the same but one change in 10,000 an update of an older key (a correction of an
//! old row), whose keys' min to max spans the table; and `uniform`, anywhere in the table.
//! Delta files are rewritten whole (copy on write), so a batch that touches every file
//! rewrites the table whatever pruning does: the uniform case is printed for that cost, not
//! against the target.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::alternatives::BenchError;
use crate::usage::run_measured;

/// Creates per hour (window) of the built table: one file each.
const ROWS_PER_HOUR: u64 = 100_000;

/// How the changed keys are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    Recent,
    /// As recent, but one change in [`OLD_EVERY`] updates a key older than the recent ones.
    Mixed,
    Uniform,
}

/// In the mixed spread, one change in this many (an update) is of an old key.
const OLD_EVERY: u64 = 10_000;

impl Spread {
    fn name(self) -> &'static str {
        match self {
            Spread::Recent => "recent",
            Spread::Mixed => "mixed",
            Spread::Uniform => "uniform",
        }
    }
}

/// One size and spread, applied `runs` times.
pub struct MirrorCase {
    pub rows: u64,
    pub spread: Spread,
    pub changed: u64,
    /// Wall time of each apply.
    pub walls: Vec<Duration>,
    pub files: Files,
    /// Wall time of building the table.
    pub build: Duration,
}

/// What the apply's commit says about files.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Files {
    /// From the commit's key ranges (`None`: a sluice that does not record them).
    pub in_table: Option<u64>,
    pub pruned: Option<u64>,
    pub scanned: u64,
    pub removed: u64,
    pub added: u64,
    pub rows_updated: u64,
    pub rows_deleted: u64,
    pub rows_inserted: u64,
}

/// The run's options of every apply (the build records them in the table's contract).
fn mirror_args(command: &mut Command) {
    command.args([
        "--window",
        "1h",
        "--key",
        "id",
        "--sequence-field",
        "lsn",
        "--mode",
        "merge",
        "--merge-scope",
        "table",
        "--delete-when",
        "op = 'd'",
    ]);
}

/// Builds a mirror of each size in `rows`, applies `changed` changed keys of each spread to
/// it `runs` times, and returns the cases (sizes in the order given).
pub fn mirror_cost(
    sluice: &Path,
    work: &Path,
    rows: &[u64],
    changed: u64,
    runs: usize,
) -> Result<Vec<MirrorCase>, BenchError> {
    let mut cases = Vec::new();
    for &n in rows.iter().filter(|&&n| n > 0) {
        if changed * 2 > n {
            return Err(format!(
                "{changed} changed keys need a table of {} rows",
                changed * 2
            )
            .into());
        }
        let dir = work.join(format!("mirror-{n}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        let source = dir.join("log");
        std::fs::create_dir_all(&source)?;
        write_creates(&source.join("creates.ndjson"), n)?;
        let built = dir.join("built");
        let mut build = Command::new(sluice);
        build
            .args(["run", "--source"])
            .arg(format!("ndjson:{}", source.display()));
        build.arg("--table").arg(&built);
        mirror_args(&mut build);
        let (build_wall, _) = run_measured(build, &dir.join("build.log"))?;
        eprintln!(
            "mirror: {n} rows built in {:.1} s",
            build_wall.as_secs_f64()
        );
        std::fs::remove_file(source.join("creates.ndjson"))?;
        for spread in [Spread::Recent, Spread::Mixed, Spread::Uniform] {
            let changes = dir.join(format!("changes-{}", spread.name()));
            std::fs::create_dir_all(&changes)?;
            write_changes(&changes.join("changes.ndjson"), n, changed, spread)?;
            let mut case = MirrorCase {
                rows: n,
                spread,
                changed,
                walls: Vec::new(),
                files: Files::default(),
                build: build_wall,
            };
            for run in 0..runs.max(1) {
                let table = dir.join("apply");
                fresh_copy(&built, &table)?;
                let mut apply = Command::new(sluice);
                apply
                    .args(["run", "--source"])
                    .arg(format!("ndjson:{}", changes.display()));
                apply.arg("--table").arg(&table);
                let (wall, _) = run_measured(apply, &dir.join(format!("apply-{run}.log")))?;
                let files = last_commit_files(&table)?;
                check_rows(&files, changed)?;
                eprintln!(
                    "mirror: {n} rows, {} {changed} keys: {:.2} s, {} of {} files read, {} rewritten",
                    spread.name(),
                    wall.as_secs_f64(),
                    files.scanned,
                    count(files.in_table),
                    files.removed
                );
                case.walls.push(wall);
                case.files = files;
            }
            cases.push(case);
        }
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(cases)
}

/// 2026-10-01T00:00:00Z, in milliseconds since the epoch: the first create's time.
const START_MS: i64 = 1_790_812_800_000;

/// [`START_MS`] plus `ms`, as RFC 3339 with milliseconds.
fn time_at(ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(START_MS + ms as i64)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// Milliseconds between two creates, for [`ROWS_PER_HOUR`] an hour.
const CREATE_EVERY_MS: u64 = 3_600_000 / ROWS_PER_HOUR;

/// One change line.
fn change_line(id: u64, op: &str, lsn: u64, ts_ms: u64, name: &str) -> String {
    format!(
        "{{\"id\":{id},\"op\":\"{op}\",\"lsn\":{lsn},\"ts\":\"{}\",\"name\":\"{name}\",\"amount\":{}}}\n",
        time_at(ts_ms),
        id % 1000
    )
}

/// The creates of keys `0..n`, in key order, `lsn` = key + 1.
fn write_creates(path: &Path, n: u64) -> Result<(), BenchError> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for id in 0..n {
        let line = change_line(id, "c", id + 1, id * CREATE_EVERY_MS, &format!("n{id}"));
        out.write_all(line.as_bytes())?;
    }
    out.flush()?;
    Ok(())
}

/// `changed` changes after the creates of `0..n`, all in the hour after them: every tenth a
/// delete, every tenth (the next) an insert of a new key, the others updates; the deleted
/// and updated keys distinct, drawn by `spread` (seeded, the same for every run) from the
/// newest 2 x `changed` keys, the older ones, or all.
fn write_changes(path: &Path, n: u64, changed: u64, spread: Spread) -> Result<(), BenchError> {
    let recent = (n - 2 * changed, 2 * changed);
    let old = (0, n - 2 * changed);
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15 ^ n;
    let mut next = || {
        // xorshift64*
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut picked = std::collections::HashSet::new();
    let hour_after = n.div_ceil(ROWS_PER_HOUR) * 3_600_000;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for j in 0..changed {
        let lsn = n + 1 + j;
        let ts_ms = hour_after + j % 3_600_000;
        let line = match j % 10 {
            1 => change_line(n + j, "c", lsn, ts_ms, &format!("new{j}")),
            op => {
                let (low, span) = match spread {
                    Spread::Uniform => (0, n),
                    Spread::Mixed if j % OLD_EVERY == 2 && old.1 > 0 => old,
                    Spread::Recent | Spread::Mixed => recent,
                };
                let id = loop {
                    let id = low + next() % span;
                    if picked.insert(id) {
                        break id;
                    }
                };
                let op = if op == 0 { "d" } else { "u" };
                change_line(id, op, lsn, ts_ms, &format!("changed{j}"))
            }
        };
        out.write_all(line.as_bytes())?;
    }
    out.flush()?;
    Ok(())
}

/// `table` as a fresh copy of `built`, and no tombstone table beside it.
fn fresh_copy(built: &Path, table: &Path) -> Result<(), BenchError> {
    for dir in [table.to_path_buf(), tombstones_of(table)] {
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
    }
    let status = Command::new("cp")
        .arg("-r")
        .arg(built)
        .arg(table)
        .status()?;
    if !status.success() {
        return Err(format!("cp -r {} failed: {status}", built.display()).into());
    }
    Ok(())
}

/// Where a mirror's tombstones go by default (`<table>_tombstones`).
fn tombstones_of(table: &Path) -> PathBuf {
    let mut name = table.file_name().unwrap_or_default().to_os_string();
    name.push("_tombstones");
    table.with_file_name(name)
}

/// The files of `table`'s last commit (a MERGE) and the files in the table before it.
fn last_commit_files(table: &Path) -> Result<Files, BenchError> {
    let log = table.join("_delta_log");
    let mut commits: Vec<PathBuf> = std::fs::read_dir(&log)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    commits.sort();
    let last = commits.last().ok_or("the table has no commit")?;
    let mut files = Files::default();
    for line in std::fs::read_to_string(last)?.lines() {
        let action: serde_json::Value = serde_json::from_str(line)?;
        if action.get("remove").is_some() {
            files.removed += 1;
        }
        if action.get("add").is_some() {
            files.added += 1;
        }
        let Some(info) = action.get("commitInfo") else {
            continue;
        };
        let metric = |name: &str| info["operationMetrics"][name].as_u64().unwrap_or(0);
        files.scanned = metric("num_target_files_scanned");
        files.rows_updated = metric("num_target_rows_updated");
        files.rows_deleted = metric("num_target_rows_deleted");
        files.rows_inserted = metric("num_target_rows_inserted");
        let ranges = find_key(info, "key_ranges");
        files.in_table = ranges.and_then(|r| r["files"].as_u64());
        files.pruned = ranges.and_then(|r| r["files_pruned"].as_u64());
    }
    Ok(files)
}

/// The first value under `key` anywhere in `value`.
fn find_key<'a>(value: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map
            .get(key)
            .or_else(|| map.values().find_map(|v| find_key(v, key))),
        serde_json::Value::Array(items) => items.iter().find_map(|v| find_key(v, key)),
        _ => None,
    }
}

/// Whether the apply changed the rows the batch holds: every update and delete met its
/// row, every insert was new.
fn check_rows(files: &Files, changed: u64) -> Result<(), BenchError> {
    let deletes = changed.div_ceil(10);
    let inserts = changed / 10 + u64::from(changed % 10 > 1);
    let updates = changed - deletes - inserts;
    let expected = (updates, deletes, inserts);
    let got = (files.rows_updated, files.rows_deleted, files.rows_inserted);
    if got != expected {
        return Err(format!(
            "the apply changed (updated, deleted, inserted) {got:?} rows, not {expected:?}"
        )
        .into());
    }
    Ok(())
}

/// A count, or `?` where the commit did not record it.
fn count(n: Option<u64>) -> String {
    n.map_or("?".to_string(), |n| n.to_string())
}

fn median(walls: &[Duration]) -> f64 {
    let mut s: Vec<f64> = walls.iter().map(Duration::as_secs_f64).collect();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(0.0)
}

pub fn report(r: &mut String, cases: &[MirrorCase]) {
    let _ = writeln!(
        r,
        "\n## Changes applied to a large mirror (CDC)\n\n\
         A mirror built from creates in key order (100,000 an hour, a file each) takes one batch of changed keys \
         (80% updates, 10% deletes, 10% new keys) in one `sluice run`, on a fresh copy each run (median wall time). \
         `recent`: the updated and deleted keys are among the newest 2x; `mixed`: the same, and 1 change in 10,000 an update of an older key; `uniform`: anywhere. \
         Files from the MERGE's commit: read (scanned), left out by the key ranges, removed (rewritten), added.\n"
    );
    let _ = writeln!(
        r,
        "| rows | spread | keys changed | files | read | pruned | rewritten | added | apply (median) | vs smallest | target |"
    );
    let _ = writeln!(
        r,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for c in cases {
        let smallest = cases
            .iter()
            .filter(|o| o.spread == c.spread)
            .min_by_key(|o| o.rows)
            .map(|o| median(&o.walls))
            .unwrap_or(0.0);
        let ratio = median(&c.walls) / smallest.max(f64::MIN_POSITIVE);
        let target = match (c.spread, ratio < 2.0) {
            (Spread::Uniform, _) => "(printed)",
            (_, true) => "< 2x: met",
            (_, false) => "< 2x: NOT met",
        };
        let f = &c.files;
        let _ = writeln!(
            r,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2} s | {ratio:.2}x | {target} |",
            c.rows,
            c.spread.name(),
            c.changed,
            count(f.in_table),
            f.scanned,
            count(f.pruned),
            f.removed,
            f.added,
            median(&c.walls)
        );
    }
    if let Some(c) = cases.iter().max_by_key(|c| c.rows) {
        let _ = writeln!(
            r,
            "\nBuilding the {}-row mirror took {:.0} s.",
            c.rows,
            c.build.as_secs_f64()
        );
    }
}
