//! Change data capture: a table that mirrors a source's rows, with changes ordered by the
//! source's sequence (`--sequence-field`), through the real binary on real Delta tables.

use std::path::Path;

use crate::common::*;

/// A change of account `id` at log position `lsn`, made at `ts` (hh:mm:ss).
fn change(id: &str, lsn: Option<i64>, ts: &str, balance: i64) -> String {
    let lsn = lsn.map_or("null".to_string(), |l| l.to_string());
    format!("{{\"id\":\"{id}\",\"lsn\":{lsn},\"ts\":\"2026-10-03T{ts}Z\",\"balance\":{balance}}}\n")
}

fn mirror_args<'a>(input: &'a str, table: &'a str, scope: &'a str) -> Vec<&'a str> {
    let mut args = merge_args(input, table, "id", scope);
    args.extend(["--sequence-field", "lsn"]);
    args
}

/// `id,lsn,balance` of every row, sorted.
fn accounts(table: &Path) -> Vec<String> {
    query_csv(
        &[("t", table)],
        "SELECT id, lsn, balance FROM t ORDER BY id",
    )
}

/// The highest sequence wins whatever the event times and the arrival order say: a change
/// stamped later by a clock that runs ahead, but lower in the log, loses; a replay and a
/// duplicate change nothing; a change without its sequence is a dead letter.
#[test]
fn the_highest_sequence_wins_whatever_the_times_and_the_arrival_order() {
    let dir = tempfile::tempdir().unwrap();
    // a1: lsn 5 at 10:05 beats lsn 3 at 10:50 (a skewed clock). a2: lsn 9 arrives first and
    // its older lsn 4 after it, late and in another window. a3 has no sequence.
    let first = change("a1", Some(3), "10:50:00", 30)
        + &change("a1", Some(5), "10:05:00", 50)
        + &change("a2", Some(9), "11:10:00", 90)
        + &change("a3", None, "10:20:00", 1)
        + &change("a4", Some(7), "12:30:00", 70);
    let second = change("a2", Some(4), "10:15:00", 40)
        + &change("a1", Some(5), "10:05:00", 50)
        + &change("a4", Some(8), "12:31:00", 80);
    let expected = ["a1,5,50", "a2,9,90", "a4,8,80"];
    for scope in ["table", "window"] {
        let input = dir.path().join(format!("in-{scope}"));
        let table = dir.path().join(format!("t-{scope}"));
        let source = format!("ndjson:{}", input.display());
        let t = table.display().to_string();
        write_in(&input, "1.ndjson", &first);
        ok(&mirror_args(&source, &t, scope));
        write_in(&input, "2.ndjson", &second);
        ok(&mirror_args(&source, &t, scope));
        if scope == "table" {
            assert_eq!(accounts(&table), expected, "{scope} scope");
        } else {
            // Window scope keeps a key's row per window: a2's lsn 4 is alone in window 10.
            assert_eq!(
                accounts(&table),
                ["a1,5,50", "a2,4,40", "a2,9,90", "a4,8,80"],
                "{scope} scope"
            );
        }
        assert_eq!(
            dead_letters(&table),
            ["missing_sequence,1"],
            "{scope} scope"
        );
        let v = version(&table);
        ok(&mirror_args(&source, &t, scope));
        assert_eq!(version(&table), v, "{scope} scope: a rerun commits nothing");

        // The whole log again, in reverse, as a new file of the stream: nothing changes.
        let reversed: String = (first.clone() + &second)
            .lines()
            .rev()
            .map(|l| format!("{l}\n"))
            .collect();
        write_in(&input, "3.ndjson", &reversed);
        ok(&mirror_args(&source, &t, scope));
        assert_eq!(
            version(&table),
            v,
            "{scope} scope: a replay of the log commits nothing"
        );
    }
}

