//! `--change-feed`: Delta's change data feed, read back with Python delta-rs (`load_cdf`).
//! For every version of every table, the feed of that version applied to the table as it was
//! before gives the table as it is (tests/interop/change_feed.py); a window rewritten for its
//! late rows shows those rows, not every row deleted and inserted again. Covered: a run, a
//! late rewrite, a backfill over a corrected source, an expiry (swap, keyed and by position),
//! a compaction (no changes), a merge, a mirror with deletes, a history's moved ends, a
//! dead-letter replay. A table without the property writes
//! no change files.

use std::path::Path;

use crate::common::*;

/// The feed of `table` checked version by version against the table (from version 0), by
/// `key`; per version its operation and change counts, as the script prints them.
fn feed(table: &Path, key: &str) -> Vec<serde_json::Value> {
    let out = interop(
        "change_feed.py",
        &[table.as_os_str(), "0".as_ref(), key.as_ref()],
    );
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The change counts of the newest version.
fn last_changes(table: &Path, key: &str) -> serde_json::Value {
    feed(table, key).last().unwrap()["changes"].clone()
}

fn event(id: &str, minute: u32, value: i64) -> String {
    format!(
        "{{\"id\":\"{id}\",\"ts\":\"2026-10-03T{:02}:{:02}:00Z\",\"value\":{value}}}\n",
        14 + minute / 60,
        minute % 60
    )
}

fn first_events() -> String {
    (0..12)
        .map(|i| event(&format!("k{i:02}"), i * 10, 10 + i as i64))
        .collect()
}

#[test]
fn a_swap_table_s_feed_is_the_true_difference_of_each_version() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.ndjson");
    std::fs::write(&file, first_events()).unwrap();
    let source = format!("ndjson:{}", file.display());
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let run = [
        "run", "--source", &source, "--table", t, "--window", "1h", "--key", "id",
    ];
    let mut first = run.to_vec();
    first.push("--change-feed");
    ok(&first);
    let props = scalar(&table, "SELECT 1");
    assert_eq!(props, "1");
    // Late rows for the first hour: a new key, and a later change of k01.
    let late = event("k99", 30, 7) + &event("k01", 31, 55);
    let mut text = first_events();
    text.push_str(&late);
    std::fs::write(&file, &text).unwrap();
    ok(&run);
    assert_eq!(
        last_changes(&table, "id"),
        serde_json::json!({"insert": 1, "update_preimage": 1, "update_postimage": 1}),
        "the rewrite of the hour shows its late rows, not every row again"
    );
    // The source corrected in place (same offsets): k02 gone, k03's value changed.
    let k02 = event("k02", 20, 12);
    let corrected = text
        .replacen(&k02, &format!("{}\n", " ".repeat(k02.len() - 1)), 1)
        .replacen(
            "\"k03\",\"ts\":\"2026-10-03T14:30:00Z\",\"value\":13",
            "\"k03\",\"ts\":\"2026-10-03T14:30:00Z\",\"value\":93",
            1,
        );
    assert_ne!(corrected, text);
    std::fs::write(&file, &corrected).unwrap();
    // Recomputed from the source with `range`, republishing complete windows too.
    let recompute = |command: &str, range: &[&str]| {
        let mut args = vec![command, "--source", &source, "--table", t, "--window", "1h"];
        args.extend(["--key", "id", "--force"]);
        args.extend_from_slice(range);
        ok(&args);
    };
    recompute(
        "backfill",
        &["--from", "2026-10-03T14:00Z", "--to", "2026-10-03T16:00Z"],
    );
    assert_eq!(
        last_changes(&table, "id"),
        serde_json::json!({"delete": 1, "update_preimage": 1, "update_postimage": 1})
    );
    // A forced rewrite of an hour from the same source changes no row: an empty feed.
    let before = version(&table);
    recompute("rewrite", &["--at", "2026-10-03T15"]);
    assert_eq!(version(&table), before + 1, "the hour is republished");
    assert_eq!(last_changes(&table, "id"), serde_json::json!({}));
    // An expiry removes both windows: every row a delete (no change files needed).
    ok(&["expire", "--table", t, "--older-than", "1d", "--apply"]);
    let deletes = last_changes(&table, "id");
    assert_eq!(deletes, serde_json::json!({"delete": 12}));

    // The same runs into a table without the property write no change files.
    let plain = dir.path().join("plain");
    let p = plain.to_str().unwrap();
    std::fs::write(&file, first_events()).unwrap();
    ok(&[
        "run", "--source", &source, "--table", p, "--window", "1h", "--key", "id",
    ]);
    std::fs::write(&file, &text).unwrap();
    ok(&[
        "run", "--source", &source, "--table", p, "--window", "1h", "--key", "id",
    ]);
    assert!(table.join("_change_data").exists());
    assert!(
        !plain.join("_change_data").exists(),
        "a table without the feed has change files"
    );
}

