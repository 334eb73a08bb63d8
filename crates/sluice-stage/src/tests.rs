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
pub(crate) fn hour_14() -> Address {
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

mod footer_stats {
    //! The Delta statistics taken from a staged file's Parquet footer are the ones computed
    //! from its rows, whatever the values: nulls, NaN and infinities, empty, long and
    //! multi-byte strings, several row groups, every value null.

    use deltalake::arrow::array::{Float32Array, Int32Array, Int8Array, TimestampMicrosecondArray};
    use proptest::prelude::*;

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("i8", DataType::Int8, true),
            Field::new("i32", DataType::Int32, true),
            Field::new("i64", DataType::Int64, true),
            Field::new("f32", DataType::Float32, true),
            Field::new("f64", DataType::Float64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("d", DataType::Date32, true),
            Field::new(
                "ts",
                DataType::Timestamp(deltalake::arrow::datatypes::TimeUnit::Microsecond, None),
                true,
            ),
        ]))
    }

    fn float() -> impl Strategy<Value = Option<f64>> {
        prop_oneof![
            4 => any::<f64>().prop_map(Some),
            1 => Just(Some(f64::NAN)),
            1 => Just(Some(f64::INFINITY)),
            1 => Just(Some(-0.0)),
            1 => Just(None),
        ]
    }

    fn text() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            3 => "[a-c]{0,3}".prop_map(Some),
            2 => "[a-zé€😀]{0,40}".prop_map(Some),
            1 => Just(None),
        ]
    }

    #[allow(clippy::type_complexity)]
    fn rows() -> impl Strategy<
        Value = Vec<(
            Option<i8>,
            Option<i32>,
            Option<i64>,
            Option<f64>,
            Option<f64>,
            Option<String>,
            Option<i32>,
            Option<i64>,
        )>,
    > {
        proptest::collection::vec(
            (
                proptest::option::of(any::<i8>()),
                proptest::option::of(any::<i32>()),
                prop_oneof![Just(None), any::<i64>().prop_map(Some)],
                float(),
                float(),
                text(),
                proptest::option::of(-700_000i32..2_900_000),
                proptest::option::of(any::<i64>()),
            ),
            0..40,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn footer_stats_equal_row_stats(rows in rows(), row_group in 1usize..12) {
            let schema = schema();
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int8Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
                    Arc::new(Int32Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
                    Arc::new(Int64Array::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())),
                    Arc::new(Float32Array::from(
                        rows.iter().map(|r| r.3.map(|v| v as f32)).collect::<Vec<_>>(),
                    )),
                    Arc::new(Float64Array::from(rows.iter().map(|r| r.4).collect::<Vec<_>>())),
                    Arc::new(StringArray::from(
                        rows.iter().map(|r| r.5.clone()).collect::<Vec<_>>(),
                    )),
                    Arc::new(Date32Array::from(rows.iter().map(|r| r.6).collect::<Vec<_>>())),
                    Arc::new(TimestampMicrosecondArray::from(
                        rows.iter().map(|r| r.7).collect::<Vec<_>>(),
                    )),
                ],
            )
            .unwrap();
            // Two batches, so the file has rows of both in its row groups.
            let cut = batch.num_rows() / 2;
            let batches = vec![batch.slice(0, cut), batch.slice(cut, batch.num_rows() - cut)];
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let staged = runtime.block_on(async {
                let options = StageOptions {
                    row_group_rows_max: row_group,
                    ..StageOptions::default()
                };
                let mut stager = Stager::new(Arc::new(InMemory::new()), "p", options);
                let staged = stager.stage(&hour_14(), &schema, batches.clone()).await.unwrap();
                let back = stager.read(&staged.path).await.unwrap();
                let rows: usize = back.iter().map(RecordBatch::num_rows).sum();
                assert_eq!(rows, batch.num_rows());
                staged
            });
            let from_footer: serde_json::Value = serde_json::from_str(&staged.stats).unwrap();
            let from_rows: serde_json::Value =
                serde_json::from_str(&file_stats(&schema, &batches)).unwrap();
            prop_assert_eq!(from_footer, from_rows);
        }
    }
}
