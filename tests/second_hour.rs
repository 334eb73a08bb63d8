//! A new user's second hour, with their own data (issue 42): a pipe given as the source,
//! `rewrite` run twice, a record field named like an address column, one-of-a-thing
//! summaries, `query` over a bare path, and daily rows across daylight saving time. Each through the real binary, with its exit
//! status and output.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use chrono::Datelike;

use crate::common::{input, interop, ok, scalar, sluice, version, BIN};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `sluice args` with `bytes` written to its standard input through a pipe.
fn sluice_fed(args: &[&str], bytes: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The run may refuse before reading: a closed pipe is not the test's failure.
    let _ = stdin.write_all(bytes);
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// The first file of a generated input, and its line count.
fn one_file(dir: &Path, events: u64) -> (std::path::PathBuf, usize) {
    let input = input(dir, events, 1, 42, 1);
    let file = std::fs::read_dir(&input)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let lines = std::fs::read_to_string(&file).unwrap().lines().count();
    (file, lines)
}

/// A pipe is not a file: read as one it looked empty ("0 records", exit 0, and an empty
/// table whose contract was then fixed). It is refused before anything is created, with
/// what to do instead; standard input redirected from a file is that file.
#[test]
fn a_pipe_is_refused_with_what_to_do_and_a_redirected_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (file, lines) = one_file(dir.path(), 300);
    let bytes = std::fs::read(&file).unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    for (source, says) in [
        ("ndjson:-", "- is standard input, not a file"),
        ("ndjson:/dev/stdin", "/dev/stdin is a pipe, not a file"),
    ] {
        let out = sluice_fed(&["run", "--source", source, "--table", t], &bytes);
        assert_eq!(out.status.code(), Some(2), "{source}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{source}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("write the stream to a file first"),
            "{}",
            stderr(&out)
        );
        assert!(!table.exists(), "{source}: a table was created");
        assert!(!dir.path().join("t_dlq").exists());
    }
    // `< events.ndjson`: /dev/stdin is the file itself, which a restart can read again.
    let out = Command::new(BIN)
        .args(["run", "--source", "ndjson:/dev/stdin", "--table", t])
        .args(["--key", "event_id"])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let distinct = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event_id"].clone())
        .collect::<std::collections::HashSet<_>>()
        .len();
    assert!(distinct <= lines);
    assert_eq!(
        scalar(&table, "SELECT count(*) FROM t"),
        distinct.to_string()
    );
}

/// `rewrite` of a window whose publication covers the whole source changes nothing, as
/// `backfill` does; `--force` republishes it.
#[test]
fn rewrite_twice_changes_nothing_the_second_time() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 2_000, 2, 7, 2);
    let src = format!("ndjson:{}", input.display());
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let rows = |table: &Path| scalar(table, "SELECT count(*) FROM t");
    ok(&["run", "--source", &src, "--table", t, "--key", "event_id"]);
    let (v0, rows0) = (version(&table), rows(&table));
    let rewrite = |extra: &[&str]| {
        let mut args = vec!["rewrite", "--source", &src, "--table", t];
        args.extend(["--key", "event_id", "--at", "2026-10-03T00:30"]);
        args.extend(extra);
        ok(&args)
    };
    // The stream's last publication of the window may have covered only what it had read
    // then (republished now) or the whole source (left as it is); after one rewrite, it
    // covers the whole source.
    let first = rewrite(&[]);
    assert!(
        first.contains("sluice rewrite: windows in [2026-10-03T00:00:00"),
        "{first}"
    );
    let v1 = version(&table);
    assert!(v1 == v0 || v1 == v0 + 1, "{first}");
    let second = rewrite(&[]);
    assert!(
        second.contains("0 republished, 1 already complete and left unchanged"),
        "{second}"
    );
    assert!(second.contains("table version unchanged"), "{second}");
    assert_eq!(version(&table), v1);
    let forced = rewrite(&["--force"]);
    assert!(forced.contains("1 republished"), "{forced}");
    assert_eq!(version(&table), v1 + 1);
    assert_eq!(rows(&table), rows0);
}

