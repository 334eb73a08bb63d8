//! The mistakes a new user makes in the first hour, each with the exit status and message it
//! gets: a table written another way than it was created (refused, nothing written), input
//! that is all rejected (exit 3), options a command does not take, mistyped paths (nothing
//! created), and the output conventions (JSON Lines, CSV headers, JSON summaries, logs).

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{input, ok, sluice, version, BIN};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn status(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// Every file under `dir`, relative, sorted: "nothing written" means this does not change.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_table_refuses_another_window_size_or_key_and_takes_its_own_when_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let src = format!("ndjson:{}", input(dir.path(), 3_000, 6, 7, 2).display());
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    ok(&[
        "run", "--source", &src, "--table", t, "--window", "90m", "--key", "event_id",
    ]);
    let before = files_under(&table);
    let v = version(&table);

    let out = sluice(&["run", "--source", &src, "--table", t, "--window", "30m"]);
    assert_eq!(status(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("window is 90m in the table, 30m in this run")
            && stderr(&out).contains("Nothing was written"),
        "{}",
        stderr(&out)
    );
    assert_eq!(files_under(&table), before, "nothing written");

    let out = sluice(&["run", "--source", &src, "--table", t, "--key", "user_id"]);
    assert_eq!(status(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("key is event_id in the table, user_id in this run"),
        "{}",
        stderr(&out)
    );
    assert_eq!(files_under(&table), before, "nothing written");

    // Left out, the window size and key are the table's: a rerun commits nothing.
    let out = ok(&["run", "--source", &src, "--table", t]);
    assert!(out.contains("0 records"), "{out}");
    assert_eq!(version(&table), v);
    let property =
        std::fs::read_to_string(table.join("_delta_log/00000000000000000000.json")).unwrap();
    assert!(property.contains("sluice.contract.sluice"), "{property}");
}

#[test]
fn a_derived_table_refuses_another_raw_table_and_a_config_override_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let src = format!("ndjson:{}", input(dir.path(), 2_000, 3, 11, 1).display());
    let d = dir.path();
    let sql = "hourly=SELECT country, count(*) AS n FROM window GROUP BY country";
    let hourly = format!("hourly={}", d.join("hourly").display());
    let raw_a = d.join("a");
    ok(&[
        "run",
        "--source",
        &src,
        "--table",
        raw_a.to_str().unwrap(),
        "--derive",
        &hourly,
        "--derive-sql",
        sql,
    ]);
    let before = files_under(&d.join("hourly"));
    let raw_b = d.join("b");
    let out = sluice(&[
        "run",
        "--source",
        &src,
        "--table",
        raw_b.to_str().unwrap(),
        "--derive",
        &hourly,
        "--derive-sql",
        sql,
    ]);
    assert_eq!(status(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("derived table hourly") && stderr(&out).contains("raw is"),
        "{}",
        stderr(&out)
    );
    assert!(!raw_b.exists(), "the new raw table was not created");
    assert_eq!(files_under(&d.join("hourly")), before, "nothing written");

    // A config whose derived tables belong to its table, run with another --table.
    let cfg = d.join("cfg");
    std::fs::create_dir(&cfg).unwrap();
    std::fs::write(
        cfg.join("p.toml"),
        format!(
            "source = \"{src}\"\ntable = \"../a\"\n[[derive]]\nname = \"hourly\"\ntable = \"../hourly\"\nsql = \"SELECT country, count(*) AS n FROM window GROUP BY country\"\n"
        ),
    )
    .unwrap();
    let config = cfg.join("p.toml");
    let out = sluice(&[
        "run",
        "--config",
        config.to_str().unwrap(),
        "--table",
        raw_b.to_str().unwrap(),
    ]);
    assert_eq!(status(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the config file's derived tables hourly"),
        "{}",
        stderr(&out)
    );
    // Paths in the config file are relative to it, from any working directory.
    let out = Command::new(BIN)
        .args(["run", "--config", config.to_str().unwrap()])
        .current_dir("/")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("0 records"),
        "a rerun of table a: {}",
        stdout(&out)
    );
    // A syntax error names its line.
    std::fs::write(cfg.join("bad.toml"), "source = \"ndjson:x\"\ntable = \n").unwrap();
    let out = sluice(&["run", "--config", cfg.join("bad.toml").to_str().unwrap()]);
    assert_eq!(status(&out), 2);
    assert!(stderr(&out).contains("line 2"), "{}", stderr(&out));
}

#[test]
fn a_run_whose_every_record_is_rejected_exits_3_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ms.ndjson");
    let lines: String = (0..50)
        .map(|i| {
            format!(
                "{{\"id\":{i},\"ts\":{}}}\n",
                1_790_000_000_000i64 + i * 1000
            )
        })
        .collect();
    std::fs::write(&file, lines).unwrap();
    let table = dir.path().join("t");
    let out = sluice(&[
        "run",
        "--source",
        &format!("ndjson:{}", file.display()),
        "--table",
        table.to_str().unwrap(),
        "--time-format",
        "epoch_s",
    ]);
    assert_eq!(status(&out), 3, "{}\n{}", stdout(&out), stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("50 of 50 records rejected")
            && err.contains("bad_time (50)")
            && err.contains("first: bad_time at ms.ndjson:0")
            && err.contains("every record of this run (50) was rejected"),
        "{err}"
    );

    // A gzipped file for a new table: no schema can be inferred from it (exit 2, no table).
    let gz = dir.path().join("events.ndjson.gz");
    std::fs::write(
        &gz,
        [
            0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xff,
        ],
    )
    .unwrap();
    let gz_table = dir.path().join("gz");
    let out = sluice(&[
        "run",
        "--source",
        &format!("ndjson:{}", gz.display()),
        "--table",
        gz_table.to_str().unwrap(),
    ]);
    assert_eq!(status(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no schema could be inferred"),
        "{}",
        stderr(&out)
    );
    assert!(!gz_table.exists());

    // Some rejected, above the ratio: a warning, exit 0.
    let mixed = dir.path().join("mixed.ndjson");
    let mut text = String::new();
    for i in 0..20 {
        if i % 4 == 0 {
            text += "not json\n";
        } else {
            text += &format!("{{\"id\":{i},\"ts\":\"2026-10-03T10:{:02}:00Z\"}}\n", i);
        }
    }
    std::fs::write(&mixed, text).unwrap();
    let out = sluice(&[
        "run",
        "--source",
        &format!("ndjson:{}", mixed.display()),
        "--table",
        dir.path().join("m").to_str().unwrap(),
    ]);
    assert_eq!(status(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("5 of 20 records rejected (25.0%): not_one_object (5)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn duplicates_kept_without_a_key_are_counted_and_key_is_suggested() {
    let dir = tempfile::tempdir().unwrap();
    let src = format!("ndjson:{}", input(dir.path(), 5_000, 3, 5, 1).display());
    let table = dir.path().join("t");
    let out = sluice(&[
        "run",
        "--source",
        &src,
        "--table",
        table.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let kept = summary["duplicates_kept"].as_u64().unwrap();
    let records = summary["records"].as_u64().unwrap();
    let distinct = crate::common::scalar(&table, "SELECT count(DISTINCT event_id) FROM t");
    assert!(kept > 0, "{summary}");
    assert_eq!(
        records - kept,
        distinct.parse::<u64>().unwrap(),
        "the copies counted are the rows beyond one per event"
    );
    assert!(
        stderr(&out).contains("Give --key FIELD"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn validation_failures_and_mistyped_paths_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let src = format!("ndjson:{}", input(dir.path(), 500, 1, 3, 1).display());
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    for (flag, value, says) in [
        ("--time-field", "when", "--time-field"),
        ("--key", "nope", "--key"),
    ] {
        let out = sluice(&["run", "--source", &src, "--table", t, flag, value]);
        assert_eq!(status(&out), 2, "{}", stderr(&out));
        assert!(
            stderr(&out).contains(says) && stderr(&out).contains("nothing was written"),
            "{}",
            stderr(&out)
        );
        assert!(!table.exists(), "{flag}: the table was created");
        assert!(!dir.path().join("t_dlq").exists());
    }
    let missing = dir.path().join("typo");
    let m = missing.to_str().unwrap();
    for args in [
        vec!["windows", "--table", m],
        vec!["gc", "--table", m, "--dry-run"],
        vec!["query", "--table", &format!("x={m}"), "SELECT 1"],
    ] {
        let out = sluice(&args);
        assert_eq!(status(&out), 1, "{args:?}");
        assert!(
            stderr(&out).contains(&format!("no Delta table at {m}")),
            "{}",
            stderr(&out)
        );
        assert!(!missing.exists(), "{args:?} created {m}");
    }
    // A directory that is not a table.
    let out = sluice(&["windows", "--table", dir.path().to_str().unwrap()]);
    assert_eq!(status(&out), 1);
    assert!(
        stderr(&out).contains("no Delta table at"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("kernel"), "{}", stderr(&out));
    // A version past the latest.
    ok(&["run", "--source", &src, "--table", t]);
    let out = sluice(&[
        "query",
        "--table",
        &format!("x={t}"),
        "--version",
        "99",
        "SELECT 1",
    ]);
    assert_eq!(status(&out), 1);
    assert!(
        stderr(&out).contains("has no version 99; its latest is"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn output_formats_logs_and_commands_follow_the_conventions() {
    let dir = tempfile::tempdir().unwrap();
    let src = format!("ndjson:{}", input(dir.path(), 800, 2, 9, 1).display());
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    // -v: sluice's own events, no dependency internals, no colour codes off a terminal.
    let out = sluice(&["-v", "run", "--source", &src, "--table", t]);
    assert!(out.status.success());
    let log = stderr(&out);
    assert!(
        !log.contains("kernel") && !log.contains("deltalake"),
        "{log}"
    );
    assert!(!log.contains('\x1b'), "ANSI codes in a pipe: {log:?}");
    assert!(log.contains("sluice"), "{log}");

    // --log-format json: every stderr line is a JSON object with a level and a target.
    let fresh = dir.path().join("t2");
    let out = sluice(&[
        "-v",
        "--log-format",
        "json",
        "run",
        "--source",
        &src,
        "--table",
        fresh.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<serde_json::Value> = stderr(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(!lines.is_empty());
    assert!(lines.iter().all(|l| l["level"].is_string()
        && l["target"]
            .as_str()
            .is_some_and(|t| t.starts_with("sluice"))));

    let named = format!("t={t}");
    let none = ok(&[
        "query",
        "--table",
        &named,
        "--format",
        "json",
        "SELECT event_id FROM t WHERE false",
    ]);
    assert_eq!(none, "", "no rows, no lines");
    let csv = ok(&[
        "query",
        "--table",
        &named,
        "--format",
        "csv",
        "SELECT event_id, amount FROM t WHERE false",
    ]);
    assert_eq!(csv.trim(), "event_id,amount", "the header alone");
    let nulls = ok(&[
        "query",
        "--table",
        &named,
        "--format",
        "json",
        "SELECT event_id, CAST(NULL AS BIGINT) AS gone FROM t LIMIT 1",
    ]);
    let row: serde_json::Value = serde_json::from_str(nulls.trim()).unwrap();
    assert!(row.as_object().unwrap().contains_key("gone"), "{nulls}");

    // Each subcommand shows and takes its own options.
    let help = ok(&["backfill", "--help"]);
    let lists = |flag: &str| help.lines().any(|l| l.trim_start().starts_with(flag));
    assert!(
        lists("--from") && !lists("--follow") && !lists("--until-idle") && lists("--brokers"),
        "{help}"
    );
    let out = sluice(&[
        "backfill",
        "--source",
        &src,
        "--table",
        t,
        "--from",
        "2026-10-03",
        "--to",
        "2026-10-04",
        "--follow",
    ]);
    assert_eq!(status(&out), 2);
    assert!(
        stderr(&out).contains("--follow is not an option of `sluice backfill`"),
        "{}",
        stderr(&out)
    );
    assert!(ok(&["run", "--help"]).contains("sluice run --source <SOURCE> --table <TABLE>"));
    assert!(ok(&["completions", "bash"]).contains("sluice"));
    assert!(ok(&["man"]).contains(".TH sluice"));
}

#[test]
fn sigint_stops_a_run_with_130_and_says_what_the_table_holds() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.ndjson");
    std::fs::write(&input, "{\"id\":1,\"ts\":\"2026-10-03T10:00:00Z\"}\n").unwrap();
    let table = dir.path().join("t");
    let child = Command::new(BIN)
        .args([
            "run",
            "--source",
            &format!("ndjson:{}", input.display()),
            "--table",
            table.to_str().unwrap(),
            "--follow",
            "--poll-interval",
            "50ms",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The table exists once the run has opened it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !table.join("_delta_log").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let status_kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status_kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(status(&out), 130, "{}\n{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("interrupted")
            && stderr(&out).contains("windows still open are not published"),
        "{}",
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("sluice run: 1 record;"),
        "the summary first: {}",
        stdout(&out)
    );
    // The summary's time is the run's (an interrupted run said "0.00 s (5142000000000
    // records/s)").
    let secs: f64 = stdout(&out)
        .split("MB in ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no time in {}", stdout(&out)));
    assert!(secs >= 0.5, "the run lasted over 0.5 s: {}", stdout(&out));
}

/// A file whose time field is not `ts`, run without `--time-field`: the refusal says that
/// `ts` is the default and how to name another, and lists the records' fields once, typed.
/// A misspelt key is named with the same fields.
#[test]
fn a_missing_time_field_is_named_as_the_default_with_the_fields_once() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("f.csv");
    std::fs::write(&csv, "id,when,amount\n1,2026-10-03T14:00:00Z,2.5\n").unwrap();
    let src = format!("csv:{}", csv.display());
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let out = sluice(&["run", "--source", &src, "--table", t]);
    assert_eq!(status(&out), 2, "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim(),
        "sluice: --time-field: the records have no field \"ts\" (the default time field: name \
         the records' event-time field with --time-field); their fields: id: long, when: \
         string, amount: double; nothing was written"
    );
    let out = sluice(&[
        "run",
        "--source",
        &src,
        "--table",
        t,
        "--time-field",
        "when",
        "--key",
        "ID",
    ]);
    assert_eq!(status(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with(
            "sluice: --key: the records have no field \"ID\"; their fields: id: long, when: string"
        ),
        "{}",
        stderr(&out)
    );
    assert!(!table.exists());
    ok(&[
        "run",
        "--source",
        &src,
        "--table",
        t,
        "--time-field",
        "when",
    ]);
}
