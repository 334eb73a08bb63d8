//! Late data, dead letters and backfill, through the real binary on real Delta tables.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;

const LATE_FILE: &str = "events-2.ndjson";

/// One event every 10 minutes from 2026-10-03T00:00Z to 12:50Z in one file; in the next, three
/// late events, their windows' ends 40 min, 3 h 40 min and 10 h 40 min behind the watermark
/// (12:40Z), and a bad line. Returns the input path and the offsets of the late lines.
fn late_input(dir: &Path) -> (std::path::PathBuf, [i64; 3], i64) {
    let mut text = String::new();
    for i in 0..78 {
        let (h, m) = (i / 6, (i % 6) * 10);
        text.push_str(&format!(
            "{{\"event_id\":\"e{h:02}{m:02}\",\"ts\":\"2026-10-03T{h:02}:{m:02}:00Z\",\"n\":{i}}}\n"
        ));
    }
    let input = dir.join("input");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("events-1.ndjson"), &text).unwrap();
    text.clear();
    let mut late = [0i64; 3];
    for (k, (id, ts)) in [
        ("late-40m", "2026-10-03T11:30:00Z"),
        ("late-3h40m", "2026-10-03T08:15:00Z"),
        ("late-10h40m", "2026-10-03T01:05:00Z"),
    ]
    .iter()
    .enumerate()
    {
        late[k] = text.len() as i64;
        text.push_str(&format!(
            "{{\"event_id\":\"{id}\",\"ts\":\"{ts}\",\"n\":-1}}\n"
        ));
    }
    let bad = text.len() as i64;
    text.push_str("{\"event_id\":\"torn\",\"ts\":\n");
    std::fs::write(input.join(LATE_FILE), text).unwrap();
    (input, late, bad)
}

fn run_policy(src: &str, table: &Path, policy: &str) -> String {
    ok(&[
        "run",
        "--source",
        src,
        "--table",
        table.to_str().unwrap(),
        "--window",
        "1h",
        "--lateness",
        "10m",
        "--chunk-bytes",
        "4KiB",
        "--late",
        policy,
        "--max-rewrite-age",
        "5h",
    ])
}

/// `(offset, reason)` of every dead letter, sorted.
fn dead_letters(table: &Path) -> Vec<(i64, String)> {
    let dlq = std::path::PathBuf::from(format!("{}_dlq", table.display()));
    query_csv(
        &[("d", &dlq)],
        "SELECT source_partition, source_offset, reason FROM d ORDER BY source_offset",
    )
    .iter()
    .map(|l| {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f[0], LATE_FILE);
        (f[1].parse().unwrap(), f[2].to_string())
    })
    .collect()
}

fn ids(table: &Path, filter: &str) -> String {
    query_csv(
        &[("t", table)],
        &format!("SELECT string_agg(event_id, ' ' ORDER BY event_id) FROM t WHERE {filter}"),
    )
    .first()
    .map(|l| l.trim_matches('"').to_string())
    .unwrap_or_default()
}

