//! Table maintenance with the real binary: `sluice vacuum` deletes exactly the files that
//! republications removed longer ago than the retention, and the table's rows stay the same.

use std::collections::BTreeSet;
use std::path::Path;

use crate::common::{commits, ok, python, run_args, sluice, sorted_rows, stream_slices};

/// Every data file a `remove` action of the log names, relative to the table root.
fn removed_files(table: &Path) -> BTreeSet<String> {
    commits(table)
        .values()
        .flatten()
        .filter_map(|a| a.get("remove")?.get("path")?.as_str().map(str::to_string))
        .collect()
}

/// The `would remove`/`removed` lines of a vacuum's output.
fn listed(out: &str, prefix: &str) -> BTreeSet<String> {
    out.lines()
        .filter_map(|l| l.strip_prefix(prefix).map(str::to_string))
        .collect()
}

#[test]
fn vacuum_deletes_only_files_removed_longer_ago_than_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    // Two slices of one stream: the second has late events for windows the first published,
    // which are republished by swap (their old files removed from the table).
    for (i, (name, bytes)) in stream_slices(4_000, 6, 11, 2, 0).into_iter().enumerate() {
        let file = dir.path().join(name);
        std::fs::write(&file, bytes).unwrap();
        let source = format!("ndjson:{}", file.display());
        // A checkpoint every 2 versions: vacuum and the readers below go through one.
        ok(&run_args(
            &source,
            t,
            &["--key", "event_id", "--checkpoint-interval", "2"],
        ));
        if i == 0 {
            assert!(removed_files(&table).is_empty());
        }
    }
    let removed = removed_files(&table);
    assert!(!removed.is_empty(), "the second slice republished windows");
    let rows = sorted_rows(&table);

    // The table's retention (7 days): nothing was removed that long ago.
    let out = ok(&["vacuum", "--table", t]);
    assert!(listed(&out, "would remove ").is_empty(), "{out}");
    assert!(out.contains("0 files"), "{out}");

    // A shorter retention than the table's is refused unless forced.
    let refused = sluice(&["vacuum", "--table", t, "--retention", "0s"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--force-retention"), "{stderr}");

    // A dry run lists exactly the removed files and deletes nothing.
    let forced = [
        "vacuum",
        "--table",
        t,
        "--retention",
        "0s",
        "--force-retention",
    ];
    let out = ok(&forced);
    assert_eq!(listed(&out, "would remove "), removed, "{out}");
    for f in &removed {
        assert!(table.join(f).exists(), "a dry run deleted {f}");
    }

    // --apply deletes them, and only them: the table reads the same rows.
    let applied: Vec<&str> = forced.iter().copied().chain(["--apply"]).collect();
    let out = ok(&applied);
    assert_eq!(listed(&out, "removed "), removed, "{out}");
    for f in &removed {
        assert!(!table.join(f).exists(), "{f} is still there");
    }
    assert_eq!(sorted_rows(&table), rows);
    // Twice changes nothing.
    let out = ok(&applied);
    assert!(listed(&out, "removed ").is_empty(), "{out}");
    assert_eq!(sorted_rows(&table), rows);
    assert!(
        std::fs::read_dir(table.join("_delta_log"))
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().contains(".checkpoint.")),
        "the table has a checkpoint"
    );
    // Independent readers after checkpoint and vacuum: Python delta-rs and Polars read the
    // same rows (count and distinct event ids).
    let read = std::process::Command::new(python())
        .args([
            "-c",
            "import sys, polars as pl\n\
             from deltalake import DeltaTable\n\
             t = DeltaTable(sys.argv[1]).to_pyarrow_table()\n\
             p = pl.read_delta(sys.argv[1])\n\
             print(t.num_rows, len(set(t.column('event_id').to_pylist())), p.height, p['event_id'].n_unique())",
            t,
        ])
        .output()
        .expect("python runs");
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let distinct = crate::common::scalar(&table, "SELECT count(DISTINCT event_id) FROM t");
    assert_eq!(
        String::from_utf8_lossy(&read.stdout).trim(),
        format!("{n} {distinct} {n} {distinct}", n = rows.len())
    );
}

