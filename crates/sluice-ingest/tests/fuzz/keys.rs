//! Key extraction: the rows any messages decode to are deduped by their key without an
//! error, one row per distinct key, never merging rows whose keys differ.

use std::sync::Arc;

use deltalake::arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::util::display::array_value_to_string;
use proptest::prelude::*;
use sluice_ingest::{dedupe, KeySpec};
use sluice_source::schema::parse_type;
use sluice_source::{DecodeOptions, LineDecoder};
use sluice_window::TimeFormat;

use crate::decode::decode_in_pieces;
use crate::inputs::line;
use crate::runner::fuzz;

/// A decoded batch with the position columns a staged file carries.
fn with_positions(batch: &RecordBatch, offsets: &[i64]) -> RecordBatch {
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("_sluice_source", DataType::Utf8, false));
    fields.push(Field::new("_sluice_offset", DataType::Int64, false));
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(StringArray::from(vec!["m"; offsets.len()])));
    columns.push(Arc::new(Int64Array::from(offsets.to_vec())));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("aligned columns")
}

#[test]
fn rows_of_any_messages_dedupe_to_one_per_distinct_key() {
    let key_types = [
        "string",
        "long",
        "double",
        "decimal(38,0)",
        "timestamp",
        "boolean",
    ];
    fuzz(
        "dedupe by key",
        600,
        (
            prop::collection::vec(line(), 1..24),
            proptest::sample::select(key_types.to_vec()),
            any::<bool>(),
        ),
        |(lines, key_type, two_columns)| {
            let schema: SchemaRef = Arc::new(Schema::new(vec![
                Field::new("ts", DataType::Utf8, true),
                Field::new("id", parse_type(key_type).expect("a type"), true),
                Field::new("n", DataType::Int64, true),
            ]));
            let key: Vec<String> = if two_columns {
                vec!["id".into(), "n".into()]
            } else {
                vec!["id".into()]
            };
            let options = DecodeOptions {
                key: key.clone(),
                // As a run opens its table: no record field takes a column sluice adds.
                reserved: crate::decode::RESERVED
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                ..DecodeOptions::new("ts", TimeFormat::Rfc3339)
            };
            let mut decoder = LineDecoder::new(schema, options)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let (_, decoded) = decode_in_pieces(&mut decoder, &lines, 1)?;
            let batches: Vec<RecordBatch> = decoded
                .iter()
                .map(|d| with_positions(&d.batch, &d.offsets))
                .collect();
            let Some(first) = batches.first() else {
                return Ok(());
            };
            let file_schema = first.schema();
            let spec = KeySpec {
                columns: key.clone(),
                time_field: "ts".into(),
                time: TimeFormat::Rfc3339.into(),
                sequence: Vec::new(),
            };
            let deduped = dedupe(&file_schema, &batches, &spec)
                .map_err(|e| TestCaseError::fail(format!("dedupe failed: {e}")))?;
            // One row per distinct key, the keys as the rows' own values.
            let mut keys = std::collections::BTreeSet::new();
            for b in &batches {
                for row in 0..b.num_rows() {
                    let mut k = Vec::new();
                    for c in &key {
                        let column = b.column_by_name(c).expect("a key column");
                        prop_assert!(column.is_valid(row), "a row without its key {}", c);
                        k.push(array_value_to_string(column, row).unwrap_or_default());
                    }
                    keys.insert(k);
                }
            }
            prop_assert_eq!(deduped.num_rows(), keys.len());
            Ok(())
        },
    );
}
