//! Values sluice reads exactly itself, rather than trusting arrow-json's conversions:
//! integers (arrow-json reads `2.5` into a `long` column as `2`), doubles and floats (it
//! rounds `9007199254740993` to `9007199254740992`), decimals (it rounds extra digits),
//! timestamps (it reads a number as microseconds whatever the format, and saturates `1e30`),
//! binary (base64, which arrow-json does not read), and the event-time field.
//!
//! Such columns are decoded as text (arrow-json hands over a number's literal text) and
//! converted here; a value that does not fit makes its row a `wrong_type` reject, naming the
//! field and the value. Nothing is rounded, truncated or clamped.

use std::sync::Arc;

use base64::Engine;
use deltalake::arrow::array::{
    Array, ArrayRef, AsArray, BinaryBuilder, Date32Builder, Decimal128Builder, Float32Builder,
    Float64Builder, Int16Builder, Int32Builder, Int64Builder, Int8Builder, ListArray, MapArray,
    StringArray, StructArray, TimestampMicrosecondBuilder,
};
use deltalake::arrow::buffer::{BooleanBuffer, NullBuffer};
use deltalake::arrow::datatypes::{DataType, Field, Fields, Schema};
use deltalake::arrow::error::ArrowError;
use sluice_window::{
    parse_f32_exact, parse_f64_exact, parse_integer_exact, Decimal, TimeFormat, TimeSpec, Zone,
};

use crate::schema::{source_name, type_name, with_type_at, FieldPath};

/// The type arrow-json decodes a record field's values as: text where sluice converts them.
pub(crate) fn read_type(t: &DataType) -> DataType {
    match t {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64
        | DataType::Timestamp(..)
        | DataType::Binary
        | DataType::Decimal128(..) => DataType::Utf8,
        DataType::Struct(fields) => DataType::Struct(read_fields(fields)),
        DataType::List(element) => DataType::List(Arc::new(
            element
                .as_ref()
                .clone()
                .with_data_type(read_type(element.data_type())),
        )),
        DataType::Map(entries, sorted) => DataType::Map(
            Arc::new(
                entries
                    .as_ref()
                    .clone()
                    .with_data_type(read_type(entries.data_type())),
            ),
            *sorted,
        ),
        other => other.clone(),
    }
}

/// Fields as arrow-json reads them: named by the record's own keys (a renamed column by its
/// source name), typed by [`read_type`].
fn read_fields(fields: &Fields) -> Fields {
    fields
        .iter()
        .map(|f| {
            Arc::new(Field::new(
                source_name(f),
                read_type(f.data_type()),
                f.is_nullable(),
            ))
        })
        .collect::<Vec<_>>()
        .into()
}

/// The schema arrow-json decodes with: [`read_type`] for every field, and the event-time
/// field as text whatever its type (its text is what the time format reads). Its fields are
/// the record's, in the same order.
pub(crate) fn read_schema(record: &Schema, time: &FieldPath) -> Schema {
    let fields: Vec<Arc<Field>> = record.fields().iter().cloned().collect();
    let fields = with_type_at(&fields, time.names(), &DataType::Utf8);
    Schema::new(read_fields(&fields.into()))
}

/// How text is read into the record's types.
pub(crate) struct Reading<'a> {
    /// The event-time field and its format: a `timestamp` time field holds the event time.
    pub time_field: &'a FieldPath,
    pub time: &'a TimeSpec,
}

/// A converted column and the rows whose value did not fit (row, reason).
pub(crate) struct Converted {
    pub array: ArrayRef,
    pub bad: Vec<(usize, String)>,
}

