//! Row-key dedupe: one row per natural key, the deterministic winner being the latest event
//! time (or the highest sequence, where the pipeline declares sequence fields), then the
//! highest source position (DESIGN.md, E5).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use deltalake::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, UInt32Array,
};
use deltalake::arrow::compute::{concat_batches, take_record_batch};
use deltalake::arrow::datatypes::{
    DataType, Float64Type, Int32Type, Int64Type, SchemaRef, TimestampMicrosecondType,
};
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::row::{RowConverter, Rows, SortField};
use sluice_publish::{OFFSET_COLUMN, SOURCE_COLUMN};
use sluice_source::FieldPath;
use sluice_stage::align_all;
use sluice_window::{key_winner, EventTime, TimeSpec};

use crate::keys::KeyRows;

/// How rows of one window are keyed.
#[derive(Debug, Clone)]
pub struct KeySpec {
    /// Natural key fields (non-empty); a dotted path names a struct member.
    pub columns: Vec<String>,
    /// The event-time field (a dotted path names a struct member) and how it is read.
    pub time_field: String,
    pub time: TimeSpec,
    /// Sequence fields (`--sequence-field`; dotted paths): when given, they order a key's
    /// changes instead of the event time, compared in this order (a log sequence number, or
    /// a binlog file then position).
    pub sequence: Vec<String>,
}

/// What orders the rows of one key in a batch: their event times, read on demand (dedupe
/// needs the times of colliding keys only), or their sequence fields as arrow's row format,
/// whose bytes compare as the values do.
enum RowOrder<'b> {
    Time(Box<dyn Fn(usize) -> EventTime + 'b>),
    Sequence(Rows),
}

/// A row's place in its key's order (values of one [`RowOrder`] kind are only ever compared
/// with each other).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Order<'a> {
    Time(EventTime),
    Sequence(&'a [u8]),
}

/// The converter of sequence columns like `columns` to arrow's row format, whose bytes
/// compare as the values do (rows are comparable when one converter made them).
pub(crate) fn sequence_converter(columns: &[ArrayRef]) -> Result<RowConverter, ArrowError> {
    RowConverter::new(
        columns
            .iter()
            .map(|c| SortField::new(c.data_type().clone()))
            .collect(),
    )
}

impl<'b> RowOrder<'b> {
    /// The order of `batch`'s rows by `key`'s rule.
    fn of(batch: &'b RecordBatch, key: &'b KeySpec) -> Result<Self, ArrowError> {
        if key.sequence.is_empty() {
            return Ok(RowOrder::Time(Box::new(event_time_reader(batch, key)?)));
        }
        let columns = columns_named(batch, &key.sequence)?;
        Ok(RowOrder::Sequence(
            sequence_converter(&columns)?.convert_columns(&columns)?,
        ))
    }

    /// The orders of two batches' rows, comparable across them: sequence fields are
    /// converted by one converter, so both must hold them with the same types.
    fn of_pair(
        a: &'b RecordBatch,
        b: &'b RecordBatch,
        key: &'b KeySpec,
    ) -> Result<(Self, Self), ArrowError> {
        if key.sequence.is_empty() {
            return Ok((Self::of(a, key)?, Self::of(b, key)?));
        }
        let (a, b) = (
            columns_named(a, &key.sequence)?,
            columns_named(b, &key.sequence)?,
        );
        let converter = sequence_converter(&a)?;
        Ok((
            RowOrder::Sequence(converter.convert_columns(&a)?),
            RowOrder::Sequence(converter.convert_columns(&b)?),
        ))
    }

    fn at(&self, i: usize) -> Order<'_> {
        match self {
            RowOrder::Time(time_of) => Order::Time(time_of(i)),
            RowOrder::Sequence(rows) => Order::Sequence(rows.row(i).data()),
        }
    }
}