#[test]
fn late_policies_at_several_ages() {
    let dir = tempfile::tempdir().unwrap();
    let (input, late, bad) = late_input(dir.path());
    let src = format!("ndjson:{}", input.display());
    let expect_late = |policy: &str| -> (String, Vec<(i64, String)>) {
        match policy {
            // The oldest is past --max-rewrite-age 5h: too_late under every policy.
            "drop" => (
                String::new(),
                vec![
                    (late[0], "late".into()),
                    (late[1], "late".into()),
                    (late[2], "too_late".into()),
                    (bad, "malformed_json".into()),
                ],
            ),
            _ => (
                "late-3h40m late-40m".into(),
                vec![(late[2], "too_late".into()), (bad, "malformed_json".into())],
            ),
        }
    };
    for policy in ["rewrite", "merge", "drop"] {
        let table = dir.path().join(policy);
        let out = run_policy(&src, &table, policy);
        let (rows, dead) = expect_late(policy);
        assert_eq!(ids(&table, "n < 0"), rows, "{policy}: {out}");
        assert_eq!(dead_letters(&table), dead, "{policy}");
        assert_eq!(ids(&table, "n >= 0").split(' ').count(), 78, "{policy}");
        let windows = ok(&[
            "windows",
            "--table",
            table.to_str().unwrap(),
            "--format",
            "csv",
        ]);
        eprintln!("--late {policy}: {out}{windows}");
        // (window, files, rows, version, publications, published_at)
        let publications: Vec<(String, u64)> = windows
            .lines()
            .skip(1)
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (f[0].to_string(), f[4].parse().unwrap())
            })
            .collect();
        assert_eq!(publications.len(), 13, "{windows}");
        for (window, n) in &publications {
            // Windows 08 and 11 each got one late publication: a new version of the window.
            let republished =
                policy != "drop" && (window.ends_with("08") || window.ends_with("11"));
            assert_eq!(
                *n,
                if republished { 2 } else { 1 },
                "{policy} {window}: {windows}"
            );
        }
        // A restart over the same input changes nothing: no row, no dead letter twice.
        let before = version(&table);
        run_policy(&src, &table, policy);
        assert_eq!(version(&table), before, "{policy}");
        assert_eq!(dead_letters(&table), dead, "{policy}");
    }
}

fn stream_args<'a>(src: &'a str, table: &'a str) -> Vec<&'a str> {
    run_args(src, table, &["--key", "event_id"])
}

#[test]
fn backfill_equals_the_stream_and_twice_changes_nothing() {
    let seed = seed("backfill vs stream");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 20_000, 6, 13, 3);
    let src = format!("ndjson:{}", input.display());
    // The stream, SIGKILLed a few times.
    let stream = dir.path().join("stream");
    let s = stream.display().to_string();
    for _ in 0..5 {
        let mut child = Command::new(BIN)
            .args(stream_args(&src, &s))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100 + rng.below(400)));
        let _ = child.kill();
        child.wait().unwrap();
    }
    ok(&stream_args(&src, &s));

    // The batch job: a backfill of every window into a fresh table.
    let batch = dir.path().join("batch");
    let b = batch.display().to_string();
    let mut backfill = stream_args(&src, &b);
    backfill[0] = "backfill";
    backfill.extend(["--from", "2000-01-01", "--to", "2100-01-01"]);
    let out = ok(&backfill);
    eprintln!("{out}");
    let cmp = compare_with_oracle(&stream, &batch);
    assert_eq!(
        (cmp.rows, cmp.duplicates, cmp.lost, cmp.extra),
        (cmp.oracle_rows, 0, 0, 0),
        "seed {seed}: {cmp:?}"
    );
    // Twice: nothing to do, no new version.
    let v = version(&batch);
    let again = ok(&backfill);
    assert!(again.contains(" 0 republished"), "{again}");
    assert_eq!(version(&batch), v);

    // A range: only its windows are touched.
    let part = dir.path().join("part");
    let p = part.display().to_string();
    let mut range = stream_args(&src, &p);
    range[0] = "backfill";
    range.extend(["--from", "2026-10-03T01:00Z", "--to", "2026-10-03T02:00Z"]);
    ok(&range);
    assert_eq!(
        scalar(&part, "SELECT count(DISTINCT window_start) FROM t"),
        "4",
        "four 15-minute windows in one hour"
    );
    let t = format!("t={}", part.display());
    let o = format!("o={}", stream.display());
    let diff = ok(&[
        "query",
        "--table",
        &t,
        "--table",
        &o,
        "--format",
        "csv",
        "SELECT count(*) FROM (SELECT * FROM o WHERE window_start IN (SELECT DISTINCT window_start FROM t) \
         EXCEPT ALL SELECT * FROM t)",
    ]);
    assert_eq!(
        diff.lines().nth(1),
        Some("0"),
        "the range equals the stream's windows"
    );

    // The one-window form on the stream's table: a window whose publication covers the
    // whole source is left as it is; --force republishes it: one new version, same rows.
    let before = sorted_rows(&stream);
    let v = version(&stream);
    let mut rewrite = stream_args(&src, &s);
    rewrite[0] = "rewrite";
    rewrite.extend(["--at", "2026-10-03T01:20"]);
    let out = ok(&rewrite);
    assert!(out.contains(" 0 republished, 1 already complete"), "{out}");
    assert_eq!(version(&stream), v);
    rewrite.push("--force");
    let out = ok(&rewrite);
    assert!(out.contains(" 1 republished"), "{out}");
    assert_eq!(version(&stream), v + 1);
    assert_eq!(sorted_rows(&stream), before);
}