impl Reading<'_> {
    /// Converts a decoded top-level column to `target`, the record field's type.
    pub fn column(&self, array: &ArrayRef, field: &Field) -> Result<Converted, ArrowError> {
        let time_rest =
            (self.time_field.root() == field.name()).then(|| &self.time_field.names()[1..]);
        self.convert(array, field.data_type(), field.name(), time_rest)
    }

    /// `time_rest`: the rest of the time field's path below this value, if the value is on it.
    fn convert(
        &self,
        array: &ArrayRef,
        target: &DataType,
        path: &str,
        time_rest: Option<&[String]>,
    ) -> Result<Converted, ArrowError> {
        let is_time = time_rest.is_some_and(|r| r.is_empty());
        if array.data_type() == target
            && !matches!(
                target,
                DataType::Struct(_) | DataType::List(_) | DataType::Map(..)
            )
        {
            return Ok(Converted {
                array: array.clone(),
                bad: Vec::new(),
            });
        }
        match target {
            DataType::Struct(fields) => {
                let source = array.as_struct();
                let mut bad = Vec::new();
                let mut children = Vec::with_capacity(fields.len());
                // The read struct has the record struct's members, in order (read_fields).
                for (i, f) in fields.iter().enumerate() {
                    let child = source.columns().get(i).ok_or_else(|| {
                        ArrowError::SchemaError(format!("no member {}", f.name()))
                    })?;
                    let rest = time_rest
                        .filter(|r| r.first() == Some(f.name()))
                        .map(|r| &r[1..]);
                    let c =
                        self.convert(child, f.data_type(), &format!("{path}.{}", f.name()), rest)?;
                    bad.extend(c.bad.into_iter().filter(|(row, _)| source.is_valid(*row)));
                    children.push(c.array);
                }
                let nulls = null_unless_a_member_is_set(source.nulls(), &children, source.len());
                let array = StructArray::try_new(fields.clone(), children, nulls)?;
                Ok(Converted {
                    array: Arc::new(array),
                    bad,
                })
            }
            DataType::List(element) => {
                let source = array.as_list::<i32>();
                let values = self.convert(
                    source.values(),
                    element.data_type(),
                    &format!("{path}[]"),
                    None,
                )?;
                let bad = to_rows(values.bad, source.value_offsets(), source);
                let array = ListArray::try_new(
                    element.clone(),
                    source.offsets().clone(),
                    values.array,
                    source.nulls().cloned(),
                )?;
                Ok(Converted {
                    array: Arc::new(array),
                    bad,
                })
            }
            DataType::Map(entries, sorted) => {
                let source = array.as_map();
                let entries_source: ArrayRef = Arc::new(source.entries().clone());
                let converted = self.convert(
                    &entries_source,
                    entries.data_type(),
                    &format!("{path}{{}}"),
                    None,
                )?;
                let bad = to_rows(converted.bad, source.value_offsets(), source);
                let array = MapArray::try_new(
                    entries.clone(),
                    source.offsets().clone(),
                    converted.array.as_struct().clone(),
                    source.nulls().cloned(),
                    *sorted,
                )?;
                Ok(Converted {
                    array: Arc::new(array),
                    bad,
                })
            }
            _ => self.scalar(array.as_string::<i32>(), target, path, is_time),
        }
    }

    /// Text to a scalar type.
    fn scalar(
        &self,
        text: &StringArray,
        target: &DataType,
        path: &str,
        is_time: bool,
    ) -> Result<Converted, ArrowError> {
        let mut bad: Vec<(usize, String)> = Vec::new();
        let mut fail = |row: usize, value: &str, why: &str| {
            bad.push((row, format!("field {path}: {} {why}", shown(value))));
        };
        let n = text.len();
        macro_rules! integers {
            ($builder:ty, $t:ty) => {{
                let mut b = <$builder>::with_capacity(n);
                for (row, v) in text.iter().enumerate() {
                    match v {
                        None => b.append_null(),
                        Some(s) => {
                            match parse_integer_exact(s).and_then(|i| <$t>::try_from(i).ok()) {
                                Some(i) => b.append_value(i),
                                None => {
                                    fail(
                                        row,
                                        s,
                                        &format!(
                                            "is not a {} (an integer in its range)",
                                            type_name(target)
                                        ),
                                    );
                                    b.append_null();
                                }
                            }
                        }
                    }
                }
                Arc::new(b.finish()) as ArrayRef
            }};
        }
        macro_rules! floats {
            ($builder:ty, $parse:ident, $what:literal) => {{
                let mut b = <$builder>::with_capacity(n);
                for (row, v) in text.iter().enumerate() {
                    match v.map(|s| (s, $parse(s))) {
                        None => b.append_null(),
                        Some((_, Some(f))) => b.append_value(f),
                        Some((s, None)) => {
                            fail(row, s, concat!("is not a number ", $what, " holds exactly"));
                            b.append_null();
                        }
                    }
                }
                Arc::new(b.finish()) as ArrayRef
            }};
        }
        let array: ArrayRef = match target {
            DataType::Utf8 => Arc::new(text.clone()),
            DataType::Int64 => integers!(Int64Builder, i64),
            DataType::Int32 => integers!(Int32Builder, i32),
            DataType::Int16 => integers!(Int16Builder, i16),
            DataType::Int8 => integers!(Int8Builder, i8),
            DataType::Float64 => floats!(Float64Builder, parse_f64_exact, "a double"),
            DataType::Float32 => floats!(Float32Builder, parse_f32_exact, "a float"),
            DataType::Decimal128(p, s) => {
                let mut b = Decimal128Builder::with_capacity(n);
                for (row, v) in text.iter().enumerate() {
                    match v {
                        None => b.append_null(),
                        Some(t) => match Decimal::parse(t)
                            .and_then(|d| d.scaled_exact(i32::from(*s), u32::from(*p)))
                        {
                            Some(d) => b.append_value(d),
                            None => {
                                fail(
                                    row,
                                    t,
                                    &format!("does not fit {} without rounding", type_name(target)),
                                );
                                b.append_null();
                            }
                        },
                    }
                }
                Arc::new(b.finish().with_precision_and_scale(*p, *s)?)
            }
            DataType::Timestamp(_, zone) => {
                let mut b = TimestampMicrosecondBuilder::with_capacity(n);
                let spec = if is_time {
                    // The time field: the event time, or for timestamp_ntz its wall-clock time.
                    match zone {
                        Some(_) => self.time.clone(),
                        None => TimeSpec::new(self.time.format.clone(), Zone::Utc),
                    }
                } else {
                    let z = if zone.is_some() {
                        self.time.zone
                    } else {
                        Zone::Utc
                    };
                    TimeSpec::new(TimeFormat::Rfc3339, z)
                };
                for (row, v) in text.iter().enumerate() {
                    let Some(t) = v else {
                        b.append_null();
                        continue;
                    };
                    // Outside the time field, a number is epoch microseconds.
                    let parsed = match (is_time, parse_integer_exact(t)) {
                        (false, Some(us)) => Ok(us),
                        _ => spec.parse_micros(t),
                    };
                    match parsed {
                        Ok(us)
                            if (-62_135_596_800_000_000..=253_402_300_799_999_999)
                                .contains(&us) =>
                        {
                            b.append_value(us)
                        }
                        Ok(_) => {
                            fail(row, t, "is outside years 1 to 9999");
                            b.append_null();
                        }
                        Err(e) => {
                            fail(row, t, &format!("is not a timestamp ({e})"));
                            b.append_null();
                        }
                    }
                }
                let a = b.finish();
                Arc::new(match zone {
                    Some(z) => a.with_timezone(z.clone()),
                    None => a,
                })
            }
            // Only the time field is read as text into a date (arrow-json reads other dates):
            // in its format, as a wall-clock date; a time of day would be lost, so it does
            // not fit.
            DataType::Date32 if is_time => {
                const DAY_US: i64 = 86_400_000_000;
                let spec = TimeSpec::new(self.time.format.clone(), Zone::Utc);
                let mut b = Date32Builder::with_capacity(n);
                for (row, v) in text.iter().enumerate() {
                    let Some(t) = v else {
                        b.append_null();
                        continue;
                    };
                    match spec.parse_micros(t) {
                        Ok(us) if us.rem_euclid(DAY_US) == 0 => {
                            b.append_value((us.div_euclid(DAY_US)) as i32)
                        }
                        Ok(_) => {
                            fail(row, t, "has a time of day, which a date does not hold");
                            b.append_null();
                        }
                        Err(e) => {
                            fail(row, t, &format!("is not a date ({e})"));
                            b.append_null();
                        }
                    }
                }
                Arc::new(b.finish())
            }
            DataType::Binary => {
                let mut b = BinaryBuilder::with_capacity(n, 0);
                for (row, v) in text.iter().enumerate() {
                    match v {
                        None => b.append_null(),
                        Some(t) => match base64_decode(t) {
                            Some(bytes) => b.append_value(bytes),
                            None => {
                                fail(row, t, "is not base64");
                                b.append_null();
                            }
                        },
                    }
                }
                Arc::new(b.finish())
            }
            other => {
                return Err(ArrowError::SchemaError(format!(
                    "field {path}: no text conversion to {other}"
                )))
            }
        };
        Ok(Converted { array, bad })
    }
}