/// `batches` as one batch of `schema` (rows written before the schema grew read their new
/// columns as null).
fn concat_aligned(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<RecordBatch, ArrowError> {
    if batches
        .iter()
        .all(|b| b.schema().as_ref() == schema.as_ref())
    {
        return concat_batches(schema, batches);
    }
    concat_batches(schema, &align_all(batches, schema)?)
}

/// The rows of `inputs` that win by row key (or source position, without a key).
pub(crate) fn unique_rows(
    schema: &SchemaRef,
    inputs: &[RecordBatch],
    key: Option<&KeySpec>,
) -> Result<RecordBatch, ArrowError> {
    match key {
        Some(key) => dedupe(schema, inputs, key),
        None => dedupe_by_position(schema, inputs),
    }
}

/// Keeps one row per key; output rows are in source-position order.
pub fn dedupe(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    key: &KeySpec,
) -> Result<RecordBatch, ArrowError> {
    let all = concat_aligned(schema, batches)?;
    let rows = KeyRows::of(&columns_named(&all, &key.columns)?)?;
    // Times are read for colliding keys only (duplicate deliveries, late rows).
    let order = RowOrder::of(&all, key)?;
    let (sources, offsets) = position_columns(schema, &all)?;
    let position = |i: usize| (sources.value(i), offsets.value(i));
    let n = all.num_rows();
    let mut winners: HashMap<Option<&[u8]>, usize, FixedState> =
        HashMap::with_capacity_and_hasher(n, fixed_state());
    // Whether row i is its key's winner so far: the kept rows come out in index order.
    let mut winning = vec![true; n];
    for i in 0..n {
        match winners.entry(rows.key(i)) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(i);
            }
            std::collections::hash_map::Entry::Occupied(mut slot) => {
                let w = *slot.get();
                if key_winner((order.at(i), &position(i)), (order.at(w), &position(w))) {
                    slot.insert(i);
                    winning[w] = false;
                } else {
                    winning[i] = false;
                }
            }
        }
    }
    let distinct_keys = winners.len();
    drop(winners);
    let mut keep: Vec<usize> = (0..n).filter(|&i| winning[i]).collect();
    debug_assert_eq!(
        keep.len(),
        distinct_keys,
        "E9: dedupe keeps one row per row key"
    );
    sort_by_position(&mut keep, &sources, &offsets);
    let indices = UInt32Array::from(keep.into_iter().map(|i| i as u32).collect::<Vec<_>>());
    take_record_batch(&all, &indices)
}

/// Key buckets of a window that outgrows the memory budget: its parts are staged one file per
/// bucket, and its publication dedupes a group of buckets at a time (rows of one key always
/// share a bucket), so the memory it needs is a fraction of the window.
pub const KEY_BUCKETS: u32 = 16;

/// Per row of `batch`, the bucket of its row key in `0..buckets` (within one process run:
/// the hash has fixed seeds but may differ between builds and machines, and buckets are never
/// persisted past the run that staged them).
fn key_buckets(
    batch: &RecordBatch,
    key_columns: &[String],
    buckets: u32,
) -> Result<Vec<u32>, ArrowError> {
    let rows = KeyRows::of(&columns_named(batch, key_columns)?)?;
    let state = fixed_state();
    let buckets = u64::from(buckets.max(1));
    Ok(rows
        .keys()
        .map(|k| (state.hash_one(k) % buckets) as u32)
        .collect())
}

/// Splits the rows of `batches` into `buckets` lists by [`key_buckets`], keeping their order;
/// empty buckets get no batch. Each batch is dropped once split, so the rows are held about
/// once, not twice.
pub fn split_by_key(
    batches: Vec<RecordBatch>,
    key_columns: &[String],
    buckets: u32,
) -> Result<Vec<Vec<RecordBatch>>, ArrowError> {
    let mut split: Vec<Vec<RecordBatch>> = (0..buckets.max(1)).map(|_| Vec::new()).collect();
    let mut offered_rows = 0;
    for batch in batches.into_iter().filter(|b| b.num_rows() > 0) {
        let of_row = key_buckets(&batch, key_columns, buckets)?;
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); split.len()];
        for (i, b) in of_row.iter().enumerate() {
            rows[*b as usize].push(i as u32);
        }
        for (b, rows) in rows.into_iter().enumerate() {
            if rows.len() == batch.num_rows() {
                split[b].push(batch.clone());
            } else if !rows.is_empty() {
                split[b].push(take_record_batch(&batch, &UInt32Array::from(rows))?);
            }
        }
        offered_rows += batch.num_rows();
    }
    debug_assert_eq!(
        split
            .iter()
            .flatten()
            .map(RecordBatch::num_rows)
            .sum::<usize>(),
        offered_rows,
        "E6: splitting a window by key bucket keeps every row"
    );
    Ok(split)
}

/// The hasher of dedupe's maps: fast on short keys, with fixed seeds (no process randomness;
/// the output never depends on iteration order anyway, it is sorted by position).
type FixedState = ahash::RandomState;

fn fixed_state() -> FixedState {
    ahash::RandomState::with_seeds(
        0x736c_7569_6365_0001,
        0x736c_7569_6365_0002,
        0x736c_7569_6365_0003,
        0x736c_7569_6365_0004,
    )
}

