//! Delta file statistics (`numRecords`, `minValues`, `maxValues`, `nullCount`): the bounds
//! taken from the Parquet footer the writer produced (its column chunk statistics), or computed
//! from the Arrow batches a file is written from; both give the same JSON.
//!
//! Readers skip files with them, so a wrong bound loses rows in queries. Where a bound cannot
//! be exact it is left out: strings longer than 32 characters have no max (a truncated max
//! would be too small), floats ignore NaN and drop bounds when every value is NaN, and
//! timestamps, booleans and nested columns carry null counts only.

use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::datatypes::{
    DataType, Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    SchemaRef,
};
use deltalake::parquet::file::metadata::ParquetMetaData;
use deltalake::parquet::file::statistics::Statistics;
use serde_json::{json, Map, Value};

const STRING_PREFIX_CHARS: usize = 32;

/// The statistics JSON of a file made of `batches`, its bounds computed from the rows.
pub fn file_stats(schema: &SchemaRef, batches: &[RecordBatch]) -> String {
    stats_json(schema, batches, |i, kind| {
        let columns: Vec<&dyn Array> = batches.iter().map(|b| b.column(i).as_ref()).collect();
        bounds(kind, &columns)
    })
}

/// The same statistics as [`file_stats`], for a file written from `batches` whose Parquet
/// footer is `footer`: the bounds are the footer's column chunk statistics, which the
/// Parquet writer computed while encoding, instead of a second pass over the rows. (Null
/// counts are the arrays' own, kept by Arrow.) The writer must not truncate statistics
/// (`statistics_truncate_length` `None`): a bound here is exact or absent.
pub fn file_stats_from_footer(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    footer: &ParquetMetaData,
) -> String {
    let descr = footer.file_metadata().schema_descr();
    // Top-level columns stored as one leaf (nested ones have no bounds).
    let leaf_of = |name: &str| {
        (0..descr.num_columns()).find(|&j| {
            let column = descr.column(j);
            let parts = column.path().parts();
            parts.len() == 1 && parts[0] == name
        })
    };
    stats_json(schema, batches, |i, kind| {
        let leaf = leaf_of(schema.field(i).name())?;
        let chunks: Vec<&Statistics> = footer
            .row_groups()
            .iter()
            .map(|rg| rg.column(leaf).statistics())
            .collect::<Option<Vec<_>>>()?;
        footer_bounds(kind, &chunks)
    })
}

/// The statistics JSON of `batches`, with bounds from `bounds_of(column index, type)`.
fn stats_json(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    bounds_of: impl Fn(usize, &DataType) -> Option<(Value, Option<Value>)>,
) -> String {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let mut mins = Map::new();
    let mut maxs = Map::new();
    let mut nulls = Map::new();
    for (i, field) in schema.fields().iter().enumerate() {
        if matches!(
            field.data_type(),
            DataType::Struct(_) | DataType::List(_) | DataType::Map(..)
        ) {
            continue;
        }
        let null_count: usize = batches.iter().map(|b| b.column(i).null_count()).sum();
        nulls.insert(field.name().clone(), json!(null_count));
        if let Some((lo, hi)) = bounds_of(i, field.data_type()) {
            mins.insert(field.name().clone(), lo);
            if let Some(hi) = hi {
                maxs.insert(field.name().clone(), hi);
            }
        }
    }
    json!({"numRecords": rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls})
        .to_string()
}

/// `(min, max)`; max may be absent where it cannot be exact.
fn bounds(kind: &DataType, columns: &[&dyn Array]) -> Option<(Value, Option<Value>)> {
    macro_rules! ints {
        ($t:ty) => {{
            let mut lo = None;
            let mut hi = None;
            for c in columns {
                let a = c.as_primitive::<$t>();
                for v in a.iter().flatten() {
                    lo = Some(lo.map_or(
                        v,
                        |l: <$t as deltalake::arrow::datatypes::ArrowPrimitiveType>::Native| {
                            l.min(v)
                        },
                    ));
                    hi = Some(hi.map_or(
                        v,
                        |h: <$t as deltalake::arrow::datatypes::ArrowPrimitiveType>::Native| {
                            h.max(v)
                        },
                    ));
                }
            }
            Some((json!(lo?), Some(json!(hi?))))
        }};
    }
    macro_rules! floats {
        ($t:ty) => {{
            let mut lo = f64::INFINITY;
            let mut hi = f64::NEG_INFINITY;
            for c in columns {
                for v in c.as_primitive::<$t>().iter().flatten() {
                    let v = v as f64;
                    if !v.is_nan() {
                        lo = lo.min(v);
                        hi = hi.max(v);
                    }
                }
            }
            finite_pair(lo, hi)
        }};
    }
    match kind {
        DataType::Int8 => ints!(Int8Type),
        DataType::Int16 => ints!(Int16Type),
        DataType::Int32 => ints!(Int32Type),
        DataType::Int64 => ints!(Int64Type),
        DataType::Float32 => floats!(Float32Type),
        DataType::Float64 => floats!(Float64Type),
        DataType::Date32 => {
            let mut lo: Option<i32> = None;
            let mut hi: Option<i32> = None;
            for c in columns {
                for v in c.as_primitive::<Date32Type>().iter().flatten() {
                    lo = Some(lo.map_or(v, |l| l.min(v)));
                    hi = Some(hi.map_or(v, |h| h.max(v)));
                }
            }
            Some((json!(date_text(lo?)?), Some(json!(date_text(hi?)?))))
        }
        DataType::Utf8 => {
            let mut lo: Option<&str> = None;
            let mut hi: Option<&str> = None;
            for c in columns {
                for v in c.as_string::<i32>().iter().flatten() {
                    lo = Some(lo.map_or(v, |l| l.min(v)));
                    hi = Some(hi.map_or(v, |h| h.max(v)));
                }
            }
            Some(text_bounds(lo?, hi?))
        }
        _ => None,
    }
}

