use std::sync::Arc;

use deltalake::arrow::array::{Date32Array, Float64Array, Int64Array, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use object_store::memory::InMemory;
use sluice_window::{AddressLayout, TimeFormat, Window, WindowSize};

use super::*;

fn batch() -> (SchemaRef, RecordBatch) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("n", DataType::Int64, true),
        Field::new("x", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("d", DataType::Date32, true),
    ]));
    let long = "z".repeat(40);
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(vec![Some(5), None, Some(-3)])),
            Arc::new(Float64Array::from(vec![
                Some(f64::NAN),
                Some(1.5),
                Some(-2.0),
            ])),
            Arc::new(StringArray::from(vec![
                Some("b"),
                Some(long.as_str()),
                None,
            ])),
            Arc::new(Date32Array::from(vec![Some(20_364), Some(0), None])),
        ],
    )
    .unwrap();
    (schema, batch)
}

/// The address of the hour 2026-10-03 14:00.
fn hour_14() -> Address {
    let size = WindowSize::parse("1h").unwrap();
    let t = TimeFormat::Rfc3339
        .parse_str("2026-10-03T14:10:00Z")
        .unwrap();
    AddressLayout::DtHour.address(Window::containing(size, t))
}

#[test]
fn stats_are_exact_or_absent() {
    let (schema, batch) = batch();
    let stats: serde_json::Value = serde_json::from_str(&file_stats(&schema, &[batch])).unwrap();
    assert_eq!(stats["numRecords"], 3);
    assert_eq!(stats["minValues"]["n"], -3);
    assert_eq!(stats["maxValues"]["n"], 5);
    assert_eq!(stats["minValues"]["x"], -2.0);
    assert_eq!(stats["maxValues"]["x"], 1.5);
    assert_eq!(stats["minValues"]["s"], "b");
    assert!(
        stats["maxValues"].get("s").is_none(),
        "a 40-char max cannot be exact"
    );
    assert_eq!(stats["minValues"]["d"], "1970-01-01");
    assert_eq!(stats["maxValues"]["d"], "2025-10-03");
    assert_eq!(stats["nullCount"]["n"], 1);
    assert_eq!(stats["nullCount"]["s"], 1);
}

#[tokio::test]
async fn staged_files_are_named_after_window_and_attempt_and_read_back() {
    let store = Arc::new(InMemory::new());
    let mut stager = Stager::new(store.clone(), "a1", StageOptions::default());
    let address = hour_14();
    let (schema, batch) = batch();
    let first = stager
        .stage(&address, &schema, vec![batch.clone()])
        .await
        .unwrap();
    let second = stager
        .stage(&address, &schema, vec![batch.clone(), batch.clone()])
        .await
        .unwrap();
    assert_eq!(
        first.path,
        "dt=2026-10-03/hour=14/part-20261003T14-a1-00001.snappy.parquet"
    );
    assert_eq!(
        second.path,
        "dt=2026-10-03/hour=14/part-20261003T14-a1-00002.snappy.parquet"
    );
    assert_eq!((first.rows, second.rows), (3, 6));
    let back = stager.read(&second.path).await.unwrap();
    assert_eq!(back.iter().map(RecordBatch::num_rows).sum::<usize>(), 6);
    assert_eq!(
        back[0].column(0).slice(0, 3).as_ref(),
        batch.column(0).as_ref()
    );
    stager.delete(&first.path).await.unwrap();
    stager.delete(&first.path).await.unwrap();
    assert!(stager.read(&first.path).await.is_err());
}

/// A staged file never replaces an object: a second stager of the same attempt (two
/// writers that took the same name) fails at the taken name and the first file's rows stay.
#[tokio::test]
async fn a_taken_name_is_an_error_and_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let address = hour_14();
    let (schema, batch) = batch();
    let mut first = Stager::new(store.clone(), "a1", StageOptions::default());
    let kept = first
        .stage(&address, &schema, vec![batch.clone(), batch.clone()])
        .await
        .unwrap();
    let mut again = Stager::new(store.clone(), "a1", StageOptions::default());
    let err = again
        .stage(&address, &schema, vec![batch.clone()])
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            StageError::Store {
                source: object_store::Error::AlreadyExists { .. },
                ..
            }
        ),
        "{err}"
    );
    let back = first.read(&kept.path).await.unwrap();
    assert_eq!(back.iter().map(RecordBatch::num_rows).sum::<usize>(), 6);
    // The next name is free.
    let next = again.stage(&address, &schema, vec![batch]).await.unwrap();
    assert!(
        next.path.ends_with("-a1-00002.snappy.parquet"),
        "{}",
        next.path
    );
}
