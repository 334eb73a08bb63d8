//! Arrow rows as the JSON lines decoding reads, and the types a table stores Arrow columns
//! as: how sources that hand over Arrow data (Parquet files, Avro messages) reach the same
//! decoding, keys, evolution and dead letters as JSON.

use std::sync::Arc;

use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema, SchemaRef, TimeUnit};
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::json::writer::{
    Encoder, EncoderFactory, EncoderOptions, LineDelimited, NullableEncoder, WriterBuilder,
};

/// The rows of `batch` as JSON lines, one per row (a row of nulls is `{}`).
pub(crate) fn json_lines(batch: &RecordBatch) -> Result<Vec<u8>, ArrowError> {
    let mut out = Vec::with_capacity(batch.get_array_memory_size());
    let mut writer = WriterBuilder::new()
        .with_explicit_nulls(false)
        .with_encoder_factory(Arc::new(Base64Binary))
        .build::<_, LineDelimited>(&mut out);
    writer.write(batch)?;
    writer.finish()?;
    drop(writer);
    Ok(out)
}

/// JSON text where arrow's writer would change a value: binary columns as base64 text
/// (what a `binary` column reads from JSON), not hex; a float NaN or infinity as the text
/// `"NaN"`, `"inf"` or `"-inf"`, not null (decoding then makes the row a dead letter
/// `wrong_type` holding it, instead of a null that looks like a value).
#[derive(Debug)]
struct Base64Binary;

impl EncoderFactory for Base64Binary {
    fn make_default_encoder<'a>(
        &self,
        field: &'a FieldRef,
        array: &'a dyn Array,
        options: &'a EncoderOptions,
    ) -> Result<Option<NullableEncoder<'a>>, ArrowError> {
        if let Some(floats) = non_finite_floats(array) {
            return Ok(Some(NullableEncoder::new(floats, array.nulls().cloned())));
        }
        if let DataType::Map(..) = array.data_type() {
            return MapEntries::encoder(field, array.as_map(), options).map(Some);
        }
        if is_uuid(field) && *array.data_type() == DataType::FixedSizeBinary(16) {
            let a = array.as_fixed_size_binary();
            let encoder = Box::new(UuidText(a)) as Box<dyn Encoder + 'a>;
            return Ok(Some(NullableEncoder::new(encoder, array.nulls().cloned())));
        }
        let values: Box<dyn Fn(usize) -> &'a [u8] + 'a> = match array.data_type() {
            DataType::Binary => {
                let a = array.as_binary::<i32>();
                Box::new(move |i| a.value(i))
            }
            DataType::LargeBinary => {
                let a = array.as_binary::<i64>();
                Box::new(move |i| a.value(i))
            }
            DataType::FixedSizeBinary(_) => {
                let a = array.as_fixed_size_binary();
                Box::new(move |i| a.value(i))
            }
            DataType::BinaryView => {
                let a = array.as_binary_view();
                Box::new(move |i| a.value(i))
            }
            _ => return Ok(None),
        };
        let encoder = Box::new(Base64Encoder(values)) as Box<dyn Encoder + 'a>;
        Ok(Some(NullableEncoder::new(encoder, array.nulls().cloned())))
    }
}

/// A map as a JSON object with every entry, one whose value is null too (arrow's writer,
/// without explicit nulls, would leave that entry out: a key the map has would be lost).
struct MapEntries<'a> {
    offsets: deltalake::arrow::buffer::OffsetBuffer<i32>,
    keys: NullableEncoder<'a>,
    values: NullableEncoder<'a>,
}

impl<'a> MapEntries<'a> {
    fn encoder(
        field: &'a FieldRef,
        map: &'a deltalake::arrow::array::MapArray,
        options: &'a EncoderOptions,
    ) -> Result<NullableEncoder<'a>, ArrowError> {
        use deltalake::arrow::json::writer::make_encoder;
        if !matches!(map.keys().data_type(), DataType::Utf8 | DataType::LargeUtf8) {
            return Err(ArrowError::JsonError(format!(
                "a map with keys of type {} has no JSON object",
                map.keys().data_type()
            )));
        }
        let keys = make_encoder(field, map.keys(), options)?;
        let values = make_encoder(field, map.values(), options)?;
        let encoder = Box::new(MapEntries {
            offsets: map.offsets().clone(),
            keys,
            values,
        }) as Box<dyn Encoder + 'a>;
        Ok(NullableEncoder::new(encoder, map.nulls().cloned()))
    }
}

impl Encoder for MapEntries<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        let (start, end) = (self.offsets[idx] as usize, self.offsets[idx + 1] as usize);
        out.push(b'{');
        for entry in start..end {
            if entry > start {
                out.push(b',');
            }
            self.keys.encode(entry, out);
            out.push(b':');
            if self.values.is_null(entry) {
                out.extend_from_slice(b"null");
            } else {
                self.values.encode(entry, out);
            }
        }
        out.push(b'}');
    }
}

/// Whether `field` holds UUIDs as 16 bytes (arrow's canonical extension, or an Avro `uuid`
/// as arrow-avro reads it): their text is the UUID's, as any reader of the source shows it.
fn is_uuid(field: &Field) -> bool {
    let m = field.metadata();
    m.get("ARROW:extension:name").map(String::as_str) == Some("arrow.uuid")
        || m.get("logicalType").map(String::as_str) == Some("uuid")
}

/// The 8-4-4-4-12 hex text of a UUID.
struct UuidText<'a>(&'a deltalake::arrow::array::FixedSizeBinaryArray);

