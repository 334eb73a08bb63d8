//! Derived window tables through the real binary: kept exact by a stream that is SIGKILLed
//! over and over and takes late data, equal to the same SQL over the raw table, equal to the
//! batch job (backfill + derive), and quiet on replays.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;

const REVENUE_SQL: &str = "SELECT country, count(*) AS orders, \
     sum(CAST(round(amount * 100) AS BIGINT)) AS revenue_cents \
     FROM window WHERE kind = 'purchase' GROUP BY country";
const KINDS_SQL: &str =
    "SELECT kind, count(*) AS events, count(DISTINCT user_id) AS users FROM window GROUP BY kind";

/// A pipeline config: raw table, key dedupe, small chunks (many late rewrites), and
/// optionally the two derived tables (revenue by swap, kinds by MERGE on `kind`).
fn config(dir: &Path, name: &str, source: &Path, derived: bool) -> std::path::PathBuf {
    let mut text = format!(
        "source = \"ndjson:{}\"\ntable = \"{}\"\nkey = \"event_id\"\nchunk_bytes = \"64KiB\"\n",
        source.display(),
        dir.join(format!("{name}_raw")).display()
    );
    if derived {
        text += &format!(
            "\n[[derive]]\nname = \"revenue\"\ntable = \"{}\"\nsql = \"{REVENUE_SQL}\"\n\
             \n[[derive]]\nname = \"kinds\"\ntable = \"{}\"\nsql = \"{KINDS_SQL}\"\nkey = [\"kind\"]\n",
            dir.join(format!("{name}_revenue")).display(),
            dir.join(format!("{name}_kinds")).display(),
        );
    }
    let path = dir.join(format!(
        "{name}{}.toml",
        if derived { "" } else { "-raw-only" }
    ));
    std::fs::write(&path, text).unwrap();
    path
}

fn sorted(mut rows: Vec<String>) -> Vec<String> {
    rows.sort();
    rows
}

/// Every row of a derived table, columns in the given order, sorted.
fn derived_rows(table: &Path, columns: &str) -> Vec<String> {
    sorted(query_csv(
        &[("d", table)],
        &format!("SELECT {columns} FROM d"),
    ))
}

#[test]
fn derived_tables_stay_exact_through_sigkills_and_late_data_and_equal_the_batch_job() {
    let seed = seed("derived tables");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    // The input arrives in 20 files; each run finds one more, so every kill lands on a run
    // with work to do (reading, a raw commit, a derived commit, or in between).
    let input = dir.path().join("input");
    std::fs::create_dir_all(&input).unwrap();
    let slices = stream_slices(20_000, 6, 29, 20, 0);
    let stream = config(dir.path(), "stream", &input, true);
    let stream_cfg = stream.display().to_string();
    let run = ["run", "--config", stream_cfg.as_str()];

    // The stream, SIGKILLed 20 times at random instants, then run to the end.
    let mut killed_running = 0;
    // Kills land within `delay_ms_max` of the start; when a run finished before its kill,
    // the window shrinks, so most kills interrupt a run however fast the machine is.
    let mut delay_ms_max = 400;
    for (name, bytes) in &slices {
        std::fs::write(input.join(name), bytes).unwrap();
        let mut child = Command::new(BIN)
            .args(run)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(20 + rng.below(delay_ms_max)));
        if child.try_wait().unwrap().is_none() {
            killed_running += 1;
        } else {
            delay_ms_max = (delay_ms_max / 2).max(20);
        }
        let _ = child.kill();
        child.wait().unwrap();
    }
    eprintln!("{killed_running} of 20 kills hit a running process");
    assert!(
        killed_running >= 10,
        "seed {seed}: most kills interrupt a run ({killed_running})"
    );
    let out = ok(&run);
    eprintln!("final run: {out}");
    let raw = dir.path().join("stream_raw");
    let revenue = dir.path().join("stream_revenue");
    let kinds = dir.path().join("stream_kinds");
    let rows = scalar(&raw, "SELECT count(*) FROM t");
    assert_eq!(
        rows, "20000",
        "seed {seed}: one row per event in the raw table"
    );

    // 1. Every derived window equals the same SQL over the raw table, grouped by window.
    let revenue_columns = "dt, hour, country, orders, revenue_cents";
    let by_window = sorted(query_csv(
        &[("r", &raw)],
        "SELECT dt, hour, country, count(*) AS orders, sum(CAST(round(amount * 100) AS BIGINT)) \
         FROM r WHERE kind = 'purchase' GROUP BY dt, hour, country",
    ));
    let streamed_revenue = derived_rows(&revenue, revenue_columns);
    assert_eq!(streamed_revenue.len(), 6 * 8, "6 hours x 8 countries");
    assert_eq!(
        streamed_revenue, by_window,
        "seed {seed}: revenue vs SQL over the raw table"
    );
    let kinds_columns = "dt, hour, kind, events, users";
    let kinds_by_window = sorted(query_csv(
        &[("r", &raw)],
        "SELECT dt, hour, kind, count(*), count(DISTINCT user_id) FROM r GROUP BY dt, hour, kind",
    ));
    let streamed_kinds = derived_rows(&kinds, kinds_columns);
    assert_eq!(
        streamed_kinds, kinds_by_window,
        "seed {seed}: kinds vs SQL over the raw table"
    );
    // Late data did rewrite windows, and the derived windows followed.
    let windows = ok(&["windows", "--table", &raw.display().to_string()]);
    assert!(
        windows.lines().any(|l| l
            .split('|')
            .nth(5)
            .is_some_and(|p| p.trim().parse::<u32>().is_ok_and(|n| n > 1))),
        "some raw window was republished by late data:\n{windows}"
    );

    // 2. A replay after the last commit publishes nothing, in any table.
    let versions = |name: &str| {
        ["raw", "revenue", "kinds"].map(|t| version(&dir.path().join(format!("{name}_{t}"))))
    };
    let before = versions("stream");
    let replay = ok(&run);
    assert!(replay.contains(" 0 commits"), "{replay}");
    assert!(
        !replay.contains("derived windows recomputed"),
        "a replay recomputes no derived window: {replay}"
    );
    assert_eq!(versions("stream"), before, "a replay commits nothing");

    // 3. The batch job: backfill the raw table from the complete input, then derive.
    let batch_raw = config(dir.path(), "batch", &input, false);
    let batch = config(dir.path(), "batch", &input, true);
    let range = ["--from", "2000-01-01", "--to", "2100-01-01"];
    let raw_only = batch_raw.display().to_string();
    ok(&[&["backfill", "--config", raw_only.as_str()][..], &range[..]].concat());
    let batch_cfg = batch.display().to_string();
    let derive = [&["derive", "--config", batch_cfg.as_str()][..], &range[..]].concat();
    let first = ok(&derive);
    assert!(
        first.contains("12 derived windows recomputed") && first.contains(", 12 published"),
        "{first}"
    );
    assert_eq!(
        derived_rows(&dir.path().join("batch_revenue"), revenue_columns),
        streamed_revenue,
        "seed {seed}: the stream's revenue table equals the batch job's"
    );
    assert_eq!(
        derived_rows(&dir.path().join("batch_kinds"), kinds_columns),
        streamed_kinds,
        "seed {seed}: the stream's kinds table equals the batch job's"
    );
    eprintln!(
        "agreement: revenue {} rows, kinds {} rows: stream == SQL over the raw table grouped by window == backfill + derive",
        streamed_revenue.len(),
        streamed_kinds.len()
    );
    // Twice: nothing changes.
    let before = versions("batch");
    let second = ok(&derive);
    assert!(
        second.contains(", 0 published in 0 commits (12 unchanged)"),
        "{second}"
    );
    assert_eq!(versions("batch"), before);
    eprintln!("derive twice: {second}replay: {replay}");
}

