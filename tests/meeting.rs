//! Where two features meet, through the real binary: each test here failed on the code
//! before its fix (issue 59). An object key with any character, a file still being written
//! when a bounded run reads it, an unterminated CSV quote, `--until-idle` on files, decimals
//! of 38 digits, and a dead-letter replay into a mirror or a history.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use crate::common::{ok, python, query_csv, write_in, BIN};
use crate::servers::{moto, put_objects, s3_env, Server};

/// Puts `objects` (key, bytes) into `bucket` with boto3, keys exactly as given.
fn put_bytes(s3: &Server, bucket: &str, objects: &[(String, Vec<u8>)]) {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<(String, std::path::PathBuf)> = objects
        .iter()
        .enumerate()
        .map(|(i, (key, bytes))| {
            let path = dir.path().join(i.to_string());
            std::fs::write(&path, bytes).unwrap();
            (key.clone(), path)
        })
        .collect();
    put_objects(s3, bucket, &files);
}

/// `sluice args` with the S3 environment of `s3`; its output.
fn sluice_s3(s3: &Server, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .envs(s3_env(s3))
        .output()
        .expect("sluice runs")
}

/// Object keys are the store's own: a key holding any printable ASCII character or letters
/// of several scripts is listed, read and resumed by its own name (it was percent-encoded a
/// second time: `in/dü.ndjson` was asked for as `in/d%25C3%25BC.ndjson`, and the pipeline
/// stopped at it on every run).
#[test]
fn object_keys_with_any_character_land_by_their_own_names() {
    let s3 = moto("keys");
    let mut names: Vec<String> = (0x20u8..0x7f)
        .map(|c| c as char)
        .filter(|c| *c != '/')
        .map(|c| format!("k{c}x.ndjson"))
        .collect();
    names.extend(
        [
            "dü.ndjson",
            "100%.ndjson",
            "%41.ndjson",
            "日本語.ndjson",
            "Ελληνικά.ndjson",
            "العربية.ndjson",
            "русский текст.ndjson",
            "emoji-🦀.ndjson",
            "sub dir/nested ü.ndjson",
        ]
        .map(str::to_string),
    );
    let objects: Vec<(String, Vec<u8>)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let line = serde_json::json!({
                "ts": format!("2026-10-03T00:{:02}:{:02}Z", i / 60, i % 60),
                "name": n,
            });
            (format!("in/{n}"), format!("{line}\n").into_bytes())
        })
        .collect();
    put_bytes(&s3, "keys", &objects);
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let t = table.display().to_string();
    let run = [
        "run",
        "--source",
        "ndjson:s3://keys/in/",
        "--table",
        &t,
        "--window",
        "1h",
    ];
    let out = sluice_s3(&s3, &run);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let landed = query_csv(
        &[("t", &table)],
        "SELECT name = _sluice_source AS own, count(*) FROM t GROUP BY name = _sluice_source",
    );
    assert_eq!(landed, [format!("true,{}", names.len())], "{stderr}");
    // Resumed by their names: a rerun reads nothing again.
    let out = sluice_s3(&s3, &run);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(": 0 records"),
        "{stdout}"
    );
    // One object named by the URL, its key percent-encoded there as a URL holds it.
    let one = dir.path().join("one");
    let o = one.display().to_string();
    let out = sluice_s3(
        &s3,
        &[
            "run",
            "--source",
            "ndjson:s3://keys/in/d%C3%BC.ndjson",
            "--table",
            &o,
            "--window",
            "1h",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        query_csv(&[("t", &one)], "SELECT name FROM t"),
        ["dü.ndjson"]
    );
}

/// `sluice run --source SCHEME:DIR --table TABLE` with `extra` options, as owned strings.
fn run_args(scheme: &str, dir: &Path, table: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "run".to_string(),
        "--source".into(),
        format!("{scheme}:{}", dir.display()),
        "--table".into(),
        table.display().to_string(),
    ];
    args.extend(extra.iter().map(|e| e.to_string()));
    args
}

