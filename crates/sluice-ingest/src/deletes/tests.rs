use std::sync::Arc;

use deltalake::arrow::array::{Int64Array, StringArray};
use deltalake::arrow::datatypes::Field;
use sluice_window::TimeFormat;

use super::*;

fn record() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("op", DataType::Utf8, true),
        Field::new("lsn", DataType::Int64, true),
        Field::new("gone", DataType::Boolean, true),
        Field::new("ts", DataType::Utf8, true),
    ])
}

/// Rows of `record()` (the position columns are not needed here).
fn rows(ids: &[&str], ops: &[Option<&str>], lsns: &[i64]) -> RecordBatch {
    let n = ids.len();
    RecordBatch::try_new(
        Arc::new(record()),
        vec![
            Arc::new(StringArray::from(ids.to_vec())),
            Arc::new(StringArray::from(ops.to_vec())),
            Arc::new(Int64Array::from(lsns.to_vec())),
            Arc::new(BooleanArray::from(vec![None; n])),
            Arc::new(StringArray::from(vec!["2026-10-03T10:00:00Z"; n])),
        ],
    )
    .unwrap()
}

fn key() -> KeySpec {
    KeySpec {
        columns: vec!["id".into()],
        time_field: "ts".into(),
        time: TimeFormat::Rfc3339.into(),
        sequence: vec!["lsn".into()],
    }
}

/// Predicates that cannot fail on a value are taken; casts, functions, mixed kinds and
/// non-conditions are refused with the reason.
#[test]
fn predicates_that_could_fail_on_a_value_are_refused() {
    for ok in [
        "op = 'd'",
        "op IN ('d', 'x') OR gone",
        "NOT (op <> 'd') AND lsn > 0",
        "gone IS TRUE",
        "op IS NULL OR \"op\" = 'delete'",
        "lsn >= 1.5",
        "op = NULL",
    ] {
        DeletePredicate::new(ok)
            .check(&record())
            .unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    for (bad, says) in [
        ("op = 1", "compares Text with Number"),
        ("CAST(op AS INT) = 1", "no casts, no functions"),
        ("lower(op) = 'd'", "no casts, no functions"),
        ("op", "not a condition"),
        ("lsn + 1 = 2", "no arithmetic"),
        ("op IN (id)", "literals only"),
        ("nope = 'd'", "nope"),
        ("op = 'd' AND", "--delete-when"),
        ("NOT op", "requires a boolean"),
    ] {
        let e = DeletePredicate::new(bad)
            .check(&record())
            .expect_err(bad)
            .to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

/// A null result is not a delete.
#[test]
fn a_predicate_is_true_false_or_null_and_null_is_no_delete() {
    let batch = rows(&["a", "b", "c"], &[Some("d"), Some("u"), None], &[1, 2, 3]);
    let flags = DeletePredicate::new("op = 'd'").evaluate(&batch).unwrap();
    assert_eq!(flags, [true, false, false]);
    let flags = DeletePredicate::new("op = 'd' OR gone")
        .evaluate(&batch)
        .unwrap();
    assert_eq!(flags, [true, false, false]);
}

/// Against tombstones: an upsert at or below its key's tombstone is buried; one above it
/// stays; a delete always stays (after a crash between the tombstone's commit and the data
/// commit, the table may still hold the row), and is a new tombstone only above the old one.
#[test]
fn tombstones_bury_older_upserts_and_never_deletes() {
    let offered = rows(
        &["a", "b", "c", "d", "e", "f"],
        &[
            Some("u"),
            Some("u"),
            Some("u"),
            Some("d"),
            Some("d"),
            Some("d"),
        ],
        &[5, 6, 7, 6, 9, 1],
    );
    let deletes = [false, false, false, true, true, true];
    let held = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("lsn", DataType::Int64, false),
        ])),
        vec![
            Arc::new(StringArray::from(vec!["a", "b", "b", "d", "e"])),
            Arc::new(Int64Array::from(vec![5, 2, 7, 6, 3])),
        ],
    )
    .unwrap();
    let buried = bury(&offered, &deletes, &[held], &key()).unwrap();
    // a: 5 at tombstone 5, buried; b: 6 below its highest tombstone 7, buried; c: none.
    assert_eq!(buried.kept, [2, 3, 4, 5]);
    // d: equal to its tombstone (a replay after a crash): applied, not recorded again.
    assert_eq!(buried.new_tombstones, [4, 5]);
}
