//! Delta file statistics (`numRecords`, `minValues`, `maxValues`, `nullCount`), computed from
//! the Arrow batches a file is written from.
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
use serde_json::{json, Map, Value};

const STRING_PREFIX_CHARS: usize = 32;

/// The statistics JSON of a file made of `batches`.
pub fn file_stats(schema: &SchemaRef, batches: &[RecordBatch]) -> String {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let mut mins = Map::new();
    let mut maxs = Map::new();
    let mut nulls = Map::new();
    for (i, field) in schema.fields().iter().enumerate() {
        let columns: Vec<&dyn Array> = batches.iter().map(|b| b.column(i).as_ref()).collect();
        if matches!(
            field.data_type(),
            DataType::Struct(_) | DataType::List(_) | DataType::Map(..)
        ) {
            continue;
        }
        let null_count: usize = columns.iter().map(|c| c.null_count()).sum();
        nulls.insert(field.name().clone(), json!(null_count));
        if let Some((lo, hi)) = bounds(field.data_type(), &columns) {
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
            if lo.is_finite() && hi.is_finite() {
                Some((json!(lo), Some(json!(hi))))
            } else {
                None
            }
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
            let lo = lo?;
            let hi = hi?;
            // A prefix is a valid lower bound; a truncated upper bound is not.
            let lo: String = lo.chars().take(STRING_PREFIX_CHARS).collect();
            let hi = (hi.chars().count() <= STRING_PREFIX_CHARS).then(|| json!(hi));
            Some((json!(lo), hi))
        }
        _ => None,
    }
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
