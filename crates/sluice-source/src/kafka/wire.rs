//! The schema registry's wire format, which Confluent's serializers (Avro, JSON Schema,
//! Protobuf) write: a zero byte, the 4-byte big-endian id of the writer's schema, then the
//! payload; and what becomes of each message read in it.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::arrow::array::RecordBatch;

use crate::registry::{Lookup, RegisteredSchema, RegistryError, SchemaKind, SchemaRegistry};
use crate::reject::RejectReason;

/// The wire format's first byte.
pub const MAGIC: u8 = 0;
/// Magic byte and schema id.
pub const PREFIX_BYTES: usize = 5;

/// What became of a message.
#[derive(Debug)]
pub enum Outcome {
    /// Its row, as one JSON object (no newline).
    Row(Vec<u8>),
    Bad(RejectReason),
}

/// Decoded messages: batches of rows (each of one schema's consecutive messages), and for
/// each message its row or why it is a dead letter.
#[derive(Debug, Default)]
pub struct MessageRows {
    pub batches: Vec<RecordBatch>,
    /// Per message, in order (every one is `Some` once decoded).
    pub slots: Vec<Option<Slot>>,
}

/// What became of one message.
#[derive(Debug)]
pub enum Slot {
    /// The next row of batch `.0` (a batch's rows are its messages, in order).
    Row(usize),
    Bad(RejectReason),
}

/// The schema id of a message in the wire format, or why it is not one.
pub fn framing(payload: Option<&[u8]>) -> Result<u32, RejectReason> {
    let Some(p) = payload else {
        return Err(RejectReason::NullValue);
    };
    if p.first() != Some(&MAGIC) {
        return Err(RejectReason::NoMagicByte(match p.first() {
            None => "an empty message".to_string(),
            Some(b) => format!("its first byte is {b:#04x}, not the wire format's 0x00"),
        }));
    }
    if p.len() < PREFIX_BYTES {
        return Err(RejectReason::Truncated(format!(
            "{} bytes: the wire format's prefix is 5 (magic byte and schema id)",
            p.len()
        )));
    }
    Ok(u32::from_be_bytes([p[1], p[2], p[3], p[4]]))
}

/// The schema ids of the messages in the wire format, each once, in the order first met: a
/// chunk asks the registry about an id once, however many of its messages carry it (an id
/// the registry does not know is not kept, so it is asked again in the next chunk).
pub fn distinct_ids(payloads: &[Option<&[u8]>]) -> Vec<u32> {
    let mut ids: Vec<u32> = Vec::new();
    for id in payloads.iter().filter_map(|p| framing(*p).ok()) {
        if ids.last() != Some(&id) && !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// What a format keeps for schema `id` (`kept`: for each id the registry answered, what its
/// messages are read with, or why they are dead letters), or why a message of that id is a
/// dead letter.
pub fn kept<T>(kept: &HashMap<u32, Result<T, String>>, id: u32) -> Result<&T, RejectReason> {
    match kept.get(&id) {
        Some(Ok(found)) => Ok(found),
        Some(Err(why)) => Err(RejectReason::UnknownSchema(why.clone())),
        None => Err(unknown(id)),
    }
}

/// Why messages of schema `id` cannot be read: the registry does not know it.
fn unknown(id: u32) -> RejectReason {
    RejectReason::UnknownSchema(format!(
        "schema id {id}: the schema registry does not know it"
    ))
}

/// Schema `id` for messages read as `format` (`--input-format`, whose schemas are of
/// `kind`): the schema, or why its messages are dead letters (another format's schema); `None`
/// while the registry does not know the id (ask again later: it may be registered since).
pub async fn schema_for(
    registry: &mut SchemaRegistry,
    id: u32,
    kind: SchemaKind,
    format: &str,
) -> Result<Option<Result<Arc<RegisteredSchema>, String>>, RegistryError> {
    Ok(match registry.schema(id).await? {
        Lookup::Unknown => None,
        Lookup::Found(s) if s.kind == kind => Some(Ok(s)),
        Lookup::Found(s) => {
            let why = format!(
                "schema id {id} is a {} schema, not {} (--input-format {format})",
                s.kind.name(),
                kind.label()
            );
            tracing::warn!(id, %why, "messages of this schema id are dead letters");
            Some(Err(why))
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_chunk_names_each_schema_id_once_in_the_order_met() {
        let m = |id: u32| {
            let mut m = vec![super::MAGIC];
            m.extend_from_slice(&id.to_be_bytes());
            m
        };
        let (a, b, c) = (m(7), m(3), m(999));
        let payloads = [
            Some(&a[..]),
            Some(&c[..]),
            None,
            Some(&a[..]),
            Some(b"{}".as_slice()),
            Some(&b[..]),
            Some(&c[..]),
            Some(&a[..]),
        ];
        assert_eq!(super::distinct_ids(&payloads), [7, 999, 3]);
    }
}