/// Files per window, from `sluice windows --format json`.
fn files_per_window(table: &str) -> Vec<(String, u64)> {
    ok(&["windows", "--table", table, "--format", "json"])
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            (
                v["window"].as_str().unwrap().to_string(),
                v["files"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn compact_leaves_one_file_per_window_with_the_same_rows_for_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    // Rows keyed by source position, parts flushed early (a small budget), and a second
    // slice of late rows added to published windows: windows of several files each.
    let mut sources = Vec::new();
    for (name, bytes) in stream_slices(6_000, 4, 17, 2, 0) {
        let file = dir.path().join(name);
        std::fs::write(&file, bytes).unwrap();
        let source = format!("ndjson:{}", file.display());
        ok(&run_args(
            &source,
            t,
            &[
                "--flush-bytes-max",
                "64KiB",
                "--late",
                "rewrite",
                "--checkpoint-interval",
                "3",
            ],
        ));
        sources.push(source);
    }
    let before = files_per_window(t);
    assert!(
        before.iter().filter(|(_, n)| *n > 1).count() >= 2,
        "windows of several files: {before:?}"
    );
    let rows = sorted_rows(&table);

    let out = ok(&["compact", "--table", t]);
    let compacted = out.lines().filter(|l| l.starts_with("compacted ")).count();
    assert_eq!(
        compacted,
        before.iter().filter(|(_, n)| *n > 1).count(),
        "{out}"
    );
    let after = files_per_window(t);
    assert_eq!(
        after.iter().map(|(a, _)| a).collect::<Vec<_>>(),
        before.iter().map(|(a, _)| a).collect::<Vec<_>>()
    );
    assert!(after.iter().all(|(_, n)| *n == 1), "{after:?}");
    assert_eq!(sorted_rows(&table), rows);
    // The compaction commits say so: dataChange=false on every action they hold.
    let compactions: Vec<_> = commits(&table)
        .into_values()
        .filter(|actions| {
            actions.iter().any(|a| {
                a.get("commitInfo")
                    .and_then(|c| c.get("sluice"))
                    .and_then(|s| s.get("compacted"))
                    .is_some()
            })
        })
        .collect();
    assert_eq!(compactions.len(), compacted);
    for actions in &compactions {
        for a in actions {
            for kind in ["add", "remove"] {
                if let Some(f) = a.get(kind) {
                    assert_eq!(f["dataChange"], serde_json::json!(false), "{a}");
                }
            }
        }
    }

    // Twice changes nothing; a rerun of the stream recognises every event.
    let out = ok(&["compact", "--table", t]);
    assert!(out.contains("0 windows compacted"), "{out}");
    let version = files_per_window(t);
    for source in &sources {
        ok(&run_args(source, t, &["--late", "rewrite"]));
    }
    assert_eq!(files_per_window(t), version);
    assert_eq!(sorted_rows(&table), rows);

    // A target below 1MiB is a usage error.
    let refused = sluice(&["compact", "--table", t, "--target-file-size", "1KiB"]);
    assert_eq!(refused.status.code(), Some(2));

    // Vacuum the replaced files, then independent readers agree.
    vacuum_now(t);
    assert_eq!(sorted_rows(&table), rows);
    assert_eq!(
        python_reads(t),
        format!("{n} {n} {}", after.len(), n = rows.len())
    );
}

/// Vacuums every file the table's versions removed (no retention).
fn vacuum_now(t: &str) {
    ok(&[
        "vacuum",
        "--table",
        t,
        "--retention",
        "0s",
        "--force-retention",
        "--apply",
    ]);
}

/// Rows read by Python delta-rs, rows read by Polars, and the files delta-rs reads.
fn python_reads(t: &str) -> String {
    let read = std::process::Command::new(python())
        .args([
            "-c",
            "import sys, polars as pl\n\
             from deltalake import DeltaTable\n\
             t = DeltaTable(sys.argv[1])\n\
             print(t.to_pyarrow_table().num_rows, pl.read_delta(sys.argv[1]).height, len(t.file_uris()))",
            t,
        ])
        .output()
        .expect("python runs");
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    String::from_utf8_lossy(&read.stdout).trim().to_string()
}

#[test]
fn a_run_compacting_its_windows_holds_the_rows_of_one_that_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    let compacting = dir.path().join("compacting");
    // Keyed by source position, late rows are appended to their windows as files of their
    // own: the second slice leaves windows of several files.
    let mut compacted = 0;
    for (name, bytes) in stream_slices(6_000, 4, 23, 2, 0) {
        let file = dir.path().join(name);
        std::fs::write(&file, bytes).unwrap();
        let source = format!("ndjson:{}", file.display());
        ok(&run_args(
            &source,
            plain.to_str().unwrap(),
            &["--late", "rewrite"],
        ));
        let out = ok(&run_args(
            &source,
            compacting.to_str().unwrap(),
            &[
                "--late",
                "rewrite",
                "--compact-files-min",
                "1",
                "--format",
                "json",
            ],
        ));
        let summary: serde_json::Value =
            serde_json::from_str(out.lines().last().unwrap()).expect("a JSON summary");
        compacted += summary["windows_compacted"]
            .as_u64()
            .expect("windows_compacted");
    }
    let several = files_per_window(plain.to_str().unwrap())
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .count();
    assert!(several >= 2, "late rows appended files to windows");
    assert_eq!(compacted, several as u64);
    assert!(
        files_per_window(compacting.to_str().unwrap())
            .iter()
            .all(|(_, n)| *n == 1),
        "{:?}",
        files_per_window(compacting.to_str().unwrap())
    );
    assert_eq!(sorted_rows(&compacting), sorted_rows(&plain));
}

/// An NDJSON line of one event.
fn event(id: &str, ts: &str) -> String {
    format!("{{\"event_id\": \"{id}\", \"ts\": \"{ts}\", \"v\": 1}}\n")
}

#[test]
fn retain_keeps_exactly_the_windows_within_the_retention_of_the_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    // Hourly windows, lateness 5m, retention 2h. The last event (16:05) puts the watermark
    // at 16:00, so windows that ended before 14:00 are removed: 10, 11 and 12 o'clock. The
    // 13 o'clock window ends at 14:00 exactly, not before it: kept, and its late event is
    // published; the late event of 12 o'clock is too late (dead-lettered), never published.
    let lines: String = [
        ("a", "2026-10-03T10:30:00Z"),
        ("b", "2026-10-03T11:30:00Z"),
        ("c", "2026-10-03T12:30:00Z"),
        ("d", "2026-10-03T13:30:00Z"),
        ("e", "2026-10-03T14:30:00Z"),
        ("f", "2026-10-03T16:05:00Z"),
        ("late13", "2026-10-03T13:40:00Z"),
        ("late12", "2026-10-03T12:45:00Z"),
    ]
    .iter()
    .map(|(id, ts)| event(id, ts))
    .collect();
    std::fs::write(input.join("a.ndjson"), lines).unwrap();
    let source = format!("ndjson:{}", input.display());
    let args = |extra: &[&'static str]| -> Vec<String> {
        let mut args: Vec<String> = run_args(&source, t, &["--window", "1h"])
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(
            ["--retain", "2h", "--late-batch", "0s", "--format", "json"]
                .iter()
                .chain(extra)
                .map(|s| s.to_string()),
        );
        args
    };
    let run = |extra: &[&'static str]| -> serde_json::Value {
        let args = args(extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        serde_json::from_str(ok(&refs).lines().last().unwrap()).unwrap()
    };
    let summary = run(&[]);
    assert_eq!(summary["windows_expired"], 3, "{summary}");
    assert_eq!(summary["late_dead_lettered"], 1, "{summary}");
    let ids = |table: &Path| {
        crate::common::query_csv(&[("t", table)], "SELECT event_id FROM t ORDER BY event_id")
    };
    assert_eq!(ids(&table), ["d", "e", "f", "late13"]);
    let windows: Vec<String> = files_per_window(t).into_iter().map(|(w, _)| w).collect();
    assert_eq!(
        windows,
        [
            "dt=2026-10-03/hour=13",
            "dt=2026-10-03/hour=14",
            "dt=2026-10-03/hour=16"
        ]
    );
    let dead =
        crate::common::query_csv(&[("d", &dir.path().join("t_dlq"))], "SELECT reason FROM d");
    assert_eq!(dead, ["too_late"]);
    // Rerunning changes nothing.
    assert_eq!(run(&[])["windows_expired"], 0);
    assert_eq!(ids(&table), ["d", "e", "f", "late13"]);
    // Five more minutes of stream: the watermark at 16:05, the 13 o'clock window (ended
    // 14:00) is now past the retention.
    std::fs::write(input.join("b.ndjson"), event("g", "2026-10-03T16:10:00Z")).unwrap();
    assert_eq!(run(&[])["windows_expired"], 1);
    assert_eq!(ids(&table), ["e", "f", "g"]);
    // --retain with derived tables is refused.
    let refused = sluice(&[
        "run",
        "--source",
        &source,
        "--table",
        t,
        "--retain",
        "2h",
        "--derive",
        "d=x",
        "--derive-sql",
        "d=SELECT 1 FROM window",
    ]);
    assert_eq!(refused.status.code(), Some(2));
}

#[test]
fn expire_removes_windows_older_than_the_clock_and_vacuum_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let (name, bytes) = stream_slices(4_000, 6, 29, 1, 0).remove(0);
    let file = dir.path().join(name);
    std::fs::write(&file, bytes).unwrap();
    ok(&run_args(&format!("ndjson:{}", file.display()), t, &[]));
    let before = files_per_window(t);
    // The stream spans 2026-10-03 00:00 to 06:00 in 15-minute windows; a cutoff at 03:07:30
    // (mid-window: the clock moves on while the test runs) removes the twelve that ended by
    // 03:00.
    let cutoff = chrono::DateTime::parse_from_rfc3339("2026-10-03T03:07:30Z").unwrap();
    let older_than = format!("{}s", (chrono::Utc::now() - cutoff.to_utc()).num_seconds());
    let due: Vec<String> = before
        .iter()
        .map(|(w, _)| w.clone())
        .filter(|w| w.as_str() < "window_start=20261003T0300Z")
        .collect();
    assert_eq!(due.len(), 12);
    let rows = sorted_rows(&table);
    let out = ok(&["expire", "--table", t, "--older-than", &older_than]);
    let listed: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("would remove "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(listed, due, "{out}");
    assert_eq!(files_per_window(t), before, "a dry run removes nothing");
    let out = ok(&[
        "expire",
        "--table",
        t,
        "--older-than",
        &older_than,
        "--apply",
    ]);
    assert!(out.contains("12 windows"), "{out}");
    let after: Vec<String> = files_per_window(t).into_iter().map(|(w, _)| w).collect();
    assert_eq!(after.len(), before.len() - 12);
    assert!(after
        .iter()
        .all(|w| w.as_str() >= "window_start=20261003T0300Z"));
    let kept = sorted_rows(&table);
    assert!(!kept.is_empty() && kept.len() < rows.len());
    assert!(kept.iter().all(|r| rows.contains(r)));
    let out = ok(&[
        "expire",
        "--table",
        t,
        "--older-than",
        &older_than,
        "--apply",
    ]);
    assert!(out.contains("0 windows"), "{out}");
    // Vacuum then deletes the expired windows' files; every reader sees what is kept.
    vacuum_now(t);
    assert_eq!(sorted_rows(&table), kept);
    assert_eq!(
        python_reads(t),
        format!("{n} {n} {}", after.len(), n = kept.len())
    );
}

#[test]
fn compaction_keeps_every_value_of_nested_evolving_dirty_rows() {
    // The shapes of real streams: nested records, records without their key, two fields
    // that appear mid-stream (one a new struct member), events dated 2099 and torn lines, in
    // two slices keyed by position: windows whose files hold different columns.
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let events = 6_000;
    let slices = crate::common::stream_slices_of(
        &sluice_source::generate::GeneratorSpec {
            seed: 37,
            events,
            hours: 4,
            shape: sluice_source::generate::Shape::Nested,
            null_key_per_mille: 20,
            new_fields_from: Some(events / 2),
            far_future_events: 2,
            ..Default::default()
        },
        2,
        500,
    );
    let lines: usize = slices
        .iter()
        .map(|(_, b)| b.split(|c| *c == b'\n').filter(|l| !l.is_empty()).count())
        .sum();
    for (name, bytes) in &slices {
        std::fs::write(input.join(name), bytes).unwrap();
        ok(&run_args(
            &format!("ndjson:{}", input.display()),
            t,
            &["--late", "rewrite"],
        ));
    }
    let rows = json_rows(t);
    let dead = crate::common::query_csv(
        &[("d", &dir.path().join("t_dlq"))],
        "SELECT count(*) FROM d",
    );
    // Every line is a row or a dead letter.
    assert_eq!(
        rows.len() + dead[0].parse::<usize>().unwrap(),
        lines,
        "rows {} + dead letters {dead:?}",
        rows.len()
    );
    assert!(
        rows.iter().any(|r| r.contains("\"coupon\":null"))
            && rows.iter().any(|r| r.contains("\"coupon\":\"")),
        "rows before and after the new fields"
    );
    let several = files_per_window(t).iter().filter(|(_, n)| *n > 1).count();
    assert!(several > 0, "windows of several files");
    let out = ok(&["compact", "--table", t]);
    assert!(
        out.contains(&format!("{several} windows compacted")),
        "{out}"
    );
    assert!(files_per_window(t).iter().all(|(_, n)| *n == 1));
    // Every value of every row, nested members and late-added fields included.
    assert_eq!(json_rows(t), rows);
    vacuum_now(t);
    let read = python_reads(t);
    assert!(
        read.starts_with(&format!("{n} {n} ", n = rows.len())),
        "{read}"
    );
}

/// Every row of the table as a JSON object (nested values kept), sorted.
fn json_rows(t: &str) -> Vec<String> {
    let out = ok(&[
        "query",
        "--table",
        &format!("t={t}"),
        "--format",
        "json",
        "SELECT * FROM t",
    ]);
    let mut lines: Vec<String> = out.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

#[test]
fn dead_letters_past_the_retention_go_with_run_retain_and_sluice_expire() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let dlq = dir.path().join("t_dlq");
    let d = dlq.to_str().unwrap();
    let offsets = || {
        crate::common::query_csv(
            &[("d", &dlq)],
            "SELECT source_partition || ':' || CAST(source_offset AS VARCHAR) FROM d ORDER BY 1",
        )
    };
    // A torn line and a line without its time among good events.
    let a = format!(
        "{}{{\"event_id\": \"torn\", \"ts\": \n{{\"event_id\": \"no_time\", \"v\": 1}}\n",
        event("a", "2026-10-03T10:30:00Z")
    );
    std::fs::write(input.join("a.ndjson"), &a).unwrap();
    let source = format!("ndjson:{}", input.display());
    let run = |extra: &[&str]| -> serde_json::Value {
        let mut args = run_args(&source, t, &["--window", "1h", "--format", "json"]);
        args.extend(extra);
        serde_json::from_str(ok(&args).lines().last().unwrap()).unwrap()
    };
    assert_eq!(run(&[])["rejected"], 2);
    let first = offsets();
    assert_eq!(first.len(), 2, "{first:?}");
    // Dead letters are detected by the clock: let them age past a 2-second retention.
    std::thread::sleep(std::time::Duration::from_millis(2_200));

    // A dry run finds them and removes nothing.
    let out = ok(&["expire", "--dlq", d, "--older-than", "2s"]);
    assert!(out.contains("2 dead letters (1 files)"), "{out}");
    assert!(out.contains("dry run"), "{out}");
    assert_eq!(offsets(), first);

    // A run with --retain removes them after its commit; the dead letter it finds itself
    // stays, and so do the table's rows.
    std::fs::write(
        input.join("b.ndjson"),
        format!("{}[1, 2]\n", event("b", "2026-10-03T10:40:00Z")),
    )
    .unwrap();
    let summary = run(&["--retain", "2s"]);
    assert_eq!(summary["dead_letters_expired"], 2, "{summary}");
    assert_eq!(summary["rejected"], 1, "{summary}");
    let b_torn = format!("b.ndjson:{}", event("b", "2026-10-03T10:40:00Z").len());
    assert_eq!(offsets(), std::slice::from_ref(&b_torn));
    let ids =
        crate::common::query_csv(&[("t", &table)], "SELECT event_id FROM t ORDER BY event_id");
    assert_eq!(ids, ["a", "b"]);
    // A rerun over the same input does not bring the expired dead letters back: the
    // dead-letter offsets stay in the table.
    let again = run(&["--retain", "2s"]);
    assert_eq!(again["rejected"], 0, "{again}");
    assert_eq!(again["commits"], 0, "{again}");
    assert_eq!(offsets(), [b_torn]);
    assert_eq!(dead_letters_in_status(t, d), 1);

    std::thread::sleep(std::time::Duration::from_millis(2_200));
    let out = ok(&["expire", "--dlq", d, "--older-than", "2s", "--apply"]);
    assert!(out.contains("1 dead letters (1 files)"), "{out}");
    assert!(out.contains("removed"), "{out}");
    assert!(offsets().is_empty());
    assert_eq!(dead_letters_in_status(t, d), 0);
}

/// The dead letters `sluice status` counts, over every pipeline and reason.
fn dead_letters_in_status(t: &str, d: &str) -> i64 {
    let status: serde_json::Value = serde_json::from_str(&ok(&[
        "status", "--table", t, "--dlq", d, "--format", "json",
    ]))
    .unwrap();
    let by_pipeline = status["dead_letters"].as_object().expect("dead_letters");
    by_pipeline
        .values()
        .flat_map(|reasons| reasons.as_object().unwrap().values())
        .map(|n| n.as_i64().unwrap())
        .sum()
}

/// A failing maintenance command exits 1 with the reason; a misused one exits 2.
#[test]
fn maintenance_commands_fail_with_their_reason_and_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let m = missing.to_str().unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let (name, bytes) = stream_slices(500, 1, 3, 1, 0).remove(0);
    let file = dir.path().join(name);
    std::fs::write(&file, bytes).unwrap();
    ok(&run_args(&format!("ndjson:{}", file.display()), t, &[]));

    let cases: [(&[&str], i32, &str); 7] = [
        (&["compact", "--table", m], 1, "no Delta table"),
        (
            &["expire", "--table", m, "--older-than", "1d"],
            1,
            "no Delta table",
        ),
        (
            &["expire", "--dlq", m, "--older-than", "1d"],
            1,
            "no Delta table",
        ),
        (
            &["expire", "--dlq", t, "--older-than", "1d"],
            1,
            "is not a dead-letter table",
        ),
        (&["expire", "--older-than", "1d"], 2, "--table"),
        (
            &["expire", "--table", t, "--older-than", "soon"],
            2,
            "--older-than",
        ),
        (
            &["compact", "--table", t, "--target-file-size", "1KiB"],
            2,
            "--target-file-size",
        ),
    ];
    for (args, code, says) in cases {
        let out = sluice(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "sluice {args:?}: {stderr}");
        assert!(stderr.contains(says), "sluice {args:?}: {stderr}");
    }
    // Nothing was written anywhere a failing command pointed at.
    assert!(!missing.exists());
}
