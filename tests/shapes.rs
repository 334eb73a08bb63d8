//! Real-world event shapes, end to end through the real binary: nested records read back by
//! independent readers, fields that appear later, records without their key, local time
//! formats, clock-skewed events, and a second pipeline on one table. Each of these once lost
//! or rejected data without a word; here each is a row or a dead letter, never nothing.

use std::path::{Path, PathBuf};

use crate::common::*;
use sluice_source::generate::{generate, GeneratorSpec, Shape};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn run(extra: &[&str]) -> std::process::Output {
    let mut args = vec!["run"];
    args.extend_from_slice(extra);
    sluice(&args)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// Nested events' schema, written out with struct, array, map and decimal types.
const NESTED_SCHEMA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/kafka/github-events.toml"
);

/// Nested events (objects three levels deep, arrays of objects, a map, nulls at every
/// level, non-ASCII text, a byte-order mark, bad lines) land every line as a row or a dead
/// letter; Python delta-rs and Polars read every row back equal to its JSON line, field by
/// field, with the schema inferred and with a schema file naming struct, array, map and
/// decimal types.
#[test]
fn a_nested_corpus_reads_back_field_by_field_in_python_and_polars() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    let mut events = Vec::new();
    generate(
        &GeneratorSpec {
            events: 3000,
            hours: 6,
            shape: Shape::Nested,
            null_key_per_mille: 30,
            ..Default::default()
        },
        &mut events,
    )
    .unwrap();
    let text = String::from_utf8(events).unwrap();
    let (first, second) = text.split_at(text[..text.len() / 2].rfind('\n').unwrap() + 1);
    write(&input.join("a.ndjson"), &format!("\u{feff}{first}"));
    let bad = [
        r#"{"event_id":"bad-1","ts":"2026-10-03T01:00:00Z","actor":{"id":"not a number"}}"#,
        r#"{"event_id":"bad-2","ts":"2026-10-03T01:00:00Z","payload":{"number":2.5}}"#,
        r#"{"event_id":"bad-3","ts":"2026-10-03T01:00:00Z""#,
        r#"["not","an","object"]"#,
        r#"{"event_id":"bad-4","ts":"yesterday"}"#,
    ];
    write(
        &input.join("b.ndjson"),
        &format!("{second}{}\n", bad.join("\n")),
    );
    for (name, extra) in [
        ("inferred", vec![]),
        ("declared", vec!["--schema", NESTED_SCHEMA]),
    ] {
        let table = dir.path().join(name);
        let src = format!("ndjson:{}", input.display());
        let t = table.display().to_string();
        let mut args = vec!["--source", &src, "--table", &t, "--window", "1h"];
        args.extend(extra.iter().copied());
        let out = run(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let summary = compare_with_input(&table, &dlq_of(&table), &input);
        eprintln!("nested corpus ({name}): {summary}");
        assert!(summary.ends_with("0 problems"), "{summary}");
        let reasons = dead_letters(&table);
        assert_eq!(
            reasons,
            [
                "bad_time,1",
                "malformed_json,1",
                "not_one_object,1",
                "wrong_type,2"
            ],
            "{name}"
        );
    }
}