/// `ok` for owned arguments.
fn ok_args(args: &[String]) -> String {
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// `sluice` for owned arguments.
fn sluice_args(args: &[String]) -> std::process::Output {
    crate::common::sluice(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn count(table: &Path) -> u64 {
    query_csv(&[("t", table)], "SELECT count(*) FROM t")[0]
        .parse()
        .unwrap()
}

/// `(reason, count)` of the table's dead letters, as `reason,count` lines (none if there is
/// no dead-letter table).
fn dead(table: &Path) -> Vec<String> {
    let dlq = crate::common::dlq_of(table);
    if !dlq.join("_delta_log").exists() {
        return Vec::new();
    }
    crate::common::dead_letters(table)
}

/// A bounded run over a directory whose last file is a gzip stream still being written
/// lands the records written so far and leaves the rest for the next run; once the writer
/// finishes, the next run lands the rest (the stream's end was a dead letter `unreadable`
/// and the file was "at its end": 154 of 300 records never landed).
#[test]
fn a_bounded_run_waits_for_a_compressed_file_still_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let slices = crate::common::stream_slices(600, 2, 59, 2, 0);
    write_in(
        &input,
        "a.ndjson",
        std::str::from_utf8(&slices[0].1).unwrap(),
    );
    let whole = gzip(&slices[1].1);
    std::fs::write(input.join("b.ndjson.gz"), &whole[..whole.len() / 2]).unwrap();
    let table = dir.path().join("t");
    let run = run_args("ndjson", &input, &table, &["--key", "event_id"]);
    ok_args(&run);
    let first = count(&table);
    assert!(first > 300 && first < 600, "{first}");
    assert_eq!(
        dead(&table),
        Vec::<String>::new(),
        "nothing is called damaged"
    );
    std::fs::write(input.join("b.ndjson.gz"), &whole).unwrap();
    ok_args(&run);
    assert_eq!(count(&table), 600);
    assert_eq!(dead(&table), Vec::<String>::new());
}

/// Writes `rows` Parquet rows (`event_id`, `ts`, and `amount` a decimal(38,10) of 38
/// digits) with pyarrow, `per_group` rows a row group.
fn parquet_file(path: &Path, rows: usize, per_group: usize) {
    let script = "import sys, decimal, pyarrow as pa, pyarrow.parquet as pq\n\
                  decimal.getcontext().prec = 60\n\
                  n, g = int(sys.argv[2]), int(sys.argv[3])\n\
                  amount = [decimal.Decimal('1234567890123456789012345678.' + str(i).zfill(10)) for i in range(n)]\n\
                  t = pa.table({'event_id': [f'p-{i}' for i in range(n)],\n\
                                'ts': [f'2026-10-03T00:{i // 60 % 60:02}:{i % 60:02}Z' for i in range(n)],\n\
                                'amount': pa.array(amount, pa.decimal128(38, 10))})\n\
                  pq.write_table(t, sys.argv[1], row_group_size=g)\n";
    let out = Command::new(python())
        .args(["-c", script])
        .arg(path)
        .args([rows.to_string(), per_group.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The same for a Parquet file whose footer is not written yet: the last file waits (it
/// was a dead letter and "at its end": 200 of 250 rows never landed). Its values are
/// decimal(38,10) of 38 digits, which land exactly (the parser stopped at 36 digits).
#[test]
fn a_bounded_run_waits_for_a_parquet_file_without_its_footer() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let whole = dir.path().join("whole.parquet");
    parquet_file(&whole, 250, 50);
    let bytes = std::fs::read(&whole).unwrap();
    std::fs::copy(&whole, input.join("a.parquet")).unwrap();
    std::fs::write(input.join("b.parquet"), &bytes[..bytes.len() * 3 / 4]).unwrap();
    let table = dir.path().join("t");
    let run = run_args("parquet", &input, &table, &["--window", "1h"]);
    ok_args(&run);
    assert_eq!(count(&table), 250);
    assert_eq!(dead(&table), Vec::<String>::new());
    std::fs::write(input.join("b.parquet"), &bytes).unwrap();
    ok_args(&run);
    assert_eq!(count(&table), 500);
    assert_eq!(dead(&table), Vec::<String>::new());
    let amounts = query_csv(
        &[("t", &table)],
        "SELECT CAST(amount AS VARCHAR) FROM t WHERE event_id = 'p-249' ORDER BY _sluice_source",
    );
    assert_eq!(amounts, ["1234567890123456789012345678.0000000249"; 2]);
    // Not Parquet at all: a dead letter, even as the last file (the run's only record,
    // rejected: exit 3).
    write_in(&input, "c.parquet", "not parquet\n");
    assert_eq!(sluice_args(&run).status.code(), Some(3));
    assert_eq!(dead(&table), ["unreadable,1"]);
}

/// An unterminated quote made its record swallow the rest of the file (exit 0, "1 record,
/// 0 rejected", the other records inside its field): its record is a dead letter, read to
/// the end of its line, and the records after it are rows.
#[test]
fn an_unterminated_csv_quote_is_a_dead_letter_and_the_records_after_it_land() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    write_in(
        &input,
        "a.csv",
        "id,ts,note\n1,2026-10-03T00:00:00Z,\"open\n2,2026-10-03T00:00:01Z,x\n3,2026-10-03T00:00:02Z,y\n",
    );
    let table = dir.path().join("t");
    ok_args(&run_args("csv", &input, &table, &["--window", "1h"]));
    assert_eq!(
        query_csv(&[("t", &table)], "SELECT id, note FROM t ORDER BY id"),
        ["2,x", "3,y"]
    );
    assert_eq!(dead(&table), ["unterminated_quote,1"]);
}

/// `--follow --until-idle` on files publishes every window it holds when it ends (the
/// second day's rows stayed unpublished: the watermark never passed them).
#[test]
fn until_idle_on_files_publishes_every_window_held() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let lines: String = (0..48)
        .map(|h| {
            format!(
                "{{\"ts\":\"2026-10-{:02}T{:02}:30:00Z\",\"n\":{h}}}\n",
                3 + h / 24,
                h % 24
            )
        })
        .collect();
    write_in(&input, "a.ndjson", &lines);
    let table = dir.path().join("t");
    let args = run_args(
        "ndjson",
        &input,
        &table,
        &[
            "--window",
            "1d",
            "--follow",
            "--poll-interval",
            "100ms",
            "--until-idle",
            "1s",
        ],
    );
    let out = ok_args(&args);
    assert_eq!(count(&table), 48, "{out}");
}

/// A number of 37 digits beside `1.5` is inferred as decimal(38,1) and lands exactly.
#[test]
fn numbers_of_38_digits_are_inferred_and_land_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let n37 = "1234567890123456789012345678901234567";
    write_in(
        &input,
        "a.ndjson",
        &format!(
            "{{\"ts\":\"2026-10-03T00:00:00Z\",\"n\":{n37}}}\n{{\"ts\":\"2026-10-03T00:00:01Z\",\"n\":1.5}}\n"
        ),
    );
    let table = dir.path().join("t");
    ok_args(&run_args("ndjson", &input, &table, &["--window", "1h"]));
    assert_eq!(
        query_csv(
            &[("t", &table)],
            "SELECT CAST(n AS VARCHAR) FROM t ORDER BY ts"
        ),
        [format!("{n37}.0"), "1.5".to_string()]
    );
}

/// The changes of a mirror's keys: key 1 inserted at lsn 101, updated at 105 and 109 with
/// times written day-first (dead letters `bad_time` until replayed with that format); key
/// 2 inserted at 100 and deleted at 120, an update at 110 written day-first (below the
/// delete: it must stay deleted); key 3 inserted at 102.
fn mirror_changes(file: &Path) {
    let change = |id: u32, lsn: u32, op: &str, ts: &str| {
        format!("{{\"id\":{id},\"lsn\":{lsn},\"op\":\"{op}\",\"v\":\"v{lsn}\",\"ts\":\"{ts}\"}}\n")
    };
    let text = [
        change(1, 101, "c", "2026-10-03T10:00:00Z"),
        change(2, 100, "c", "2026-10-03T10:05:00Z"),
        change(3, 102, "c", "2026-10-03T10:10:00Z"),
        change(1, 105, "u", "2026/10/03 11:00"),
        change(2, 110, "u", "2026/10/03 11:30"),
        change(1, 109, "u", "2026/10/03 12:00"),
        change(2, 120, "d", "2026-10-03T13:00:00Z"),
    ]
    .concat();
    std::fs::write(file, text).unwrap();
}

/// A replay into a mirror went around it: republished by window swap, key 1 had three rows
/// (lsn 101, 105, 109). It now publishes as the mirror does: one row per key, the highest
/// sequence, a delete's tombstone respected; a replay again changes nothing.
#[test]
fn a_replay_into_a_mirror_keeps_one_row_per_key_in_sequence_order() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("changes.ndjson");
    mirror_changes(&file);
    for history in [false, true] {
        let table = dir.path().join(if history { "history" } else { "mirror" });
        let t = table.display().to_string();
        let src = format!("ndjson:{}", file.display());
        let mut run = vec![
            "run",
            "--source",
            &src,
            "--table",
            &t,
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
        ];
        if history {
            run.extend(["--scd", "2"]);
        }
        let out = ok(&run);
        assert!(out.contains("3 rejected"), "{out}");
        let replay = [
            "dead-letters",
            "--table",
            &t,
            "--replay",
            "--time-format",
            "%Y/%m/%d %H:%M",
        ];
        let dlq = crate::common::dlq_of(&table);
        let before = dir.path().join(format!("{}_before", table.display()));
        crate::common::copy_dir(&dlq, &before);
        let out = ok(&replay);
        assert!(out.contains("3 dead letters replayed: 3 landed"), "{out}");
        let rows = |sql: &str| query_csv(&[("t", &table)], sql);
        if history {
            assert_eq!(
                rows("SELECT id, __start_at, __end_at FROM t ORDER BY id, __start_at"),
                [
                    "1,101,105",
                    "1,105,109",
                    "1,109,",
                    "2,100,110",
                    "2,110,120",
                    "3,102,"
                ]
            );
        } else {
            assert_eq!(
                rows("SELECT id, lsn, v FROM t ORDER BY id"),
                ["1,109,v109", "3,102,v102"]
            );
        }
        let version = crate::common::version(&table);
        let again = ok(&replay);
        assert!(again.contains("0 dead letters replayed"), "{again}");
        // As after a crash before the dead-letter table recorded the replay.
        let b = before.display().to_string();
        let mut replay_before = replay.to_vec();
        replay_before.extend(["--dlq", &b]);
        let out = ok(&replay_before);
        assert!(
            out.contains("3 landed (0 rows changed in 0 windows)"),
            "{out}"
        );
        assert_eq!(crate::common::version(&table), version);
    }
}

/// A gzip file called damaged (corrupt data: its rest a dead letter `unreadable`) that is
/// then rewritten whole was "at its end" for good: its new records were never read. The run
/// now refuses it, naming it (exit 1), until it is given a new name or moved away.
#[test]
fn a_damaged_file_rewritten_later_is_refused_not_passed_over() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let slices = crate::common::stream_slices(400, 2, 61, 2, 0);
    let whole = gzip(&slices[0].1);
    let lines = slices[0]
        .1
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    let half = slices[0].1.len() / 2;
    let cut = slices[0].1[..half]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    let mut damaged = gzip(&slices[0].1[..cut]);
    damaged.extend_from_slice(b"\x1f\x8b\x08\xffnot a gzip member");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("a.ndjson.gz"), &damaged).unwrap();
    write_in(
        &input,
        "b.ndjson",
        std::str::from_utf8(&slices[1].1).unwrap(),
    );
    let table = dir.path().join("t");
    let run = run_args("ndjson", &input, &table, &["--key", "event_id"]);
    ok_args(&run);
    assert_eq!(dead(&table), ["unreadable,1"]);
    let landed = count(&table);
    std::fs::write(input.join("a.ndjson.gz"), &whole).unwrap();
    let out = sluice_args(&run);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("a.ndjson.gz changed after it was read to its end"),
        "{stderr}"
    );
    assert_eq!(count(&table), landed, "nothing written");
    // Under a new name it is a new file: its records land (by key, once).
    std::fs::rename(input.join("a.ndjson.gz"), input.join("a2.ndjson.gz")).unwrap();
    ok_args(&run);
    assert!(count(&table) > landed && lines > 0);
}