/// Polls `done` every 50 ms; panics naming `what` after a minute (a hang, not a slow machine).
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

fn event(id: &str, ts: &str) -> String {
    format!("{{\"event_id\":\"{id}\",\"ts\":\"2026-10-03T{ts}:00Z\",\"n\":1}}\n")
}

fn row_count(table: &Path) -> i64 {
    if version(table) < 0 {
        return 0;
    }
    scalar(table, "SELECT count(*) FROM t").parse().unwrap()
}

/// `sluice run --follow`: windows that no later event would seal are sealed by the idle
/// timeout; lines appended to the last file, a line completed later and a new file are
/// picked up; a late event after an idle seal rewrites its window; SIGTERM ends the run
/// gracefully (exit 0, summary printed) and a plain rerun finishes what was left open. The
/// table then equals a bounded run over the final input.
#[test]
fn follow_seals_idle_windows_picks_up_appends_and_stops_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let a = input.join("a.ndjson");
    let text: String = (0..6)
        .map(|i| event(&format!("h10-{i}"), &format!("10:{i}0")))
        .collect();
    append(&a, &text);
    let src = format!("ndjson:{}", input.display());
    let table = dir.path().join("followed");
    let t = table.to_str().unwrap();
    let base = [
        "run",
        "--source",
        &src,
        "--table",
        t,
        "--window",
        "1h",
        "--lateness",
        "10m",
    ];
    let mut args = base.to_vec();
    args.extend([
        "--follow",
        "--poll-interval",
        "50ms",
        "--idle-timeout",
        "700ms",
        // A late event is republished at once (the default batches them for a minute).
        "--late-batch",
        "0s",
    ]);
    let child = Command::new(BIN)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The largest event time is 10:50, so the watermark (10:40) never reaches 11:00: only the
    // idle timeout can publish window 10.
    wait_for("the idle seal of window 10", || row_count(&table) == 6);

    // A late event for window 10, two events of window 12, and a line still being written.
    append(
        &a,
        &(event("h10-late", "10:55") + &event("h12-0", "12:05") + &event("h12-1", "12:10")),
    );
    append(
        &a,
        "{\"event_id\":\"h12-torn\",\"ts\":\"2026-10-03T12:20:00Z\"",
    );
    wait_for("the late rewrite and the idle seal of window 12", || {
        row_count(&table) == 9
    });
    assert_eq!(
        ids(&table, "event_id = 'h12-torn'"),
        "",
        "an incomplete line is not an event"
    );

    // The line is completed, and a new file (sorting after a.ndjson) starts.
    append(&a, ",\"n\":1}\n");
    append(&input.join("b.ndjson"), &event("h13-0", "13:00"));
    wait_for("the completed line and the new file", || {
        row_count(&table) == 11
    });

    // SIGTERM while window 14 is open: a graceful stop leaves it to the next run.
    append(&input.join("b.ndjson"), &event("h14-0", "14:00"));
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("idle seals"), "{stdout}");
    let windows = ok(&["windows", "--table", t, "--format", "csv"]);
    eprintln!("followed run: {stdout}{windows}");
    let w10 = windows.lines().find(|l| l.contains("hour=10")).unwrap();
    assert_eq!(
        w10.split(',').nth(4),
        Some("2"),
        "idle seal + late rewrite: {windows}"
    );

    ok(&base);
    assert_eq!(row_count(&table), 12);
    let bounded = dir.path().join("bounded");
    let mut args = base.to_vec();
    args[4] = bounded.to_str().unwrap();
    ok(&args);
    assert_eq!(sorted_rows(&table), sorted_rows(&bounded));
    assert_eq!(dead_letters_count(&table), 0);
}