/// The sequence fields are part of the table's contract: a later run without the option
/// keeps them, a run that gives others is refused before it writes.
#[test]
fn the_sequence_field_is_part_of_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    write_in(
        &input,
        "1.ndjson",
        &(change("a1", Some(2), "10:00:00", 2) + &change("a1", Some(1), "10:30:00", 1)),
    );
    let source = format!("ndjson:{}", input.display());
    let table = dir.path().join("t");
    let t = table.display().to_string();
    ok(&mirror_args(&source, &t, "table"));
    assert_eq!(accounts(&table), ["a1,2,2"]);
    let status = ok(&["status", "--table", &t]);
    assert!(status.contains("sequence-field=lsn"), "{status}");

    // Left out: adopted from the table (lsn 3 beats lsn 2 though its time is earlier).
    write_in(&input, "2.ndjson", &change("a1", Some(3), "09:00:00", 3));
    ok(&["run", "--source", &source, "--table", &t]);
    assert_eq!(accounts(&table), ["a1,3,3"]);

    let v = version(&table);
    let mut other = mirror_args(&source, &t, "table");
    let at = other.iter().position(|a| *a == "lsn").unwrap();
    other[at] = "balance";
    let out = sluice(&other);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("sequence-field is lsn in the table, balance in this run"),
        "{stderr}"
    );
    assert_eq!(version(&table), v);
}

/// A sequence needs a key, and a field that orders.
#[test]
fn sequence_options_are_validated() {
    let dir = tempfile::tempdir().unwrap();
    write_in(
        dir.path(),
        "in.ndjson",
        &change("a1", Some(1), "10:00:00", 1),
    );
    let src = format!("ndjson:{}", dir.path().join("in.ndjson").display());
    let t = dir.path().join("t").display().to_string();
    for (extra, says) in [
        (
            vec!["--sequence-field", "lsn"],
            "--sequence-field: needs --key",
        ),
        (
            vec!["--key", "id", "--sequence-field", "nope"],
            "--sequence-field: the records have no field \"nope\"",
        ),
        (
            vec!["--key", "id", "--sequence-field", "lsn,"],
            "--sequence-field \"lsn,\": empty field name",
        ),
    ] {
        let mut args = vec!["run", "--source", &src, "--table", &t];
        args.extend(extra);
        assert_refused(&args, says);
    }
}

/// A change with an operation: `c`reate, `u`pdate or `d`elete.
pub(crate) fn op(id: &str, op: &str, lsn: i64, ts: &str, balance: i64) -> String {
    format!(
        "{{\"id\":\"{id}\",\"op\":\"{op}\",\"lsn\":{lsn},\"ts\":\"2026-10-03T{ts}Z\",\"balance\":{balance}}}\n"
    )
}

fn delete_args<'a>(input: &'a str, table: &'a str) -> Vec<&'a str> {
    let mut args = mirror_args(input, table, "table");
    args.extend(["--delete-when", "op = 'd'"]);
    args
}

