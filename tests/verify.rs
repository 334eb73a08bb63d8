//! `sluice verify` finds each broken promise in a table sluice wrote, once another engine or
//! a hand broke it: a deleted data file, a key written twice by hand into a window, a mirror
//! key twice, an overlapping history version, a row above its tombstone, an offset moved back.
//! (Every table the end-to-end tests read back is verified to hold: `common::sorted_rows`,
//! `common::compare_with_oracle` and the matrix call it.)

use std::path::Path;

use crate::common::{interop, ok, sluice, verified, version, write_in};

/// The change log of docs/cdc.md: creates, an update and a delete over two hours.
const CHANGES: &str = r#"{"id": 1, "op": "c", "lsn": 101, "ts": "2026-10-03T14:00:05Z", "name": "ada"}
{"id": 2, "op": "c", "lsn": 102, "ts": "2026-10-03T14:00:09Z", "name": "bob"}
{"id": 1, "op": "u", "lsn": 105, "ts": "2026-10-03T14:20:00Z", "name": "ada"}
{"id": 2, "op": "d", "lsn": 107, "ts": "2026-10-03T14:30:00Z", "name": "bob"}
{"id": 3, "op": "c", "lsn": 110, "ts": "2026-10-03T15:40:00Z", "name": "cyd"}
"#;

/// `sluice verify --format json` of `table`: its exit status and report.
fn verify(table: &Path) -> (Option<i32>, serde_json::Value) {
    let t = table.display().to_string();
    let out = sluice(&["verify", "--table", &t, "--format", "json"]);
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "verify printed no report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report)
}

/// The findings of a report as (check, version).
fn findings(report: &serde_json::Value) -> Vec<(String, Option<u64>)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["check"].as_str().unwrap().to_string(),
                f["version"].as_u64(),
            )
        })
        .collect()
}

/// A mirror of the change log on `id`, ordered by `lsn`, with deletes.
const MIRROR: [&str; 8] = [
    "--sequence-field",
    "lsn",
    "--mode",
    "merge",
    "--merge-scope",
    "table",
    "--delete-when",
    "op = 'd'",
];

/// The findings of a table that breaks a promise (exit 4): (check, version) and messages.
fn broken(table: &Path) -> (Vec<(String, Option<u64>)>, Vec<String>) {
    let (code, report) = verify(table);
    assert_eq!(code, Some(4), "{report}");
    assert_eq!(report["holds"], false, "{report}");
    let messages = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["message"].as_str().unwrap().to_string())
        .collect();
    (findings(&report), messages)
}

fn assert_holds(table: &Path) {
    let (code, report) = verify(table);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["holds"], true, "{report}");
}

fn run_changes(dir: &Path, table: &Path, extra: &[&str]) {
    let input = dir.join("changes");
    write_in(&input, "1.ndjson", CHANGES);
    let source = format!("ndjson:{}", input.display());
    let t = table.display().to_string();
    let mut args = vec![
        "run", "--source", &source, "--table", &t, "--window", "1h", "--key", "id",
    ];
    args.extend_from_slice(extra);
    ok(&args);
}

fn edit(args: &[&str]) -> u64 {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    interop("hand_edit.py", &args)
        .trim()
        .parse()
        .expect("the edit's version")
}

#[test]
fn a_window_table_with_a_file_deleted_and_a_key_written_twice() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    run_changes(dir.path(), &table, &[]);
    assert_holds(&table);
    let (_, report) = verify(&table);
    assert_eq!(report["pipelines_checked"], serde_json::json!(["sluice"]));
    assert_eq!(report["windows_compared"], 2, "{report}");

    // Another engine appends cyd's row again, into her window.
    let t = table.display().to_string();
    let twice = edit(&["copy", &t, "id", "3"]);
    let (found, messages) = broken(&table);
    assert_eq!(
        found,
        vec![
            ("window_rows".into(), Some(twice)),
            ("duplicate_key".into(), Some(twice)),
        ],
        "{messages:?}"
    );
    let duplicate = &messages[1];
    assert!(
        duplicate.contains("dt=2026-10-03, hour=15, id=3 is held by 2 rows"),
        "{duplicate}"
    );

    // A data file of the other window is deleted.
    let hour = table.join("dt=2026-10-03/hour=14");
    let file = std::fs::read_dir(&hour)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(&file).unwrap();
    let (code, report) = verify(&table);
    assert_eq!(code, Some(4), "{report}");
    let found = findings(&report);
    assert_eq!(found[0], ("missing_file".into(), Some(1)), "{report}");
    assert!(
        report["findings"][0]["message"]
            .as_str()
            .unwrap()
            .contains(file.file_name().unwrap().to_str().unwrap()),
        "{report}"
    );
    assert!(
        found.contains(&("duplicate_key".into(), Some(twice))),
        "{report}"
    );
}