/// A record field named like an address column: inferred, it is stored under a new name;
/// declared in a schema file, the error says what to do, and `column = "…"` does it.
#[test]
fn a_field_named_like_an_address_column_has_a_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flights.ndjson");
    let mut text = String::new();
    for i in 0..24 {
        text += &format!("{{\"flight\":{i},\"ts\":\"2013-01-01T{i:02}:15:00Z\",\"hour\":{i}}}\n");
    }
    std::fs::write(&file, &text).unwrap();
    let src = format!("ndjson:{}", file.display());
    let schema = dir.path().join("schema.toml");
    let fields = |hour: &str| {
        format!(
            "[[fields]]\nname = \"flight\"\ntype = \"long\"\n\n[[fields]]\nname = \"ts\"\ntype = \"string\"\n\n[[fields]]\nname = \"hour\"\ntype = \"long\"\n{hour}"
        )
    };
    std::fs::write(&schema, fields("")).unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let s = schema.to_str().unwrap();
    let out = sluice(&["run", "--source", &src, "--table", t, "--schema", s]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    for says in [
        "record field \"hour\" collides with the address column sluice adds",
        "--address window_start",
        "`column = \"NAME\"`",
    ] {
        assert!(stderr(&out).contains(says), "{says}: {}", stderr(&out));
    }
    assert!(!table.exists());
    std::fs::write(&schema, fields("column = \"flight_hour\"\n")).unwrap();
    ok(&["run", "--source", &src, "--table", t, "--schema", s]);
    assert_eq!(
        scalar(
            &table,
            "SELECT count(*) FROM t WHERE flight_hour = hour AND flight = flight_hour"
        ),
        "24"
    );
    // Inferred, the field is renamed on its own and keeps its values.
    let inferred = dir.path().join("t2");
    ok(&[
        "run",
        "--source",
        &src,
        "--table",
        inferred.to_str().unwrap(),
    ]);
    assert_eq!(
        scalar(&inferred, "SELECT count(*) FROM t WHERE hour_2 = hour"),
        "24"
    );
    // A column name readers refuse is refused in a schema file.
    std::fs::write(&schema, fields("column = \"flight hour\"\n")).unwrap();
    let out = sluice(&["run", "--source", &src, "--table", t, "--schema", s]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("column \"flight hour\": not a column name Delta readers take"),
        "{}",
        stderr(&out)
    );
}

/// One of a thing is not "1 commits"; `query` takes a bare path (named after its last
/// segment) and an unknown table name lists the tables there are.
#[test]
fn summaries_count_in_words_and_query_takes_a_bare_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("one.ndjson");
    std::fs::write(&file, "{\"id\":1,\"ts\":\"2026-10-03T10:00:00Z\"}\n").unwrap();
    let table = dir.path().join("events");
    let t = table.to_str().unwrap();
    let src = format!("ndjson:{}", file.display());
    let out = ok(&["run", "--source", &src, "--table", t]);
    assert!(
        out.starts_with("sluice run: 1 record; 1 window publication in 1 commit (table version 1)"),
        "{out}"
    );
    let out = ok(&[
        "query",
        "--table",
        t,
        "--format",
        "csv",
        "SELECT id FROM events",
    ]);
    assert_eq!(out, "id\n1\n");
    let out = sluice(&["query", "--table", t, "SELECT * FROM evnets"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!("(tables: events ({t}))")),
        "{}",
        stderr(&out)
    );
}

/// Daily rows in Los Angeles are 25 hours apart across the end of daylight saving time: with
/// daily windows that is the next window, not a skewed clock (the guard is at least two
/// windows), so no event is "far ahead" and every day is published in its place.
#[test]
fn daily_rows_across_daylight_saving_time_are_not_far_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("daily.ndjson");
    let mut text = String::new();
    let mut day = chrono::NaiveDate::from_ymd_opt(2013, 1, 1).unwrap();
    while day.year() == 2013 {
        text += &format!("{{\"date\":\"{day} 00:00\",\"temp\":{}}}\n", day.ordinal());
        day = day.succ_opt().unwrap();
    }
    std::fs::write(&file, &text).unwrap();
    let table = dir.path().join("t");
    let src = format!("ndjson:{}", file.display());
    let out = ok(&[
        "run",
        "--source",
        &src,
        "--table",
        table.to_str().unwrap(),
        "--window",
        "1d",
        "--time-field",
        "date",
        "--time-format",
        "%Y-%m-%d %H:%M",
        "--time-zone",
        "America/Los_Angeles",
        "--format",
        "json",
    ]);
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["events_far_ahead"], 0, "{summary}");
    assert_eq!(summary["records"], 365, "{summary}");
    assert_eq!(scalar(&table, "SELECT count(*) FROM t"), "365");
}

