//! What a Kafka message's value holds, and how it becomes a record: JSON text as it is, or
//! a schema-registry format decoded against its registered schema ([`MessageFormat`]).
//!
//! The consumer hands over messages as they are ([`RawMessage`]: a value can be absent, a
//! tombstone); a run keeps the ones it has not seen and turns them into a [`Chunk`] with
//! [`Payloads::chunk`], each message a JSON line, an Arrow row (Avro) or a dead letter at its
//! offset.

use std::time::{Duration, Instant};

use crate::chunk::{ArrowRows, Chunk};
use crate::message_columns::MessageMeta;
use crate::registry::{RegistryError, RegistryOptions, SchemaKind, SchemaRegistry};
use crate::reject::{Reject, RejectReason, RAW_BYTES_MAX};

use super::avro::AvroMessages;
use super::json_schema::JsonSchemaMessages;
use super::protobuf::ProtobufMessages;
use super::wire::{MessageRows, Outcome, Slot};

/// A message as the consumer read it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawMessage {
    pub offset: i64,
    /// `None`: a tombstone.
    pub value: Option<Vec<u8>>,
    /// Its key, timestamp and headers, when they are read ([`PayloadOptions::meta`]).
    pub meta: Option<MessageMeta>,
}

/// How message values are written (`--input-format` of a `kafka:` source).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MessageFormat {
    /// One JSON object per message.
    #[default]
    Json,
    /// Avro in the Confluent wire format, its schema in the registry.
    Avro,
    /// JSON in the Confluent wire format, its JSON Schema in the registry.
    JsonSchema,
    /// Protobuf in the Confluent wire format (with message indexes), its `.proto` in the
    /// registry.
    Protobuf,
}

impl MessageFormat {
    pub fn parse(name: &str) -> Option<MessageFormat> {
        match name {
            "json" | "ndjson" => Some(MessageFormat::Json),
            "avro" => Some(MessageFormat::Avro),
            "json-schema" => Some(MessageFormat::JsonSchema),
            "protobuf" => Some(MessageFormat::Protobuf),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MessageFormat::Json => "json",
            MessageFormat::Avro => "avro",
            MessageFormat::JsonSchema => "json-schema",
            MessageFormat::Protobuf => "protobuf",
        }
    }

    /// The kind of registry schema the format's messages name by id (`None`: JSON, which
    /// names none).
    pub fn schema_kind(self) -> Option<SchemaKind> {
        match self {
            MessageFormat::Json => None,
            MessageFormat::Avro => Some(SchemaKind::Avro),
            MessageFormat::JsonSchema => Some(SchemaKind::Json),
            MessageFormat::Protobuf => Some(SchemaKind::Protobuf),
        }
    }

    /// Whether the format's messages carry a schema id to look up in a registry.
    pub fn needs_registry(self) -> bool {
        self.schema_kind().is_some()
    }

    /// Whether a new table can take its columns from the format's registered schema (Avro's
    /// and Protobuf's type every field; a JSON Schema does not say how values are stored).
    pub fn gives_columns(self) -> bool {
        matches!(self, MessageFormat::Avro | MessageFormat::Protobuf)
    }
}

/// The format of a topic's messages and the registry its schemas are in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PayloadOptions {
    pub format: MessageFormat,
    pub registry: Option<RegistryOptions>,
    /// Read each message's key, timestamp and headers too (`--kafka-columns`).
    pub meta: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PayloadOptionsError {
    #[error("--input-format {0} reads schema ids: give --schema-registry URL")]
    NoRegistry(&'static str),
    #[error(
        "--schema-registry: JSON messages carry no schema id (--input-format avro, protobuf or json-schema)"
    )]
    UnusedRegistry,
}

impl PayloadOptions {
    pub fn check(&self) -> Result<(), PayloadOptionsError> {
        match (self.format.needs_registry(), &self.registry) {
            (true, None) => Err(PayloadOptionsError::NoRegistry(self.format.name())),
            (false, Some(_)) => Err(PayloadOptionsError::UnusedRegistry),
            _ => Ok(()),
        }
    }
}

