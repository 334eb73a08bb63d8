//! The envelope on rows that arrived as Arrow (Avro messages, Parquet rows): the change's
//! columns are read as columns. Each row's image (`after`, or `before` for a delete) is picked
//! field by field from the two struct columns, the operation, the `source` block and whether
//! the change was streamed are added as [`OP_FIELD`], [`SOURCE_FIELD`] and [`STREAMED_FIELD`],
//! and the records that name no row are rejects with the reasons the JSON path gives them
//! ([`Envelope::unwrap_line`]): the same rows and the same dead letters, without writing the
//! records as JSON text and reading them again.
//!
//! A batch of another shape (no `op` column of strings, no `before` and `after` structs of the
//! same fields, no `source` column, an image with a field named like one sluice adds, rows
//! that are rows already) is not read here: [`unwrap_rows`] declines it and the caller reads
//! its records as JSON lines.

use std::sync::Arc;

use deltalake::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, StructArray};
use deltalake::arrow::compute::filter_record_batch;
use deltalake::arrow::compute::kernels::zip::zip;
use deltalake::arrow::datatypes::{DataType, Field, Schema};

use super::{Envelope, OP_FIELD, SOURCE_FIELD, STREAMED_FIELD};
use crate::chunk::ArrowRows;
use crate::reject::{Reject, RejectReason, RAW_BYTES_MAX};

/// The columns of a change batch this module reads.
struct Change<'a> {
    op: &'a deltalake::arrow::array::StringArray,
    before: &'a StructArray,
    after: &'a StructArray,
    source: &'a ArrayRef,
    source_field: &'a Field,
}

/// `rows` (of file ordinal `file`) with each change replaced by its row, and the changes that
/// name no row as rejects; `None` when the batch is not of a shape read here (see the module
/// doc).
pub(super) fn unwrap_rows(rows: &ArrowRows, file: u32) -> Option<(ArrowRows, Vec<Reject>)> {
    let change = change_columns(&rows.batch)?;
    let n = rows.batch.num_rows();
    let mut keep = Vec::with_capacity(n);
    let mut is_delete = Vec::with_capacity(n);
    let mut bad = Vec::new();
    for row in 0..n {
        let op = change.op.value(row);
        let verdict = match op {
            "c" | "u" | "r" if change.after.is_valid(row) => Ok(false),
            "d" if change.before.is_valid(row) => Ok(true),
            "c" | "u" | "r" => Err(format!("op {op:?} without its \"after\" object")),
            "d" => Err(format!("op {op:?} without its \"before\" object")),
            "t" | "m" => Err(format!(
                "op {op:?} (a truncate or a logical message) names no row"
            )),
            other => Err(format!("unknown op {other:?} (c, u, d, r)")),
        };
        keep.push(verdict.is_ok());
        is_delete.push(verdict.as_ref().is_ok_and(|d| *d));
        if let Err(why) = verdict {
            let offset = rows.offsets[row];
            let mut line = rows.json_line(offset);
            line.truncate(RAW_BYTES_MAX);
            bad.push(Reject {
                file,
                offset,
                reason: RejectReason::BadEnvelope(why),
                raw: String::from_utf8_lossy(&line).into_owned(),
            });
        }
    }
    let batch = row_batch(&change, &BooleanArray::from(is_delete))?;
    let keep = BooleanArray::from(keep);
    let batch = filter_record_batch(&batch, &keep).ok()?;
    let offsets = rows
        .offsets
        .iter()
        .zip(keep.values())
        .filter_map(|(o, k)| k.then_some(*o))
        .collect();
    Some((ArrowRows { batch, offsets }, bad))
}

/// The change columns of `batch`, if it has them (see the module doc).
fn change_columns(batch: &RecordBatch) -> Option<Change<'_>> {
    let column = |name: &str| batch.column_by_name(name);
    let op = column("op")?.as_string_opt::<i32>()?;
    let before = column("before")?.as_struct_opt()?;
    let after = column("after")?.as_struct_opt()?;
    let (source_index, source_field) = batch.schema_ref().column_with_name("source")?;
    if op.null_count() > 0 || before.fields() != after.fields() {
        return None;
    }
    let added = [OP_FIELD, SOURCE_FIELD, STREAMED_FIELD];
    if after
        .fields()
        .iter()
        .any(|f| added.contains(&f.name().as_str()))
    {
        return None;
    }
    Some(Change {
        op,
        before,
        after,
        source: batch.column(source_index),
        source_field,
    })
}

/// Each row's image (`before` where `is_delete`, else `after`) as columns, then the added
/// fields; rows whose image is missing hold whatever `after` holds (they are filtered out).
fn row_batch(change: &Change, is_delete: &BooleanArray) -> Option<RecordBatch> {
    let mut fields: Vec<Field> = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (i, field) in change.after.fields().iter().enumerate() {
        let picked = zip(is_delete, change.before.column(i), change.after.column(i)).ok()?;
        fields.push(field.as_ref().clone().with_nullable(true));
        columns.push(picked);
    }
    fields.push(Field::new(OP_FIELD, DataType::Utf8, true));
    columns.push(Arc::new(change.op.clone()));
    fields.push(
        change
            .source_field
            .clone()
            .with_name(SOURCE_FIELD)
            .with_nullable(true),
    );
    columns.push(change.source.clone());
    let streamed: BooleanArray = change.op.iter().map(|op| Some(op != Some("r"))).collect();
    fields.push(Field::new(STREAMED_FIELD, DataType::Boolean, true));
    columns.push(Arc::new(streamed));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).ok()
}

impl Envelope {
    /// The columns of the rows a change of `schema`'s columns (a registry's writer schema, a
    /// Parquet file's footer) becomes: the fields of `after`, then [`OP_FIELD`],
    /// [`SOURCE_FIELD`] (of `source`'s type) and [`STREAMED_FIELD`]. Errs, saying why, for
    /// columns that are not a change's.
    pub fn row_schema(self, schema: &Schema) -> Result<Schema, String> {
        let field = |name: &str| schema.field_with_name(name).ok();
        let not_change =
            "not a Debezium change (a struct column \"after\" and a string column \"op\")";
        let Some(DataType::Struct(image)) = field("after").map(Field::data_type) else {
            return Err(not_change.into());
        };
        if !matches!(field("op").map(Field::data_type), Some(DataType::Utf8)) {
            return Err(not_change.into());
        }
        let mut fields: Vec<Field> = image
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        if let Some(f) = fields
            .iter()
            .find(|f| [OP_FIELD, SOURCE_FIELD, STREAMED_FIELD].contains(&f.name().as_str()))
        {
            return Err(format!(
                "the row has a field {:?}, which sluice adds for the change",
                f.name()
            ));
        }
        fields.push(Field::new(OP_FIELD, DataType::Utf8, true));
        let source = field("source").map_or(DataType::Null, |f| f.data_type().clone());
        fields.push(Field::new(SOURCE_FIELD, source, true));
        fields.push(Field::new(STREAMED_FIELD, DataType::Boolean, true));
        Ok(Schema::new(fields))
    }
}
