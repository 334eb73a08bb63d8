//! Deletes of a mirror (`--delete-when`): which changes are deletes, and which changes a
//! tombstone buries.
//!
//! The predicate is a [`RowCondition`]: SQL over the record's top-level fields, limited to
//! what cannot fail on any value (a publication that failed on every restart would stop the
//! pipeline, E8). A null result is not a delete.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Schema};
use deltalake::arrow::error::ArrowError;
use sluice_window::EventTime;

use crate::condition::{ConditionError, RowCondition};
use crate::dedupe::{columns_named, event_time_reader, sequence_converter, KeySpec};
use crate::keys::KeyRows;

/// Why a `--delete-when` predicate is refused.
#[derive(Debug, thiserror::Error)]
pub enum DeletePredicateError {
    #[error("--delete-when {sql:?}: {source}")]
    Parse {
        sql: String,
        source: deltalake::datafusion::error::DataFusionError,
    },
    #[error("--delete-when {sql:?}: {why}")]
    Refused { sql: String, why: String },
}

/// A validated `--delete-when` predicate.
#[derive(Debug, Clone)]
pub struct DeletePredicate {
    condition: RowCondition,
}

impl DeletePredicate {
    /// The predicate `sql`, to be checked against the record fields ([`Self::check`])
    /// before it is evaluated.
    pub fn new(sql: impl Into<String>) -> Self {
        DeletePredicate {
            condition: RowCondition::new(sql),
        }
    }

    /// Parses the predicate against the record fields `record` and checks that it cannot
    /// fail on a value (see [`crate::condition`]).
    pub fn check(&self, record: &Schema) -> Result<(), DeletePredicateError> {
        let sql = self.sql().to_string();
        self.condition.check(record).map_err(|e| match e {
            ConditionError::Parse(source) => DeletePredicateError::Parse { sql, source },
            ConditionError::Refused(why) => DeletePredicateError::Refused { sql, why },
        })
    }

    pub fn sql(&self) -> &str {
        self.condition.sql()
    }

    /// Per row of `batch`, whether the predicate holds (null: no). `batch` holds at least
    /// the fields the predicate names (the record grown since, and the position columns).
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<Vec<bool>, ArrowError> {
        let values = self.condition.evaluate(batch).map_err(|e| {
            ArrowError::ComputeError(format!("--delete-when {:?}: {e}", self.sql()))
        })?;
        Ok((0..values.len())
            .map(|i| values.is_valid(i) && values.value(i))
            .collect())
    }
}

/// What the tombstones of the offered keys decide: which offered rows stay, and which of
/// them are deletes to record as new tombstones.
#[derive(Debug)]
pub(crate) struct Buried {
    /// Indices of the offered rows that change the table: every delete, and each upsert
    /// whose sequence is above its key's tombstone (or whose key has none).
    pub kept: Vec<u32>,
    /// Indices of the offered deletes whose sequence is above their key's tombstone (or
    /// whose key has none): the tombstones to record.
    pub new_tombstones: Vec<u32>,
}

