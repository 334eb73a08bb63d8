//! Key ranges of a table-scope MERGE, so that its cost follows the changes, not the table.
//!
//! A MERGE across the table joins the offered rows with the table on the row key. deltalake
//! prunes its scan by one range, the offered keys' min to max, which spans the whole table as
//! soon as the keys are spread (a 1-row MERGE into a large table reads every file:
//! delta-io/delta-rs#2573). Here the offered keys, sorted, are cut wherever a file that holds
//! none of them lies between two of them: by its key statistics (`minValues`, `maxValues`) such
//! a file's keys all fall strictly between two neighbouring offered keys, or outside them all.
//! The ranges that remain cover every offered key and meet only the files whose statistics
//! admit an offered key (up to [`RANGES_MAX`] ranges; more are coalesced in order, which still
//! covers every key). As a conjunct of the MERGE's predicate, and as a filter of the read of
//! the keys' current rows before it, they change no result: a target row whose key is not
//! offered matches nothing. They only let the scan skip files by their statistics.
//!
//! Keys of integer and string types are ranged; other types and nested keys have no ranges
//! (the scan reads every file, as before). A file without statistics for the key is never
//! pruned and cuts nothing.

use deltalake::arrow::array::{Array, AsArray};
use deltalake::arrow::datatypes::{
    ArrowPrimitiveType, DataType, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type,
    UInt32Type, UInt8Type,
};
use deltalake::datafusion::common::ScalarValue;
use deltalake::datafusion::logical_expr::{lit, Expr};
use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;

/// The most ranges a predicate holds (each a disjunct of two comparisons).
pub(crate) const RANGES_MAX: usize = 64;

/// One key value, as both the offered rows and the statistics give it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Bound {
    Int(i64),
    Str(String),
}

/// What [`KeyRanges::new`] planned: the ranges and how many files they leave out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeyRanges {
    data_type: DataType,
    /// Sorted, disjoint, inclusive; empty when no key is offered.
    ranges: Vec<(Bound, Bound)>,
    /// Files of the table.
    pub files: usize,
    /// Files whose statistics admit no offered key.
    pub files_pruned: usize,
}

/// The non-null values of a primitive integer `column` as bounds.
fn int_bounds<T>(column: &dyn Array) -> Vec<Bound>
where
    T: ArrowPrimitiveType,
    T::Native: Into<i64>,
{
    let values = column.as_primitive::<T>().iter().flatten();
    values.map(|v| Bound::Int(v.into())).collect()
}

/// The non-null values of `column` as bounds (`None`: a type that is not ranged).
fn offered_bounds(column: &dyn Array) -> Option<Vec<Bound>> {
    let text = |s: &str| Bound::Str(s.to_string());
    Some(match column.data_type() {
        DataType::Int8 => int_bounds::<Int8Type>(column),
        DataType::Int16 => int_bounds::<Int16Type>(column),
        DataType::Int32 => int_bounds::<Int32Type>(column),
        DataType::Int64 => int_bounds::<Int64Type>(column),
        DataType::UInt8 => int_bounds::<UInt8Type>(column),
        DataType::UInt16 => int_bounds::<UInt16Type>(column),
        DataType::UInt32 => int_bounds::<UInt32Type>(column),
        DataType::Utf8 => column
            .as_string::<i32>()
            .iter()
            .flatten()
            .map(text)
            .collect(),
        DataType::LargeUtf8 => column
            .as_string::<i64>()
            .iter()
            .flatten()
            .map(text)
            .collect(),
        DataType::Utf8View => column.as_string_view().iter().flatten().map(text).collect(),
        _ => return None,
    })
}

/// One side of a file's key statistics (`minValues` or `maxValues`) in `stats` (the `add`
/// action's JSON statistics), as a bound of the kind `int` says.
fn stats_bound(stats: &serde_json::Value, side: &str, column: &str, int: bool) -> Option<Bound> {
    let value = stats.get(side)?.get(column)?;
    match int {
        true => value.as_i64().map(Bound::Int),
        false => value.as_str().map(|s| Bound::Str(s.to_string())),
    }
}

/// A file's `[min, max]` of `column` from its JSON statistics; `None` without both.
pub(crate) fn file_bounds(stats: Option<&str>, column: &str, int: bool) -> Option<(Bound, Bound)> {
    let stats: serde_json::Value = serde_json::from_str(stats?).ok()?;
    let min = stats_bound(&stats, "minValues", column, int)?;
    let max = stats_bound(&stats, "maxValues", column, int)?;
    (min <= max).then_some((min, max))
}