/// `--delete-when`: a delete removes its key's row and keeps a tombstone, so a late change of
/// that key with a lower sequence leaves it deleted; a key deleted and created again is back;
/// a delete below the row's sequence changes nothing; a replay of the whole log commits
/// nothing.
#[test]
fn deletes_remove_rows_and_tombstones_keep_them_removed() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let table = dir.path().join("t");
    let source = format!("ndjson:{}", input.display());
    let t = table.display().to_string();
    let first = op("a1", "c", 1, "10:00:00", 1)
        + &op("a2", "c", 2, "10:05:00", 2)
        + &op("a1", "u", 3, "10:10:00", 3)
        + &op("a3", "c", 4, "10:12:00", 4)
        + &op("a2", "d", 6, "10:20:00", 0)
        // Deleted and created again in one window: the last change wins.
        + &op("a5", "c", 8, "10:30:00", 8)
        + &op("a5", "d", 9, "10:31:00", 0)
        + &op("a5", "c", 10, "10:32:00", 10)
        + &op("a4", "c", 5, "11:30:00", 5);
    write_in(&input, "1.ndjson", &first);
    ok(&delete_args(&source, &t));
    assert_eq!(accounts(&table), ["a1,3,3", "a3,4,4", "a4,5,5", "a5,10,10"]);

    // Late: an update of a2 older than its delete; a delete of a3; a delete of a1 older than
    // its row; a delete of a key the table never held.
    let second = op("a2", "u", 5, "10:15:00", 55)
        + &op("a3", "d", 7, "10:40:00", 0)
        + &op("a1", "d", 2, "10:06:00", 0)
        + &op("a6", "d", 12, "11:35:00", 0);
    write_in(&input, "2.ndjson", &second);
    ok(&delete_args(&source, &t));
    assert_eq!(accounts(&table), ["a1,3,3", "a4,5,5", "a5,10,10"]);
    // The tombstones, in a table of their own: a2's, a3's and a6's deletes.
    let tombstones = dir.path().join("t_tombstones");
    assert_eq!(
        query_csv(
            &[("s", &tombstones)],
            "SELECT id, lsn, deleted_at, pipeline FROM s ORDER BY id"
        ),
        [
            "a2,6,2026-10-03T10:20:00Z,sluice",
            "a3,7,2026-10-03T10:40:00Z,sluice",
            "a6,12,2026-10-03T11:35:00Z,sluice",
        ]
    );
    // Nothing of the deletes is in the table: readers see rows only.
    assert_eq!(scalar(&table, "SELECT count(*) FROM t WHERE op = 'd'"), "0");

    // A key created again after its delete, with a higher sequence, is back.
    write_in(&input, "3.ndjson", &op("a2", "c", 11, "11:40:00", 11));
    ok(&delete_args(&source, &t));
    assert_eq!(
        accounts(&table),
        ["a1,3,3", "a2,11,11", "a4,5,5", "a5,10,10"]
    );

    // The whole log again, shuffled, as a new file: nothing changes.
    let v = version(&table);
    let all = first + &second + &op("a2", "c", 11, "11:40:00", 11);
    let mut lines: Vec<&str> = all.lines().collect();
    lines.reverse();
    lines.rotate_left(3);
    write_in(&input, "4.ndjson", &(lines.join("\n") + "\n"));
    ok(&delete_args(&source, &t));
    assert_eq!(version(&table), v, "a replay of the log commits nothing");
    assert_eq!(
        accounts(&table),
        ["a1,3,3", "a2,11,11", "a4,5,5", "a5,10,10"]
    );
}

/// A mirror's MERGE reads only the files whose key statistics admit a changed key: five
/// hours of creates, a file each holding a run of keys, then an update in the third file, a
/// delete in the fifth and a new key. The fourth file lies between the two changed keys and is
/// left out too; the rows read back are the whole table's, changed.
#[test]
fn a_change_reads_only_the_files_that_may_hold_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let table = dir.path().join("t");
    let source = format!("ndjson:{}", input.display());
    let t = table.display().to_string();
    let creates: String = (0..100)
        .map(|i| {
            let ts = format!("{}:{:02}:00", 10 + i / 20, i % 20);
            op(&format!("k{i:04}"), "c", i + 1, &ts, i)
        })
        .collect();
    write_in(&input, "1.ndjson", &creates);
    ok(&delete_args(&source, &t));
    let changes = op("k0050", "u", 200, "15:00:00", 5000)
        + &op("k0090", "d", 201, "15:01:00", 0)
        + &op("k0500", "c", 202, "15:02:00", 500);
    write_in(&input, "2.ndjson", &changes);
    ok(&delete_args(&source, &t));

    let commits = commits(&table);
    let info = commits
        .values()
        .next_back()
        .and_then(|actions| actions.iter().find_map(|a| a.get("commitInfo")))
        .expect("the MERGE's commitInfo");
    assert_eq!(
        (
            info.pointer("/sluice/key_ranges/files")
                .and_then(|v| v.as_u64()),
            info.pointer("/sluice/key_ranges/files_pruned")
                .and_then(|v| v.as_u64()),
            info.pointer("/operationMetrics/num_target_files_scanned")
                .and_then(|v| v.as_u64()),
        ),
        (Some(5), Some(3), Some(2)),
        "5 files, 3 left out by the key ranges, 2 read: {info}"
    );
    let rows = accounts(&table);
    assert_eq!(
        rows.len(),
        100,
        "100 creates, a delete, a new key: {rows:?}"
    );
    assert!(rows.contains(&"k0050,200,5000".to_string()), "{rows:?}");
    assert!(rows.contains(&"k0500,202,500".to_string()), "{rows:?}");
    assert!(!rows.iter().any(|r| r.starts_with("k0090,")), "{rows:?}");
    let untouched = (0..100).filter(|&i| i != 50 && i != 90);
    for i in untouched {
        assert!(
            rows.contains(&format!("k{i:04},{},{i}", i + 1)),
            "k{i:04}: {rows:?}"
        );
    }
}

