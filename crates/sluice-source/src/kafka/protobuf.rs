//! Protobuf messages in the Confluent wire format (`--input-format protobuf`): a zero byte,
//! the 4-byte big-endian schema id, the message indexes (which message of the schema's file
//! the body is), then the body. The schema is fetched from the registry by its id with the
//! files it imports (its references; Google's well-known types are built in), compiled in
//! process ([protox]: no `protoc`), and each body is decoded by descriptor ([prost_reflect])
//! and read as proto3 JSON, so keys, time fields, evolution and dead letters hold exactly as
//! for JSON. Flat messages take a direct path into Arrow columns with the same rows
//! ([`flat`]; [`ProtobufMessages::decode_flat`]), which declines a chunk it cannot read the
//! same way.
//!
//! How a message becomes a row (proto3's JSON mapping with three choices made for a table):
//! field names as the `.proto` spells them; every field without presence written with its
//! value, a default included (proto3 does not tell an unset `int32` from a 0); a field with
//! presence (a message, `optional`, a oneof member, any proto2 field) absent, so null, when
//! unset; 64-bit integers as numbers (exact: the table reads them as `long`); enums by name;
//! `bytes` as base64 (what a `binary` column reads); `google.protobuf.Timestamp` as RFC 3339
//! text (what a timestamp column reads); wrappers as their value or null.
//!
//! A message is one row or one dead letter: `null_value`, `no_magic_byte`,
//! `unknown_schema_id` (also: a schema that does not compile, or whose imports the registry
//! does not have), `truncated` (the body ends inside a field or its indexes), and
//! `schema_mismatch` (indexes naming no message, a body that does not decode, or fields its
//! schema does not declare: they would be dropped silently).

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use prost_reflect::{DynamicMessage, MessageDescriptor, ReflectMessage, SerializeOptions, Value};

use crate::registry::{RegistryError, SchemaKind, SchemaRegistry};
use crate::reject::{panic_message, RejectReason};

use super::wire::{
    distinct_ids, framing, kept, schema_for, MessageRows, Outcome, Slot, PREFIX_BYTES,
};

mod columns;
mod flat;
mod schema;
pub use columns::table_schema;
use flat::{FlatBatch, FlatPlan};
use schema::{compile_with_references, ProtoSchema};

/// The most message indexes a message may carry (nesting depth of its message type).
pub const INDEXES_MAX: usize = 64;

/// Decodes Protobuf messages against the schemas the registry gives their ids.
pub struct ProtobufMessages {
    registry: SchemaRegistry,
    /// Each id the registry answered: its compiled file, or why its messages are dead
    /// letters (not a Protobuf schema, one that does not compile, a missing import).
    schemas: HashMap<u32, Result<Arc<ProtoSchema>, String>>,
    /// The plan of each message type (schema id, indexes) met, or `None` where it is not
    /// flat ([`flat`]).
    plans: HashMap<(u32, Vec<i64>), Option<Arc<FlatPlan>>>,
}

impl ProtobufMessages {
    pub fn new(registry: SchemaRegistry) -> ProtobufMessages {
        ProtobufMessages {
            registry,
            schemas: HashMap::new(),
            plans: HashMap::new(),
        }
    }

    /// Fetches and compiles the schemas of ids not seen before (waiting while the registry
    /// cannot be reached).
    pub async fn prepare(&mut self, payloads: &[Option<&[u8]>]) -> Result<(), RegistryError> {
        for id in distinct_ids(payloads) {
            if self.schemas.contains_key(&id) {
                continue;
            }
            let found =
                schema_for(&mut self.registry, id, SchemaKind::Protobuf, "protobuf").await?;
            let Some(found) = found else { continue };
            let compiled = match found {
                Ok(main) => compile_with_references(&mut self.registry, &main)
                    .await?
                    .map(Arc::new),
                Err(why) => Err(why),
            };
            if let Err(why) = &compiled {
                tracing::warn!(id, %why, "messages of this schema id are dead letters");
            }
            self.schemas.insert(id, compiled);
        }
        Ok(())
    }

