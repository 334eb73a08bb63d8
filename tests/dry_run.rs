//! `sluice run --dry-run` runs the whole pipeline and writes nothing: what it reports (the
//! windows with their rows, new or replacing, the dead letters by reason, the contract, the
//! derived windows) is what the same run then publishes, in every table mode, for a new
//! table and an existing one; its exit codes are the run's.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::*;

/// Every file under `dir` with its size: what a dry run must leave as it is.
fn tree(dir: &Path) -> BTreeMap<String, u64> {
    let mut files = BTreeMap::new();
    if !dir.exists() {
        return files;
    }
    for entry in walk(dir) {
        let meta = std::fs::metadata(&entry).unwrap();
        files.insert(entry.display().to_string(), meta.len());
    }
    files
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut all = vec![dir.to_path_buf()];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all.extend(walk(&path));
        } else {
            all.push(path);
        }
    }
    all
}

/// The dry run of `args`, as its JSON report; asserts nothing under `root` changed.
fn dry_run(root: &Path, args: &[&str]) -> serde_json::Value {
    let before = tree(root);
    let mut all = args.to_vec();
    all.extend(["--dry-run", "--format", "json"]);
    let report: serde_json::Value = serde_json::from_str(&ok(&all)).expect("one JSON object");
    assert_eq!(tree(root), before, "the dry run of {args:?} wrote");
    assert_eq!(report["dry_run"], true);
    report
}

/// Address → rows of the windows the dry run reports, and whether each replaces one.
fn reported(report: &serde_json::Value) -> BTreeMap<String, (i64, bool)> {
    report["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let address = w["address"].as_str().unwrap().to_string();
            let rows = w["rows"].as_i64().unwrap();
            (address, (rows, w["replaces"].as_bool().unwrap()))
        })
        .collect()
}

/// Address → (rows, published before `since`) of the windows the versions after `since`
/// published, read back with `sluice windows`.
fn published(table: &Path, since: Option<i64>) -> BTreeMap<String, (i64, bool)> {
    let t = table.to_str().unwrap();
    ok(&["windows", "--table", t, "--format", "json"])
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|w| since.is_none_or(|v| w["version"].as_i64().unwrap() > v))
        .map(|w| {
            let address = w["window"].as_str().unwrap().to_string();
            let republished = w["publications"].as_i64().unwrap() > 1;
            (address, (w["rows"].as_i64().unwrap(), republished))
        })
        .collect()
}

/// The pipeline's dead letters by reason, from `sluice status`.
fn dead_letters_by_reason(table: &Path) -> serde_json::Value {
    let t = table.to_str().unwrap();
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["status", "--table", t, "--format", "json"])).unwrap();
    status["dead_letters"]["sluice"].clone()
}

/// The dry run, then the run: the run publishes what the dry run reported.
fn dry_then_real(root: &Path, table: &Path, args: &[&str]) -> serde_json::Value {
    let exists = table.join("_delta_log").exists();
    let since = exists.then(|| version(table));
    let letters_before = exists.then(|| dead_letters_by_reason(table));
    let report = dry_run(root, args);
    assert_eq!(report["table_exists"], exists);
    ok(args);
    assert_eq!(reported(&report), published(table, since), "{args:?}");
    // Dead letters: those of this run.
    let after = dead_letters_by_reason(table);
    let mut added = serde_json::Map::new();
    for (reason, n) in after.as_object().into_iter().flatten() {
        let had = letters_before
            .as_ref()
            .and_then(|b| b[reason].as_i64())
            .unwrap_or(0);
        if n.as_i64().unwrap() > had {
            added.insert(reason.clone(), (n.as_i64().unwrap() - had).into());
        }
    }
    assert_eq!(report["dead_letters"], serde_json::Value::Object(added));
    assert_verified(table);
    report
}

#[test]
fn a_window_table_new_then_with_late_rows() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let input = root.join("in");
    let table = root.join("tables/events");
    let t = table.to_str().unwrap();
    let source = format!("ndjson:{}", input.display());
    let slices = stream_slices(4_000, 4, seed("dry_run_window"), 2, 300);
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join(&slices[0].0), &slices[0].1).unwrap();
    let derived = root.join("tables/hourly");
    let derive_at = format!("hourly={}", derived.display());
    let args = run_args(
        &source,
        t,
        &[
            "--key",
            "event_id",
            "--late",
            "rewrite",
            "--derive",
            &derive_at,
            "--derive-sql",
            "hourly=SELECT count(*) AS n FROM window",
        ],
    );
    // A new table: its contract would be recorded; no directory is left behind.
    let first = dry_then_real(root, &table, &args);
    assert_eq!(first["contract"]["key"], "event_id", "{first}");
    assert_eq!(first["contract"]["window"], "15m", "{first}");
    assert!(first["windows"].as_array().unwrap().len() >= 3, "{first}");
    assert_ne!(
        first["dead_letters"],
        serde_json::json!({}),
        "torn lines: {first}"
    );
    assert_eq!(
        first["derived_windows_published"],
        first["windows"].as_array().unwrap().len()
    );
    // The second slice: late rows for published windows, which a run rewrites.
    std::fs::write(input.join(&slices[1].0), &slices[1].1).unwrap();
    let second = dry_then_real(root, &table, &args);
    let replaced = reported(&second).values().filter(|(_, r)| *r).count();
    assert!(replaced > 0, "late rows replace windows: {second}");
    // Run again: nothing to read, nothing reported.
    let third = dry_run(root, &args);
    assert_eq!(third["windows"], serde_json::json!([]), "{third}");
}