/// Turns a partition's messages into records (one per run: it keeps the schemas fetched).
pub struct Payloads(Decoding);

enum Decoding {
    Json,
    /// (Taken while a blocking thread decodes with it.)
    Avro(Option<AvroMessages>),
    JsonSchema(JsonSchemaMessages),
    /// (Taken while a blocking thread decodes with it.)
    Protobuf(Option<ProtobufMessages>),
}

impl Payloads {
    pub fn new(options: &PayloadOptions) -> Result<Payloads, PayloadOptionsError> {
        options.check()?;
        let registry = || options.registry.clone().map(SchemaRegistry::new);
        Ok(Payloads(match (options.format, registry()) {
            (MessageFormat::Avro, Some(r)) => Decoding::Avro(Some(AvroMessages::new(r))),
            (MessageFormat::JsonSchema, Some(r)) => {
                Decoding::JsonSchema(JsonSchemaMessages::new(r))
            }
            (MessageFormat::Protobuf, Some(r)) => {
                Decoding::Protobuf(Some(ProtobufMessages::new(r)))
            }
            _ => Decoding::Json,
        }))
    }

    /// The messages (in offset order, of one partition: file ordinal 1) as a chunk: each one
    /// a line, a row or a dead letter; and how long decoding them took. Errs only when the
    /// registry refuses to answer; while it cannot be reached, this waits for it. Avro is
    /// decoded on a blocking thread (a chunk's worth must not hold up the caller's runtime).
    pub async fn chunk(
        &mut self,
        mut messages: Vec<RawMessage>,
    ) -> Result<(Chunk, Duration), RegistryError> {
        let meta: Vec<MessageMeta> = messages.iter_mut().filter_map(|m| m.meta.take()).collect();
        let meta = (!meta.is_empty()).then(|| std::sync::Arc::new(meta));
        let (mut chunk, took) = self.values(messages).await?;
        chunk.meta = meta;
        Ok((chunk, took))
    }

    async fn values(
        &mut self,
        messages: Vec<RawMessage>,
    ) -> Result<(Chunk, Duration), RegistryError> {
        let started = Instant::now();
        match &mut self.0 {
            Decoding::Json => {
                let chunk = Chunk::messages(
                    1,
                    messages
                        .iter()
                        .map(|m| (m.offset, m.value.as_deref().unwrap_or_default())),
                );
                Ok((chunk, started.elapsed()))
            }
            Decoding::JsonSchema(json) => {
                json.prepare(&values(&messages)).await?;
                let started = Instant::now();
                let outcomes = json.decode(&values(&messages));
                Ok((lines_and_rejects(&messages, outcomes), started.elapsed()))
            }
            Decoding::Protobuf(slot) => {
                let protobuf = slot.as_mut().expect(LENT);
                protobuf.prepare(&values(&messages)).await?;
                Ok(on_blocking_thread(slot, messages, |protobuf, messages| {
                    let payloads = values(messages);
                    if let Some(rows) = protobuf.decode_flat(&payloads) {
                        return arrow_and_rejects(messages, rows);
                    }
                    tracing::debug!(
                        messages = messages.len(),
                        "Protobuf messages read the JSON way: a type that is not flat, or a message the direct path does not read"
                    );
                    lines_and_rejects(messages, protobuf.decode(&payloads))
                })
                .await)
            }
            Decoding::Avro(slot) => {
                let avro = slot.as_mut().expect(LENT);
                avro.prepare(&values(&messages)).await?;
                Ok(on_blocking_thread(slot, messages, |avro, messages| {
                    arrow_and_rejects(messages, avro.decode(&values(messages)))
                })
                .await)
            }
        }
    }
}

