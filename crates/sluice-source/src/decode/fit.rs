//! Rows that arrive as Arrow (Avro messages, decoded by arrow-avro) put straight into the
//! record schema's columns, when every value fits as it is: no JSON text in between.
//!
//! A column fits when its type holds each value exactly in the record field's type: the
//! same type; a narrower integer in a wider one; `float` in `double`; an enum's dictionary as
//! its text; a timestamp with a time zone in microseconds (UTC); structs member by member (a
//! member the record has and the rows lack is null), lists and maps element by element. Any
//! other pair (a field the record lacks, a type the record holds differently, a float that is
//! NaN or infinite, which JSON decoding rejects) does not fit: [`columns`] says `None` and the
//! caller decodes the rows as JSON lines, where schema evolution, conversions and dead letters
//! decide. So a row lands with the same values by either way.

use std::sync::Arc;

use deltalake::arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, ListArray, MapArray, RecordBatch, StructArray,
    TimestampMicrosecondArray,
};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{
    DataType, Field, Fields, Float32Type, Float64Type, Schema, TimeUnit, TimestampMillisecondType,
};

use crate::schema::source_name;

/// The record schema's columns (in its order) of `batch`'s rows, or `None` when a column
/// does not fit (see the module doc). Fields the rows lack are null.
pub fn columns(record: &Schema, batch: &RecordBatch) -> Option<Vec<ArrayRef>> {
    let rows = batch.schema();
    // Every field of the rows must be the record's (a new one grows the schema: JSON path).
    if rows
        .fields()
        .iter()
        .any(|f| record.fields().iter().all(|r| source_name(r) != f.name()))
    {
        return None;
    }
    record
        .fields()
        .iter()
        .map(|field| match rows.index_of(source_name(field)) {
            Ok(i) => fit(batch.column(i), field),
            Err(_) => Some(new_null_array(field.data_type(), batch.num_rows())),
        })
        .collect()
}

/// `array` as a column of `field`'s type, if every value fits exactly.
fn fit(array: &ArrayRef, field: &Field) -> Option<ArrayRef> {
    let to = field.data_type();
    let from = array.data_type();
    match (from, to) {
        (DataType::Float64, DataType::Float64) => {
            let a = array.as_primitive::<Float64Type>();
            finite(a.values().iter().copied()).then(|| array.clone())
        }
        (DataType::Float32, DataType::Float32 | DataType::Float64) => {
            let a = array.as_primitive::<Float32Type>();
            finite(a.values().iter().map(|v| *v as f64)).then(|| cast(array, to).ok())?
        }
        (DataType::Struct(_), DataType::Struct(members)) => structs(array, members),
        (DataType::List(_), DataType::List(element)) => lists(array, element),
        (DataType::Map(..), DataType::Map(entries, _)) => maps(array, entries),
        (
            DataType::Timestamp(unit, Some(_)),
            DataType::Timestamp(TimeUnit::Microsecond, Some(_)),
        ) => timestamps(array, unit, to),
        _ if from == to => Some(array.clone()),
        (DataType::Int8 | DataType::Int16 | DataType::Int32, DataType::Int64)
        | (DataType::Int8 | DataType::Int16, DataType::Int32)
        | (DataType::Int8, DataType::Int16)
        | (DataType::LargeUtf8, DataType::Utf8)
        | (DataType::LargeBinary, DataType::Binary) => cast(array, to).ok(),
        (DataType::Dictionary(_, values), DataType::Utf8)
            if matches!(values.as_ref(), DataType::Utf8 | DataType::LargeUtf8) =>
        {
            cast(array, to).ok()
        }
        _ => None,
    }
}

fn finite(mut values: impl Iterator<Item = f64>) -> bool {
    values.all(f64::is_finite)
}

/// A timestamp column in microseconds, UTC (milliseconds multiplied: none overflows, or the
/// column does not fit).
fn timestamps(array: &ArrayRef, unit: &TimeUnit, to: &DataType) -> Option<ArrayRef> {
    let DataType::Timestamp(_, zone) = to else {
        return None;
    };
    let micros: TimestampMicrosecondArray = match unit {
        TimeUnit::Microsecond => array
            .as_primitive::<deltalake::arrow::datatypes::TimestampMicrosecondType>()
            .reinterpret_cast(),
        TimeUnit::Millisecond => {
            let a = array.as_primitive::<TimestampMillisecondType>();
            if a.values().iter().any(|v| v.checked_mul(1000).is_none()) {
                return None;
            }
            a.unary(|v| v * 1000)
        }
        _ => return None,
    };
    Some(Arc::new(micros.with_timezone_opt(zone.clone())))
}

fn structs(array: &ArrayRef, members: &Fields) -> Option<ArrayRef> {
    let a = array.as_struct();
    let (from_fields, children, nulls) = a.clone().into_parts();
    if from_fields
        .iter()
        .any(|f| members.iter().all(|m| source_name(m) != f.name()))
    {
        return None;
    }
    let columns: Option<Vec<ArrayRef>> = members
        .iter()
        .map(
            |m| match from_fields.iter().position(|f| f.name() == source_name(m)) {
                Some(i) => fit(&children[i], m),
                None => Some(new_null_array(m.data_type(), a.len())),
            },
        )
        .collect();
    StructArray::try_new(members.clone(), columns?, nulls)
        .ok()
        .map(|s| Arc::new(s) as ArrayRef)
}

fn lists(array: &ArrayRef, element: &Arc<Field>) -> Option<ArrayRef> {
    let (_, offsets, values, nulls) = array.as_list::<i32>().clone().into_parts();
    let values = fit(&values, element)?;
    ListArray::try_new(element.clone(), offsets, values, nulls)
        .ok()
        .map(|l| Arc::new(l) as ArrayRef)
}

fn maps(array: &ArrayRef, entries: &Arc<Field>) -> Option<ArrayRef> {
    let (_, offsets, pairs, nulls, sorted) = array.as_map().clone().into_parts();
    let DataType::Struct(members) = entries.data_type() else {
        return None;
    };
    // Map entries are positional (key, value): their names may differ.
    if pairs.num_columns() != 2 || members.len() != 2 {
        return None;
    }
    let key = fit(pairs.column(0), &members[0])?;
    let value = fit(pairs.column(1), &members[1])?;
    if key.null_count() > 0 {
        return None;
    }
    let pairs = StructArray::try_new(members.clone(), vec![key, value], None).ok()?;
    MapArray::try_new(entries.clone(), offsets, pairs, nulls, sorted)
        .ok()
        .map(|m| Arc::new(m) as ArrayRef)
}

#[cfg(test)]
mod tests;
