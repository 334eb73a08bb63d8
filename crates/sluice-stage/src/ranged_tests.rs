//! Ranged column reads: the same rows as a whole-object read, fetched by ranges only.

use std::sync::Arc;

use deltalake::arrow::array::{Int64Array, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use object_store::memory::InMemory;
use sluice_faults::{FaultPlan, FaultStore};

use super::*;
use crate::tests::hour_14;

/// A window file of `rows` rows: a string key, a wide payload (most of the bytes) and a
/// number, in row groups of 4,096 rows.
async fn window_file(store: Arc<dyn ObjectStore>, rows: usize) -> StagedFile {
    let schema = Arc::new(Schema::new(vec![
        Field::new("payload", DataType::Utf8, true),
        Field::new("event_id", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
    ]));
    // Distinct, barely compressible payloads (128 pseudo-random hex digits each): the key
    // column is a small part of the file.
    let payload: Vec<String> = (0..rows as u64)
        .map(|i| {
            (1..=8u64)
                .map(|j| format!("{:016x}", (i * 8 + j).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
                .collect()
        })
        .collect();
    let keys: Vec<Option<String>> = (0..rows)
        .map(|i| (i % 97 != 0).then(|| format!("e{i:09}")))
        .collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(payload)),
            Arc::new(StringArray::from(keys)),
            Arc::new(Int64Array::from_iter_values(0..rows as i64)),
        ],
    )
    .unwrap();
    let options = StageOptions {
        row_group_rows_max: 4_096,
        ..StageOptions::default()
    };
    let mut stager = Stager::new(store, "r1", options);
    stager
        .stage(&hour_14(), &schema, vec![batch])
        .await
        .unwrap()
}

/// A ranged read of the key column returns exactly the rows a whole-object read returns
/// (nulls included, every row group), and fetches only ranges that together are a small part
/// of the file.
#[tokio::test]
async fn a_ranged_read_returns_the_column_and_fetches_only_part_of_the_file() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let file = window_file(inner.clone(), 20_000).await;
    let size = u64::try_from(file.size_bytes).unwrap();
    let columns = vec!["event_id".to_string()];
    let whole = read_parquet_columns(inner.as_ref(), &file.path, &columns)
        .await
        .unwrap();
    let seen = FaultStore::new(inner, FaultPlan::PassThrough);
    let ranged = ranged::read_columns_by_range(Arc::new(seen.clone()), &file.path, size, &columns)
        .await
        .unwrap();
    let concat = |batches: &[RecordBatch]| {
        deltalake::arrow::compute::concat_batches(&batches[0].schema(), batches).unwrap()
    };
    let (whole, ranged) = (concat(&whole), concat(&ranged));
    assert_eq!(ranged.num_rows(), 20_000);
    assert_eq!(ranged.schema().fields().len(), 1);
    assert_eq!(ranged, whole);
    let reads = seen.log();
    assert!(reads.len() >= 2, "the footer, then the chunks: {reads:?}");
    let mut fetched = 0u64;
    for read in &reads {
        assert!(
            read.kind.starts_with("get") && !read.ranges.is_empty(),
            "a read of the whole object: {read:?}"
        );
        fetched += read.ranges.iter().map(|r| r.end - r.start).sum::<u64>();
    }
    assert!(
        fetched * 4 < size,
        "fetched {fetched} of {size} bytes for one narrow column"
    );
}

/// Through the stager: a file below [`RANGED_READ_BYTES_MIN`] is read whole, the same
/// columns either way; a missing file and a size past the object's end are errors, not panics.
#[tokio::test]
async fn column_reads_pick_the_path_by_size_and_fail_cleanly() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let file = window_file(store.clone(), 2_000).await;
    let size = u64::try_from(file.size_bytes).unwrap();
    assert!(size < RANGED_READ_BYTES_MIN);
    let stager = Stager::new(store.clone(), "r2", StageOptions::default());
    let columns = vec!["event_id".to_string(), "n".to_string()];
    let small = stager
        .read_columns(&file.path, size, &columns)
        .await
        .unwrap();
    let ranged = ranged::read_columns_by_range(store.clone(), &file.path, size, &columns)
        .await
        .unwrap();
    assert_eq!(small, ranged);
    let rows: usize = small.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows, 2_000);
    let missing = "dt=2026-10-03/hour=14/none.parquet";
    let err = ranged::read_columns_by_range(store.clone(), missing, size, &columns)
        .await
        .unwrap_err();
    assert!(matches!(err, StageError::Store { .. }), "{err}");
    let err = ranged::read_columns_by_range(store, &file.path, size + 1, &columns)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StageError::Store { .. } | StageError::Decode { .. }),
        "{err}"
    );
}