fn dead_letters_count(table: &Path) -> i64 {
    let dlq = std::path::PathBuf::from(format!("{}_dlq", table.display()));
    scalar(&dlq, "SELECT count(*) FROM t").parse().unwrap()
}

/// A file that appears with a name sorting *before* files already consumed is read after
/// them (files are read in the order they arrive): its events land, none passes for a replay
/// of a published position, and a rerun changes nothing.
#[test]
fn a_file_added_before_consumed_files_is_read_after_them() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    append(
        &input.join("b.ndjson"),
        &(event("b0", "10:00") + &event("b1", "12:00")),
    );
    let src = format!("ndjson:{}", input.display());
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let args = ["run", "--source", &src, "--table", t, "--window", "1h"];
    ok(&args);
    // Its event is in a window already published (10:00) and in one that is not (11:00).
    append(
        &input.join("a.ndjson"),
        &(event("a0", "11:00") + &event("a1", "10:30")),
    );
    ok(&args);
    assert_eq!(row_count(&table), 4);
    ok(&args);
    assert_eq!(row_count(&table), 4, "a rerun reads nothing again");
}

/// `--late-batch`: late events for one window spread over many chunks cost one
/// republication per interval instead of one per chunk; the rows are the same.
#[test]
fn late_batch_interval_bounds_republications() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let mut text: String = (0..6)
        .map(|i| event(&format!("h01-{i}"), &format!("01:{i}0")))
        .collect();
    for k in 0..5 {
        // ~6 KB of events of a later hour, then a late event for window 01: each late event
        // lands in its own 4 KiB chunk.
        for i in 0..60 {
            text.push_str(&event(
                &format!("h{:02}-{i:02}-padding-to-a-hundred-bytes-per-line", 2 + k),
                &format!("{:02}:{:02}", 2 + k, i),
            ));
        }
        text.push_str(&event(&format!("late-{k}"), "01:30"));
    }
    append(&input.join("a.ndjson"), &text);
    let src = format!("ndjson:{}", input.display());
    let publications_of_01 = |batch: &str| {
        let table = dir.path().join(format!("batch-{batch}"));
        let t = table.to_str().unwrap();
        let out = ok(&[
            "run",
            "--source",
            &src,
            "--table",
            t,
            "--window",
            "1h",
            "--lateness",
            "10m",
            "--chunk-bytes",
            "4KiB",
            "--late-batch",
            batch,
        ]);
        let windows = ok(&["windows", "--table", t, "--format", "csv"]);
        eprintln!("--late-batch {batch}: {out}{windows}");
        let w01 = windows.lines().find(|l| l.contains("hour=01")).unwrap();
        let n: u64 = w01.split(',').nth(4).unwrap().parse().unwrap();
        (n, sorted_rows(&table))
    };
    let (per_chunk, rows_per_chunk) = publications_of_01("0s");
    let (batched, rows_batched) = publications_of_01("1h");
    assert_eq!(per_chunk, 6, "the first publication and one per late chunk");
    assert_eq!(
        batched, 2,
        "the first publication and one late batch at the end"
    );
    assert_eq!(rows_per_chunk.len(), 6 + 300 + 5);
    assert_eq!(rows_per_chunk, rows_batched);
}
