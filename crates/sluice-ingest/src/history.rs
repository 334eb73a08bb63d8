//! History (`--scd 2`): every change of a key is a version of its row, current from the
//! change's sequence ([`START_AT`]) until the sequence of the key's next change or delete
//! ([`END_AT`]; null while current). Pure: no I/O.
//!
//! The versions a table holds say exactly which changes built them: each version is one
//! change (its values, its sequence as its start), and each end that no version starts at
//! is a delete. So the history of a key after offered changes is recomputed from what the
//! table holds, the tombstones of the key's deletes, and the offered changes, in sequence
//! order, whatever order they arrived in: a late change between two versions splits the
//! earlier one, a late delete ends the version it falls in, a replay changes nothing. Only
//! the versions that are new, or whose end moved, are written.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::arrow::array::{new_null_array, Array, ArrayRef, RecordBatch, UInt32Array};
use deltalake::arrow::compute::{cast, concat, concat_batches, take, take_record_batch};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::row::Rows;

use crate::dedupe::{columns_named, sequence_converter};
use crate::keys::KeyRows;

/// The column of the sequence that ended a version (the key's next change or delete); null
/// for the current version.
pub use sluice_publish::HISTORY_END_AT as END_AT;
/// The column of a version's first sequence (the change that made it).
pub use sluice_publish::HISTORY_START_AT as START_AT;

/// `record` (a new table's) with the two version columns, of the sequence field's type,
/// last. A record field of either name is refused: the versions would overwrite its values
/// (the caller reserves the names, so an inferred field of either is stored under another).
pub fn with_version_columns(record: &SchemaRef, sequence: &DataType) -> Result<SchemaRef, String> {
    let mut fields: Vec<Field> = record.fields().iter().map(|f| f.as_ref().clone()).collect();
    for name in [START_AT, END_AT] {
        if record.field_with_name(name).is_ok() {
            return Err(format!(
                "the records have a field {name}, the column of a version's sequence"
            ));
        }
        fields.push(Field::new(name, sequence.clone(), true));
    }
    Ok(Arc::new(Schema::new_with_metadata(
        fields,
        record.metadata().clone(),
    )))
}

/// What history asks of a table for offered changes.
#[derive(Debug)]
pub(crate) struct Versions {
    /// The versions to write, in the offered rows' schema: new ones (to insert) and held
    /// ones whose end moved (to update), with their start and end set.
    pub rows: RecordBatch,
    /// Indices of the offered deletes that no tombstone of their key records yet.
    pub new_tombstones: Vec<u32>,
}

