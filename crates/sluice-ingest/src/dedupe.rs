//! Row-key dedupe: one row per natural key, the deterministic winner being the latest event
//! time, then the highest source position (DESIGN.md, E5).

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray, UInt32Array};
use deltalake::arrow::compute::{concat_batches, take_record_batch};
use deltalake::arrow::datatypes::{
    DataType, Int32Type, Int64Type, SchemaRef, TimestampMicrosecondType,
};
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::row::{RowConverter, SortField};
use sluice_publish::{OFFSET_COLUMN, SOURCE_COLUMN};
use sluice_window::{key_winner, EventTime, TimeFormat};

/// How rows of one window are keyed.
#[derive(Debug, Clone)]
pub struct KeySpec {
    /// Natural key columns (non-empty).
    pub columns: Vec<String>,
    pub time_field: String,
    pub time_format: TimeFormat,
}

/// Keeps one row per key; output rows are in source-position order.
pub fn dedupe(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    key: &KeySpec,
) -> Result<RecordBatch, ArrowError> {
    let all = concat_batches(schema, batches)?;
    let key_indices: Vec<usize> = key
        .columns
        .iter()
        .map(|c| schema.index_of(c))
        .collect::<Result<_, _>>()?;
    let converter = RowConverter::new(
        key_indices
            .iter()
            .map(|i| SortField::new(schema.field(*i).data_type().clone()))
            .collect(),
    )?;
    let key_columns: Vec<_> = key_indices.iter().map(|i| all.column(*i).clone()).collect();
    let rows = converter.convert_columns(&key_columns)?;
    let times = event_times(&all, key)?;
    let (sources, offsets) = position_columns(schema, &all)?;
    let position = |i: usize| (sources.value(i), offsets.value(i));
    let mut winners: HashMap<&[u8], usize> = HashMap::with_capacity(all.num_rows());
    for i in 0..all.num_rows() {
        let k = rows.row(i);
        winners
            .entry(k.data())
            .and_modify(|w| {
                if key_winner((times[i], &position(i)), (times[*w], &position(*w))) {
                    *w = i;
                }
            })
            .or_insert(i);
    }
    let mut keep: Vec<usize> = winners.into_values().collect();
    keep.sort_by(|a, b| position(*a).cmp(&position(*b)));
    let indices = UInt32Array::from(keep.into_iter().map(|i| i as u32).collect::<Vec<_>>());
    take_record_batch(&all, &indices)
}