#[test]
fn a_merge_table_a_mirror_with_deletes_and_a_history() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let input = root.join("in");
    let source = format!("ndjson:{}", input.display());
    // MERGE on a key, windows of an hour.
    let slices = stream_slices(3_000, 3, seed("dry_run_merge"), 2, 0);
    let merged = root.join("merged");
    let m = merged.to_str().unwrap();
    std::fs::create_dir_all(&input).unwrap();
    for (name, bytes) in &slices {
        std::fs::write(input.join(name), bytes).unwrap();
        dry_then_real(root, &merged, &merge_args(&source, m, "event_id", "window"));
    }
    // A mirror of accounts with deletes (a tombstone table beside it).
    let changes = root.join("changes");
    let c = format!("ndjson:{}", changes.display());
    let mirror = root.join("accounts");
    let a = mirror.to_str().unwrap();
    let line = crate::cdc::op;
    let mut args = merge_args(&c, a, "id", "table");
    args.extend(["--sequence-field", "lsn", "--delete-when", "op = 'd'"]);
    write_in(
        &changes,
        "1.ndjson",
        &(line("a1", "c", 1, "10:00:00", 1)
            + &line("a2", "c", 2, "10:05:00", 2)
            + &line("a3", "c", 3, "11:05:00", 3)
            + "{\"id\":\"a9\",\"op\":\"c\"\n"),
    );
    let first = dry_then_real(root, &mirror, &args);
    assert_eq!(first["contract"]["delete-when"], "op = 'd'", "{first}");
    write_in(
        &changes,
        "2.ndjson",
        &(line("a2", "d", 4, "10:20:00", 0) + &line("a1", "u", 5, "12:00:00", 11)),
    );
    dry_then_real(root, &mirror, &args);
    assert_eq!(
        query_csv(&[("t", &mirror)], "SELECT id, balance FROM t ORDER BY id"),
        ["a1,11", "a3,3"]
    );
    // The same changes as a history (every version a row; a delete ends its key's).
    std::fs::remove_file(changes.join("2.ndjson")).unwrap();
    let history = root.join("history");
    let h = history.to_str().unwrap();
    let mut args = merge_args(&c, h, "id", "table");
    args.extend([
        "--sequence-field",
        "lsn",
        "--delete-when",
        "op = 'd'",
        "--scd",
        "2",
    ]);
    dry_then_real(root, &history, &args);
    write_in(
        &changes,
        "2.ndjson",
        &(line("a2", "d", 4, "10:20:00", 0) + &line("a1", "u", 5, "12:00:00", 11)),
    );
    dry_then_real(root, &history, &args);
    assert_eq!(scalar(&history, "SELECT count(*) FROM t"), "4");
}

#[test]
fn exits_as_the_run_would_and_refuses_what_it_cannot_do_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let input = root.join("in");
    let table = root.join("tables/t");
    let t = table.to_str().unwrap();
    let source = format!("ndjson:{}", input.display());
    // Every record rejected: exit 3, and no directory for the table that would be created.
    write_in(&input, "1.ndjson", "{\"ts\":\"yesterday\",\"id\":1}\n");
    let mut args = run_args(&source, t, &["--dry-run"]);
    let out = sluice(&args);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("dead-letter 1 record"), "{report}");
    assert!(report.contains("bad_time 1"), "{report}");
    assert!(!root.join("tables").exists());

    // An existing table whose contract another option breaks: exit 2, as the run.
    write_in(
        &input,
        "1.ndjson",
        "{\"ts\":\"2026-10-03T10:00:00Z\",\"id\":1}\n",
    );
    ok(&run_args(&source, t, &[]));
    let before = tree(root);
    assert_refused(
        &run_args(&source, t, &["--window", "1d", "--dry-run"]),
        "window",
    );
    assert_refused(
        &run_args(&source, t, &["--follow", "--dry-run"]),
        "--dry-run: reads the input as it is now",
    );
    args = vec!["backfill", "--source", &source, "--table", t, "--dry-run"];
    args.extend(["--from", "2026-10-03T00:00Z", "--to", "2026-10-04T00:00Z"]);
    assert_refused(&args, "--dry-run is not an option of `sluice backfill`");
    assert_eq!(tree(root), before);
}