/// Sorts row indices into source-position order. Rows arrive in read order, which is position
/// order in every path that exists today (a window's published rows, then its parts, then its
/// buffered rows), so one linear check usually proves that index order is position order and
/// an integer sort suffices; comparing `(source name, offset)` pairs in the sort itself was
/// the largest cost of dedupe. Any other order still sorts by position.
fn sort_by_position(keep: &mut [usize], sources: &StringArray, offsets: &Int64Array) {
    let position = |i: usize| (sources.value(i), offsets.value(i));
    let n = sources.len();
    if (1..n).all(|i| position(i - 1) <= position(i)) {
        keep.sort_unstable();
    } else {
        keep.sort_by(|a, b| position(*a).cmp(&position(*b)));
    }
    debug_assert!(
        keep.windows(2).all(|w| position(w[0]) <= position(w[1])),
        "E5: a window's rows are written in source-position order"
    );
}

/// Keeps one row per source position (the row key when no natural key is declared), in
/// position order. Rows of one position are one record, so which copy stays is immaterial.
pub fn dedupe_by_position(
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<RecordBatch, ArrowError> {
    let all = concat_aligned(schema, batches)?;
    let (sources, offsets) = position_columns(schema, &all)?;
    let mut first: HashMap<(&str, i64), usize, FixedState> =
        HashMap::with_capacity_and_hasher(all.num_rows(), fixed_state());
    for i in 0..all.num_rows() {
        first
            .entry((sources.value(i), offsets.value(i)))
            .or_insert(i);
    }
    let mut keep: Vec<usize> = first.into_values().collect();
    sort_by_position(&mut keep, &sources, &offsets);
    let position = |i: usize| (sources.value(i), offsets.value(i));
    debug_assert!(
        keep.windows(2).all(|w| position(w[0]) < position(w[1])),
        "E9: one row per source position, in position order"
    );
    let indices = UInt32Array::from(keep.into_iter().map(|i| i as u32).collect::<Vec<_>>());
    take_record_batch(&all, &indices)
}

/// Whether some row of `offered` has the same value in `columns` (the row key) as some row of
/// `present`, which holds at least those columns (other physical types are cast to
/// `offered`'s).
pub fn any_key_in(
    offered: &RecordBatch,
    present: &[RecordBatch],
    columns: &[String],
) -> Result<bool, ArrowError> {
    let offered_keys = columns_named(offered, columns)?;
    let offered_rows = KeyRows::of(&offered_keys)?;
    let mut keys: HashSet<Option<&[u8]>, FixedState> =
        HashSet::with_capacity_and_hasher(offered.num_rows(), fixed_state());
    keys.extend(offered_rows.keys());
    for batch in present.iter().filter(|b| b.num_rows() > 0) {
        let batch_keys: Vec<_> = columns
            .iter()
            .zip(&offered_keys)
            .map(|(c, o)| {
                let column = column_at(batch, c)?;
                deltalake::arrow::compute::cast(&column, o.data_type())
            })
            .collect::<Result<_, ArrowError>>()?;
        if KeyRows::of(&batch_keys)?.keys().any(|k| keys.contains(&k)) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The rows of `offered` whose row key (`columns`) no row of `present` has.
pub(crate) fn absent_rows(
    offered: &RecordBatch,
    present: &[RecordBatch],
    columns: &[String],
) -> Result<RecordBatch, ArrowError> {
    let offered_keys = columns_named(offered, columns)?;
    let mut present_rows = Vec::new();
    for batch in present.iter().filter(|b| b.num_rows() > 0) {
        let batch_keys: Vec<_> = columns
            .iter()
            .zip(&offered_keys)
            .map(|(c, o)| deltalake::arrow::compute::cast(&column_at(batch, c)?, o.data_type()))
            .collect::<Result<_, ArrowError>>()?;
        present_rows.push(KeyRows::of(&batch_keys)?);
    }
    let mut keys: HashSet<Option<&[u8]>, FixedState> = HashSet::with_hasher(fixed_state());
    for rows in &present_rows {
        keys.extend(rows.keys());
    }
    let offered_rows = KeyRows::of(&offered_keys)?;
    let keep: Vec<u32> = (0..offered.num_rows())
        .filter(|i| !keys.contains(&offered_rows.key(*i)))
        .map(|i| i as u32)
        .collect();
    take_record_batch(offered, &UInt32Array::from(keep))
}

/// The top-level columns [`drop_losers`] needs from the table's current rows (a nested key
/// or time field needs its whole top-level struct), and the time field, which says the
/// window each row is in ([`windows_of`]).
pub fn incumbent_columns(key: &KeySpec) -> Vec<String> {
    let mut columns: Vec<String> = Vec::new();
    let fields = key
        .columns
        .iter()
        .chain(std::iter::once(&key.time_field))
        .chain(&key.sequence)
        .map(|c| root_of(c))
        .chain([SOURCE_COLUMN, OFFSET_COLUMN]);
    for c in fields {
        if !columns.iter().any(|k| k == c) {
            columns.push(c.to_string());
        }
    }
    columns
}

/// The windows (of `size`) the rows of `batches` are in, by their event times as `key`
/// reads them: where a MERGE across the table changes rows besides its own window's.
pub(crate) fn windows_of(
    batches: &[RecordBatch],
    key: &KeySpec,
    size: sluice_window::WindowSize,
) -> Result<std::collections::BTreeSet<sluice_window::Window>, ArrowError> {
    let mut finder = sluice_window::WindowFinder::new(size);
    let mut windows = std::collections::BTreeSet::new();
    for batch in batches.iter().filter(|b| b.num_rows() > 0) {
        let time = event_time_reader(batch, key)?;
        // A row whose time does not read (written by another tool) is in no window sluice
        // can name: it is not one of its windows.
        let times = (0..batch.num_rows())
            .map(time)
            .filter(|t| *t != EventTime::MIN);
        windows.extend(times.map(|t| finder.find(t)));
    }
    Ok(windows)
}

/// The top-level column a field name starts in (`user` of `user.id`).
pub fn root_of(field: &str) -> &str {
    field.split('.').next().unwrap_or(field)
}

/// Drops the offered rows (unique by key) that lose against the table's current row of
/// their key (`incumbents`, projected to [`incumbent_columns`]): only winners are merged, so
/// a replay (same time, same position) and a delivery older than what the table holds change
/// nothing, whatever the arrival order. With sequence fields, a change must have a higher
/// sequence than the table's row to win: one at or below it changes nothing.
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
    let offered_keys = columns_named(offered, &key.columns)?;
    let present_keys = columns_named(&present, &key.columns)?;
    let offered_rows = KeyRows::of(&offered_keys)?;
    debug_assert_eq!(
        offered_rows.keys().collect::<HashSet<_>>().len(),
        offered.num_rows(),
        "E9: a MERGE's offered rows are unique by row key"
    );
    let present_rows = KeyRows::of(&present_keys)?;
    let (present_order, offered_order) = RowOrder::of_pair(&present, offered, key)?;
    let (p_sources, p_offsets) = position_columns(&present.schema(), &present)?;
    // Per key, the order and position of its best row in the table.
    type Best<'a> = (Order<'a>, (&'a str, i64));
    let mut best: HashMap<Option<&[u8]>, Best> = HashMap::new();
    for i in 0..present.num_rows() {
        let candidate = (
            present_order.at(i),
            (p_sources.value(i), p_offsets.value(i)),
        );
        best.entry(present_rows.key(i))
            .and_modify(|b| {
                if key_winner((candidate.0, &candidate.1), (b.0, &b.1)) {
                    *b = candidate;
                }
            })
            .or_insert(candidate);
    }
    let (o_sources, o_offsets) = position_columns(&offered.schema(), offered)?;
    // With a sequence, an equal one is the same change delivered again: the table's row
    // stays (a redelivery at a later position rewrites nothing).
    let sequenced = !key.sequence.is_empty();
    let keep: Vec<u32> = (0..offered.num_rows())
        .filter(|i| match best.get(&offered_rows.key(*i)) {
            None => true,
            Some((t, _)) if sequenced => offered_order.at(*i) > *t,
            Some((t, p)) => key_winner(
                (
                    offered_order.at(*i),
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

/// `batch`'s fields of these names (dotted paths reach into structs), in this order.
pub(crate) fn columns_named(
    batch: &RecordBatch,
    names: &[String],
) -> Result<Vec<ArrayRef>, ArrowError> {
    names.iter().map(|c| column_at(batch, c)).collect()
}

/// The values of field `name` (a top-level name, or a dotted path into structs).
fn column_at(batch: &RecordBatch, name: &str) -> Result<ArrayRef, ArrowError> {
    let schema = batch.schema();
    let path =
        FieldPath::resolve(&schema, name).map_err(|e| ArrowError::SchemaError(e.to_string()))?;
    path.array(batch)
        .ok_or_else(|| ArrowError::SchemaError(format!("no field {name} in the rows")))
}

/// The source and offset columns of `batch`.
fn position_columns(
    schema: &SchemaRef,
    batch: &RecordBatch,
) -> Result<(StringArray, Int64Array), ArrowError> {
    let wrong =
        |name: &str| ArrowError::SchemaError(format!("position column {name} of another type"));
    Ok((
        batch
            .column(schema.index_of(SOURCE_COLUMN)?)
            .as_string_opt::<i32>()
            .ok_or_else(|| wrong(SOURCE_COLUMN))?
            .clone(),
        batch
            .column(schema.index_of(OFFSET_COLUMN)?)
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| wrong(OFFSET_COLUMN))?
            .clone(),
    ))
}

/// Reads the event time of a row of `batch` on demand ([`EventTime::MIN`] where it has
/// none: rows whose time no longer parses sort first; they were checked on decode, so this
/// only happens for rows written by another tool). Dedupe needs the times of colliding keys
/// only, a few percent of the rows.
pub(crate) fn event_time_reader<'b>(
    batch: &'b RecordBatch,
    key: &'b KeySpec,
) -> Result<impl Fn(usize) -> EventTime + 'b, ArrowError> {
    let column = column_at(batch, &key.time_field)?;
    let t = &key.time;
    let at = move |i: usize| -> Option<EventTime> {
        if column.is_null(i) {
            return None;
        }
        match column.data_type() {
            // (A table's rows read through DataFusion may come as views or large strings.)
            DataType::Utf8 => t.parse_text(column.as_string::<i32>().value(i)).ok(),
            DataType::Utf8View => t.parse_text(column.as_string_view().value(i)).ok(),
            DataType::LargeUtf8 => t.parse_text(column.as_string::<i64>().value(i)).ok(),
            DataType::Int64 => t
                .from_integer(column.as_primitive::<Int64Type>().value(i))
                .ok(),
            DataType::Int32 => t
                .from_integer(i64::from(column.as_primitive::<Int32Type>().value(i)))
                .ok(),
            DataType::Float64 => t
                .from_float(column.as_primitive::<Float64Type>().value(i))
                .ok(),
            // A timestamp holds the instant; a timestamp_ntz the wall-clock time in the zone.
            DataType::Timestamp(_, Some(_)) => Some(EventTime::from_micros(
                column.as_primitive::<TimestampMicrosecondType>().value(i),
            )),
            DataType::Timestamp(_, None) => t
                .zone
                .instant_of_wall_micros(column.as_primitive::<TimestampMicrosecondType>().value(i))
                .map(EventTime::from_micros),
            _ => None,
        }
    };
    Ok(move |i: usize| at(i).unwrap_or(EventTime::MIN))
}

/// The record fields of a file schema (without the position columns).
pub(crate) fn record_fields(file_schema: &SchemaRef) -> SchemaRef {
    Arc::new(deltalake::arrow::datatypes::Schema::new(
        file_schema
            .fields()
            .iter()
            .filter(|f| f.name() != SOURCE_COLUMN && f.name() != OFFSET_COLUMN)
            .cloned()
            .collect::<Vec<_>>(),
    ))
}

/// The file-schema batch of decoded record columns (named as in `schema`) and their
/// positions. Columns are placed by name: the position columns are not always last (a
/// column another tool added to the table, e.g. `ALTER TABLE ADD COLUMNS`, comes after them).
pub fn with_positions(
    schema: &SchemaRef,
    records: &RecordBatch,
    source: &str,
    offsets: Vec<i64>,
) -> Result<RecordBatch, ArrowError> {
    let n = records.num_rows();
    let sources: ArrayRef = Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
        source, n,
    )));
    let offsets: ArrayRef = Arc::new(Int64Array::from(offsets));
    let fields = schema.fields();
    let k = records.num_columns();
    let positional = fields.len() == k + 2
        && fields[k].name() == SOURCE_COLUMN
        && fields[k + 1].name() == OFFSET_COLUMN
        && records
            .schema()
            .fields()
            .iter()
            .zip(fields.iter())
            .all(|(r, f)| r.name() == f.name());
    let columns = if positional {
        let mut columns = records.columns().to_vec();
        columns.extend([sources, offsets]);
        columns
    } else {
        fields
            .iter()
            .map(|f| match f.name().as_str() {
                SOURCE_COLUMN => Ok(sources.clone()),
                OFFSET_COLUMN => Ok(offsets.clone()),
                name => records.column_by_name(name).cloned().ok_or_else(|| {
                    ArrowError::SchemaError(format!("the decoded rows lack the column {name}"))
                }),
            })
            .collect::<Result<Vec<_>, _>>()?
    };
    RecordBatch::try_new(schema.clone(), columns)
}