/// Deletes need a mirror: merge mode across the table, ordered by a sequence; and a
/// predicate that cannot fail on a value.
#[test]
fn delete_options_are_validated() {
    let dir = tempfile::tempdir().unwrap();
    write_in(dir.path(), "in.ndjson", &op("a1", "c", 1, "10:00:00", 1));
    let src = format!("ndjson:{}", dir.path().join("in.ndjson").display());
    let t = dir.path().join("t").display().to_string();
    let needs = "--delete-when: needs --mode merge --merge-scope table and --sequence-field";
    let window = merge_args(&src, &t, "id", "window");
    let unsequenced = merge_args(&src, &t, "id", "table");
    let mirror = mirror_args(&src, &t, "table");
    for (base, predicate, says) in [
        (&window, "op = 'd'", needs),
        (&unsequenced, "op = 'd'", needs),
        (&mirror, "nope = 'd'", "--delete-when \"nope = 'd'\""),
        (&mirror, "op = 1", "compares Text with Number"),
        (
            &mirror,
            "CAST(op AS INT) = 1",
            "nothing that could fail on a value",
        ),
        (&mirror, "op", "not a condition"),
    ] {
        let mut args = base.clone();
        args.extend(["--delete-when", predicate]);
        assert_refused(&args, says);
    }
    assert!(
        !dir.path().join("t").exists(),
        "a refused run writes nothing"
    );
}

/// `--scd 2` keeps every change as a version, current from its sequence to its key's next
/// change or delete, whatever the arrival order; the table records it, so a later run that
/// leaves it out still keeps history, and one that asks for `--scd 1` is refused.
#[test]
fn history_keeps_every_version_in_sequence_order() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let table = dir.path().join("h");
    let src = format!("ndjson:{}", input.display());
    let t = table.display().to_string();
    write_in(
        &input,
        "1.ndjson",
        &(op("a1", "c", 1, "10:00:00", 1)
            + &op("a1", "u", 4, "10:01:00", 4)
            + &op("a2", "c", 2, "10:02:00", 2)
            + &op("a2", "d", 5, "10:03:00", 2)
            + &op("a3", "d", 9, "10:05:00", 3)),
    );
    let mut args = delete_args(&src, &t);
    args.extend(["--scd", "2"]);
    ok(&args);
    let versions = || {
        query_csv(
            &[("t", &table)],
            "SELECT id, balance, __start_at, __end_at FROM t ORDER BY id, __start_at",
        )
    };
    assert_eq!(versions(), ["a1,1,1,4", "a1,4,4,", "a2,2,2,5"]);
    // Late: a change of a1 between its versions, one of a2 between its create and delete,
    // a3's create before its delete, a redelivery.
    write_in(
        &input,
        "2.ndjson",
        &(op("a1", "u", 3, "10:00:30", 3)
            + &op("a2", "u", 3, "10:02:30", 7)
            + &op("a3", "c", 8, "10:04:00", 8)
            + &op("a1", "u", 4, "10:01:00", 4)),
    );
    ok(&["run", "--source", &src, "--table", &t]);
    let all = [
        "a1,1,1,3", "a1,3,3,4", "a1,4,4,", "a2,2,2,3", "a2,7,3,5", "a3,8,8,9",
    ];
    assert_eq!(versions(), all);
    let v = version(&table);
    ok(&["run", "--source", &src, "--table", &t]);
    assert_eq!(version(&table), v, "a replay commits nothing");
    let status = ok(&["status", "--table", &t]);
    assert!(status.contains("scd=2"), "{status}");
    assert_refused(
        &["run", "--source", &src, "--table", &t, "--scd", "1"],
        "scd is 2 in the table, (none) in this run",
    );
}