#[test]
fn bad_derived_queries_stop_the_run_before_anything_is_ingested() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 200, 1, 3, 1);
    let src = format!("ndjson:{}", input.display());
    let table = dir.path().join("raw");
    let t = table.display().to_string();
    let derived = format!("d={}", dir.path().join("d").display());
    let cases = [
        ("SELEC country FROM window", "ParserError"),
        (
            "SELECT country, sum(price) AS p FROM window GROUP BY country",
            "No field named price",
        ),
        (
            "SELECT country AS hour FROM window",
            "output column \"hour\" is also an address column",
        ),
        (
            "SELECT country, count(*) FROM window GROUP BY country",
            "cannot be a Delta column name",
        ),
    ];
    let run = |sql: &str, extra: &[&str]| {
        let sql_flag = format!("d={sql}");
        let mut args = vec![
            "run",
            "--source",
            &src,
            "--table",
            &t,
            "--derive",
            &derived,
            "--derive-sql",
            &sql_flag,
        ];
        args.extend_from_slice(extra);
        sluice(&args)
    };
    for (sql, message) in cases {
        let out = run(sql, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{sql}: {stderr}");
        assert!(stderr.contains(message), "{sql}: {stderr}");
        assert!(stderr.contains("derived table d"), "{stderr}");
        if message != "cannot be a Delta column name" && !message.contains("address column") {
            assert!(
                stderr.contains(&format!("query: {sql}")),
                "the query text is shown: {stderr}"
            );
        }
        assert_eq!(
            scalar(&table, "SELECT count(*) FROM t"),
            "0",
            "nothing ingested"
        );
        assert!(
            !dir.path().join("d").join("_delta_log").exists(),
            "no derived table created"
        );
    }
    // A key that is not an output column.
    let out = run(
        "SELECT country, count(*) AS n FROM window GROUP BY country",
        &["--derive-key", "d=kind"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("key column \"kind\" is not an output column"));
}

/// `sluice derive --follow` beside the ingesters: it keeps a derived table up to a raw table
/// that grows by two more runs (with late rows), and at the end equals a batch `sluice derive`
/// of the final raw table; stopped by SIGTERM, it exits 0, and a batch derive over the table
/// it kept changes nothing.
#[test]
fn derive_follow_keeps_a_derived_table_up_to_a_growing_raw_table() {
    let seed = seed("derive --follow");
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 6_000, 6, seed, 3);
    let mut files: Vec<_> = std::fs::read_dir(&input)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let raw = dir.path().join("raw");
    let raw_text = raw.display().to_string();
    let revenue = dir.path().join("revenue");
    let ingest = |file: &Path| {
        let source = format!("ndjson:{}", file.display());
        ok(&run_args(
            &source,
            &raw_text,
            &["--window", "1h", "--key", "event_id"],
        ));
    };
    ingest(&files[0]);
    let derive_args = |table: &Path| {
        vec![
            "derive".to_string(),
            "--table".into(),
            raw_text.clone(),
            "--derive".into(),
            format!("revenue={}", table.display()),
            "--derive-sql".into(),
            format!("revenue={REVENUE_SQL}"),
        ]
    };
    let follow = Command::new(BIN)
        .args(derive_args(&revenue))
        .args(["--follow", "--poll-interval", "100ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Each time, until the derived table settles the raw table's last version: the follower
    // sees the raw table grow twice.
    let settled = |table: &Path| {
        commits(table)
            .values()
            .flatten()
            .filter_map(|a| {
                let txn = a.get("txn")?;
                txn["appId"]
                    .as_str()?
                    .ends_with(sluice_publish::RAW_VERSION_TXN)
                    .then(|| txn["version"].as_i64().unwrap())
            })
            .max()
    };
    let wait_settled = || {
        let raw_version = version(&raw);
        let waited = std::time::Instant::now();
        while settled(&revenue) != Some(raw_version) {
            assert!(
                waited.elapsed() < Duration::from_secs(60),
                "seed {seed}: the derived table settled {:?}, the raw table is at {raw_version}",
                settled(&revenue)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_settled();
    for file in &files[1..] {
        ingest(file);
        wait_settled();
    }
    unsafe { libc::kill(follow.id() as i32, libc::SIGTERM) };
    let out = follow.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("sluice derive --follow:"), "{stdout}");

    // The batch job over the final raw table.
    let batch = dir.path().join("batch_revenue");
    let range = ["--from", "2000-01-01", "--to", "2100-01-01"];
    let mut args = derive_args(&batch);
    args.extend(range.map(String::from));
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let columns = "dt, hour, country, orders, revenue_cents";
    let followed = derived_rows(&revenue, columns);
    assert!(!followed.is_empty());
    assert_eq!(
        followed,
        derived_rows(&batch, columns),
        "seed {seed}: derive --follow equals the batch job"
    );
    // The table it kept is exact: a batch derive over it publishes nothing.
    let mut again = derive_args(&revenue);
    again.extend(range.map(String::from));
    let before = version(&revenue);
    let out = ok(&again.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.contains(" 0 published"), "{out}");
    assert_eq!(version(&revenue), before);
    eprintln!(
        "derive --follow: {} rows kept beside 3 runs, equal to the batch job; {stdout}",
        followed.len()
    );
}

/// A year of daily windows (NOAA temperatures in Seattle, data/seattle-temps.ndjson):
/// `sluice derive` publishes its 366 derived windows by group commits (2, not 366), each
/// equal to the query over its raw window; a second `derive` commits nothing.
#[test]
fn derive_over_a_year_of_daily_windows_publishes_by_group_commits() {
    let dir = tempfile::tempdir().unwrap();
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/data/seattle-temps.ndjson");
    let raw = dir.path().join("temps");
    let daily = dir.path().join("daily");
    ok(&[
        "run",
        "--source",
        &format!("ndjson:{data}"),
        "--table",
        raw.to_str().unwrap(),
        "--window",
        "1d",
        "--time-field",
        "date",
        "--time-format",
        "%Y/%m/%d %H:%M",
        "--time-zone",
        "-08:00",
    ]);
    let derive = || {
        ok(&[
            "derive",
            "--table",
            raw.to_str().unwrap(),
            "--derive",
            &format!("daily={}", daily.display()),
            "--derive-sql",
            "daily=SELECT count(*) AS hours, max(temp) AS high FROM window",
            "--from",
            "2009-01-01T00:00:00Z",
            "--to",
            "2012-01-01T00:00:00Z",
        ])
    };
    let out = derive();
    assert!(
        out.contains("366 published in 2 commits (0 unchanged)"),
        "{out}"
    );
    let data_commits = commits(&daily)
        .values()
        .filter(|actions| actions.iter().any(|a| a.get("add").is_some()))
        .count();
    assert_eq!(data_commits, 2, "366 windows, 256 per commit: {out}");
    assert_eq!(scalar(&daily, "SELECT count(*) FROM t"), "366");
    let by_window = sorted(query_csv(
        &[("r", &raw)],
        "SELECT dt, count(*), max(temp) FROM r GROUP BY dt",
    ));
    assert_eq!(derived_rows(&daily, "dt, hours, high"), by_window);
    let before = version(&daily);
    derive();
    assert_eq!(
        version(&daily),
        before,
        "nothing changed, nothing committed"
    );
}