/// A struct's validity: null where it was, and where every member is null (`{}`, or
/// `{"a": null}`): such a value holds nothing, and reads as a record read before the struct's
/// column existed reads it (left out: null), so the row never depends on when it was read.
fn null_unless_a_member_is_set(
    nulls: Option<&NullBuffer>,
    members: &[ArrayRef],
    len: usize,
) -> Option<NullBuffer> {
    let mut any_set: Option<BooleanBuffer> = Some(BooleanBuffer::new_unset(len));
    for m in members {
        match m.logical_nulls() {
            // A member set in every row: so is the struct (where it is not null itself).
            None => {
                any_set = None;
                break;
            }
            Some(n) => {
                if let Some(set) = any_set.as_mut() {
                    *set = &*set | n.inner();
                }
            }
        }
    }
    match any_set {
        None => nulls.cloned(),
        Some(set) => NullBuffer::union(nulls, Some(&NullBuffer::new(set))),
    }
}

/// Base64 in any of its common alphabets, padded or not.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let t = text.trim();
    [STANDARD, URL_SAFE, STANDARD_NO_PAD, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|e| e.decode(t).ok())
}

/// Rows of a list or map whose element at `bad`'s indices failed.
fn to_rows(bad: Vec<(usize, String)>, offsets: &[i32], list: &dyn Array) -> Vec<(usize, String)> {
    bad.into_iter()
        .filter_map(|(i, reason)| {
            let row = offsets
                .partition_point(|o| (*o as usize) <= i)
                .checked_sub(1)?;
            list.is_valid(row).then_some((row, reason))
        })
        .collect()
}

/// A value in a message: cut to a readable length.
fn shown(value: &str) -> String {
    const CHARS_MAX: usize = 64;
    match value.char_indices().nth(CHARS_MAX) {
        Some((i, _)) => format!("{:?}…", &value[..i]),
        None => format!("{value:?}"),
    }
}
