//! End-to-end tests of the real `sluice` binary on real Delta tables on disk.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use sluice_source::generate::{GeneratorSpec, Shape};

#[test]
fn invalid_options_exit_2_with_one_line_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 10, 1, 1, 1);
    let src = format!("ndjson:{}", input.display());
    let table = dir.path().join("t").display().to_string();
    let named = format!("t={table}");
    let run = |option: &'static str, value: &'static str| -> (Vec<String>, &'static str) {
        let args = ["run", "--source", &src, "--table", &table, option, value];
        (args.iter().map(|a| a.to_string()).collect(), option)
    };
    let owned = |args: &[&str], option: &'static str| -> (Vec<String>, &'static str) {
        (args.iter().map(|a| a.to_string()).collect(), option)
    };
    let cases = vec![
        owned(&["run", "--table", &table], "--source"),
        owned(
            &["run", "--source", "pulsar:x", "--table", &table],
            "--source",
        ),
        owned(
            &["run", "--source", "kafka:x", "--table", &table],
            "--brokers",
        ),
        run("--store-attempts-max", "0"),
        run("--window", "7m"),
        run("--lateness", "soon"),
        run("--address", "dt"),
        run("--time-field", "nope"),
        run("--key", "nope"),
        run("--flush-bytes-max", "lots"),
        owned(
            &["query", "--table", &named, "--format", "xml", "SELECT 1"],
            "--format",
        ),
    ];
    for (args, option) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = sluice(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(option), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
    }
}

#[test]
fn a_rerun_over_ingested_input_commits_nothing_and_changes_no_row() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 20_000, 6, 7, 3);
    let src = format!("ndjson:{}", input.display());
    let table = dir.path().join("t");
    let t = table.display().to_string();
    let first = ok(&run_args(&src, &t, &["--checkpoint-interval", "3"]));
    assert!(table.join("_delta_log/_last_checkpoint").exists());
    assert!(first.contains("window publications in"), "{first}");
    let v1 = version(&table);
    let rows1 = sorted_rows(&table);
    assert!(v1 > 1 && !rows1.is_empty());
    let second = ok(&run_args(&src, &t, &["--checkpoint-interval", "3"]));
    assert!(
        second.contains("0 window publications in 0 commits"),
        "{second}"
    );
    assert_eq!(version(&table), v1);
    assert_eq!(sorted_rows(&table), rows1);
    // Every good line exactly once: row key = source position.
    let lines: usize = std::fs::read_dir(&input)
        .unwrap()
        .map(|e| {
            std::fs::read_to_string(e.unwrap().path())
                .unwrap()
                .lines()
                .count()
        })
        .sum();
    assert_eq!(rows1.len(), lines);
    assert_eq!(scalar(&table, "SELECT count(DISTINCT _sluice_source || ':' || CAST(_sluice_offset AS VARCHAR)) FROM t"), lines.to_string());
}