/// `--scd 2` needs a mirror with one sequence field.
#[test]
fn history_options_are_validated() {
    let dir = tempfile::tempdir().unwrap();
    write_in(dir.path(), "in.ndjson", &op("a1", "c", 1, "10:00:00", 1));
    let src = format!("ndjson:{}", dir.path().join("in.ndjson").display());
    let t = dir.path().join("t").display().to_string();
    let needs = "--scd 2: needs --mode merge --merge-scope table and one --sequence-field";
    let window = mirror_args(&src, &t, "window");
    let unsequenced = merge_args(&src, &t, "id", "table");
    let mut two = merge_args(&src, &t, "id", "table");
    two.extend(["--sequence-field", "lsn,balance"]);
    for mut args in [window, unsequenced, two] {
        args.extend(["--scd", "2"]);
        assert_refused(&args, needs);
    }
    assert!(
        !dir.path().join("t").exists(),
        "a refused run writes nothing"
    );
}

/// `sluice expire` counts the tombstones of deletes older than its cutoff (a dry run), then
/// removes them with --apply, leaving newer ones and the table's rows; with `--table`, the
/// table's tombstones expire with its windows.
#[test]
fn old_tombstones_expire() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let table = dir.path().join("t");
    let source = format!("ndjson:{}", input.display());
    let t = table.display().to_string();
    // Two deletes in October, one a day ahead of this machine's clock.
    let tomorrow = chrono::Utc::now() + chrono::Duration::days(1);
    let later = format!(
        "{{\"id\":\"a3\",\"op\":\"d\",\"lsn\":9,\"ts\":\"{}\",\"balance\":0}}\n",
        tomorrow.format("%Y-%m-%dT%H:%M:%SZ")
    );
    let log = op("a1", "c", 1, "10:00:00", 1)
        + &op("a1", "d", 2, "10:01:00", 0)
        + &op("a2", "d", 3, "10:02:00", 0)
        + &op("a4", "c", 4, "10:03:00", 4)
        + &later;
    write_in(&input, "1.ndjson", &log);
    ok(&delete_args(&source, &t));
    let tombstones = dir.path().join("t_tombstones");
    let count = || scalar(&tombstones, "SELECT count(*) FROM t");
    assert_eq!(count(), "3");
    // --tombstones alone: `--table` would expire the table's October windows too.
    let s = tombstones.display().to_string();
    let dry = ok(&["expire", "--tombstones", &s, "--older-than", "1h"]);
    assert!(
        dry.contains("sluice expire: 2 tombstones of deletes before"),
        "{dry}"
    );
    assert_eq!(count(), "3", "a dry run removes nothing");
    let applied = ok(&[
        "expire",
        "--tombstones",
        &s,
        "--older-than",
        "1h",
        "--apply",
    ]);
    assert!(
        applied.contains("2 tombstones of deletes before"),
        "{applied}"
    );
    assert_eq!(count(), "1");
    assert_eq!(accounts(&table), ["a4,4,4"]);
    let both = ok(&["expire", "--table", &t, "--older-than", "1h", "--apply"]);
    assert!(both.contains("0 tombstones of deletes before"), "{both}");
    assert!(both.contains("sluice expire: 1 windows (1 rows)"), "{both}");
}

/// A Debezium change event of table `users`: `before`/`after` rows, the operation, the
/// source block with the log position and the commit time.
pub(crate) fn debezium(op: &str, before: &str, after: &str, lsn: i64, minute: u32) -> String {
    let ts_ms = 1_791_036_000_000i64 + i64::from(minute) * 60_000;
    format!(
        "{{\"before\":{before},\"after\":{after},\"op\":\"{op}\",\"source\":{{\"connector\":\"postgresql\",\"table\":\"users\",\"lsn\":{lsn},\"txId\":{},\"ts_ms\":{ts_ms}}},\"ts_ms\":{ts_ms}}}\n",
        lsn / 10
    )
}

/// A user row of the Debezium tests (`after`), and one with its key only (a delete's
/// `before`).
pub(crate) fn user(id: i64, name: &str) -> String {
    format!("{{\"id\":{id},\"name\":\"{name}\",\"score\":1.50}}")
}

pub(crate) fn key_only(id: i64) -> String {
    format!("{{\"id\":{id},\"name\":null,\"score\":null}}")
}