impl KeyRanges {
    /// The ranges of the offered `column` (of the rows offered to a MERGE) over the files
    /// whose JSON statistics `files` yields (one item per file of the table); `None` when
    /// the column's type is not ranged.
    pub(crate) fn new(
        column: &dyn Array,
        column_name: &str,
        files: impl IntoIterator<Item = Option<String>>,
    ) -> Option<KeyRanges> {
        let data_type = column.data_type().clone();
        let mut keys = offered_bounds(column)?;
        // The statistics hold the kind of bound the column's values are.
        let int = !matches!(
            data_type,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        );
        keys.sort_unstable();
        keys.dedup();
        let bounds: Vec<Option<(Bound, Bound)>> = files
            .into_iter()
            .map(|stats| file_bounds(stats.as_deref(), column_name, int))
            .collect();
        let ranges = coalesced(cut(&keys, &bounds), RANGES_MAX);
        debug_assert!(
            ranges.len() <= RANGES_MAX && ranges.windows(2).all(|w| w[0].1 < w[1].0),
            "E9: key ranges are sorted, disjoint and at most RANGES_MAX"
        );
        debug_assert!(
            keys.iter().all(|k| meets(&ranges, k, k)),
            "E9: the key ranges of a MERGE cover every offered key"
        );
        let files_pruned = bounds
            .iter()
            .flatten()
            .filter(|(lo, hi)| !meets(&ranges, lo, hi))
            .count();
        Some(KeyRanges {
            data_type,
            ranges,
            files: bounds.len(),
            files_pruned,
        })
    }

    /// Whether no file may hold an offered key (every file was pruned, or none exists).
    pub(crate) fn excludes_every_file(&self) -> bool {
        self.files_pruned == self.files
    }

    /// The ranges as a predicate over `column` (a balanced disjunction; `false` without
    /// ranges), with literals of the column's type.
    pub(crate) fn predicate(&self, column: Expr) -> Expr {
        let literal = |b: &Bound| -> Option<Expr> {
            let value = match b {
                Bound::Int(v) => ScalarValue::Int64(Some(*v)),
                Bound::Str(s) => ScalarValue::Utf8(Some(s.clone())),
            };
            value.cast_to(&self.data_type).ok().map(lit)
        };
        let disjuncts: Vec<Expr> = self
            .ranges
            .iter()
            .map(|(lo, hi)| match (literal(lo), literal(hi)) {
                (Some(lo), Some(hi)) if lo == hi => column.clone().eq(lo),
                (Some(lo), Some(hi)) => column.clone().gt_eq(lo).and(column.clone().lt_eq(hi)),
                // A bound came from a value of the column's type, so its cast back cannot
                // fail; were it to, the range would admit every row, never drop one.
                _ => lit(true),
            })
            .collect();
        any_of(disjuncts)
    }

    #[cfg(test)]
    pub(crate) fn ranges(&self) -> &[(Bound, Bound)] {
        &self.ranges
    }
}

/// The JSON statistics (`add.stats`) of every file of `table`'s loaded version.
pub(crate) async fn file_stats(table: &DeltaTable) -> Result<Vec<Option<String>>, DeltaTableError> {
    table
        .get_active_add_actions_by_partitions(&[])
        .map_ok(|view| view.stats())
        .try_collect()
        .await
}

/// `exprs` or'ed as a balanced tree (depth log n, whatever the count); `false` if empty.
fn any_of(mut exprs: Vec<Expr>) -> Expr {
    match exprs.len() {
        0 => lit(false),
        1 => exprs.remove(0),
        n => {
            let right = exprs.split_off(n / 2);
            any_of(exprs).or(any_of(right))
        }
    }
}

/// Whether `[lo, hi]` meets one of `ranges` (sorted, disjoint, inclusive).
pub(crate) fn meets(ranges: &[(Bound, Bound)], lo: &Bound, hi: &Bound) -> bool {
    let first_ending_at_or_above = ranges.partition_point(|(_, end)| end < lo);
    ranges
        .get(first_ending_at_or_above)
        .is_some_and(|(start, _)| start <= hi)
}

/// The runs of sorted, distinct `keys` not separated by a file that holds none of them, as
/// inclusive ranges, over `files` (bounds from statistics; `None`: none). A file holds none
/// when no key falls in its bounds; its keys then all lie between two neighbouring keys (the
/// gap is cut) or outside every key (nothing to cut).
pub(crate) fn cut(keys: &[Bound], files: &[Option<(Bound, Bound)>]) -> Vec<(Bound, Bound)> {
    let mut cut_before = vec![false; keys.len()];
    for (lo, hi) in files.iter().flatten() {
        let first_at_or_above = keys.partition_point(|k| k < lo);
        let holds_a_key = keys.get(first_at_or_above).is_some_and(|k| k <= hi);
        if !holds_a_key && first_at_or_above > 0 && first_at_or_above < keys.len() {
            cut_before[first_at_or_above] = true;
        }
    }
    let mut ranges: Vec<(Bound, Bound)> = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        match ranges.last_mut() {
            Some((_, hi)) if !cut_before[i] => *hi = key.clone(),
            _ => ranges.push((key.clone(), key.clone())),
        }
    }
    ranges
}

/// `ranges` (sorted, disjoint) as at most `max` ranges: consecutive ones joined in groups of
/// equal count, each group spanning its first range's low to its last range's high.
pub(crate) fn coalesced(ranges: Vec<(Bound, Bound)>, max: usize) -> Vec<(Bound, Bound)> {
    if ranges.len() <= max.max(1) {
        return ranges;
    }
    let group = ranges.len().div_ceil(max.max(1));
    ranges
        .chunks(group)
        .map(|chunk| (chunk[0].0.clone(), chunk[chunk.len() - 1].1.clone()))
        .collect()
}

#[cfg(test)]
mod tests;
