//! The columns a Protobuf message becomes, for a new table of a Protobuf topic: each field a
//! column of the type its proto3 JSON reads as exactly ([`crate::rows::table_type`] makes
//! them table types: `uint64` as `decimal(20,0)`, `uint32` as `long`, map keys as text).

use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};

use crate::registry::{RegisteredSchema, RegistryError, SchemaRegistry};

use super::schema::compile_with_references;

/// The deepest nesting of messages a new table's columns take (a bound on the walk of a
/// registry's answer).
pub const NESTING_MAX: usize = 64;

/// The columns of the first message of `latest` (a subject's schema: the message
/// Confluent's converters read by default), with its imports fetched from `registry`; or why
/// there are none (a schema that does not compile, a field whose columns only its values
/// could tell).
pub async fn table_schema(
    registry: &mut SchemaRegistry,
    latest: &RegisteredSchema,
) -> Result<Result<SchemaRef, String>, RegistryError> {
    let schema = match compile_with_references(registry, latest).await? {
        Ok(schema) => schema,
        Err(why) => return Ok(Err(why)),
    };
    let Some(message) = schema.message(&[0]) else {
        return Ok(Err(format!("schema id {} declares no message", latest.id)));
    };
    Ok(message_fields(&message, &mut Vec::new())
        .map(|fields| crate::rows::table_schema(&Schema::new(fields))))
}

/// The fields of `message` (`within`: the messages it is nested in, to refuse recursion).
fn message_fields(
    message: &MessageDescriptor,
    within: &mut Vec<String>,
) -> Result<Vec<Field>, String> {
    if within.iter().any(|m| m == message.full_name()) {
        return Err(format!(
            "{} contains itself: a table has no recursive columns",
            message.full_name()
        ));
    }
    if within.len() >= NESTING_MAX {
        return Err(format!(
            "{} is nested deeper than {NESTING_MAX} messages",
            message.full_name()
        ));
    }
    within.push(message.full_name().to_string());
    let fields = message
        .fields()
        .map(|f| Ok(Field::new(f.name(), field_type(&f, within)?, true)))
        .collect::<Result<Vec<_>, String>>();
    within.pop();
    fields
}

fn field_type(field: &FieldDescriptor, within: &mut Vec<String>) -> Result<DataType, String> {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            return Err(format!("map field {} has no entry message", field.name()));
        };
        let key = Field::new("key", DataType::Utf8, false);
        let value = Field::new(
            "value",
            value_type(&entry.map_entry_value_field(), within)?,
            true,
        );
        let entries = Field::new(
            "entries",
            DataType::Struct(Fields::from(vec![key, value])),
            false,
        );
        return Ok(DataType::Map(Arc::new(entries), false));
    }
    let item = value_type(field, within)?;
    Ok(if field.is_list() {
        DataType::List(Arc::new(Field::new("item", item, true)))
    } else {
        item
    })
}

/// The type of one value of `field`.
fn value_type(field: &FieldDescriptor, within: &mut Vec<String>) -> Result<DataType, String> {
    Ok(match field.kind() {
        Kind::Double => DataType::Float64,
        Kind::Float => DataType::Float32,
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => DataType::Int32,
        Kind::Uint32 | Kind::Fixed32 => DataType::UInt32,
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => DataType::Int64,
        Kind::Uint64 | Kind::Fixed64 => DataType::UInt64,
        Kind::Bool => DataType::Boolean,
        Kind::String | Kind::Enum(_) => DataType::Utf8,
        Kind::Bytes => DataType::Binary,
        Kind::Message(m) => match well_known(m.full_name()) {
            Some(Ok(t)) => t,
            Some(Err(())) => {
                return Err(format!(
                    "field {} is a {}, whose columns only its values tell: give --schema FILE",
                    field.name(),
                    m.full_name()
                ))
            }
            None => DataType::Struct(Fields::from(message_fields(&m, within)?)),
        },
    })
}

/// The type of a well-known message as its JSON form reads (`Err`: a form with no fixed
/// columns: `Struct`, `Value`, `ListValue`, `Any`, `Empty`); `None`: not a well-known type.
fn well_known(name: &str) -> Option<Result<DataType, ()>> {
    Some(Ok(match name {
        "google.protobuf.Timestamp" => {
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
        }
        "google.protobuf.Duration" | "google.protobuf.FieldMask" => DataType::Utf8,
        "google.protobuf.DoubleValue" => DataType::Float64,
        "google.protobuf.FloatValue" => DataType::Float32,
        "google.protobuf.Int64Value" => DataType::Int64,
        "google.protobuf.UInt64Value" => DataType::UInt64,
        "google.protobuf.Int32Value" => DataType::Int32,
        "google.protobuf.UInt32Value" => DataType::UInt32,
        "google.protobuf.BoolValue" => DataType::Boolean,
        "google.protobuf.StringValue" => DataType::Utf8,
        "google.protobuf.BytesValue" => DataType::Binary,
        "google.protobuf.Struct"
        | "google.protobuf.Value"
        | "google.protobuf.ListValue"
        | "google.protobuf.Any"
        | "google.protobuf.Empty" => return Some(Err(())),
        _ => return None,
    }))
}
