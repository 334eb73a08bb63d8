//! Late data, dead letters and backfill, through the real binary on real Delta tables.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

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

    // The one-window form on the stream's table: one new version, same rows.
    let before = sorted_rows(&stream);
    let v = version(&stream);
    let mut rewrite = stream_args(&src, &s);
    rewrite[0] = "rewrite";
    rewrite.extend(["--at", "2026-10-03T01:20"]);
    let out = ok(&rewrite);
    assert!(out.contains(" 1 republished"), "{out}");
    assert_eq!(version(&stream), v + 1);
    assert_eq!(sorted_rows(&stream), before);
}
