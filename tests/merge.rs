//! `--mode merge`: upserts on a natural key with a deterministic winner, through the real
//! binary on real Delta tables. (The SIGKILL soak in `e2e.rs` covers merge mode too.)

use std::path::Path;

use crate::common::*;

fn order(id: &str, ts: &str, amount: i64) -> String {
    format!("{{\"order_id\":\"{id}\",\"ts\":\"2026-10-03T{ts}Z\",\"amount\":{amount}}}\n")
}

fn merge_run(input: &Path, table: &Path, scope: &str) -> String {
    let source = format!("ndjson:{}", input.display());
    let args = merge_args(&source, table.to_str().unwrap(), "order_id", scope);
    ok(&args)
}

/// `order_id,ts,amount,hour` of every row, sorted.
fn orders(table: &Path) -> Vec<String> {
    query_csv(
        &[("t", table)],
        "SELECT order_id, ts, amount, hour FROM t ORDER BY order_id, hour",
    )
}

fn keys_unique_per(table: &Path, scope: &str) -> bool {
    let per = if scope == "table" {
        "order_id"
    } else {
        "order_id, dt, hour"
    };
    query_csv(
        &[("t", table)],
        &format!("SELECT count(*) FROM (SELECT {per} FROM t GROUP BY {per} HAVING count(*) > 1)"),
    ) == ["0"]
}

/// A later event for a key wins whether it arrives first or last; an older delivery and a
/// duplicate delivery change nothing; a rerun commits nothing.
#[test]
fn a_later_event_for_a_key_wins_whatever_the_arrival_order() {
    let dir = tempfile::tempdir().unwrap();
    // First delivery: o1 twice (a duplicate), o2; then an 11:30 event seals window 10.
    let first = order("o1", "10:05:00", 1)
        + &order("o1", "10:05:00", 1)
        + &order("o2", "10:10:00", 2)
        + &order("o9", "11:30:00", 9);
    // Later: a newer o1 (wins), an older o2 (loses), a new key o3, all late for window 10.
    let second =
        order("o1", "10:20:00", 10) + &order("o2", "10:01:00", 20) + &order("o3", "10:30:00", 3);
    let expected = [
        "o1,2026-10-03T10:20:00Z,10,10",
        "o2,2026-10-03T10:10:00Z,2,10",
        "o3,2026-10-03T10:30:00Z,3,10",
        "o9,2026-10-03T11:30:00Z,9,11",
    ];

    let in_order = dir.path().join("in-order");
    let table = dir.path().join("t");
    write_in(&in_order, "1.ndjson", &first);
    let out = merge_run(&in_order, &table, "window");
    eprintln!("first delivery: {out}");
    write_in(&in_order, "2.ndjson", &second);
    let out = merge_run(&in_order, &table, "window");
    eprintln!("second delivery: {out}");
    assert_eq!(orders(&table), expected);
    assert!(keys_unique_per(&table, "window"));
    let v = version(&table);
    merge_run(&in_order, &table, "window");
    assert_eq!(version(&table), v, "a rerun commits nothing");

    // The same deliveries in the opposite order, in one run and in two.
    let reversed = dir.path().join("reversed");
    write_in(&reversed, "1.ndjson", &second);
    write_in(&reversed, "2.ndjson", &first);
    let table = dir.path().join("reversed-table");
    merge_run(&reversed, &table, "window");
    assert_eq!(orders(&table), expected);
    let split = dir.path().join("split");
    let table = dir.path().join("split-table");
    write_in(&split, "1.ndjson", &second);
    merge_run(&split, &table, "window");
    write_in(&split, "2.ndjson", &first);
    merge_run(&split, &table, "window");
    assert_eq!(orders(&table), expected);
    assert!(keys_unique_per(&table, "window"));
}