    /// The messages as rows of Arrow batches, read off the wire ([`flat`]), when each one
    /// that names a message type names a flat one and is regular; `None` to decode them
    /// with [`ProtobufMessages::decode`]. The dead letters are the same as its.
    pub fn decode_flat(&mut self, payloads: &[Option<&[u8]>]) -> Option<MessageRows> {
        let mut out = MessageRows {
            batches: Vec::new(),
            slots: Vec::with_capacity(payloads.len()),
        };
        let mut building: Option<((u32, Vec<i64>), FlatBatch)> = None;
        for p in payloads {
            let (id, schema) = match framing(*p).and_then(|id| Ok((id, kept(&self.schemas, id)?))) {
                Ok(known) => known,
                Err(reason) => {
                    out.slots.push(Some(Slot::Bad(reason)));
                    continue;
                }
            };
            let body = &p.unwrap_or_default()[PREFIX_BYTES..];
            // The common case, without reading the indexes again: the first message of the
            // file (a single 0 byte), of the schema of the batch being built.
            let first_of_building = body.first() == Some(&0)
                && building
                    .as_ref()
                    .is_some_and(|((i, indexes), _)| *i == id && indexes[..] == [0]);
            let message = if first_of_building {
                &body[1..]
            } else {
                let (descriptor, indexes, message) = match message_of(id, schema, body) {
                    Ok(named) => named,
                    Err(reason) => {
                        out.slots.push(Some(Slot::Bad(reason)));
                        continue;
                    }
                };
                let key = (id, indexes);
                if building.as_ref().is_none_or(|(k, _)| *k != key) {
                    let plan = self
                        .plans
                        .entry(key.clone())
                        .or_insert_with(|| FlatPlan::of(&descriptor).map(Arc::new))
                        .clone()?;
                    if let Some((_, batch)) = building.replace((key, FlatBatch::new(plan))) {
                        out.batches.push(batch.finish());
                    }
                }
                message
            };
            let (_, batch) = building.as_mut().expect("a batch is being built");
            batch.push(message).ok()?;
            out.slots.push(Some(Slot::Row(out.batches.len())));
        }
        if let Some((_, batch)) = building {
            out.batches.push(batch.finish());
        }
        Some(out)
    }

    /// Each message's row as JSON text, or why it is a dead letter.
    pub fn decode(&self, payloads: &[Option<&[u8]>]) -> Vec<Outcome> {
        payloads
            .iter()
            .map(|p| {
                let id = match framing(*p) {
                    Ok(id) => id,
                    Err(reason) => return Outcome::Bad(reason),
                };
                let schema = match kept(&self.schemas, id) {
                    Ok(schema) => schema,
                    Err(reason) => return Outcome::Bad(reason),
                };
                let body = &p.unwrap_or_default()[PREFIX_BYTES..];
                // prost-reflect's panics are its bugs; the message is a dead letter.
                catch_unwind(AssertUnwindSafe(|| decode_one(id, schema, body)))
                    .unwrap_or_else(|e| Outcome::Bad(RejectReason::Internal(panic_message(&e))))
            })
            .collect()
    }
}

/// The message type a body (after the 5-byte prefix) names with its indexes, the indexes,
/// and the message after them.
fn message_of<'b>(
    id: u32,
    schema: &ProtoSchema,
    body: &'b [u8],
) -> Result<(MessageDescriptor, Vec<i64>, &'b [u8]), RejectReason> {
    let (indexes, message) = message_indexes(body)?;
    match schema.message(&indexes) {
        Some(descriptor) => Ok((descriptor, indexes, message)),
        None => Err(RejectReason::SchemaMismatch(format!(
            "message indexes {indexes:?} name no message of schema id {id}"
        ))),
    }
}