/// E1 soak: a stream arrives as files, one slice per cycle; each cycle starts the real binary
/// and SIGKILLs it at a random moment (most runs die mid-work: before, during or after a
/// commit, or in recovery). The end equals one clean run over the whole stream: 0 duplicates,
/// 0 losses. CI runs 30 kills per key mode over 60k events in 30 slices; `just soak` runs 200
/// kills over 1M events in 100 slices (`SLUICE_SOAK_EVENTS`, `SLUICE_SOAK_KILLS`,
/// `SLUICE_SOAK_SLICES`).
#[test]
fn sigkill_soak_equals_one_clean_run() {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .map(|v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{name} must be a number"))
            })
            .unwrap_or(default)
    };
    let events = env("SLUICE_SOAK_EVENTS", 60_000);
    let kills_wanted = env("SLUICE_SOAK_KILLS", 30);
    let slices_wanted = env("SLUICE_SOAK_SLICES", 30);
    // Rows keyed by position (swap), by event_id (swap), by event_id upserted (merge mode);
    // then the shapes of real streams, keyed by event_id, by swap and by merge: nested
    // records, records without their key, two fields that appear mid-stream (one of them a
    // new struct member), and events dated 2099; then a catch-up: 1-minute windows, so that
    // each chunk seals many of them and they are published by group commits of up to 16
    // windows (kills land inside them); then rows keyed by position (late rows appended to
    // their windows as files of their own) with `sluice compact` running beside each run,
    // killed with it.
    for mode in [
        "position",
        "key",
        "merge",
        "shapes",
        "shapes-merge",
        "catchup",
        "compact",
    ] {
        let seed = seed(&format!("sigkill soak ({mode})"));
        let mut rng = Rng(seed);
        let dir = tempfile::tempdir().unwrap();
        let shapes = mode.starts_with("shapes");
        let slices = if shapes {
            let events = events / 3;
            stream_slices_of(
                &GeneratorSpec {
                    seed: 11,
                    events,
                    hours: 6,
                    shape: Shape::Nested,
                    null_key_per_mille: 20,
                    new_fields_from: Some(events / 2),
                    far_future_events: 2,
                    ..Default::default()
                },
                slices_wanted as usize,
                997,
            )
        } else {
            stream_slices(events, 6, 11, slices_wanted as usize, 997)
        };
        let count_lines = |start: &[&[u8]]| {
            slices
                .iter()
                .map(|(_, b)| {
                    b.split(|c| *c == b'\n')
                        .filter(|l| start.iter().any(|s| l.starts_with(s)))
                        .count() as u64
                })
                .sum::<u64>()
        };
        let bad_lines = count_lines(&[b"{\"event_id\": \"torn"]);
        // Records without their key are dead letters `missing_key`.
        let keyless = count_lines(&[b"{\"event_id\":null", b"{\"ts\""]);
        // The oracle: one clean run over the whole stream (same file names, so the same
        // source positions).
        let whole = dir.path().join("whole");
        std::fs::create_dir_all(&whole).unwrap();
        for (name, bytes) in &slices {
            std::fs::write(whole.join(name), bytes).unwrap();
        }
        // Checkpoints every 5 commits: recovery must read offsets and coverage back from
        // checkpoints, not only from JSON commits (E4).
        let mut extra = vec!["--flush-bytes-max", "2MiB", "--checkpoint-interval", "5"];
        if mode != "position" && mode != "compact" {
            extra.extend(["--key", "event_id"]);
        }
        if mode.ends_with("merge") {
            extra.extend(["--mode", "merge"]);
        }
        if mode == "catchup" {
            extra.extend(["--window", "1m", "--group-windows-max", "16"]);
        }
        let clean = dir.path().join("clean");
        let c = clean.display().to_string();
        let w = format!("ndjson:{}", whole.display());
        let started = Instant::now();
        ok(&run_args(&w, &c, &extra));
        let clean_ms = started.elapsed().as_millis() as u64;
        let started = Instant::now();
        ok(&run_args(&w, &c, &extra));
        let startup_ms = started.elapsed().as_millis() as u64;

        let arriving = dir.path().join("arriving");
        std::fs::create_dir_all(&arriving).unwrap();
        let src = format!("ndjson:{}", arriving.display());
        let crashed = dir.path().join("crashed");
        let k = crashed.display().to_string();
        let (mut kills, mut finished, mut progressed) = (0, 0, 0);
        let mut next_slice = slices.iter();
        // A new slice arrives after each run that finished; a killed run's work waits for the
        // next run. Kills land uniformly within 1.2x the expected run length, which tracks the
        // runs that finish and grows while runs are being killed, so kills keep landing mid-work.
        let mut expected_ms = (startup_ms + clean_ms / slices.len().max(1) as u64) as f64;
        let mut add_slice = true;
        let (mut compactions_finished, mut compactions_killed) = (0, 0);
        let soak_started = Instant::now();
        while kills < kills_wanted && kills + finished < 10 * kills_wanted {
            if add_slice {
                if let Some((name, bytes)) = next_slice.next() {
                    std::fs::write(arriving.join(name), bytes).unwrap();
                }
            }
            let before = version(&crashed);
            let run_started = Instant::now();
            let mut child = Command::new(BIN)
                .args(run_args(&src, &k, &extra))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            // A compaction beside the run, once the table exists (its first commit, not just
            // the log directory a killed creation can leave behind): small targets, so that
            // it rewrites windows the run is republishing.
            let mut compactor = (mode == "compact"
                && crashed
                    .join("_delta_log/00000000000000000000.json")
                    .exists())
            .then(|| {
                Command::new(BIN)
                    .args(["compact", "--table", &k, "--target-file-size", "1MiB"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            });
            std::thread::sleep(Duration::from_millis(
                rng.below((1.2 * expected_ms) as u64 + 1),
            ));
            if let Some(mut compactor) = compactor.take() {
                match compactor.try_wait().unwrap() {
                    None => {
                        compactor.kill().unwrap();
                        compactions_killed += 1;
                        compactor.wait().unwrap();
                    }
                    Some(_) => {
                        let out = compactor.wait_with_output().unwrap();
                        assert!(
                            out.status.success(),
                            "a compaction failed on its own (seed {seed}): {}",
                            String::from_utf8_lossy(&out.stderr)
                        );
                        compactions_finished += 1;
                    }
                }
            }
            add_slice = match child.try_wait().unwrap() {
                None => {
                    child.kill().unwrap();
                    kills += 1;
                    if version(&crashed) > before {
                        progressed += 1;
                    }
                    expected_ms *= 1.1;
                    false
                }
                Some(status) => {
                    assert!(status.success(), "a run failed on its own (seed {seed})");
                    finished += 1;
                    expected_ms =
                        0.5 * expected_ms + 0.5 * run_started.elapsed().as_millis() as f64;
                    true
                }
            };
            child.wait().unwrap();
        }
        for (name, bytes) in next_slice {
            std::fs::write(arriving.join(name), bytes).unwrap();
        }
        ok(&run_args(&src, &k, &extra));
        let soak_s = soak_started.elapsed().as_secs_f64();
        assert_eq!(
            kills, kills_wanted,
            "every planned kill must land (seed {seed})"
        );
        assert!(crashed.join("_delta_log/_last_checkpoint").exists());
        if mode == "compact" {
            // Compactions finished and landed beside the runs; one more leaves one file per
            // window, changing no row (compared with the oracle below).
            let compacted = commits(&crashed)
                .values()
                .flatten()
                .filter(|a| a.pointer("/commitInfo/sluice/compacted").is_some())
                .count();
            eprintln!("soak ({mode}): {compactions_finished} compactions finished, {compactions_killed} killed; {compacted} compaction commits in the retained log");
            assert!(compactions_finished > 0 && compacted > 0, "seed {seed}");
            ok(&["compact", "--table", &k]);
        }
        if mode == "catchup" {
            // The catch-up did publish windows together: commits of several windows, none of
            // more than 16 (the log's commits since the last cleanup).
            let groups: Vec<usize> = commits(&crashed)
                .values()
                .flatten()
                .filter_map(|a| a.pointer("/commitInfo/sluice/windows"))
                .map(|w| w.as_array().map_or(0, Vec::len))
                .collect();
            eprintln!("soak ({mode}): group commits in the retained log, windows each: {groups:?}");
            assert!(!groups.is_empty(), "seed {seed}");
            assert!(groups.iter().all(|n| (2..=16).contains(n)), "seed {seed}");
        }
        let cmp = compare_with_oracle(&clean, &crashed);
        eprintln!(
            "soak ({mode}): {events} events in {} slices; clean run {clean_ms} ms (start-up {startup_ms} ms); \
             {kills} SIGKILLs ({progressed} after the killed run had committed), {finished} runs finished before their kill; \
             {soak_s:.0} s; oracle {} rows, table {} rows, {} duplicates, {} lost, {} not in the oracle",
            slices.len(),
            cmp.oracle_rows,
            cmp.rows,
            cmp.duplicates,
            cmp.lost,
            cmp.extra
        );
        assert_eq!(
            (cmp.rows, cmp.duplicates, cmp.lost, cmp.extra),
            (cmp.oracle_rows, 0, 0, 0),
            "seed {seed}"
        );
        // Every bad line is in the dead-letter table exactly once, as in the clean run.
        let dead = |t: &Path| {
            query_csv(
                &[("d", &t.with_file_name(format!("{}_dlq", t.file_name().unwrap().to_str().unwrap())))],
                "SELECT count(*), count(DISTINCT source_partition || ':' || CAST(source_offset AS VARCHAR)) FROM d",
            )
            .remove(0)
        };
        let dead_lines = bad_lines + keyless;
        let expected_dead = format!("{dead_lines},{dead_lines}");
        eprintln!(
            "soak ({mode}): {bad_lines} bad lines, {keyless} without their key; dead letters (count, distinct positions): {}",
            dead(&crashed)
        );
        assert_eq!(dead(&crashed), expected_dead, "seed {seed}");
        assert_eq!(dead(&clean), expected_dead, "seed {seed}");
        // Rerunning once more changes nothing.
        let v = version(&crashed);
        ok(&run_args(&src, &k, &extra));
        assert_eq!(version(&crashed), v);
        if shapes {
            // The table grew by both fields: rows before them hold nulls, rows after their
            // values (equal to the clean run's, compared above).
            let grown = query_csv(
                &[("t", &crashed)],
                "SELECT count(*) > count(coupon), count(coupon) > 0, count(coupon) = count(t.actor.plan) FROM t",
            );
            eprintln!("soak ({mode}): the schema grew mid-stream; (old rows null, new rows set, both fields) = {grown:?}");
            assert_eq!(grown, ["true,true,true"], "seed {seed}");
        }
        if mode.ends_with("merge") {
            // One row per key per window, and the same rows a swap run keyed the same way
            // publishes: both keep each key's winner (latest event time, then position).
            let swapped = dir.path().join("swapped");
            let mut keyed = extra.clone();
            keyed.truncate(keyed.len() - 2);
            ok(&run_args(&w, &swapped.display().to_string(), &keyed));
            let cmp = compare_with_oracle(&swapped, &crashed);
            let repeated = query_csv(
                &[("t", &crashed)],
                "SELECT count(*) FROM (SELECT event_id FROM t GROUP BY event_id, window_start HAVING count(*) > 1)",
            );
            eprintln!(
                "soak ({mode}) vs a swap run keyed by event_id: {} rows vs {}, {} lost, {} extra; keys repeated within a window: {}",
                cmp.rows, cmp.oracle_rows, cmp.lost, cmp.extra, repeated[0]
            );
            assert_eq!(
                (cmp.rows, cmp.lost, cmp.extra),
                (cmp.oracle_rows, 0, 0),
                "seed {seed}"
            );
            assert_eq!(repeated, ["0"], "seed {seed}");
        }
    }
}

/// E2: a reader polling during ingestion sees every window either absent or exactly as one
/// publication left it; and every version of the log reads back with delta-rs.
///
/// The stream arrives a slice at a time (`--follow`, each slice's windows sealed by the idle
/// timeout, later slices rewriting some of them as late rows), and the next slice is written
/// only once the reader has caught a new version: the reader sees several versions however
/// fast or slow the run and the reader are.
#[test]
fn readers_never_see_a_partial_window_at_any_version() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    std::fs::create_dir_all(&input).unwrap();
    let slices = stream_slices(40_000, 6, 5, 5, 0);
    let lines: usize = slices
        .iter()
        .map(|(_, b)| b.split(|c| *c == b'\n').filter(|l| !l.is_empty()).count())
        .sum();
    let mut slices = slices.into_iter();
    let (name, bytes) = slices.next().unwrap();
    std::fs::write(input.join(name), bytes).unwrap();
    let src = format!("ndjson:{}", input.display());
    let table = dir.path().join("t");
    let t = table.display().to_string();
    let mut child = Command::new(BIN)
        .args(run_args(
            &src,
            &t,
            &[
                "--flush-bytes-max",
                "1MiB",
                "--follow",
                "--poll-interval",
                "50ms",
                "--idle-timeout",
                "300ms",
                "--late-batch",
                "0s",
            ],
        ))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut observed: Vec<(i64, std::collections::BTreeMap<String, i64>)> = Vec::new();
    // Polls until the reader catches a version it has not seen (the run is alive throughout).
    let catch_a_new_version = |observed: &mut Vec<_>, child: &mut std::process::Child| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the followed run ended early"
            );
            if let Some(seen) = rt.block_on(window_counts(&t, None)) {
                let last = observed.last().map(|(v, _): &(i64, _)| *v);
                if last != Some(seen.0) {
                    observed.push(seen);
                    return;
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no new version for 120 s after {} versions",
                observed.len()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    catch_a_new_version(&mut observed, &mut child);
    for (name, bytes) in slices {
        std::fs::write(input.join(name), bytes).unwrap();
        catch_a_new_version(&mut observed, &mut child);
    }
    // The idle timeout seals every window still open; once the whole stream is published,
    // SIGTERM ends the run gracefully.
    let deadline = Instant::now() + Duration::from_secs(120);
    while published_rows_by_version(&table)
        .values()
        .next_back()
        .map_or(0, |w| w.values().sum::<i64>())
        < lines as i64
    {
        assert!(
            Instant::now() < deadline,
            "the stream was not all published in 120 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(child.wait().unwrap().success());
    let expected = published_rows_by_version(&table);
    assert!(
        observed.len() >= 5,
        "the reader saw {} versions",
        observed.len()
    );
    for (v, counts) in &observed {
        assert_eq!(counts, &expected[v], "version {v} as seen while ingesting");
    }
    // Every version, read by delta-rs (time travel), holds exactly the published windows.
    for (v, windows) in &expected {
        let (_, counts) = rt.block_on(window_counts(&t, Some(*v))).unwrap();
        assert_eq!(&counts, windows, "version {v}");
    }
    // The whole stream landed (no --key: a row per line, late lines rewriting their windows).
    let (_, last) = expected.iter().next_back().unwrap();
    assert_eq!(last.values().sum::<i64>(), lines as i64);
}

/// `(version, rows per window)` of the table at `version` (default: latest).
async fn window_counts(
    table: &str,
    version: Option<i64>,
) -> Option<(i64, std::collections::BTreeMap<String, i64>)> {
    let mut delta =
        sluice_publish::open_table(table, &Default::default(), version.map(|v| v as u64))
            .await
            .ok()?;
    if version.is_none() {
        delta.load().await.ok()?;
    }
    let v = delta.version()?;
    let ctx = deltalake::datafusion::prelude::SessionContext::new();
    ctx.register_table("t", delta.table_provider().await.ok()?)
        .ok()?;
    let sql = "SELECT 'window_start=' || window_start AS w, count(*) AS n FROM t GROUP BY 1";
    let batches = ctx.sql(sql).await.ok()?.collect().await.ok()?;
    let mut out = std::collections::BTreeMap::new();
    for b in &batches {
        let w = deltalake::arrow::compute::cast(
            b.column(0),
            &deltalake::arrow::datatypes::DataType::Utf8,
        )
        .ok()?;
        let n = deltalake::arrow::compute::cast(
            b.column(1),
            &deltalake::arrow::datatypes::DataType::Int64,
        )
        .ok()?;
        use deltalake::arrow::array::AsArray;
        for i in 0..b.num_rows() {
            out.insert(
                w.as_string::<i32>().value(i).to_string(),
                n.as_primitive::<deltalake::arrow::datatypes::Int64Type>()
                    .value(i),
            );
        }
    }
    Some((v as i64, out))
}

#[test]
fn bad_records_are_rejected_with_position_and_reason_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.ndjson");
    let good = r#"{"event_id":"a","ts":"2026-10-03T14:00:00Z","n":1}"#;
    let lines = [
        good,
        r#"{"event_id":"b","ts":"2026-10-03T14:01:00Z","n":"#,
        r#"{"event_id":"c","ts":"2026-10-03T14:02:00Z","n":"three"}"#,
        r#"{"event_id":"d","n":4}"#,
        r#"{"event_id":"e","ts":"yesterday","n":5}"#,
        r#"{"event_id":"f","ts":"2026-10-03T15:30:00Z","n":6}"#,
    ];
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let schema = dir.path().join("schema.toml");
    std::fs::write(
        &schema,
        "[[fields]]\nname = \"event_id\"\ntype = \"string\"\n[[fields]]\nname = \"ts\"\ntype = \"string\"\n[[fields]]\nname = \"n\"\ntype = \"long\"\n",
    )
    .unwrap();
    let table = dir.path().join("t");
    let src = format!("ndjson:{}", input.display());
    let args = [
        "run",
        "--source",
        &src,
        "--table",
        table.to_str().unwrap(),
        "--schema",
        schema.to_str().unwrap(),
    ];
    let out = ok(&args);
    assert!(out.contains("4 rejected"), "{out}");
    let dlq = format!("d={}_dlq", table.display());
    let read_rejects = || -> Vec<(i64, String)> {
        ok(&[
            "query",
            "--table",
            &dlq,
            "--format",
            "csv",
            "SELECT source_partition, source_offset, reason, pipeline, raw FROM d ORDER BY source_offset",
        ])
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.splitn(5, ',').collect();
            assert_eq!(f[0], "in.ndjson", "{l}");
            assert_eq!(f[3], "sluice", "{l}");
            (f[1].parse().unwrap(), f[2].to_string())
        })
        .collect()
    };
    let mut offsets = vec![0i64];
    for l in &lines {
        offsets.push(offsets.last().unwrap() + l.len() as i64 + 1);
    }
    let expected = vec![
        (offsets[1], "malformed_json".to_string()),
        (offsets[2], "wrong_type".to_string()),
        (offsets[3], "missing_time".to_string()),
        (offsets[4], "bad_time".to_string()),
    ];
    assert_eq!(read_rejects(), expected);
    assert_eq!(scalar(&table, "SELECT count(*) FROM t"), "2");
    // A rerun neither duplicates rejects nor rows.
    ok(&args);
    assert_eq!(read_rejects(), expected);
    assert_eq!(scalar(&table, "SELECT count(*) FROM t"), "2");
}