/// Where a Debezium test's change files and table go.
struct Users {
    _dir: tempfile::TempDir,
    input: std::path::PathBuf,
    table: std::path::PathBuf,
    /// The `--source` and `--table` arguments.
    source: String,
    t: String,
}

impl Users {
    fn new() -> Users {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in");
        let table = dir.path().join("users");
        let source = format!("ndjson:{}", input.display());
        let t = table.display().to_string();
        Users {
            _dir: dir,
            input,
            table,
            source,
            t,
        }
    }
}

/// A snapshot's read and the first streamed change of its row at the same log position: the
/// change wins, whichever arrives first and however often the read is delivered again (by
/// `__streamed`, after the position in the default sequence).
#[test]
fn a_change_at_the_snapshot_position_wins_over_the_read() {
    let users = Users::new();
    let (input, table, source, t) = (&users.input, &users.table, &users.source, &users.t);
    let snapshot = debezium("r", "null", &user(1, "ada"), 100, 0)
        + &debezium("r", "null", &user(2, "bob"), 100, 0)
        + &debezium("r", "null", &user(3, "cyd"), 100, 0);
    write_in(input, "1.ndjson", &snapshot);
    let mut args = vec!["run", "--source", &source, "--table", &t];
    args.extend(debezium_mirror("id"));
    ok(&args);
    // Streamed at the snapshot's position: an update of ada, a delete of bob. In the same
    // file, cyd's read delivered again after cyd's update.
    let streamed = debezium("u", &user(1, "ada"), &user(1, "ada l."), 100, 1)
        + &debezium("d", &key_only(2), "null", 100, 1)
        + &debezium("u", &user(3, "cyd"), &user(3, "cyd k."), 100, 1)
        + &debezium("r", "null", &user(3, "cyd"), 100, 0);
    write_in(input, "2.ndjson", &streamed);
    ok(&["run", "--source", source, "--table", t]);
    let rows = || {
        query_csv(
            &[("t", table)],
            "SELECT id, name, __op, __streamed FROM t ORDER BY id",
        )
    };
    assert_eq!(rows(), ["1,ada l.,u,true", "3,cyd k.,u,true"]);
    // The snapshot again (a connector that restarted its snapshot): nothing changes.
    write_in(input, "3.ndjson", &snapshot);
    let v = version(table);
    ok(&["run", "--source", source, "--table", t]);
    assert_eq!(rows(), ["1,ada l.,u,true", "3,cyd k.,u,true"]);
    assert_eq!(version(table), v, "a read delivered again commits nothing");
}

/// `--envelope debezium`: each change's row lands (a delete's `before` names its key), the
/// log position orders a key's changes and `__op = 'd'` deletes, by default; a snapshot read
/// is an upsert; what is not a change (a truncate, a torn line) is a dead letter
/// `bad_envelope`.
#[test]
fn debezium_change_events_mirror_the_source_table() {
    let users = Users::new();
    let (input, table, source, t) = (&users.input, &users.table, &users.source, &users.t);
    let log = debezium("r", "null", &user(1, "ada"), 100, 0)
        + &debezium("r", "null", &user(2, "bob"), 100, 0)
        + &debezium("c", "null", &user(3, "cyd"), 200, 5)
        + &debezium("u", &user(1, "ada"), &user(1, "ada l."), 210, 6)
        + &debezium("d", &key_only(2), "null", 220, 7)
        + "{\"before\":null,\"after\":null,\"op\":\"t\",\"source\":{\"lsn\":225}}\n"
        + "{\"op\":\"u\",\"after\":{\"id\":3\n"
        + &debezium("u", &user(3, "cyd"), &user(3, "cyd k."), 230, 75);
    write_in(input, "1.ndjson", &log);
    let mut args = vec![
        "run",
        "--source",
        &source,
        "--table",
        &t,
        "--lateness",
        "10m",
    ];
    args.extend(debezium_mirror("id"));
    ok(&args);
    let rows = || {
        query_csv(
            &[("t", table)],
            "SELECT id, name, score, __op FROM t ORDER BY id",
        )
    };
    assert_eq!(rows(), ["1,ada l.,1.5,u", "3,cyd k.,1.5,u"]);
    assert_eq!(dead_letters(table), ["bad_envelope,2"]);
    let status = ok(&["status", "--table", t]);
    for term in [
        "envelope=debezium",
        "sequence-field=__source.lsn,__streamed",
        "delete-when=__op = 'd'",
    ] {
        assert!(status.contains(term), "{term}: {status}");
    }

    // Late: an update of bob older than his delete, and a redelivery of ada's update.
    write_in(
        input,
        "2.ndjson",
        &(debezium("u", &user(2, "bob"), &user(2, "bob m."), 215, 6)
            + &debezium("u", &user(1, "ada"), &user(1, "ada l."), 210, 6)),
    );
    let v = version(table);
    ok(&["run", "--source", source, "--table", t]);
    assert_eq!(rows(), ["1,ada l.,1.5,u", "3,cyd k.,1.5,u"]);
    assert_eq!(version(table), v, "nothing changed, nothing committed");
}