/// Inferred columns come in the order their fields first appear in the source (they were
/// sorted by name), and a field first seen later comes after them.
#[test]
fn inferred_columns_keep_the_order_of_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flights.ndjson");
    std::fs::write(
        &file,
        concat!(
            "{\"year\":2013,\"month\":1,\"day\":1,\"carrier\":\"UA\",\"ts\":\"2013-01-01T05:15:00Z\"}\n",
            "{\"year\":2013,\"month\":1,\"day\":1,\"carrier\":\"AA\",\"ts\":\"2013-01-01T05:29:00Z\",\"air_time\":227}\n",
        ),
    )
    .unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    ok(&[
        "run",
        "--source",
        &format!("ndjson:{}", file.display()),
        "--table",
        t,
    ]);
    let header = ok(&[
        "query",
        "--table",
        t,
        "--format",
        "csv",
        "SELECT * FROM t LIMIT 1",
    ]);
    let columns: Vec<&str> = header.lines().next().unwrap().split(',').collect();
    let fields: Vec<&str> = columns
        .iter()
        .copied()
        .filter(|c| !c.starts_with("_sluice") && *c != "dt" && *c != "hour")
        .collect();
    assert_eq!(
        fields,
        ["year", "month", "day", "carrier", "ts", "air_time"],
        "{header}"
    );
}

/// `--time-column`: the instant sluice computed from a local time text is stored as a
/// `timestamp` column, so SQL over time parses nothing; it is part of the contract, and a
/// record's own field of that name is kept under another name, never overwritten.
#[test]
fn the_computed_instant_is_stored_in_a_timestamp_column() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flights.ndjson");
    std::fs::write(
        &file,
        concat!(
            "{\"id\":1,\"sched_dep\":\"2013-01-01 05:15\"}\n",
            "{\"id\":2,\"sched_dep\":\"2013-07-01 05:15\"}\n",
            "{\"id\":3,\"sched_dep\":\"2013-07-01 06:00\",\"departs\":\"2013-07-01T10:00:00Z\"}\n",
        ),
    )
    .unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let src = format!("ndjson:{}", file.display());
    let run = |column: &str| {
        sluice(&[
            "run",
            "--source",
            &src,
            "--table",
            t,
            "--time-field",
            "sched_dep",
            "--time-zone",
            "America/New_York",
            "--time-column",
            column,
        ])
    };
    let out = run("departs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Standard time, then daylight saving time: 05:15 local is 10:15Z, then 09:15Z.
    assert_eq!(
        scalar(
            &table,
            "SELECT string_agg(CAST(to_unixtime(departs) AS VARCHAR), ' ' ORDER BY id) FROM t"
        ),
        "1357035300 1372670100 1372672800"
    );
    // A record's own `departs` is kept, under another name.
    assert_eq!(
        scalar(&table, "SELECT departs_2 FROM t WHERE id = 3"),
        "2013-07-01T10:00:00Z"
    );
    assert_eq!(
        scalar(
            &table,
            "SELECT count(*) FROM t WHERE arrow_typeof(departs) = 'Timestamp(µs, \"UTC\")'"
        ),
        "3"
    );
    let out = run("departs_at");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("time-column is departs in the table, departs_at in this run"),
        "{}",
        stderr(&out)
    );
}

/// A `date`-typed time field (declared in a schema file) is accepted: the day's midnight in
/// the time zone is the event time, and the column holds the date.
#[test]
fn a_date_typed_time_field_lands_under_its_day() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("weather.ndjson");
    std::fs::write(
        &file,
        "{\"day\":\"2013-03-09\",\"temp\":4}\n{\"day\":\"2013-03-10\",\"temp\":6}\n{\"day\":\"2013-03-11\",\"temp\":9}\n",
    )
    .unwrap();
    let schema = dir.path().join("schema.toml");
    std::fs::write(
        &schema,
        "[[fields]]\nname = \"day\"\ntype = \"date\"\n\n[[fields]]\nname = \"temp\"\ntype = \"long\"\n",
    )
    .unwrap();
    let table = dir.path().join("t");
    ok(&[
        "run",
        "--source",
        &format!("ndjson:{}", file.display()),
        "--table",
        table.to_str().unwrap(),
        "--schema",
        schema.to_str().unwrap(),
        "--time-field",
        "day",
        "--time-zone",
        "America/New_York",
        "--window",
        "1d",
        "--window-zone",
        "America/New_York",
    ]);
    assert_eq!(
        scalar(
            &table,
            "SELECT count(*) FROM t WHERE CAST(dt AS DATE) = day"
        ),
        "3"
    );
}