#[test]
fn a_table_keyed_by_position_and_a_replay_keep_their_feed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.ndjson");
    // One record with a time the table's format cannot read: a dead letter until replayed.
    let text = first_events() + "{\"id\":\"odd\",\"ts\":\"03/10/2026 14:45\",\"value\":1}\n";
    std::fs::write(&file, &text).unwrap();
    let source = format!("ndjson:{}", file.display());
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    ok(&[
        "run",
        "--source",
        &source,
        "--table",
        t,
        "--window",
        "1h",
        "--change-feed",
    ]);
    std::fs::write(&file, text.clone() + &event("k50", 5, 3)).unwrap();
    ok(&["run", "--source", &source, "--table", t, "--window", "1h"]);
    assert_eq!(
        last_changes(&table, "_sluice_source,_sluice_offset"),
        serde_json::json!({"insert": 1})
    );
    // The late row went in a file of its own: a compaction rewrites the hour, same rows.
    let before = version(&table);
    ok(&["compact", "--table", t]);
    assert_eq!(
        version(&table),
        before + 1,
        "the hour of two files is compacted"
    );
    let compacted = feed(&table, "_sluice_source,_sluice_offset");
    assert_eq!(compacted.last().unwrap()["changes"], serde_json::json!({}));
    ok(&[
        "dead-letters",
        "--table",
        t,
        "--replay",
        "--time-format",
        "%d/%m/%Y %H:%M",
    ]);
    assert_eq!(
        last_changes(&table, "_sluice_source,_sluice_offset"),
        serde_json::json!({"insert": 1})
    );
}

#[test]
fn merges_and_a_mirror_s_deletes_keep_their_feed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.ndjson");
    std::fs::write(&file, first_events()).unwrap();
    let source = format!("ndjson:{}", file.display());
    let table = dir.path().join("m");
    let t = table.to_str().unwrap();
    let mut merge = merge_args(&source, t, "id", "window");
    merge.push("--change-feed");
    ok(&merge);
    std::fs::write(
        &file,
        first_events() + &event("k01", 31, 55) + &event("k98", 32, 1),
    )
    .unwrap();
    ok(&merge);
    assert_eq!(
        last_changes(&table, "id"),
        serde_json::json!({"insert": 1, "update_preimage": 1, "update_postimage": 1})
    );

    // A mirror: changes with a sequence, a delete among them.
    let change = |id: &str, lsn: i64, minute: u32, op: &str| {
        format!("{{\"id\":\"{id}\",\"lsn\":{lsn},\"ts\":\"2026-10-03T14:{minute:02}:00Z\",\"op\":\"{op}\"}}\n")
    };
    let log = dir.path().join("log.ndjson");
    let first = change("a", 1, 0, "c") + &change("b", 2, 1, "c") + &change("c", 3, 2, "c");
    std::fs::write(&log, &first).unwrap();
    let log_source = format!("ndjson:{}", log.display());
    let mirror = dir.path().join("mirror");
    let mt = mirror.to_str().unwrap();
    let mut args = merge_args(&log_source, mt, "id", "table");
    args.extend([
        "--sequence-field",
        "lsn",
        "--delete-when",
        "op = 'd'",
        "--change-feed",
    ]);
    ok(&args);
    std::fs::write(
        &log,
        first + &change("b", 4, 3, "d") + &change("a", 5, 4, "u"),
    )
    .unwrap();
    ok(&args);
    let last = last_changes(&mirror, "id");
    assert_eq!(last["delete"], 1, "{last}");
    assert_eq!(last["update_postimage"], 1, "{last}");
}

/// A history (`--scd 2`): a later change of a key closes its current version (its
/// `__end_at` moves) and opens a new one; the feed says exactly that.
#[test]
fn a_history_s_moved_ends_are_in_its_feed() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.ndjson");
    let change = |id: &str, lsn: i64, minute: u32, value: i64| {
        format!("{{\"id\":\"{id}\",\"lsn\":{lsn},\"ts\":\"2026-10-03T14:{minute:02}:00Z\",\"value\":{value}}}\n")
    };
    let first = change("a", 1, 0, 1) + &change("b", 2, 1, 1) + &change("a", 3, 2, 2);
    std::fs::write(&log, &first).unwrap();
    let source = format!("ndjson:{}", log.display());
    let table = dir.path().join("history");
    let t = table.to_str().unwrap();
    let mut args = merge_args(&source, t, "id", "table");
    args.extend(["--sequence-field", "lsn", "--scd", "2", "--change-feed"]);
    ok(&args);
    std::fs::write(&log, first + &change("a", 4, 3, 3)).unwrap();
    ok(&args);
    let last = last_changes(&table, "id,lsn");
    assert_eq!(
        last,
        serde_json::json!({"insert": 1, "update_preimage": 1, "update_postimage": 1}),
        "a's version of lsn 3 closed, lsn 4 opened"
    );
}