#[test]
fn windows_and_query_print_tables_csv_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 2_000, 3, 3, 1);
    let src = format!("ndjson:{}", input.display());
    let table = dir.path().join("t");
    let t = table.display().to_string();
    ok(&["run", "--source", &src, "--table", &t, "--window", "1h"]);
    let csv = ok(&["windows", "--table", &t, "--format", "csv"]);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("window,files,rows,version,publications,published_at")
    );
    let rows: Vec<&str> = lines.collect();
    assert!(rows.len() >= 3, "{csv}");
    assert!(rows[0].starts_with("dt=2026-10-03/hour=00,"), "{csv}");
    let total: i64 = rows
        .iter()
        .map(|r| r.split(',').nth(2).unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(total.to_string(), scalar(&table, "SELECT count(*) FROM t"));
    let pretty = ok(&["windows", "--table", &t]);
    assert!(pretty.contains("| window"), "{pretty}");
    let json = ok(&[
        "query",
        "--table",
        &format!("e={t}"),
        "--format",
        "json",
        "SELECT hour, count(*) AS n FROM e GROUP BY hour ORDER BY hour",
    ]);
    let first: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!(first["hour"], "00");
    // Time travel: version 1 holds only the windows its commit published (the first
    // window, or the first group of windows sealed together).
    let at_1 = published_rows_by_version(&table)[&1].len();
    assert!(
        at_1 < rows.len(),
        "{at_1} windows at version 1 of {}",
        rows.len()
    );
    assert_eq!(
        scalar_at(&table, Some(1), "SELECT count(DISTINCT hour) AS h FROM t"),
        at_1.to_string()
    );
}