/// Decides, for `offered` rows (unique by key) flagged by `deletes`, against `tombstones`
/// (batches of the key columns then the sequence columns, as the tombstone table holds
/// them), which rows stay and which deletes are new tombstones. A delete always stays: the
/// table may still hold its key's row after a crash between the tombstone's commit and the
/// data commit.
pub(crate) fn bury(
    offered: &RecordBatch,
    deletes: &[bool],
    tombstones: &[RecordBatch],
    key: &KeySpec,
) -> Result<Buried, ArrowError> {
    debug_assert_eq!(
        deletes.len(),
        offered.num_rows(),
        "E9: a delete flag per offered change"
    );
    let keys = columns_named(offered, &key.columns)?;
    let sequence = columns_named(offered, &key.sequence)?;
    let converter = sequence_converter(&sequence)?;
    let offered_rows = KeyRows::of(&keys)?;
    let offered_sequence = converter.convert_columns(&sequence)?;
    // The highest tombstone sequence per key (as bytes that compare as the values do).
    let width = key.columns.len();
    let mut held: Vec<(KeyRows, deltalake::arrow::row::Rows)> = Vec::new();
    for t in tombstones.iter().filter(|t| t.num_rows() > 0) {
        let cast_like = |columns: &[ArrayRef], like: &[ArrayRef]| {
            columns
                .iter()
                .zip(like)
                .map(|(c, l)| cast(c, l.data_type()))
                .collect::<Result<Vec<_>, _>>()
        };
        let t_keys = cast_like(&t.columns()[..width], &keys)?;
        let t_sequence = cast_like(&t.columns()[width..], &sequence)?;
        held.push((
            KeyRows::of(&t_keys)?,
            converter.convert_columns(&t_sequence)?,
        ));
    }
    let mut highest: HashMap<Option<&[u8]>, &[u8]> = HashMap::new();
    for (rows, sequences) in &held {
        for i in 0..rows.len() {
            let s = sequences.row(i).data();
            highest
                .entry(rows.key(i))
                .and_modify(|h| *h = (*h).max(s))
                .or_insert(s);
        }
    }
    let mut buried = Buried {
        kept: Vec::with_capacity(offered.num_rows()),
        new_tombstones: Vec::new(),
    };
    for (i, &delete) in deletes.iter().enumerate().take(offered.num_rows()) {
        let above = highest
            .get(&offered_rows.key(i))
            .is_none_or(|h| offered_sequence.row(i).data() > *h);
        if delete || above {
            buried.kept.push(i as u32);
        }
        if delete && above {
            buried.new_tombstones.push(i as u32);
        }
    }
    let offered_rows = offered.num_rows() as u32;
    debug_assert!(
        buried.kept.iter().all(|&i| i < offered_rows)
            && buried.kept.windows(2).all(|w| w[0] < w[1]),
        "E9: what bury keeps was offered, each change once"
    );
    debug_assert!(
        buried.new_tombstones.iter().all(|i| deletes[*i as usize]),
        "E9: bury's new tombstones are offered deletes"
    );
    debug_assert!(
        buried
            .new_tombstones
            .iter()
            .all(|i| buried.kept.contains(i)),
        "E9: a delete bury records as a tombstone is also applied to the table"
    );
    Ok(buried)
}

/// The event times of `rows` of `batch` (each delete's, for its tombstone).
pub(crate) fn event_times_of(
    batch: &RecordBatch,
    rows: &[u32],
    key: &KeySpec,
) -> Result<Vec<EventTime>, ArrowError> {
    let time_of = event_time_reader(batch, key)?;
    Ok(rows.iter().map(|i| time_of(*i as usize)).collect())
}

/// The values of the key fields then the sequence fields of `rows` of `batch`.
pub(crate) fn tombstone_values(
    batch: &RecordBatch,
    rows: &[u32],
    key: &KeySpec,
) -> Result<Vec<ArrayRef>, ArrowError> {
    let indices = deltalake::arrow::array::UInt32Array::from(rows.to_vec());
    let fields: Vec<String> = key.columns.iter().chain(&key.sequence).cloned().collect();
    columns_named(batch, &fields)?
        .iter()
        .map(|c| deltalake::arrow::compute::take(c, &indices, None))
        .collect()
}

/// `flags` as an arrow array.
pub(crate) fn flag_array(flags: impl IntoIterator<Item = bool>) -> BooleanArray {
    BooleanArray::from(flags.into_iter().collect::<Vec<bool>>())
}

/// The types of `fields` (dotted paths) in `schema`.
pub(crate) fn field_types(
    schema: &Arc<Schema>,
    fields: &[String],
) -> Result<Vec<(String, DataType)>, ArrowError> {
    fields
        .iter()
        .map(|f| {
            let path = sluice_source::FieldPath::resolve(schema, f)
                .map_err(|e| ArrowError::SchemaError(e.to_string()))?;
            let field = path
                .field(schema)
                .map_err(|e| ArrowError::SchemaError(e.to_string()))?;
            Ok((f.clone(), field.data_type().clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests;
