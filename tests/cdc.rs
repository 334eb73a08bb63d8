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
            "sequence field",
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