/// `(min, max)` of a column from its chunks' Parquet statistics, under the rules of
/// [`bounds`]; `None` where a chunk's bound is inexact or the type has none.
fn footer_bounds(kind: &DataType, chunks: &[&Statistics]) -> Option<(Value, Option<Value>)> {
    /// The least and greatest of the chunks' bounds. `bounds_of` gives a chunk's exact
    /// `(min, max)`, `Some(None)` for a chunk without values (every one null: its statistics
    /// carry no bound, exact or not), `None` when its bounds are unknown: then the column has
    /// none.
    fn extremes<'s, T: PartialOrd + 's>(
        chunks: &[&'s Statistics],
        bounds_of: impl Fn(&'s Statistics) -> Option<Option<(T, T)>>,
    ) -> Option<(T, T)> {
        let mut out: Option<(T, T)> = None;
        for chunk in chunks {
            let Some((lo, hi)) = bounds_of(chunk)? else {
                continue;
            };
            out = Some(match out {
                None => (lo, hi),
                Some((l, h)) => (if lo < l { lo } else { l }, if h < hi { hi } else { h }),
            });
        }
        out
    }
    /// A chunk's exact `(min, max)`; `Some(None)` without values; `None` if inexact.
    fn exact<T>(lo: Option<T>, hi: Option<T>, exact: bool) -> Option<Option<(T, T)>> {
        match lo.zip(hi) {
            Some(pair) if exact => Some(Some(pair)),
            Some(_) => None,
            None => Some(None),
        }
    }
    macro_rules! values {
        ($variant:ident) => {
            extremes(chunks, |c| match c {
                Statistics::$variant(v) => exact(
                    v.min_opt().copied(),
                    v.max_opt().copied(),
                    v.min_is_exact() && v.max_is_exact(),
                ),
                // Another physical type than the column's: no bounds.
                _ => None,
            })
        };
    }
    match kind {
        DataType::Int8 | DataType::Int16 | DataType::Int32 => {
            let (lo, hi) = values!(Int32)?;
            Some((json!(lo), Some(json!(hi))))
        }
        DataType::Int64 => {
            let (lo, hi) = values!(Int64)?;
            Some((json!(lo), Some(json!(hi))))
        }
        DataType::Date32 => {
            let (lo, hi) = values!(Int32)?;
            Some((json!(date_text(lo)?), Some(json!(date_text(hi)?))))
        }
        // Parquet's float statistics leave NaN out, as `bounds` does.
        DataType::Float32 => {
            let (lo, hi) = values!(Float)?;
            finite_pair(f64::from(lo), f64::from(hi))
        }
        DataType::Float64 => {
            let (lo, hi) = values!(Double)?;
            finite_pair(lo, hi)
        }
        DataType::Utf8 => {
            let (lo, hi) = extremes(chunks, |c| match c {
                Statistics::ByteArray(v) => exact(
                    v.min_bytes_opt(),
                    v.max_bytes_opt(),
                    v.min_is_exact() && v.max_is_exact(),
                ),
                _ => None,
            })?;
            Some(text_bounds(
                std::str::from_utf8(lo).ok()?,
                std::str::from_utf8(hi).ok()?,
            ))
        }
        _ => None,
    }
}

/// Float bounds, absent unless both are finite (as in [`bounds`]).
fn finite_pair(lo: f64, hi: f64) -> Option<(Value, Option<Value>)> {
    (lo.is_finite() && hi.is_finite()).then(|| (json!(lo), Some(json!(hi))))
}

/// String bounds: a prefix of the least is a valid lower bound; a truncated greatest is no
/// upper bound, so a long one is left out.
fn text_bounds(lo: &str, hi: &str) -> (Value, Option<Value>) {
    let lo: String = lo.chars().take(STRING_PREFIX_CHARS).collect();
    let hi = (hi.chars().count() <= STRING_PREFIX_CHARS).then(|| json!(hi));
    (json!(lo), hi)
}

/// `YYYY-MM-DD` of a day count since 1970-01-01 (days-to-civil).
fn date_text(days: i32) -> Option<String> {
    let z = i64::from(days) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (0..=9999)
        .contains(&y)
        .then(|| format!("{y:04}-{m:02}-{d:02}"))
}