/// An envelope reads records that can hold a change's rows: a CSV record is flat, refused.
#[test]
fn an_envelope_needs_records_that_hold_rows() {
    let dir = tempfile::tempdir().unwrap();
    write_in(dir.path(), "in.csv", "id,ts\n1,2026-10-03T10:00:00Z\n");
    let src = format!("csv:{}", dir.path().join("in.csv").display());
    let t = dir.path().join("t").display().to_string();
    assert_refused(
        &[
            "run",
            "--source",
            &src,
            "--table",
            &t,
            "--envelope",
            "debezium",
        ],
        "--envelope: a CSV record is flat",
    );
}

/// Debezium on Kafka writes a tombstone (a message without a value) after each delete event,
/// for log compaction: under `--envelope debezium` each is left out and counted, neither a
/// row nor a dead letter, and the delete event before it deletes the row.
#[cfg(feature = "kafka")]
#[test]
fn kafka_tombstones_after_debezium_deletes_are_left_out_and_counted() {
    use crate::servers::{create_topic, produce_values, tansu};
    let broker = tansu();
    create_topic(&broker, "users", 1);
    let events = [
        debezium("c", "null", &user(1, "ada"), 100, 0),
        debezium("c", "null", &user(2, "bob"), 110, 1),
        debezium("d", &key_only(2), "null", 120, 2),
        debezium("u", &user(1, "ada"), &user(1, "ada l."), 130, 3),
        debezium("d", &key_only(1), "null", 140, 4),
        debezium("c", "null", &user(3, "cyd"), 150, 5),
    ];
    let mut messages: Vec<(&str, Option<&[u8]>)> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let key = ["1", "2", "2", "1", "1", "3"][i];
        messages.push((key, Some(e.trim_end().as_bytes())));
        if e.contains("\"op\":\"d\"") {
            messages.push((key, None));
        }
    }
    produce_values(&broker, "users", messages);
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("users");
    let t = table.display().to_string();
    // A Kafka source has no file to infer from: the rows' schema, envelope fields included.
    let fields = [
        ("id", "long"),
        ("name", "string"),
        ("score", "double"),
        ("__op", "string"),
        (
            "__source",
            "struct<connector:string,table:string,lsn:long,txId:long,ts_ms:long>",
        ),
        ("__streamed", "boolean"),
    ];
    let schema: String = fields
        .iter()
        .map(|(n, t)| format!("[[fields]]\nname = \"{n}\"\ntype = \"{t}\"\n\n"))
        .collect();
    write_in(dir.path(), "schema.toml", &schema);
    let schema = dir.path().join("schema.toml").display().to_string();
    let mut args = vec![
        "run",
        "--source",
        "kafka:users",
        "--brokers",
        &broker.address,
    ];
    args.extend(["--table", &t, "--until-idle", "3s", "--schema", &schema]);
    args.extend(debezium_mirror("id"));
    let stderr = ok_stderr(&args);
    assert!(
        stderr.contains("2 Kafka tombstones (messages without a value) left out"),
        "{stderr}"
    );
    let rows = query_csv(&[("t", &table)], "SELECT id, name FROM t ORDER BY id");
    assert_eq!(rows, ["3,cyd"]);
    assert!(
        !dlq_of(&table).exists() || dead_letters(&table).is_empty(),
        "no dead letter: {:?}",
        dead_letters(&table)
    );
}
