//! The direct path of flat Protobuf messages: a proto3 message whose fields are all singular
//! scalars (numbers, `bool`, `string`, enums; `optional` or not) is read off the wire straight
//! into Arrow columns, without prost-reflect's dynamic message and without JSON text. Its
//! rows are what the JSON path reads ([`super::decode_one`] and proto3's JSON mapping): a
//! field without presence that is unset holds its default (0, false, "", the enum's first
//! value), an unset `optional` is null, the last occurrence of a field wins, enums by name,
//! integers exact (`uint64` as such: the table reads it as `decimal(20,0)`).
//!
//! What this path does not read the way the JSON path does is not read here: a message type
//! with a field of another kind (a message, a list, a map, `bytes`, `float`, a real oneof) or
//! of proto2 makes [`FlatPlan::of`] decline, and a message with anything irregular (a field
//! number its type does not declare, a wire type its field does not take, a cut-short or
//! over-long varint, a length past the end, text that is not UTF-8, an enum number with no
//! name, a double that is not finite) makes [`FlatBatch::push`] fail: the caller decodes
//! the whole chunk the JSON way, which gives such messages their dead letters.

use std::sync::Arc;

use deltalake::arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, RecordBatch,
    StringBuilder, UInt32Builder, UInt64Builder,
};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use prost_reflect::{Cardinality, EnumDescriptor, Kind, MessageDescriptor, Syntax};

/// How the fields of one flat message type become columns.
pub struct FlatPlan {
    schema: SchemaRef,
    /// In declaration order, one per column.
    fields: Vec<FlatField>,
    /// Field number → index in `fields` (numbers up to [`FIELD_NUMBER_MAX`]).
    by_number: Vec<Option<usize>>,
}

struct FlatField {
    kind: FlatKind,
    /// Unset is null (`optional`), not the default.
    presence: bool,
}

#[derive(Clone)]
enum FlatKind {
    Double,
    Int32,
    Sint32,
    Sfixed32,
    Uint32,
    Fixed32,
    Int64,
    Sint64,
    Sfixed64,
    Uint64,
    Fixed64,
    Bool,
    String,
    Enum(EnumDescriptor),
}

impl FlatKind {
    fn of(kind: Kind) -> Option<FlatKind> {
        Some(match kind {
            Kind::Double => FlatKind::Double,
            Kind::Int32 => FlatKind::Int32,
            Kind::Sint32 => FlatKind::Sint32,
            Kind::Sfixed32 => FlatKind::Sfixed32,
            Kind::Uint32 => FlatKind::Uint32,
            Kind::Fixed32 => FlatKind::Fixed32,
            Kind::Int64 => FlatKind::Int64,
            Kind::Sint64 => FlatKind::Sint64,
            Kind::Sfixed64 => FlatKind::Sfixed64,
            Kind::Uint64 => FlatKind::Uint64,
            Kind::Fixed64 => FlatKind::Fixed64,
            Kind::Bool => FlatKind::Bool,
            Kind::String => FlatKind::String,
            Kind::Enum(e) => FlatKind::Enum(e),
            Kind::Float | Kind::Bytes | Kind::Message(_) => return None,
        })
    }

    /// The column type of its values (what proto3's JSON reads as exactly).
    fn data_type(&self) -> DataType {
        match self {
            FlatKind::Double => DataType::Float64,
            FlatKind::Int32 | FlatKind::Sint32 | FlatKind::Sfixed32 => DataType::Int32,
            FlatKind::Uint32 | FlatKind::Fixed32 => DataType::UInt32,
            FlatKind::Int64 | FlatKind::Sint64 | FlatKind::Sfixed64 => DataType::Int64,
            FlatKind::Uint64 | FlatKind::Fixed64 => DataType::UInt64,
            FlatKind::Bool => DataType::Boolean,
            FlatKind::String | FlatKind::Enum(_) => DataType::Utf8,
        }
    }

    /// The wire type its values come in.
    fn wire_type(&self) -> u8 {
        match self {
            FlatKind::Double | FlatKind::Sfixed64 | FlatKind::Fixed64 => WIRE_I64,
            FlatKind::Sfixed32 | FlatKind::Fixed32 => WIRE_I32,
            FlatKind::String => WIRE_LEN,
            _ => WIRE_VARINT,
        }
    }
}