/// A decoder is lent to a blocking thread while it decodes a chunk, and chunks are decoded
/// one at a time.
const LENT: &str = "a chunk is decoded at a time";

/// `decode` run on a blocking thread (a chunk's worth must not hold up the caller's
/// runtime), with the decoder `slot` lends it; the chunk and how long decoding took.
async fn on_blocking_thread<D: Send + 'static>(
    slot: &mut Option<D>,
    messages: Vec<RawMessage>,
    decode: fn(&mut D, &[RawMessage]) -> Chunk,
) -> (Chunk, Duration) {
    let mut decoder = slot.take().expect(LENT);
    let decoded = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let chunk = decode(&mut decoder, &messages);
        (decoder, chunk, started.elapsed())
    })
    .await;
    match decoded {
        Ok((decoder, chunk, took)) => {
            *slot = Some(decoder);
            (chunk, took)
        }
        // The decoders catch their libraries' panics; a panic here is sluice's own bug.
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// The messages' values.
fn values(messages: &[RawMessage]) -> Vec<Option<&[u8]>> {
    messages.iter().map(|m| m.value.as_deref()).collect()
}

/// A chunk of `messages` with no record in it yet: where they start and end, their bytes.
fn empty_chunk(messages: &[RawMessage]) -> Chunk {
    Chunk {
        file: 1,
        start: messages.first().map_or(0, |m| m.offset),
        message_offsets: Some(Vec::new()),
        end_at: messages.last().map(|m| m.offset + 1),
        stored_bytes: Some(
            messages
                .iter()
                .map(|m| m.value.as_ref().map_or(0, |v| v.len() as u64))
                .sum(),
        ),
        ..Chunk::default()
    }
}

/// A chunk of the rows' JSON lines at their messages' offsets, the others dead letters.
fn lines_and_rejects(messages: &[RawMessage], outcomes: Vec<Outcome>) -> Chunk {
    let mut chunk = empty_chunk(messages);
    let mut offsets = Vec::new();
    for (message, outcome) in messages.iter().zip(outcomes) {
        match outcome {
            Outcome::Row(line) => {
                offsets.push(message.offset);
                chunk.data.extend_from_slice(&line);
                chunk.data.push(b'\n');
            }
            Outcome::Bad(reason) => chunk.bad.push(dead_letter(message, reason)),
        }
    }
    chunk.message_offsets = Some(offsets);
    chunk
}

/// A chunk of the rows' Arrow batches at their messages' offsets, the others dead letters.
fn arrow_and_rejects(messages: &[RawMessage], rows: MessageRows) -> Chunk {
    let mut chunk = empty_chunk(messages);
    let mut offsets: Vec<Vec<i64>> = vec![Vec::new(); rows.batches.len()];
    for (message, slot) in messages.iter().zip(rows.slots) {
        match slot {
            Some(Slot::Row(batch)) => offsets[batch].push(message.offset),
            Some(Slot::Bad(reason)) => chunk.bad.push(dead_letter(message, reason)),
            None => chunk.bad.push(dead_letter(
                message,
                RejectReason::Internal("the message was not decoded".into()),
            )),
        }
    }
    chunk.arrow = rows
        .batches
        .into_iter()
        .zip(offsets)
        .map(|(batch, offsets)| ArrowRows { batch, offsets })
        .collect();
    chunk
}

fn dead_letter(message: &RawMessage, reason: RejectReason) -> Reject {
    Reject {
        file: 1,
        offset: message.offset,
        reason,
        raw: base64_text(message.value.as_deref().unwrap_or_default()),
    }
}

/// A binary message's bytes as a dead letter keeps them: base64 (cut at
/// [`RAW_BYTES_MAX`] bytes of text).
fn base64_text(bytes: &[u8]) -> String {
    use base64::Engine;
    let keep = &bytes[..bytes.len().min(RAW_BYTES_MAX / 4 * 3)];
    base64::engine::general_purpose::STANDARD.encode(keep)
}