/// One message's body (after the 5-byte prefix): its indexes, then the message.
fn decode_one(id: u32, schema: &ProtoSchema, body: &[u8]) -> Outcome {
    let (descriptor, message) = match message_of(id, schema, body) {
        Ok((descriptor, _, message)) => (descriptor, message),
        Err(reason) => return Outcome::Bad(reason),
    };
    let decoded = match DynamicMessage::decode(descriptor.clone(), message) {
        Ok(decoded) => decoded,
        Err(e) => return Outcome::Bad(decode_failure(id, &descriptor, message, &e)),
    };
    if let Some(why) = undeclared_field(&decoded) {
        return Outcome::Bad(RejectReason::SchemaMismatch(format!(
            "the payload does not match schema id {id}: {why}"
        )));
    }
    let options = SerializeOptions::new()
        .stringify_64_bit_integers(false)
        .use_proto_field_name(true)
        .skip_default_fields(false);
    let mut line = Vec::with_capacity(message.len() * 2);
    let mut serializer = serde_json::Serializer::new(&mut line);
    match decoded.serialize_with_options(&mut serializer, &options) {
        Ok(()) => Outcome::Row(line),
        Err(e) => Outcome::Bad(RejectReason::SchemaMismatch(format!(
            "{} of schema id {id} has no JSON form: {e}",
            descriptor.full_name()
        ))),
    }
}

/// The message indexes at the start of `body` (zigzag varints: a count, then that many
/// indexes; a count of 0 means `[0]`, the file's first message) and the message after them.
fn message_indexes(body: &[u8]) -> Result<(Vec<i64>, &[u8]), RejectReason> {
    let mut rest = body;
    let count = zigzag_varint(&mut rest)?;
    if count == 0 {
        return Ok((vec![0], rest));
    }
    if count < 0 || count as usize > INDEXES_MAX {
        return Err(RejectReason::SchemaMismatch(format!(
            "its message indexes count {count} (at most {INDEXES_MAX})"
        )));
    }
    let mut indexes = Vec::with_capacity(count as usize);
    for _ in 0..count {
        indexes.push(zigzag_varint(&mut rest)?);
    }
    Ok((indexes, rest))
}

/// Reads one zigzag varint off the front of `bytes`.
fn zigzag_varint(bytes: &mut &[u8]) -> Result<i64, RejectReason> {
    let mut value: u64 = 0;
    for (i, b) in bytes.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *bytes = &bytes[i + 1..];
            return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
        }
    }
    Err(if bytes.len() < 10 {
        RejectReason::Truncated("the payload ends inside its message indexes".into())
    } else {
        RejectReason::SchemaMismatch(
            "its message indexes hold a varint longer than 10 bytes".into(),
        )
    })
}

/// Why a body did not decode: `truncated` when it ends inside a field (prost reads past its
/// end, or stops in a varint), else `schema_mismatch`.
fn decode_failure(
    id: u32,
    descriptor: &MessageDescriptor,
    body: &[u8],
    error: &prost_reflect::prost::DecodeError,
) -> RejectReason {
    let text = error.to_string();
    let cut_varint = text.contains("invalid varint") && body.last().is_some_and(|b| b & 0x80 != 0);
    if text.contains("buffer underflow") || cut_varint {
        return RejectReason::Truncated(format!(
            "{} bytes end before the message {} of schema id {id} does",
            body.len(),
            descriptor.full_name()
        ));
    }
    RejectReason::SchemaMismatch(format!(
        "the payload does not decode as {} of schema id {id}: {text}",
        descriptor.full_name()
    ))
}

/// A field the message carries that its schema does not declare (here or in a nested
/// message), named by its path: the producer wrote it with another schema than its id says.
fn undeclared_field(message: &DynamicMessage) -> Option<String> {
    if let Some(field) = message.unknown_fields().next() {
        return Some(format!(
            "field number {} is not in {}",
            field.number(),
            message.descriptor().full_name()
        ));
    }
    message.fields().find_map(|(field, value)| {
        undeclared_in(value).map(|why| format!("{}: {why}", field.name()))
    })
}

fn undeclared_in(value: &Value) -> Option<String> {
    match value {
        Value::Message(m) => undeclared_field(m),
        Value::List(items) => items.iter().find_map(undeclared_in),
        Value::Map(entries) => entries.values().find_map(undeclared_in),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