/// The highest field number a flat plan takes (its lookup is a table of this many slots; a
/// message type with higher numbers goes the JSON way).
const FIELD_NUMBER_MAX: usize = 4096;

const WIRE_VARINT: u8 = 0;
const WIRE_I64: u8 = 1;
const WIRE_LEN: u8 = 2;
const WIRE_I32: u8 = 5;

impl FlatPlan {
    /// The plan of `message`, if it is a flat proto3 message (see the module doc).
    pub fn of(message: &MessageDescriptor) -> Option<FlatPlan> {
        if message.parent_file().syntax() != Syntax::Proto3 {
            return None;
        }
        let mut fields = Vec::new();
        let mut columns = Vec::new();
        let mut by_number = Vec::new();
        for field in message.fields() {
            let real_oneof = field.containing_oneof().is_some_and(|o| !o.is_synthetic());
            if field.cardinality() != Cardinality::Optional || real_oneof {
                return None;
            }
            let kind = FlatKind::of(field.kind())?;
            columns.push(Field::new(field.name(), kind.data_type(), true));
            let number = field.number() as usize;
            if number > FIELD_NUMBER_MAX {
                return None;
            }
            if by_number.len() <= number {
                by_number.resize(number + 1, None);
            }
            by_number[number] = Some(fields.len());
            fields.push(FlatField {
                kind,
                presence: field.supports_presence(),
            });
        }
        Some(FlatPlan {
            schema: Arc::new(Schema::new(columns)),
            fields,
            by_number,
        })
    }
}

/// A field's value as read off the wire, before it is checked against its kind.
#[derive(Clone, Copy)]
enum Wire {
    Unset,
    Varint(u64),
    Fixed(u64),
    /// A length-delimited value: its range in the message.
    Len(usize, usize),
}

/// Why a message is not read here (the JSON path reads it, and says why if it is bad).
#[derive(Debug)]
pub struct Irregular;

/// One column being built.
enum Column {
    F64(Float64Builder),
    I32(Int32Builder),
    U32(UInt32Builder),
    I64(Int64Builder),
    U64(UInt64Builder),
    Bool(BooleanBuilder),
    Str(StringBuilder),
}

impl Column {
    fn new(t: &DataType) -> Column {
        match t {
            DataType::Float64 => Column::F64(Float64Builder::new()),
            DataType::Int32 => Column::I32(Int32Builder::new()),
            DataType::UInt32 => Column::U32(UInt32Builder::new()),
            DataType::Int64 => Column::I64(Int64Builder::new()),
            DataType::UInt64 => Column::U64(UInt64Builder::new()),
            DataType::Boolean => Column::Bool(BooleanBuilder::new()),
            _ => Column::Str(StringBuilder::new()),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Column::F64(b) => Arc::new(b.finish()),
            Column::I32(b) => Arc::new(b.finish()),
            Column::U32(b) => Arc::new(b.finish()),
            Column::I64(b) => Arc::new(b.finish()),
            Column::U64(b) => Arc::new(b.finish()),
            Column::Bool(b) => Arc::new(b.finish()),
            Column::Str(b) => Arc::new(b.finish()),
        }
    }
}

/// Rows of one flat message type, built column by column.
pub struct FlatBatch {
    plan: Arc<FlatPlan>,
    columns: Vec<Column>,
    /// The current message's values, one per field (reused).
    values: Vec<Wire>,
}

impl FlatBatch {
    pub fn new(plan: Arc<FlatPlan>) -> FlatBatch {
        let columns = plan
            .schema
            .fields()
            .iter()
            .map(|f| Column::new(f.data_type()))
            .collect();
        let values = vec![Wire::Unset; plan.fields.len()];
        FlatBatch {
            plan,
            columns,
            values,
        }
    }