/// A long run with no terminal is not silent: a progress line on stderr every interval (10 s;
/// here a few milliseconds), for `run`, `backfill` and `derive`.
#[test]
fn long_commands_print_progress_lines_without_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let flights = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/flights-dst.ndjson");
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let with_lines = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(args)
            .env("SLUICE_PROGRESS_INTERVAL_MS", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stderr(&out)
    };
    let src = format!("ndjson:{flights}");
    let common = [
        "--table",
        t,
        "--time-field",
        "sched_dep",
        "--time-zone",
        "America/New_York",
    ];
    let run = with_lines(&[&["run", "--source", &src][..], &common].concat());
    assert!(run.contains("sluice run: "), "{run}");
    assert!(run.contains("% of 0.7 MB read, "), "{run}");
    // Bytes count as read with the records they hold: a line that counts records does not
    // say 0% read (bytes were once counted only at the end of the pass).
    for line in run.lines().filter(|l| l.contains("% of 0.7 MB read, ")) {
        let records = line
            .split(" read, ")
            .nth(1)
            .and_then(|r| r.split(' ').next());
        if records != Some("0") {
            assert!(!line.starts_with("sluice run: 0% "), "{line}");
        }
    }
    let backfill = with_lines(
        &[
            &[
                "backfill",
                "--source",
                &src,
                "--from",
                "2013-01-01T00:00Z",
                "--to",
                "2014-01-02T00:00Z",
                "--force",
            ][..],
            &common,
        ]
        .concat(),
    );
    assert!(backfill.contains("sluice backfill: "), "{backfill}");
    let derived = dir.path().join("d");
    let derive = with_lines(&[
        "derive",
        "--table",
        t,
        "--derive",
        &format!("d={}", derived.display()),
        "--derive-sql",
        "d=SELECT count(*) AS flights FROM window",
        "--from",
        "2013-01-01T00:00Z",
        "--to",
        "2014-01-02T00:00Z",
    ]);
    assert!(derive.contains("derived windows recomputed, "), "{derive}");

    // Parquet: what is read is the file's stored bytes (a column chunk at a time), never more
    // than the file holds (each column's read once counted the rest of the file), and the
    // summary says the same size.
    let ndjson = input(&dir.path().join("events"), 20_000, 4, 7, 1);
    let parquet = dir.path().join("parquet");
    let args = [ndjson.as_os_str(), parquet.as_os_str(), "2000".as_ref()];
    interop("to_parquet.py", &args);
    let stored: u64 = std::fs::read_dir(&parquet)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let mb = format!("{:.1} MB", stored as f64 / 1e6);
    let out = Command::new(BIN)
        .args(["run", "--source", &format!("parquet:{}", parquet.display())])
        .args(["--table", dir.path().join("p").to_str().unwrap()])
        .env("SLUICE_PROGRESS_INTERVAL_MS", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let run = format!("{}{}", stderr(&out), String::from_utf8_lossy(&out.stdout));
    let shares: Vec<u64> = run
        .lines()
        .filter_map(|l| {
            l.strip_prefix("sluice run: ")?
                .split_once(&format!("% of {mb} read"))
                .and_then(|(percent, _)| percent.parse().ok())
        })
        .collect();
    assert!(!shares.is_empty(), "no progress line of {mb}: {run}");
    assert!(shares.iter().all(|p| *p <= 100), "{run}");
    let summary = run
        .lines()
        .find(|l| l.contains(" records; "))
        .unwrap_or_default();
    assert!(summary.contains(&format!("; {mb} in ")), "{summary}");

    // On a terminal (`script` gives the run one) the bar counts in decimal units too, as the
    // summary does (kB for this file).
    let command = format!(
        "{BIN} run --source parquet:{} --table {}",
        parquet.display(),
        dir.path().join("bar").display()
    );
    let bar = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .output()
        .unwrap();
    let bar = String::from_utf8_lossy(&bar.stdout);
    let kb = format!("/{:.2} kB ", stored as f64 / 1e3);
    assert!(bar.contains(&kb), "{kb}: {bar}");
    assert!(!bar.contains("iB"), "{bar}");
    assert!(!bar.contains(" 1 windows"), "{bar}");
}