/// A MERGE across the table ordered by event time (no sequence field) keeps the newer row
/// against an older change delivered late: the table's current rows are read back with their
/// times, whatever string type DataFusion hands them in (views, large strings; the unit test
/// `incumbent_times_read_from_string_views` checks each), and compared with the change's.
#[test]
fn a_merge_across_the_table_keeps_the_newer_row_against_a_late_older_change() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    write_in(
        &input,
        "a.ndjson",
        "{\"id\":1,\"v\":\"new\",\"ts\":\"2026-10-03T02:00:00Z\"}\n",
    );
    let table = dir.path().join("t");
    let run = run_args(
        "ndjson",
        &input,
        &table,
        &[
            "--window",
            "1h",
            "--key",
            "id",
            "--mode",
            "merge",
            "--merge-scope",
            "table",
        ],
    );
    ok_args(&run);
    write_in(
        &input,
        "b.ndjson",
        "{\"id\":1,\"v\":\"old\",\"ts\":\"2026-10-03T01:00:00Z\"}\n",
    );
    ok_args(&run);
    assert_eq!(
        query_csv(&[("t", &table)], "SELECT id, v FROM t"),
        ["1,new"]
    );
}

/// A mirror's MERGE moves a key's row to the window of its new change: the window it left
/// changed too (it is emptied here), and a notify target hears of it (only the published
/// window was notified, so a downstream copy of the old window kept the moved row).
#[test]
fn a_mirror_notifies_the_window_a_key_left() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let change = |seq: u32, ts: &str| {
        format!("{{\"id\":1,\"seq\":{seq},\"v\":\"v{seq}\",\"ts\":\"2026-10-03T{ts}Z\"}}\n")
    };
    write_in(&input, "a.ndjson", &change(1, "00:30:00"));
    let table = dir.path().join("t");
    let heard = dir.path().join("heard.ndjson");
    let notify = format!(
        "log=cat >> {}; echo >> {}",
        heard.display(),
        heard.display()
    );
    let run = run_args(
        "ndjson",
        &input,
        &table,
        &[
            "--window",
            "1h",
            "--key",
            "id",
            "--sequence-field",
            "seq",
            "--mode",
            "merge",
            "--merge-scope",
            "table",
            "--notify-command",
            &notify,
        ],
    );
    ok_args(&run);
    write_in(&input, "b.ndjson", &change(2, "02:30:00"));
    ok_args(&run);
    assert_eq!(
        query_csv(&[("t", &table)], "SELECT hour, seq FROM t"),
        ["02,2"]
    );
    let heard: Vec<(String, i64, String)> = std::fs::read_to_string(&heard)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let n: serde_json::Value = serde_json::from_str(l).unwrap();
            let text = |k: &str| n[k].as_str().unwrap_or_default().to_string();
            (text("address"), n["rows"].as_i64().unwrap(), text("reason"))
        })
        .collect();
    assert!(
        heard.contains(&("dt=2026-10-03/hour=00".into(), 0, "rewritten".into())),
        "{heard:?}"
    );
    assert!(
        heard.contains(&("dt=2026-10-03/hour=02".into(), 1, "complete".into())),
        "{heard:?}"
    );
}