    /// Appends the message `body` (after its indexes) as a row; on [`Irregular`] the batch
    /// is left half-built and must be thrown away.
    pub fn push(&mut self, body: &[u8]) -> Result<(), Irregular> {
        self.values.fill(Wire::Unset);
        let mut at = 0;
        while at < body.len() {
            let tag = varint(body, &mut at)?;
            let (number, wire) = (tag >> 3, (tag & 7) as u8);
            let number = usize::try_from(number).map_err(|_| Irregular)?;
            let i = self
                .plan
                .by_number
                .get(number)
                .copied()
                .flatten()
                .ok_or(Irregular)?;
            if wire != self.plan.fields[i].kind.wire_type() {
                return Err(Irregular);
            }
            self.values[i] = match wire {
                WIRE_VARINT => Wire::Varint(varint(body, &mut at)?),
                WIRE_I64 => Wire::Fixed(u64::from_le_bytes(
                    take(body, &mut at, 8)?.try_into().map_err(|_| Irregular)?,
                )),
                WIRE_I32 => Wire::Fixed(u64::from(u32::from_le_bytes(
                    take(body, &mut at, 4)?.try_into().map_err(|_| Irregular)?,
                ))),
                _ => {
                    let len = usize::try_from(varint(body, &mut at)?).map_err(|_| Irregular)?;
                    let start = at;
                    take(body, &mut at, len)?;
                    Wire::Len(start, at)
                }
            };
        }
        for (i, field) in self.plan.fields.iter().enumerate() {
            append(&mut self.columns[i], field, self.values[i], body)?;
        }
        Ok(())
    }

    pub fn finish(mut self) -> RecordBatch {
        let columns = self.columns.iter_mut().map(Column::finish).collect();
        RecordBatch::try_new(self.plan.schema.clone(), columns)
            .expect("each column is built to its field's type, one value per row")
    }
}

/// Appends one field's value (`Unset`: null with presence, else its default).
fn append(
    column: &mut Column,
    field: &FlatField,
    value: Wire,
    body: &[u8],
) -> Result<(), Irregular> {
    let (bits, unset) = match value {
        Wire::Unset => (0, true),
        Wire::Varint(v) | Wire::Fixed(v) => (v, false),
        Wire::Len(..) => (0, false),
    };
    if unset && field.presence {
        match column {
            Column::F64(b) => b.append_null(),
            Column::I32(b) => b.append_null(),
            Column::U32(b) => b.append_null(),
            Column::I64(b) => b.append_null(),
            Column::U64(b) => b.append_null(),
            Column::Bool(b) => b.append_null(),
            Column::Str(b) => b.append_null(),
        }
        return Ok(());
    }
    match (column, &field.kind) {
        (Column::F64(b), FlatKind::Double) => {
            let v = f64::from_bits(bits);
            if !v.is_finite() {
                return Err(Irregular);
            }
            b.append_value(v)
        }
        (Column::I32(b), FlatKind::Int32 | FlatKind::Sfixed32) => b.append_value(bits as i32),
        (Column::I32(b), FlatKind::Sint32) => {
            let n = bits as u32;
            b.append_value(((n >> 1) as i32) ^ -((n & 1) as i32))
        }
        (Column::U32(b), _) => b.append_value(bits as u32),
        (Column::I64(b), FlatKind::Sint64) => {
            b.append_value(((bits >> 1) as i64) ^ -((bits & 1) as i64))
        }
        (Column::I64(b), _) => b.append_value(bits as i64),
        (Column::U64(b), _) => b.append_value(bits),
        (Column::Bool(b), _) => b.append_value(bits != 0),
        (Column::Str(b), FlatKind::Enum(e)) => {
            let value = e.get_value(bits as i32).ok_or(Irregular)?;
            b.append_value(value.name())
        }
        (Column::Str(b), _) => match value {
            Wire::Len(start, end) => {
                let text = std::str::from_utf8(&body[start..end]).map_err(|_| Irregular)?;
                b.append_value(text)
            }
            _ => b.append_value(""),
        },
        _ => return Err(Irregular),
    }
    Ok(())
}

/// Reads a varint at `*at` (at most 10 bytes, the last one holding at most one bit).
fn varint(body: &[u8], at: &mut usize) -> Result<u64, Irregular> {
    let mut value: u64 = 0;
    for i in 0..10 {
        let b = *body.get(*at + i).ok_or(Irregular)?;
        if i == 9 && b > 1 {
            return Err(Irregular);
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *at += i + 1;
            return Ok(value);
        }
    }
    Err(Irregular)
}

/// The `n` bytes at `*at`.
fn take<'a>(body: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], Irregular> {
    let end = at
        .checked_add(n)
        .filter(|e| *e <= body.len())
        .ok_or(Irregular)?;
    let bytes = &body[*at..end];
    *at = end;
    Ok(bytes)
}

#[cfg(test)]
mod tests;
