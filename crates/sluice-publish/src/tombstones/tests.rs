use std::sync::Arc;

use deltalake::arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use deltalake::arrow::datatypes::{DataType, Int64Type};
use sluice_window::EventTime;

use super::*;

/// Appends the deletes of keys `ids`, each at sequence `id * 10`, as one commit (one file).
async fn delete(table: &mut TombstoneTable, ids: &[i64]) {
    let values: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.to_vec())),
        Arc::new(Int64Array::from_iter_values(ids.iter().map(|i| i * 10))),
    ];
    let deleted_at = ids.iter().map(|_| EventTime::from_micros(0)).collect();
    let pipeline = "p".to_string();
    let tombstones = Tombstones {
        pipeline,
        values,
        deleted_at,
    };
    table.append(tombstones).await.unwrap();
}

/// `(key, sequence)` of the tombstones of `ids`, sorted.
async fn tombstones_of(table: &mut TombstoneTable, ids: &[i64]) -> Vec<(i64, i64)> {
    let keys: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(ids.to_vec()))];
    let mut found: Vec<(i64, i64)> = Vec::new();
    for batch in table.of_keys(&keys).await.unwrap() {
        let key = batch.column(0).as_primitive::<Int64Type>();
        let sequence = batch.column(1).as_primitive::<Int64Type>();
        found.extend((0..batch.num_rows()).map(|i| (key.value(i), sequence.value(i))));
        assert_eq!(key.null_count(), 0);
    }
    found.sort();
    found
}

/// The keys' tombstones are found whichever files hold them, and keys between or beyond the
/// files' key ranges find none (those files are left out by their statistics).
#[tokio::test]
async fn tombstones_of_keys_are_found_across_files_by_their_key_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let options = TableOptions {
        location: dir
            .path()
            .join("t_tombstones")
            .to_str()
            .unwrap()
            .to_string(),
        ..TableOptions::new("")
    };
    let keys = [("id".to_string(), DataType::Int64)];
    let sequence = [("lsn".to_string(), DataType::Int64)];
    let mut table = TombstoneTable::open_or_create(&options, &keys, &sequence)
        .await
        .unwrap();
    assert!(
        tombstones_of(&mut table, &[1]).await.is_empty(),
        "no file yet"
    );
    delete(&mut table, &[1, 5, 9]).await;
    delete(&mut table, &[20, 25]).await;
    delete(&mut table, &[40, 3]).await;
    assert_eq!(
        tombstones_of(&mut table, &[5, 25, 3, 7]).await,
        [(3, 30), (5, 50), (25, 250)]
    );
    assert_eq!(tombstones_of(&mut table, &[40]).await, [(40, 400)]);
    assert!(tombstones_of(&mut table, &[12, 30, 100]).await.is_empty());
}