/// With --key, a record whose key is null or missing is a dead letter `missing_key`, never
/// collapsed into one row with the other keyless records (35 rows once held 100 records).
#[test]
fn records_without_their_key_are_dead_letters() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..100)
        .map(|i| {
            let ts = format!("2026-10-03T10:{:02}:{:02}Z", i / 60, i % 60);
            match i % 3 {
                0 => format!(r#"{{"event_id":"k{i}","ts":"{ts}","n":{i}}}"#),
                1 => format!(r#"{{"event_id":null,"ts":"{ts}","n":{i}}}"#),
                _ => format!(r#"{{"ts":"{ts}","n":{i}}}"#),
            }
        })
        .collect();
    let (table, out) = ingest(
        dir.path(),
        "t",
        &(lines.join("\n") + "\n"),
        &["--key", "event_id"],
    );
    assert!(out.contains("66 rejected"), "{out}");
    assert_eq!(scalar(&table, "SELECT count(*) FROM t"), "34");
    assert_eq!(dead_letters(&table), ["missing_key,66"]);
}

/// A field the table does not have: `add` (the default) makes it a column in the commit of
/// the first window that carries it, `reject` dead-letters the record naming the field,
/// `ignore` leaves it out and says so.
#[test]
fn new_fields_are_added_rejected_or_ignored_never_dropped_silently() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    let first: Vec<String> = (0..20)
        .map(|i| format!(r#"{{"event_id":"a{i}","ts":"2026-10-03T10:{i:02}:00Z","n":{i}}}"#))
        .collect();
    let second: Vec<String> = (0..20)
        .map(|i| {
            format!(r#"{{"event_id":"b{i}","ts":"2026-10-03T11:{i:02}:00Z","n":{i},"coupon":"C{i}","account":{{"plan":"pro"}}}}"#)
        })
        .collect();
    write(&input.join("a.ndjson"), &(first.join("\n") + "\n"));
    let src = format!("ndjson:{}", input.display());
    for mode in ["add", "reject", "ignore"] {
        let table = dir.path().join(mode);
        let t = table.to_str().unwrap();
        ok(&[
            "run",
            "--source",
            &src,
            "--table",
            t,
            "--schema-evolution",
            mode,
        ]);
    }
    write(&input.join("b.ndjson"), &(second.join("\n") + "\n"));
    // add
    let table = dir.path().join("add");
    let out = ok(&["run", "--source", &src, "--table", table.to_str().unwrap()]);
    assert!(out.contains("new columns: coupon, account"), "{out}");
    assert_eq!(
        query_csv(
            &[("t", &table)],
            "SELECT count(*), count(coupon), count(t.account.plan) FROM t"
        ),
        ["40,20,20"]
    );
    assert_eq!(
        query_csv(&[("t", &table)], "SELECT count(*) FROM t WHERE event_id LIKE 'a%' AND coupon IS NULL AND account IS NULL"),
        ["20"]
    );
    let history = ok(&[
        "windows",
        "--table",
        table.to_str().unwrap(),
        "--schema-history",
        "--format",
        "csv",
    ]);
    let lines: Vec<&str> = history.lines().collect();
    assert_eq!(
        lines[1].split(',').take(2).collect::<Vec<_>>(),
        ["0", "created"],
        "{history}"
    );
    assert!(
        lines[2].starts_with('2') && lines[2].contains("added") && lines[2].contains("coupon"),
        "{history}"
    );
    // reject: this run reads only the new file, whose every record is rejected: exit 3
    let table = dir.path().join("reject");
    let rejected = sluice(&[
        "run",
        "--source",
        &src,
        "--table",
        table.to_str().unwrap(),
        "--schema-evolution",
        "reject",
    ]);
    let out = String::from_utf8_lossy(&rejected.stdout);
    assert_eq!(rejected.status.code(), Some(3), "{out}");
    assert!(out.contains("20 rejected"), "{out}");
    assert_eq!(dead_letters(&table), ["unknown_field,20"]);
    assert_eq!(
        query_csv(&[("d", &dlq_of(&table))], "SELECT DISTINCT detail FROM d"),
        ["\"fields the table does not have: coupon, account\""]
    );
    // ignore
    let table = dir.path().join("ignore");
    let out = run(&[
        "--source",
        &src,
        "--table",
        table.to_str().unwrap(),
        "--schema-evolution",
        "ignore",
    ]);
    assert!(out.status.success());
    assert!(
        stderr(&out).contains("20 rows carried fields the table does not have, left out (--schema-evolution ignore): account (20), coupon (20)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(scalar(&table, "SELECT count(*) FROM t"), "40");
    let columns = ok(&[
        "query",
        "--table",
        &format!("t={}", table.display()),
        "--format",
        "csv",
        "SELECT * FROM t LIMIT 1",
    ]);
    assert!(
        !columns.lines().next().unwrap().contains("coupon"),
        "{columns}"
    );
}

/// A table belongs to the pipeline that created it: another pipeline is refused before it
/// writes anything (it once swapped the owner's windows away). A table created for several
/// pipelines holds each one's rows at addresses of its own.
#[test]
fn a_second_pipeline_is_refused_or_lands_beside_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let lines = |p: &str| -> String {
        (0..30)
            .map(|i| {
                format!(
                    "{{\"event_id\":\"{p}{i}\",\"ts\":\"2026-10-03T{:02}:{:02}:00Z\"}}\n",
                    i / 10,
                    i % 60
                )
            })
            .collect()
    };
    let a = dir.path().join("a.ndjson");
    let b = dir.path().join("b.ndjson");
    write(&a, &lines("a"));
    write(&b, &lines("b"));
    let (sa, sb) = (
        format!("ndjson:{}", a.display()),
        format!("ndjson:{}", b.display()),
    );
    let table = dir.path().join("one");
    let t = table.to_str().unwrap();
    ok(&["run", "--source", &sa, "--table", t, "--pipeline", "pa"]);
    let before = commits(&table).len();
    let files_before = std::fs::read_dir(&table).unwrap().count();
    let out = run(&["--source", &sb, "--table", t, "--pipeline", "pb"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("belongs to pipeline \"pa\""),
        "{}",
        stderr(&out)
    );
    assert_eq!(commits(&table).len(), before, "nothing committed");
    assert_eq!(
        std::fs::read_dir(&table).unwrap().count(),
        files_before,
        "nothing staged"
    );
    assert_eq!(
        scalar(&table, "SELECT count(*) FROM t WHERE event_id LIKE 'a%'"),
        "30"
    );

    let shared = dir.path().join("many");
    let s = shared.to_str().unwrap();
    ok(&[
        "run",
        "--source",
        &sa,
        "--table",
        s,
        "--pipeline",
        "pa",
        "--pipelines",
        "many",
    ]);
    ok(&["run", "--source", &sb, "--table", s, "--pipeline", "pb"]);
    // A rerun of each changes nothing; the other pipeline's rows stay.
    let v = version(&shared);
    ok(&["run", "--source", &sa, "--table", s, "--pipeline", "pa"]);
    assert_eq!(version(&shared), v);
    assert_eq!(
        query_csv(
            &[("t", &shared)],
            "SELECT pipeline, count(*) FROM t GROUP BY pipeline ORDER BY pipeline"
        ),
        ["pa,30", "pb,30"]
    );
    let out = run(&[
        "--source",
        &sb,
        "--table",
        s,
        "--pipeline",
        "pb",
        "--pipelines",
        "one",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// One event dated 2099 among 2026 events does not make the rest of the stream late; a
/// stream that resumes after a week's silence lands normally; both even under `--late drop`,
/// where a late event is a dead letter.
#[test]
fn clock_skewed_events_and_real_jumps() {
    let dir = tempfile::tempdir().unwrap();
    let at = |minute: i64| {
        chrono::DateTime::from_timestamp(1_790_985_600 + minute * 60, 0)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };
    let mut skewed: Vec<String> = (0..300)
        .map(|i| format!(r#"{{"event_id":"e{i}","ts":"{}"}}"#, at(i / 2)))
        .collect();
    skewed.insert(
        150,
        r#"{"event_id":"future","ts":"2099-10-03T00:00:00Z"}"#.to_string(),
    );
    let week = 7 * 24 * 60;
    let gap: Vec<String> = (0..400)
        .map(|i| {
            let minute = if i < 200 { i } else { week + i };
            format!(r#"{{"event_id":"g{i}","ts":"{}"}}"#, at(minute))
        })
        .collect();
    for (name, lines, rows, guard) in [
        ("skewed", &skewed, "301", true),
        ("gap", &gap, "400", true),
        ("unguarded", &skewed, "151", false),
    ] {
        let input = dir.path().join(format!("{name}.ndjson"));
        write(&input, &(lines.join("\n") + "\n"));
        let table = dir.path().join(name);
        let src = format!("ndjson:{}", input.display());
        let mut args = vec![
            "run",
            "--source",
            &src,
            "--table",
            table.to_str().unwrap(),
            "--key",
            "event_id",
            "--late",
            "drop",
            "--lateness",
            "1m",
        ];
        if !guard {
            args.extend(["--max-time-ahead", "off"]);
        }
        let out = ok(&args);
        eprintln!("{name}: {out}");
        assert_eq!(
            scalar(&table, "SELECT count(*) FROM t"),
            rows,
            "{name}: {out}"
        );
        if guard {
            assert!(out.contains(" 0 late"), "{name}: {out}");
            assert!(dead_letters(&table).is_empty(), "{name}");
        } else {
            // Without the guard, the 2099 event made the 149 events after it late.
            assert_eq!(dead_letters(&table), ["late,150"], "{name}");
        }
    }
    let future = query_csv(
        &[("t", &dir.path().join("skewed"))],
        "SELECT dt, hour FROM t WHERE event_id = 'future'",
    );
    assert_eq!(future, ["2099-10-03,00"]);
}

/// Writes `text` as `<name>.ndjson` under `dir` and runs `sluice run` over it into the table
/// `<name>`; the table and the run's summary.
fn ingest(dir: &Path, name: &str, text: &str, extra: &[&str]) -> (PathBuf, String) {
    let input = dir.join(format!("{name}.ndjson"));
    write(&input, text);
    let table = dir.join(name);
    let src = format!("ndjson:{}", input.display());
    let mut args = vec!["run", "--source", &src, "--table", table.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = ok(&args);
    (table, out)
}

/// Times in the formats real data has: a strftime pattern in a local zone (hourly
/// temperatures written `2010/01/01 00:00`), ISO 8601 with a space and no zone, fractional
/// seconds, a byte-order mark; epoch milliseconds as strings. Nothing is `bad_time`.
#[test]
fn local_time_formats_read_their_instants() {
    let dir = tempfile::tempdir().unwrap();
    // (table, input, run options, query, its rows)
    type Case<'a> = (&'a str, &'a str, &'a [&'a str], &'a str, &'a [&'a str]);
    let cases: [Case; 3] = [
        (
            // 00:00 in Seattle in January is 08:00 UTC; 12:00 in July (daylight saving) 19:00.
            "temps",
            "\u{feff}{\"date\":\"2010/01/01 00:00\",\"temp\":39.4}\n{\"date\":\"2010/01/01 01:00\",\"temp\":39.2}\n{\"date\":\"2010/07/01 12:00\",\"temp\":61.0}\n",
            &["--time-field", "date", "--time-format", "%Y/%m/%d %H:%M", "--time-zone", "America/Los_Angeles"],
            "SELECT dt, hour, date FROM t ORDER BY dt, hour",
            &["2010-01-01,08,2010/01/01 00:00", "2010-01-01,09,2010/01/01 01:00", "2010-07-01,19,2010/07/01 12:00"],
        ),
        (
            "iso",
            "{\"ts\":\"2026-10-03 01:00:00\"}\n{\"ts\":\"2026-10-03 00:00:00.875\"}\n{\"ts\":\"2026-10-03T03:30:00+02:00\"}\n",
            &[],
            "SELECT hour, count(*) FROM t GROUP BY hour ORDER BY hour",
            &["00,1", "01,2"],
        ),
        (
            "epoch",
            "{\"at\":\"1791037500123\"}\n{\"at\":1791037500123}\n{\"at\":1.7910375e12}\n",
            &["--time-field", "at", "--time-format", "epoch_ms"],
            "SELECT DISTINCT dt, hour FROM t",
            &["2026-10-03,14"],
        ),
    ];
    for (name, text, extra, sql, rows) in cases {
        let (table, out) = ingest(dir.path(), name, text, extra);
        assert!(
            out.contains("3 records") && out.contains("0 rejected"),
            "{name}: {out}"
        );
        assert_eq!(query_csv(&[("t", &table)], sql), rows, "{name}");
    }
}

/// A nested time field and a nested key: `--time-field payload.created_at --key actor.id`.
#[test]
fn nested_fields_name_the_time_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let text = concat!(
        "{\"actor\":{\"id\":1},\"payload\":{\"created_at\":\"2026-10-03T10:00:00Z\",\"v\":1}}\n",
        "{\"actor\":{\"id\":1},\"payload\":{\"created_at\":\"2026-10-03T10:05:00Z\",\"v\":2}}\n",
        "{\"actor\":{\"id\":2},\"payload\":{\"created_at\":\"2026-10-03T10:01:00Z\",\"v\":3}}\n",
        "{\"actor\":{\"login\":\"x\"},\"payload\":{\"created_at\":\"2026-10-03T10:01:00Z\",\"v\":4}}\n",
        "{\"actor\":{\"id\":3},\"payload\":null}\n",
    );
    for mode in ["swap", "merge"] {
        let args = [
            "--time-field",
            "payload.created_at",
            "--key",
            "actor.id",
            "--mode",
            mode,
        ];
        let (table, out) = ingest(dir.path(), mode, text, &args);
        assert!(out.contains("2 rejected"), "{mode}: {out}");
        assert_eq!(
            query_csv(
                &[("t", &table)],
                "SELECT t.actor.id, t.payload.v FROM t ORDER BY 1"
            ),
            ["1,2", "2,3"],
            "{mode}"
        );
        assert_eq!(
            dead_letters(&table),
            ["missing_key,1", "missing_time,1"],
            "{mode}"
        );
    }
}

/// Every type a schema file names lands as that Delta type and reads back as written: an
/// instant (`timestamp`, here also the time field), a wall-clock time (`timestamp_ntz`: the
/// table gets Delta's timestampNtz feature), a date, base64 `binary`, an exact `decimal`.
#[test]
fn schema_file_types_land_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("types.toml");
    write(
        &schema,
        "[[fields]]\nname = \"ts\"\ntype = \"timestamp\"\n[[fields]]\nname = \"local\"\ntype = \"timestamp_ntz\"\n[[fields]]\nname = \"d\"\ntype = \"date\"\n[[fields]]\nname = \"blob\"\ntype = \"binary\"\n[[fields]]\nname = \"price\"\ntype = \"decimal(8,3)\"\n",
    );
    let text = concat!(
        "{\"ts\":\"2026-10-03 10:00:00+02:00\",\"local\":\"2026-10-03 10:00:00\",\"d\":\"2026-10-03\",\"blob\":\"aGVsbG8=\",\"price\":\"12.345\"}\n",
        "{\"ts\":\"2026-10-03T09:00:00Z\",\"local\":\"2026-10-03T11:30:00\",\"d\":\"2026-10-04\",\"blob\":\"\",\"price\":1}\n",
        "{\"ts\":\"2026-10-03T09:00:00Z\",\"price\":1.2345}\n",
    );
    let (table, out) = ingest(
        dir.path(),
        "types",
        text,
        &["--schema", schema.to_str().unwrap()],
    );
    assert!(
        out.contains("2 records") && out.contains("1 rejected"),
        "{out}"
    );
    let rows = ok(&[
        "query",
        "--table",
        &format!("t={}", table.display()),
        "--format",
        "json",
        "SELECT ts, local, d, blob, price FROM t ORDER BY ts",
    ]);
    assert_eq!(
        rows.lines().collect::<Vec<_>>(),
        [
            r#"{"ts":"2026-10-03T08:00:00Z","local":"2026-10-03T10:00:00","d":"2026-10-03","blob":"68656c6c6f","price":12.345}"#,
            r#"{"ts":"2026-10-03T09:00:00Z","local":"2026-10-03T11:30:00","d":"2026-10-04","blob":"","price":1.000}"#,
        ]
    );
    let log = std::fs::read_to_string(table.join("_delta_log/00000000000000000000.json")).unwrap();
    assert!(
        log.contains("\"readerFeatures\":[\"timestampNtz\"]"),
        "{log}"
    );
    assert_eq!(dead_letters(&table), ["wrong_type,1"]);
}

/// Derived tables keep working as the raw table gains columns, and a derived query can use
/// the new columns from then on.
#[test]
fn derived_tables_keep_working_as_the_raw_table_grows() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    write(
        &input.join("a.ndjson"),
        "{\"ts\":\"2026-10-03T10:00:00Z\",\"country\":\"DE\"}\n{\"ts\":\"2026-10-03T10:10:00Z\",\"country\":\"FR\"}\n",
    );
    let src = format!("ndjson:{}", input.display());
    let raw = dir.path().join("raw");
    let derive = |name: &str, sql: &str| {
        let table = dir.path().join(name);
        ok(&[
            "run",
            "--source",
            &src,
            "--table",
            raw.to_str().unwrap(),
            "--derive",
            &format!("d={}", table.display()),
            "--derive-sql",
            &format!("d={sql}"),
        ]);
        query_csv(&[("d", &table)], "SELECT * FROM d ORDER BY hour, country")
    };
    let counts = "SELECT country, count(*) AS n FROM window GROUP BY country";
    assert_eq!(
        derive("counts", counts),
        ["DE,1,2026-10-03,10", "FR,1,2026-10-03,10"]
    );
    write(
        &input.join("b.ndjson"),
        "{\"ts\":\"2026-10-03T11:00:00Z\",\"country\":\"DE\",\"coupon\":\"X\"}\n",
    );
    assert_eq!(
        derive("counts", counts),
        [
            "DE,1,2026-10-03,10",
            "FR,1,2026-10-03,10",
            "DE,1,2026-10-03,11"
        ]
    );
    let coupons = "SELECT country, count(coupon) AS coupons FROM window GROUP BY country";
    assert_eq!(
        derive("coupons", coupons),
        [
            "DE,0,2026-10-03,10",
            "FR,0,2026-10-03,10",
            "DE,1,2026-10-03,11"
        ]
    );
}

/// The README's example on real data: a year of hourly temperatures in Seattle, times
/// written `2010/01/01 00:00` in Pacific standard time, every line a row.
#[test]
fn the_readme_temperature_example_lands_every_line() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("temps");
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/data/seattle-temps.ndjson");
    let out = ok(&[
        "run",
        "--source",
        &format!("ndjson:{data}"),
        "--table",
        table.to_str().unwrap(),
        "--window",
        "1d",
        "--time-field",
        "date",
        "--time-format",
        "%Y/%m/%d %H:%M",
        "--time-zone",
        "-08:00",
    ]);
    assert!(
        // As docs/input.md shows it: 366 daily windows sealed together, in group commits.
        out.starts_with(
            "sluice run: 8759 records; 366 window publications in 3 commits (table version 3)"
        ),
        "{out}"
    );
    assert!(out.contains(" 0 late, 0 rejected"), "{out}");
    assert_eq!(
        query_csv(
            &[("t", &table)],
            "SELECT dt, round(avg(temp), 1) AS mean_f FROM t GROUP BY dt ORDER BY dt LIMIT 3"
        ),
        ["2010-01-01,40.2", "2010-01-02,40.6", "2010-01-03,40.8"]
    );
}

/// Decoding on several threads lands the table one thread lands, over a stream that is
/// nested, grows fields mid-run and is dirty (records without their key, bad lines, a wrong
/// type): the same rows, dead letters and schema history, with chunks small enough that the
/// new fields first appear in a helper thread's chunk.
#[test]
fn decoding_on_several_threads_lands_what_one_thread_lands() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    let mut events = Vec::new();
    generate(
        &GeneratorSpec {
            events: 4000,
            hours: 4,
            shape: Shape::Nested,
            null_key_per_mille: 20,
            new_fields_from: Some(1500),
            ..Default::default()
        },
        &mut events,
    )
    .unwrap();
    let mut text = String::from_utf8(events).unwrap();
    text.push_str("{\"event_id\":\"bad-json\",\n");
    text.push_str(
        r#"{"event_id":"wrong-type","ts":"2026-10-03T01:00:00Z","actor":{"id":"not a number"}}"#,
    );
    text.push('\n');
    write(&input.join("a.ndjson"), &text);
    let src = format!("ndjson:{}", input.display());
    let mut landed = Vec::new();
    for threads in ["1", "3"] {
        let table = dir.path().join(format!("t{threads}"));
        let out = run(&[
            "--source",
            &src,
            "--table",
            table.to_str().unwrap(),
            "--key",
            "event_id",
            "--chunk-bytes",
            "4KiB",
            "--decode-threads",
            threads,
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        // JSON: nested columns have no CSV form.
        let rows: Vec<String> = ok(&[
            "query",
            "--table",
            &format!("t={}", table.display()),
            "--format",
            "json",
            "SELECT * FROM t ORDER BY _sluice_offset",
        ])
        .lines()
        .map(str::to_string)
        .collect();
        let history = ok(&[
            "windows",
            "--table",
            table.to_str().unwrap(),
            "--schema-history",
            "--format",
            "csv",
        ]);
        let history: Vec<String> = history
            .lines()
            .map(|l| l.split(',').skip(1).collect::<Vec<_>>().join(","))
            .collect();
        let dead = query_csv(
            &[("d", &dlq_of(&table))],
            "SELECT source_offset, reason, detail FROM d ORDER BY source_offset",
        );
        landed.push((rows, history, dead));
    }
    let (rows, history, dead) = &landed[0];
    assert!(
        rows.len() > 3500,
        "the keyed events are rows: {}",
        rows.len()
    );
    assert!(history.iter().any(|h| h.contains("coupon")), "{history:?}");
    assert!(dead.iter().any(|d| d.contains("missing_key")), "{dead:?}");
    assert!(dead.iter().any(|d| d.contains("wrong_type")), "{dead:?}");
    assert_eq!(
        landed[1], landed[0],
        "three decode threads land what one lands"
    );
}