/// A window whose files a MERGE rewrote (files without coverage) keeps its rows when a later
/// run publishes more late rows of it: that publication must merge into the window, never
/// replace it. (A first publication by swap, tried for speed, lost the window's rows here: the
/// table does not tell which windows a MERGE published.)
#[test]
fn a_window_a_merge_rewrote_keeps_its_rows_when_a_later_run_adds_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let table = dir.path().join("t");
    // Run 1: window 10 published with o1 and o2 (o9 seals it).
    write_in(
        &input,
        "1.ndjson",
        &(order("o1", "10:05:00", 1) + &order("o2", "10:10:00", 2) + &order("o9", "11:30:00", 9)),
    );
    merge_run(&input, &table, "window");
    // Run 2: a newer o1, late: the MERGE rewrites window 10's file.
    write_in(&input, "2.ndjson", &order("o1", "10:20:00", 10));
    merge_run(&input, &table, "window");
    // Run 3, a new process: a new key for window 10, late again.
    write_in(&input, "3.ndjson", &order("o4", "10:40:00", 4));
    merge_run(&input, &table, "window");
    assert_eq!(
        orders(&table),
        [
            "o1,2026-10-03T10:20:00Z,10,10",
            "o2,2026-10-03T10:10:00Z,2,10",
            "o4,2026-10-03T10:40:00Z,4,10",
            "o9,2026-10-03T11:30:00Z,9,11",
        ]
    );
    assert!(keys_unique_per(&table, "window"));
}

/// `--merge-scope table`: a key is unique across the table, so a key whose newer event falls
/// in another window moves there; with the default window scope each window keeps its row.
#[test]
fn table_scope_keeps_one_row_per_key_across_windows() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    write_in(
        &input,
        "1.ndjson",
        &(order("o1", "10:05:00", 1) + &order("o2", "10:06:00", 2) + &order("o9", "12:30:00", 9)),
    );
    write_in(
        &input,
        "2.ndjson",
        &(order("o1", "11:05:00", 11) + &order("o2", "09:59:00", 20) + &order("o8", "13:30:00", 8)),
    );
    let table = dir.path().join("table-scope");
    merge_run(&input, &table, "table");
    let rows = orders(&table);
    eprintln!("table scope: {rows:?}");
    assert_eq!(
        rows,
        [
            // o1 moved to window 11 (later event); o2's 09:59 delivery is older: it loses.
            "o1,2026-10-03T11:05:00Z,11,11",
            "o2,2026-10-03T10:06:00Z,2,10",
            "o8,2026-10-03T13:30:00Z,8,13",
            "o9,2026-10-03T12:30:00Z,9,12",
        ]
    );
    assert!(keys_unique_per(&table, "table"));
    let v = version(&table);
    merge_run(&input, &table, "table");
    assert_eq!(version(&table), v, "a rerun commits nothing");

    let table = dir.path().join("window-scope");
    merge_run(&input, &table, "window");
    assert_eq!(
        orders(&table),
        [
            "o1,2026-10-03T10:05:00Z,1,10",
            "o1,2026-10-03T11:05:00Z,11,11",
            "o2,2026-10-03T09:59:00Z,20,09",
            "o2,2026-10-03T10:06:00Z,2,10",
            "o8,2026-10-03T13:30:00Z,8,13",
            "o9,2026-10-03T12:30:00Z,9,12",
        ]
    );
    assert!(keys_unique_per(&table, "window"));
}

/// Merge mode needs a key; the scope needs merge mode.
#[test]
fn merge_mode_options_are_validated() {
    let dir = tempfile::tempdir().unwrap();
    write_in(dir.path(), "in.ndjson", &order("o1", "10:00:00", 1));
    let src = format!("ndjson:{}", dir.path().join("in.ndjson").display());
    let t = dir.path().join("t").display().to_string();
    for (extra, says) in [
        (vec!["--mode", "merge"], "--mode merge: needs --key"),
        (vec!["--mode", "upsert"], "[possible values: swap, merge]"),
        (
            vec!["--merge-scope", "table"],
            "--merge-scope: only with --mode merge",
        ),
        (
            vec![
                "--mode",
                "merge",
                "--key",
                "order_id",
                "--merge-scope",
                "world",
            ],
            "[possible values: window, table]",
        ),
    ] {
        let mut args = vec!["run", "--source", &src, "--table", &t];
        args.extend(extra);
        assert_refused(&args, says);
    }
}