/// `sluice gc` removes staged files no version references and never a referenced one.
#[test]
fn gc_removes_orphans_and_keeps_every_referenced_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 20_000, 4, 9, 2);
    let src = format!("ndjson:{}", input.display());
    let table = dir.path().join("t");
    let t = table.display().to_string();
    // --key swaps republished windows, so older versions reference removed files.
    ok(&run_args(&src, &t, &["--key", "event_id"]));
    let before = sorted_rows(&table);
    let referenced: Vec<String> = commits(&table)
        .values()
        .flatten()
        .filter_map(|a| {
            a.get("add")
                .and_then(|add| add["path"].as_str())
                .map(str::to_string)
        })
        .collect();
    let removed = commits(&table)
        .values()
        .flatten()
        .filter(|a| a.get("remove").is_some())
        .count();
    assert!(removed > 0, "the test needs removed files");
    // An attempt that died after staging leaves a part no version names.
    let some = table.join(&referenced[0]);
    let orphan = some.with_file_name("part-20261003T00-dead-00001.snappy.parquet");
    std::fs::copy(&some, &orphan).unwrap();

    let young = ok(&["gc", "--table", &t, "--dry-run"]);
    assert!(young.contains("0 orphaned files"), "{young}");
    let dry = ok(&["gc", "--table", &t, "--dry-run", "--older-than", "0s"]);
    assert!(dry.contains("1 orphaned file ("), "{dry}");
    assert!(dry.contains("part-20261003T00-dead-00001"), "{dry}");
    assert!(orphan.exists());
    let wet = ok(&["gc", "--table", &t, "--older-than", "0s"]);
    assert!(
        wet.contains("1 orphaned file (") && wet.contains("removed"),
        "{wet}"
    );
    assert!(!orphan.exists());
    for path in &referenced {
        assert!(
            table.join(path).exists(),
            "gc removed referenced file {path}"
        );
    }
    assert_eq!(sorted_rows(&table), before);
    // Old versions still read: their removed files were kept.
    let v1 = scalar_at(&table, Some(1), "SELECT count(*) FROM t");
    assert!(v1.parse::<i64>().unwrap() > 0);
}