/// Keeps one row per source position (the row key when no natural key is declared), in
/// position order. Rows of one position are one record, so which copy stays is immaterial.
pub fn dedupe_by_position(
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<RecordBatch, ArrowError> {
    let all = concat_batches(schema, batches)?;
    let (sources, offsets) = position_columns(schema, &all)?;
    let mut first: HashMap<(&str, i64), usize> = HashMap::with_capacity(all.num_rows());
    for i in 0..all.num_rows() {
        first
            .entry((sources.value(i), offsets.value(i)))
            .or_insert(i);
    }
    let mut keep: Vec<((&str, i64), usize)> = first.into_iter().collect();
    keep.sort_unstable();
    let indices = UInt32Array::from(keep.into_iter().map(|(_, i)| i as u32).collect::<Vec<_>>());
    take_record_batch(&all, &indices)
}

/// The columns [`drop_losers`] needs from the table's current rows.
pub fn incumbent_columns(key: &KeySpec) -> Vec<String> {
    let mut columns = key.columns.clone();
    for c in [key.time_field.as_str(), SOURCE_COLUMN, OFFSET_COLUMN] {
        if !columns.iter().any(|k| k == c) {
            columns.push(c.to_string());
        }
    }
    columns
}

/// Drops the offered rows (unique by key) that lose against the table's current row of
/// their key (`incumbents`, projected to [`incumbent_columns`]): only winners are merged, so
/// a replay (same time, same position) and a delivery older than what the table holds change
/// nothing, whatever the arrival order.
pub fn drop_losers(
    offered: &RecordBatch,
    incumbents: &[RecordBatch],
    key: &KeySpec,
) -> Result<RecordBatch, ArrowError> {
    let non_empty: Vec<&RecordBatch> = incumbents.iter().filter(|b| b.num_rows() > 0).collect();
    if non_empty.is_empty() {
        return Ok(offered.clone());
    }
    let present = concat_batches(&non_empty[0].schema(), non_empty.iter().copied())?;
    // A reader may hand back other physical types (string views): cast to the offered ones.
    let offered_schema = offered.schema();
    let mut fields = Vec::with_capacity(present.num_columns());
    let mut columns = Vec::with_capacity(present.num_columns());
    for (field, column) in present.schema().fields().iter().zip(present.columns()) {
        let target = offered_schema.field_with_name(field.name())?;
        columns.push(deltalake::arrow::compute::cast(column, target.data_type())?);
        fields.push(target.clone());
    }
    let present = RecordBatch::try_new(
        Arc::new(deltalake::arrow::datatypes::Schema::new(fields)),
        columns,
    )?;
    let key_fields = |b: &RecordBatch| -> Result<Vec<_>, ArrowError> {
        key.columns
            .iter()
            .map(|c| Ok(b.column(b.schema().index_of(c)?).clone()))
            .collect()
    };
    let offered_keys = key_fields(offered)?;
    let present_keys = key_fields(&present)?;
    let converter = RowConverter::new(
        offered_keys
            .iter()
            .map(|c| SortField::new(c.data_type().clone()))
            .collect(),
    )?;
    let offered_rows = converter.convert_columns(&offered_keys)?;
    let present_rows = converter.convert_columns(&present_keys)?;
    let present_times = event_times(&present, key)?;
    let (p_sources, p_offsets) = position_columns(&present.schema(), &present)?;
    let mut best: HashMap<&[u8], (EventTime, (&str, i64))> = HashMap::new();
    for (i, time) in present_times.iter().enumerate() {
        let candidate = (*time, (p_sources.value(i), p_offsets.value(i)));
        best.entry(present_rows.row(i).data())
            .and_modify(|b| {
                if key_winner((candidate.0, &candidate.1), (b.0, &b.1)) {
                    *b = candidate;
                }
            })
            .or_insert(candidate);
    }
    let offered_times = event_times(offered, key)?;
    let (o_sources, o_offsets) = position_columns(&offered.schema(), offered)?;
    let keep: Vec<u32> = (0..offered.num_rows())
        .filter(|i| match best.get(offered_rows.row(*i).data()) {
            None => true,
            Some((t, p)) => key_winner(
                (
                    offered_times[*i],
                    &(o_sources.value(*i), o_offsets.value(*i)),
                ),
                (*t, p),
            ),
        })
        .map(|i| i as u32)
        .collect();
    if keep.len() == offered.num_rows() {
        return Ok(offered.clone());
    }
    take_record_batch(offered, &UInt32Array::from(keep))
}

/// The source and offset columns of `batch`.
fn position_columns(
    schema: &SchemaRef,
    batch: &RecordBatch,
) -> Result<(StringArray, Int64Array), ArrowError> {
    Ok((
        batch
            .column(schema.index_of(SOURCE_COLUMN)?)
            .as_string::<i32>()
            .clone(),
        batch
            .column(schema.index_of(OFFSET_COLUMN)?)
            .as_primitive::<Int64Type>()
            .clone(),
    ))
}

/// Event times of every row; rows whose time no longer parses sort first (they were checked
/// on decode, so this only happens for rows written by another tool).
fn event_times(batch: &RecordBatch, key: &KeySpec) -> Result<Vec<EventTime>, ArrowError> {
    let column = batch
        .column(batch.schema().index_of(&key.time_field)?)
        .clone();
    let f = key.time_format;
    let at = |i: usize| -> Option<EventTime> {
        if column.is_null(i) {
            return None;
        }
        match column.data_type() {
            DataType::Utf8 => f.parse_str(column.as_string::<i32>().value(i)).ok(),
            DataType::Int64 => f
                .from_integer(column.as_primitive::<Int64Type>().value(i))
                .ok(),
            DataType::Int32 => f
                .from_integer(i64::from(column.as_primitive::<Int32Type>().value(i)))
                .ok(),
            DataType::Timestamp(..) => Some(EventTime::from_micros(
                column.as_primitive::<TimestampMicrosecondType>().value(i),
            )),
            _ => None,
        }
    };
    Ok((0..batch.num_rows())
        .map(|i| at(i).unwrap_or(EventTime::MIN))
        .collect())
}

/// Appends the position columns to decoded record columns.
pub fn with_positions(
    schema: &SchemaRef,
    records: &RecordBatch,
    source: &str,
    offsets: Vec<i64>,
) -> Result<RecordBatch, ArrowError> {
    let n = records.num_rows();
    let mut columns = records.columns().to_vec();
    columns.push(Arc::new(
        deltalake::arrow::array::StringArray::from_iter_values(std::iter::repeat_n(source, n)),
    ));
    columns.push(Arc::new(deltalake::arrow::array::Int64Array::from(offsets)));
    RecordBatch::try_new(schema.clone(), columns)
}
