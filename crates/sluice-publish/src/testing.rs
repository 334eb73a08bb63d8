//! Helpers of the crate's unit tests: a table of one `id` column, hourly windows, windows
//! published from offset ranges, and their offsets read back.

use std::sync::Arc;

use deltalake::arrow::array::{Int64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use object_store::ObjectStore;
use serde_json::json;
use sluice_stage::Stager;
use sluice_window::{AddressLayout, Shard, TimeFormat, Window, WindowSize};

use crate::{Coverage, Publication, Replace, TableOptions, WindowTable};

pub fn record_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, true)]))
}

pub fn hour(text: &str) -> Window {
    let t = TimeFormat::Rfc3339.parse_str(text).unwrap();
    Window::containing(WindowSize::parse("1h").unwrap(), t)
}

pub fn rows(schema: &SchemaRef, offsets: std::ops::Range<i64>) -> RecordBatch {
    let ids: Vec<String> = offsets.clone().map(|o| format!("e{o}")).collect();
    RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(ids)),
            Arc::new(StringArray::from(vec!["in"; offsets.clone().count()])),
            Arc::new(Int64Array::from(offsets.collect::<Vec<_>>())),
        ],
    )
    .unwrap()
}

pub async fn open(
    dir: &std::path::Path,
    store: Option<Arc<dyn ObjectStore>>,
    shard: Option<Shard>,
) -> WindowTable {
    open_with(dir, store, shard, crate::CHECKPOINT_INTERVAL_DEFAULT).await
}

/// A table of hourly windows at `dir` (created if new), a checkpoint every
/// `checkpoint_interval` commits; a writer of `shard` retries over other shards' commits.
pub async fn open_with(
    dir: &std::path::Path,
    store: Option<Arc<dyn ObjectStore>>,
    shard: Option<Shard>,
    checkpoint_interval: u64,
) -> WindowTable {
    let options = TableOptions {
        location: dir.to_str().unwrap().to_string(),
        store,
        shard,
        commit_retries: if shard.is_some() { 15 } else { 0 },
        checkpoint_interval,
        ..TableOptions::new("")
    };
    WindowTable::open_or_create(
        &options,
        Some(&record_schema()),
        AddressLayout::DtHour,
        WindowSize::parse("1h").unwrap(),
    )
    .await
    .unwrap()
}

/// Publishes `window` as `parts` files of `rows_each` rows (offsets from `first`), by swap.
pub async fn publish(
    table: &mut WindowTable,
    stager: &mut Stager,
    window: Window,
    parts: i64,
    rows_each: i64,
    first: i64,
) -> u64 {
    let address = table.address(window);
    let schema = table.file_schema().clone();
    let mut files = Vec::new();
    for p in 0..parts {
        let start = first + p * rows_each;
        files.push(
            stager
                .stage(
                    &address,
                    &schema,
                    vec![rows(&schema, start..start + rows_each)],
                )
                .await
                .unwrap(),
        );
    }
    let end = first + parts * rows_each;
    table
        .publish(Publication {
            pipeline: "p".into(),
            window,
            files,
            replace: Replace::Window,
            coverage: Coverage {
                partition: "in".into(),
                offset: end,
            },
            txns: vec![("in".into(), end)],
            position_ranges: json!([]),
            published_at_ms: 1_000,
        })
        .await
        .unwrap()
        .version
}

/// The offsets of the rows at `window`'s address, sorted, read from its files.
pub async fn offsets_at(table: &mut WindowTable, window: Window) -> Vec<i64> {
    let address = table.address(window);
    let store = table.store();
    let mut out = Vec::new();
    for f in table.files_at(&address).await.unwrap() {
        for b in sluice_stage::read_parquet(store.as_ref(), &f.path)
            .await
            .unwrap()
        {
            let o = b
                .column_by_name(crate::OFFSET_COLUMN)
                .unwrap()
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .clone();
            out.extend(o.iter().flatten());
        }
    }
    out.sort();
    out
}

pub fn options_of(dir: &std::path::Path, store: Arc<dyn ObjectStore>) -> TableOptions {
    TableOptions {
        location: dir.to_str().unwrap().to_string(),
        store: Some(store),
        ..TableOptions::new("")
    }
}