impl Encoder for UuidText<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        out.push(b'"');
        for (i, b) in self.0.value(idx).iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                out.push(b'-');
            }
            out.extend_from_slice(format!("{b:02x}").as_bytes());
        }
        out.push(b'"');
    }
}

/// An encoder for a float column that holds a NaN or an infinity (`None` for any other
/// column: the writer's own encoder is exact for finite values).
fn non_finite_floats<'a>(array: &'a dyn Array) -> Option<Box<dyn Encoder + 'a>> {
    use deltalake::arrow::datatypes::{Float32Type, Float64Type};
    let value: Box<dyn Fn(usize) -> f64 + 'a> = match array.data_type() {
        DataType::Float64 => {
            let a = array.as_primitive::<Float64Type>();
            if a.values().iter().all(|v| v.is_finite()) {
                return None;
            }
            Box::new(move |i| a.value(i))
        }
        DataType::Float32 => {
            let a = array.as_primitive::<Float32Type>();
            if a.values().iter().all(|v| v.is_finite()) {
                return None;
            }
            Box::new(move |i| a.value(i) as f64)
        }
        _ => return None,
    };
    Some(Box::new(FloatText(value)))
}

struct FloatText<'a>(Box<dyn Fn(usize) -> f64 + 'a>);

impl Encoder for FloatText<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        let v = (self.0)(idx);
        let text = if v.is_nan() {
            "\"NaN\"".to_string()
        } else if v.is_infinite() {
            format!("\"{}inf\"", if v < 0.0 { "-" } else { "" })
        } else {
            // Shortest text that reads back as the same value.
            format!("{v:?}")
        };
        out.extend_from_slice(text.as_bytes());
    }
}

struct Base64Encoder<'a>(Box<dyn Fn(usize) -> &'a [u8] + 'a>);

impl Encoder for Base64Encoder<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        use base64::Engine;
        out.push(b'"');
        out.extend_from_slice(
            base64::engine::general_purpose::STANDARD
                .encode((self.0)(idx))
                .as_bytes(),
        );
        out.push(b'"');
    }
}

/// `inferred` (a schema inferred from the first rows as JSON) with each top-level column of
/// a scalar type taking the type `footer` (see [`footer_types`]) gives its field: a new
/// table's columns as the files declare them (`int32`, `timestamp`, `decimal(p,s)`,
/// `binary`, ...) rather than as their JSON text reads. Nested columns keep the types their
/// values give (their members' names may have been renamed for Delta).
pub fn with_footer_types(inferred: &Schema, footer: &Schema) -> SchemaRef {
    let fields: Vec<Field> = inferred
        .fields()
        .iter()
        .map(|f| {
            let declared = footer
                .field_with_name(crate::schema::source_name(f))
                .ok()
                .map(|d| d.data_type())
                .filter(|t| !t.is_nested() && !f.data_type().is_nested());
            match declared {
                Some(t) => f.as_ref().clone().with_data_type(t.clone()),
                None => f.as_ref().clone(),
            }
        })
        .collect();
    Arc::new(Schema::new_with_metadata(
        fields,
        inferred.metadata().clone(),
    ))
}

/// The schema a new table takes from rows' Arrow schema (an Avro writer schema as arrow-avro
/// reads it): each field as [`table_field`] makes it.
pub fn table_schema(rows: &Schema) -> SchemaRef {
    let fields: Vec<Field> = rows.fields().iter().map(|f| table_field(f)).collect();
    Arc::new(Schema::new(fields))
}

/// `field` as a table stores it: its type as [`table_type`] maps it (member by member), but
/// a UUID held as 16 bytes as its text (as rows are written as JSON).
pub fn table_field(field: &Field) -> Field {
    let t = match field.data_type() {
        DataType::FixedSizeBinary(16) if is_uuid(field) => DataType::Utf8,
        other => table_type(other),
    };
    Field::new(field.name(), t, true)
}

/// The type a table stores a Parquet column's values as: the same where a Delta table has
/// it; else the nearest type that holds every value exactly (unsigned integers in the next
/// wider signed type, or `decimal(20,0)` for 64 bits; any time unit as microseconds; a
/// dictionary as its values); a type with no Delta counterpart (times of day, durations,
/// intervals) as the text its JSON has.
pub fn table_type(t: &DataType) -> DataType {
    let nested = |f: &FieldRef| Arc::new(table_field(f));
    match t {
        DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64
        | DataType::Date32
        | DataType::Decimal128(_, _) => t.clone(),
        DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 => DataType::Int64,
        DataType::UInt64 => DataType::Decimal128(20, 0),
        DataType::Float16 => DataType::Float32,
        DataType::Date64 => DataType::Date32,
        DataType::Timestamp(_, Some(_)) => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        DataType::Timestamp(_, None) => DataType::Timestamp(TimeUnit::Microsecond, None),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => DataType::Binary,
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _) => DataType::List(nested(f)),
        DataType::Struct(fields) => DataType::Struct(fields.iter().map(nested).collect::<Fields>()),
        DataType::Map(entries, sorted) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                let key = Field::new(kv[0].name(), DataType::Utf8, false);
                let value = nested(&kv[1]);
                let entries = Field::new(
                    entries.name(),
                    DataType::Struct(Fields::from(vec![Arc::new(key), value])),
                    false,
                );
                DataType::Map(Arc::new(entries), *sorted)
            }
            _ => DataType::Utf8,
        },
        DataType::Dictionary(_, values) => table_type(values),
        _ => DataType::Utf8,
    }
}