#[test]
fn a_mirror_with_a_key_twice_and_a_row_above_its_tombstone() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("users");
    run_changes(dir.path(), &table, &MIRROR);
    assert_holds(&table);

    let t = table.display().to_string();
    let tombstones = format!("{t}_tombstones");
    // cyd (lsn 110) deleted at lsn 200, the row left in place: as a crash between the
    // tombstone's commit and the data commit leaves it, for good.
    edit(&["tombstone", &tombstones, "3", "200"]);
    let twice = edit(&["copy", &t, "id", "1"]);
    let (found, messages) = broken(&table);
    assert_eq!(
        found,
        vec![
            ("duplicate_key".into(), Some(twice)),
            ("tombstone_above_row".into(), Some(2)),
        ],
        "{messages:?}"
    );
    assert!(
        messages[0].starts_with("id=1 is held by 2 rows in a mirror"),
        "{messages:?}"
    );
    assert!(
        messages[1]
            .starts_with("id=3 is in the table at sequence 110 while its tombstone is at 200"),
        "{messages:?}"
    );
}

#[test]
fn a_history_with_an_overlapping_version() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("h");
    let history = [&MIRROR[..], &["--scd", "2"]].concat();
    run_changes(dir.path(), &table, &history);
    assert_holds(&table);

    // A second current version of ada, starting inside her first one.
    let t = table.display().to_string();
    let overlap = edit(&["version", &t, "1", "103"]);
    // It overlaps both ways: ada's first version now ends after the next one starts, and the
    // new one has no end though a later version follows; both made by the edit.
    let (found, messages) = broken(&table);
    assert_eq!(
        found,
        vec![
            ("history_overlap".into(), Some(overlap)),
            ("history_overlap".into(), Some(overlap)),
        ],
        "{messages:?}"
    );
    let expected = [
        "id=1: the version [101, 105) overlaps the next one, starting at 103",
        "id=1: the version [103, null) overlaps the next one, starting at 105",
    ];
    for e in expected {
        assert!(
            messages.iter().any(|m| m.starts_with(e)),
            "{e}: {messages:?}"
        );
    }
}

#[test]
fn an_offset_moved_back_by_a_hand_written_commit() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    run_changes(dir.path(), &table, &[]);
    assert_eq!(verified(&table), Ok(()));
    // A commit that moves the source file's offset back to 0, written into the log by hand.
    let commit = concat!(
        r#"{"commitInfo":{"timestamp":1796649370818,"operation":"SET TRANSACTION"}}"#,
        "\n",
        r#"{"txn":{"appId":"sluice/1.ndjson","version":0,"lastUpdated":1796649370818}}"#,
        "\n"
    );
    let next = (version(&table) + 1) as u64;
    let log = table.join(format!("_delta_log/{next:020}.json"));
    assert!(!log.exists());
    std::fs::write(log, commit).unwrap();
    let (found, messages) = broken(&table);
    assert_eq!(found, vec![("offset_regression".into(), Some(next))]);
    assert!(
        messages[0].starts_with("sluice/1.ndjson moved back from "),
        "{messages:?}"
    );
    // The text form names it too, and a usage error is exit 2.
    let t = table.display().to_string();
    let out = sluice(&["verify", "--table", &t]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("finding    offset_regression (version {next})")),
        "{text}"
    );
    let out = sluice(&["verify", "--table", &t, "--format", "yaml"]);
    assert_eq!(out.status.code(), Some(2));
}
