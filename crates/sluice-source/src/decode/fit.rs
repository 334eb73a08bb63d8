//! Rows that arrive as Arrow (Avro messages decoded by arrow-avro, Parquet row groups) put
//! straight into the record schema's columns, when every value fits as it is: no JSON text in
//! between.
//!
//! A column fits when its type holds each value exactly in the record field's type: the
//! same type; a narrower integer in a wider one (an unsigned one in a wider signed one, or in
//! a decimal); `float` in `double`; an enum's dictionary as its text; large or view text and
//! bytes as text and bytes; fixed-size bytes as bytes; a timestamp in microseconds of the
//! same kind (with a zone, UTC, or without one) when each value is a whole microsecond of
//! the years 1 to 9999; structs member by member (a
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
    ArrowPrimitiveType, DataType, Field, Fields, Float32Type, Float64Type, Schema, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};

use crate::schema::source_name;

/// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z in microseconds.
pub(super) const MICROS_MIN: i64 = -62_135_596_800_000_000;
pub(super) const MICROS_MAX: i64 = 253_402_300_799_999_999;

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
            DataType::Timestamp(unit, from_zone),
            DataType::Timestamp(TimeUnit::Microsecond, zone),
        ) if from_zone.is_some() == zone.is_some() => timestamps(array, unit, to),
        _ if from == to => Some(array.clone()),
        (DataType::Int8 | DataType::Int16 | DataType::Int32, DataType::Int64)
        | (DataType::Int8 | DataType::Int16, DataType::Int32)
        | (DataType::Int8, DataType::Int16)
        | (DataType::UInt8, DataType::Int16 | DataType::Int32 | DataType::Int64)
        | (DataType::UInt16, DataType::Int32 | DataType::Int64)
        | (DataType::UInt32, DataType::Int64)
        | (DataType::LargeUtf8 | DataType::Utf8View, DataType::Utf8)
        | (
            DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_),
            DataType::Binary,
        ) => cast(array, to).ok(),
        (DataType::UInt64, DataType::Decimal128(precision, 0)) if *precision >= 20 => {
            cast(array, to).ok()
        }
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

/// A timestamp column in microseconds, of `to`'s zone (or none): seconds and milliseconds
/// multiplied, nanoseconds divided where each is a whole microsecond; every value must be
/// an instant of the years 1 to 9999 (what its JSON text reads back as), else the column
/// does not fit.
fn timestamps(array: &ArrayRef, unit: &TimeUnit, to: &DataType) -> Option<ArrayRef> {
    let DataType::Timestamp(_, zone) = to else {
        return None;
    };
    let micros: TimestampMicrosecondArray = match unit {
        TimeUnit::Microsecond => array
            .as_primitive::<TimestampMicrosecondType>()
            .reinterpret_cast(),
        TimeUnit::Millisecond => {
            scaled::<TimestampMillisecondType>(array, |v| v.checked_mul(1000))?
        }
        TimeUnit::Second => scaled::<TimestampSecondType>(array, |v| v.checked_mul(1_000_000))?,
        TimeUnit::Nanosecond => {
            scaled::<TimestampNanosecondType>(array, |v| (v % 1000 == 0).then_some(v / 1000))?
        }
    };
    if micros
        .iter()
        .flatten()
        .any(|v| !(MICROS_MIN..=MICROS_MAX).contains(&v))
    {
        return None;
    }
    Some(Arc::new(micros.with_timezone_opt(zone.clone())))
}

/// Each non-null value of `array` through `to_micros`; `None` if one gives none.
fn scaled<T: ArrowPrimitiveType<Native = i64>>(
    array: &ArrayRef,
    to_micros: impl Fn(i64) -> Option<i64>,
) -> Option<TimestampMicrosecondArray> {
    let a = array.as_primitive::<T>();
    // A null slot's value is any number: it is not judged.
    let values = a
        .values()
        .iter()
        .enumerate()
        .map(|(i, v)| match a.is_null(i) {
            true => Some(0),
            false => to_micros(*v),
        })
        .collect::<Option<Vec<i64>>>()?;
    Some(TimestampMicrosecondArray::new(
        values.into(),
        a.nulls().cloned(),
    ))
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
