use std::sync::Arc;

use deltalake::arrow::array::{AsArray, Int64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::*;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("amount", DataType::Int64, true),
        Field::new(SOURCE_COLUMN, DataType::Utf8, false),
        Field::new(OFFSET_COLUMN, DataType::Int64, false),
    ]))
}

/// Rows (id, amount, offset) from one source file.
fn rows(rows: &[(&str, i64, i64)]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|_| "f"))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
        ],
    )
    .unwrap()
}

/// (change type, id, amount) of each changed row, sorted.
fn changes(batch: &RecordBatch) -> Vec<(String, String, i64)> {
    let kinds = batch
        .column_by_name(CHANGE_TYPE_COLUMN)
        .unwrap()
        .as_string::<i32>();
    let ids = batch.column_by_name("id").unwrap().as_string::<i32>();
    let amounts = batch
        .column_by_name("amount")
        .unwrap()
        .as_primitive::<deltalake::arrow::datatypes::Int64Type>();
    let mut out: Vec<_> = (0..batch.num_rows())
        .map(|i| {
            (
                kinds.value(i).to_string(),
                ids.value(i).to_string(),
                amounts.value(i),
            )
        })
        .collect();
    out.sort();
    out
}

fn change(kind: &str, id: &str, amount: i64) -> (String, String, i64) {
    (kind.to_string(), id.to_string(), amount)
}

/// By key: a new key is an insert, a gone key a delete, a changed row an update (both
/// images), an unchanged row nothing.
#[test]
fn a_swap_s_difference_is_by_row_key() {
    let old = [rows(&[("a", 1, 10), ("b", 2, 20)]), rows(&[("c", 3, 30)])];
    let new = [rows(&[("a", 1, 10), ("b", 5, 40), ("d", 4, 50)])];
    let key = ["id".to_string()];
    let diff = difference(&old, &new, &schema(), &key).unwrap();
    assert_eq!(diff.schema(), change_schema(&schema()));
    assert_eq!(
        changes(&diff),
        [
            change("delete", "c", 3),
            change("insert", "d", 4),
            change("update_postimage", "b", 5),
            change("update_preimage", "b", 2),
        ]
    );
    // The same rows: no change at all.
    let same = difference(&old, &old, &schema(), &key).unwrap();
    assert_eq!(same.num_rows(), 0);
}

/// Without a key, a row is its source position: a late row is an insert, the rest nothing.
#[test]
fn without_a_key_the_position_is_the_row_key() {
    let old = [rows(&[("a", 1, 10), ("a", 1, 20)])];
    let new = [rows(&[("a", 1, 10), ("a", 1, 20), ("a", 1, 30)])];
    let diff = difference(&old, &new, &schema(), &[]).unwrap();
    assert_eq!(changes(&diff), [change("insert", "a", 1)]);
    // A first publication: every row an insert; an emptied window: every row a delete.
    assert_eq!(difference(&[], &new, &schema(), &[]).unwrap().num_rows(), 3);
    let gone = difference(&old, &[], &schema(), &[]).unwrap();
    assert_eq!(
        changes(&gone),
        [change("delete", "a", 1), change("delete", "a", 1)]
    );
}

/// Files of an older schema compare with the new columns null; a key the files lack falls
/// back to the whole row.
#[test]
fn older_files_and_a_missing_key_are_compared_whole() {
    let narrow: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new(SOURCE_COLUMN, DataType::Utf8, false),
        Field::new(OFFSET_COLUMN, DataType::Int64, false),
    ]));
    let old = RecordBatch::try_new(
        narrow,
        vec![
            Arc::new(StringArray::from(vec!["a"])),
            Arc::new(StringArray::from(vec!["f"])),
            Arc::new(Int64Array::from(vec![10])),
        ],
    )
    .unwrap();
    let new = [rows(&[("a", 7, 10)])];
    let diff = difference(&[old], &new, &schema(), &["id".to_string()]).unwrap();
    assert_eq!(
        diff.num_rows(),
        2,
        "the amount went from null to 7: an update"
    );
    let whole = difference(
        &new,
        &[rows(&[("a", 8, 10)])],
        &schema(),
        &["nope".to_string()],
    )
    .unwrap();
    assert_eq!(
        changes(&whole),
        [change("delete", "a", 7), change("insert", "a", 8)]
    );
}