/// One change of a key: its sequence (an index into the sequence values) and what it is.
#[derive(Debug, Clone, Copy)]
struct Change {
    at: usize,
    what: What,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum What {
    /// A version the table holds (row of the combined batch); ranks first among changes of
    /// one sequence: what the table holds stays as it is.
    Held(usize),
    /// An offered upsert (row of the combined batch).
    Offered(usize),
    /// A delete: offered, a tombstone, or an end no version starts at.
    Delete,
}

/// The versions of the keys of `offered` (unique by key and sequence; `deletes` flags the
/// deletes) given `held` (the table's versions of those keys, in `offered`'s columns) and
/// `tombstones` (batches of the key columns then the sequence column).
pub(crate) fn versions(
    offered: &RecordBatch,
    deletes: &[bool],
    held: &[RecordBatch],
    tombstones: &[RecordBatch],
    key: &[String],
    sequence: &str,
) -> Result<Versions, ArrowError> {
    let schema = offered.schema();
    let n_offered = offered.num_rows();
    assert_eq!(
        deletes.len(),
        n_offered,
        "E9 history: a delete flag per offered change"
    );
    let mut batches = vec![offered.clone()];
    for h in held {
        batches.push(conform(h, &schema)?);
    }
    let all = concat_batches(&schema, &batches)?;
    let all_keys = columns_named(&all, key)?;
    let (values, tomb_keys) = sequence_values(&all, &all_keys, tombstones, sequence)?;
    let converter = sequence_converter(std::slice::from_ref(&values))?;
    let ordered = converter.convert_columns(std::slice::from_ref(&values))?;
    let rows = all.num_rows();

    // The changes of each key, keys in the order they first appear.
    let keys = KeyRows::of(&all_keys)?;
    let mut slots: HashMap<Option<&[u8]>, usize> = HashMap::new();
    let mut changes: Vec<Vec<Change>> = Vec::new();
    for i in 0..rows {
        let what = match deletes.get(i) {
            _ if i >= n_offered => What::Held(i),
            Some(true) => What::Delete,
            _ => What::Offered(i),
        };
        let slot = *slots.entry(keys.key(i)).or_insert_with(|| {
            changes.push(Vec::new());
            changes.len() - 1
        });
        changes[slot].push(Change { at: i, what });
        if i >= n_offered && !values.is_null(rows + i) {
            changes[slot].push(Change {
                at: rows + i,
                what: What::Delete,
            });
        }
    }
    // The tombstones of these keys, as deletes.
    let mut next_value = 2 * rows;
    let mut recorded: HashMap<Option<&[u8]>, Vec<usize>> = HashMap::new();
    let tomb_rows: Vec<KeyRows> = tomb_keys
        .iter()
        .map(|k| KeyRows::of(k))
        .collect::<Result<_, _>>()?;
    for t in &tomb_rows {
        for j in 0..t.len() {
            let at = next_value + j;
            if let Some(slot) = slots.get(&t.key(j)) {
                changes[*slot].push(Change {
                    at,
                    what: What::Delete,
                });
                recorded.entry(t.key(j)).or_default().push(at);
            }
        }
        next_value += t.len();
    }

    let mut plan = Plan::default();
    for list in &mut changes {
        plan.key(list, &ordered, &values, rows);
    }
    let seq = |at: usize| ordered.row(at);
    // The offered deletes that no tombstone of their key records yet.
    let new_tombstones: Vec<u32> = (0..n_offered)
        .filter(|&i| deletes[i])
        .filter(|&i| {
            !recorded
                .get(&keys.key(i))
                .is_some_and(|at| at.iter().any(|a| seq(*a) == seq(i)))
        })
        .map(|i| i as u32)
        .collect();
    Ok(Versions {
        rows: plan.versions(&all, &values)?,
        new_tombstones,
    })
}

/// Every sequence value a change of `all`'s keys can have, in one array that changes point
/// into: each row's sequence, then each row's end ([`END_AT`]), then each tombstone's
/// sequence; with the tombstones' key columns, cast to `all_keys`' types.
fn sequence_values(
    all: &RecordBatch,
    all_keys: &[ArrayRef],
    tombstones: &[RecordBatch],
    sequence: &str,
) -> Result<(ArrayRef, Vec<Vec<ArrayRef>>), ArrowError> {
    let [sequence] = <[ArrayRef; 1]>::try_from(columns_named(all, &[sequence.to_string()])?)
        .map_err(|_| ArrowError::SchemaError("one sequence field".into()))?;
    let seq_type = sequence.data_type().clone();
    let ends = cast(all.column(all.schema().index_of(END_AT)?), &seq_type)?;
    let mut values: Vec<ArrayRef> = vec![sequence, ends];
    let mut tomb_keys = Vec::new();
    let width = all_keys.len();
    for t in tombstones.iter().filter(|t| t.num_rows() > 0) {
        let k = t.columns()[..width]
            .iter()
            .zip(all_keys)
            .map(|(c, like)| cast(c, like.data_type()))
            .collect::<Result<Vec<_>, _>>()?;
        tomb_keys.push(k);
        values.push(cast(&t.columns()[width], &seq_type)?);
    }
    let refs: Vec<&dyn Array> = values.iter().map(|v| v.as_ref()).collect();
    Ok((concat(&refs)?, tomb_keys))
}

/// The versions to write: rows of the combined batch, each with its end (an index into the
/// sequence values; `None`: current).
#[derive(Default)]
struct Plan {
    rows: Vec<u32>,
    ends: Vec<Option<u32>>,
}

impl Plan {
    /// Plans one key's `changes` (`ordered`: the sequence values as comparable rows; `values`:
    /// the sequence values; `rows`: the combined batch's rows, whose ends follow their
    /// sequences in `values`). In sequence order, one change per sequence (what the table
    /// holds first, then an upsert, then a delete): each upsert is a version until the next
    /// change; an offered one is new, a held one is written only if its end moved.
    fn key(&mut self, changes: &mut Vec<Change>, ordered: &Rows, values: &ArrayRef, rows: usize) {
        let seq = |at: usize| ordered.row(at);
        changes.sort_by(|a, b| seq(a.at).cmp(&seq(b.at)).then(a.what.cmp(&b.what)));
        changes.dedup_by(|later, first| seq(later.at) == seq(first.at));
        for (j, change) in changes.iter().enumerate() {
            let end = changes.get(j + 1).map(|next| next.at as u32);
            // A history version ends after it starts (`sluice verify`'s `history_overlap`):
            // the changes are in sequence order, one per sequence.
            debug_assert!(
                end.is_none_or(|e| seq(e as usize) > seq(change.at)),
                "E9 history: a version ends after it starts"
            );
            let moved = match change.what {
                What::Offered(_) => true,
                What::Held(i) => {
                    let held_end = (!values.is_null(rows + i)).then_some(rows + i);
                    match (held_end, end) {
                        (None, None) => false,
                        (Some(h), Some(e)) => seq(h) != seq(e as usize),
                        _ => true,
                    }
                }
                What::Delete => false,
            };
            if let (true, What::Offered(i) | What::Held(i)) = (moved, change.what) {
                self.rows.push(i as u32);
                self.ends.push(end);
            }
        }
    }

    /// The planned rows of `all`, with their start (their own sequence) and end set.
    fn versions(self, all: &RecordBatch, values: &ArrayRef) -> Result<RecordBatch, ArrowError> {
        debug_assert_eq!(
            self.rows.len(),
            self.ends.len(),
            "E9 history: every planned version has its end (none while current)"
        );
        let schema = all.schema();
        let picked = take_record_batch(all, &UInt32Array::from(self.rows.clone()))?;
        let starts = take(values, &UInt32Array::from(self.rows), None)?;
        let ends = take(values, &UInt32Array::from(self.ends), None)?;
        let mut columns = picked.columns().to_vec();
        let start_type = schema.field_with_name(START_AT)?.data_type().clone();
        columns[schema.index_of(START_AT)?] = cast(&starts, &start_type)?;
        columns[schema.index_of(END_AT)?] = cast(&ends, &start_type)?;
        RecordBatch::try_new(schema, columns)
    }
}

/// `batch` (read back from the table) in `schema`: same columns by name, cast to its types;
/// a column the table does not have yet (schema evolution: its rows predate it) is null.
fn conform(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let columns = schema
        .fields()
        .iter()
        .map(|f| match batch.schema().index_of(f.name()) {
            Ok(i) => cast(batch.column(i), f.data_type()),
            Err(_) => Ok(new_null_array(f.data_type(), batch.num_rows())),
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns)
}

#[cfg(test)]
mod tests;