/// A first run that lands nothing (a typo in `--time-format` rejects every record) leaves no
/// table: its options are not recorded, so the corrected run is not refused for them. The
/// dead letters stay, with their reason.
#[test]
fn a_first_run_that_lands_nothing_leaves_no_table_to_lock_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let (file, lines) = one_file(dir.path(), 200);
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let src = format!("ndjson:{}", file.display());
    let out = sluice(&[
        "run",
        "--source",
        &src,
        "--table",
        t,
        "--time-format",
        "%Y-%m-%d %H:%M",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("is not kept"), "{}", stderr(&out));
    assert!(!table.exists(), "no table is left behind");
    let dlq = dir.path().join("t_dlq");
    assert_eq!(scalar(&dlq, "SELECT count(*) FROM t"), lines.to_string());
    // The dead letters say which table and contract they were meant for: a table that is
    // gone, whose time format had the typo.
    let typo = "SELECT count(*) FROM t WHERE table_id IS NOT NULL \
                AND strpos(contract, '\"%Y-%m-%d %H:%M\"') > 0";
    assert_eq!(scalar(&dlq, typo), lines.to_string());
    let listed = ok(&["dead-letters", "--table", t, "--limit", "1"]);
    assert!(
        listed.starts_with(&format!("{lines} dead letters in "))
            && listed.contains(&format!(
                "(no table at {t}: these were meant for a table once there)"
            )),
        "{listed}"
    );
    let out = ok(&["run", "--source", &src, "--table", t]);
    assert!(out.contains(&format!("{lines} records")), "{out}");
    assert_eq!(scalar(&table, "SELECT count(*) FROM t"), lines.to_string());
    // The new table's status and dead letters are its own: none.
    let status = ok(&["status", "--table", t]);
    assert!(status.contains("  dead      none\n"), "{status}");
    assert!(
        status.contains(&format!(
            "{lines} dead letters in {t}_dlq meant for a table once at this location (removed; not counted above)"
        )),
        "{status}"
    );
    let listed = ok(&["dead-letters", "--table", t]);
    assert_eq!(
        listed,
        format!("0 dead letters in {t}_dlq\n  ({lines} dead letters meant for a table once at {t} not listed)\n")
    );
}

/// A table removed and run again from the start gets its own dead letters: the dead-letter
/// offsets are kept per table, so the old table's are neither counted for the new one nor
/// taken for already written.
#[test]
fn a_table_run_again_after_removal_counts_its_own_dead_letters() {
    let dir = tempfile::tempdir().unwrap();
    let (file, lines) = one_file(dir.path(), 100);
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("{torn\n[1]\n{\"no\": \"time\"}\n");
    std::fs::write(&file, text).unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let src = format!("ndjson:{}", file.display());
    let run = || ok(&["run", "--source", &src, "--table", t]);
    run();
    std::fs::remove_dir_all(&table).unwrap();
    run();
    assert_eq!(scalar(&table, "SELECT count(*) FROM t"), lines.to_string());
    let dlq = dir.path().join("t_dlq");
    let per_table = "SELECT count(DISTINCT table_id) || ' ' || count(*) FROM t";
    assert_eq!(scalar(&dlq, per_table), "2 6");
    let status = ok(&["status", "--table", t]);
    assert!(
        status.contains(&format!("  dead      3 in {t}_dlq: ")),
        "{status}"
    );
    assert!(
        status.contains(&format!("3 dead letters in {t}_dlq meant for a table once")),
        "{status}"
    );

    // The old table's dead letters can be removed, and only they: a dry run first.
    let others = |extra: &[&str]| {
        let mut args = vec!["dead-letters", "--table", t, "--remove-others"];
        args.extend_from_slice(extra);
        ok(&args)
    };
    let dry = others(&[]);
    assert!(
        dry.starts_with(
            "sluice dead-letters: 3 dead letters meant for a table once at this location ("
        ) && dry.contains("found (dry run, nothing removed"),
        "{dry}"
    );
    assert_eq!(scalar(&dlq, per_table), "2 6");
    let removed = others(&["--apply"]);
    assert!(removed.contains(") removed"), "{removed}");
    assert_eq!(scalar(&dlq, per_table), "1 3");
    let status = ok(&["status", "--table", t]);
    assert!(
        status.contains(&format!("  dead      3 in {t}_dlq: ")),
        "{status}"
    );
    assert!(!status.contains("meant for a table once"), "{status}");
    assert!(others(&["--apply"]).starts_with("sluice dead-letters: 0 dead letters"));
    let out = sluice(&["dead-letters", "--table", t, "--apply"]);
    assert_eq!(out.status.code(), Some(2));
}
