//! Avro messages in the Confluent wire format (a zero byte, a 4-byte big-endian schema id,
//! the Avro body) decoded to Arrow by arrow-avro, with the writer schema fetched from the
//! registry by its id. The rows are handed on as Arrow batches ([`crate::ArrowRows`]):
//! decoding puts them in the table's columns as they are when they fit, else reads them as
//! JSON lines ([`crate::rows`]), so keys, time fields, evolution and dead letters hold
//! exactly as for JSON.
//!
//! A message is one row or one dead letter: no magic byte (`no_magic_byte`), an id the
//! registry does not know (`unknown_schema_id`), a body that ends before its record does
//! (`truncated`), a body that does not decode as its schema or has bytes after its record
//! (`schema_mismatch`), no value at all (`null_value`). Decoding runs over consecutive
//! messages of one schema; a bad message ends its run (the decoder's half-built row is
//! thrown away with it) and the messages before it are decoded again without it.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use arrow_avro::reader::{Decoder, ReaderBuilder};
use arrow_avro::schema::{AvroSchema, Fingerprint, FingerprintAlgorithm, SchemaStore};
use deltalake::arrow::array::RecordBatch;

use crate::registry::{RegisteredSchema, RegistryError, SchemaKind, SchemaRegistry};

use super::wire::{distinct_ids, framing, kept, schema_for, MessageRows, Slot};
use crate::reject::{panic_message, RejectReason};

/// Decodes Avro messages against the writer schemas the registry gives their ids.
pub struct AvroMessages {
    registry: SchemaRegistry,
    /// A decoder per schema id the registry answered, or why its messages are dead letters
    /// (not an Avro schema, or one sluice cannot read).
    decoders: HashMap<u32, Result<SchemaDecoder, String>>,
}

/// The decoder of one writer schema and what it is built from (a decoder that failed on a
/// message is built again).
struct SchemaDecoder {
    store: SchemaStore,
    decoder: Decoder,
}

impl SchemaDecoder {
    fn new(id: u32, text: &str) -> Result<SchemaDecoder, String> {
        let mut store = SchemaStore::new_with_type(FingerprintAlgorithm::Id);
        store
            .set(Fingerprint::Id(id), AvroSchema::new(text.to_string()))
            .map_err(|e| e.to_string())?;
        let decoder = build(&store)?;
        Ok(SchemaDecoder { store, decoder })
    }

    fn reset(&mut self) -> Result<(), String> {
        self.decoder = build(&self.store)?;
        Ok(())
    }
}

/// The whole writer schema of `schema`: its text, with the named types it references
/// (Confluent schema references, fetched from the registry) defined in it; or why it cannot
/// be had.
pub async fn writer_schema(
    registry: &mut SchemaRegistry,
    schema: &RegisteredSchema,
) -> Result<Result<String, String>, RegistryError> {
    if schema.references.is_empty() {
        return Ok(Ok(schema.text.clone()));
    }
    let referenced = match registry.references(schema).await? {
        Ok(referenced) => referenced,
        Err(why) => return Ok(Err(why)),
    };
    let texts: Vec<&str> = referenced.iter().map(|(_, s)| s.text.as_str()).collect();
    Ok(references::inline(&schema.text, &texts).map_err(|e| {
        format!(
            "schema id {} and its references cannot be read: {e}",
            schema.id
        )
    }))
}

/// The columns a new table takes from an Avro writer schema (`text`): its fields as
/// arrow-avro reads them, each as a table stores it ([`crate::rows::table_field`]: records
/// as structs, enums as strings, timestamps in microseconds, `uuid` as its text, ...).
pub fn table_schema(text: &str) -> Result<deltalake::arrow::datatypes::SchemaRef, String> {
    let decoder = SchemaDecoder::new(0, text)?;
    Ok(crate::rows::table_schema(&decoder.decoder.schema()))
}

/// Rows per decoded batch (a message chunk is at most this long by default).
const BATCH_ROWS: usize = 16_384;

fn build(store: &SchemaStore) -> Result<Decoder, String> {
    build_for(store, BATCH_ROWS)
}

fn build_for(store: &SchemaStore, rows: usize) -> Result<Decoder, String> {
    let build = || {
        ReaderBuilder::new()
            .with_batch_size(rows)
            .with_writer_schema_store(store.clone())
            .build_decoder()
    };
    match catch_unwind(AssertUnwindSafe(build)) {
        Ok(built) => built.map_err(|e| e.to_string()),
        Err(panic) => Err(format!(
            "arrow-avro failed on the schema ({})",
            panic_message(panic.as_ref())
        )),
    }
}

impl AvroMessages {
    pub fn new(registry: SchemaRegistry) -> AvroMessages {
        AvroMessages {
            registry,
            decoders: HashMap::new(),
        }
    }

    /// Fetches the schemas of the messages' ids not seen before (waiting while the registry
    /// cannot be reached). Errs only when the registry refuses the request.
    pub async fn prepare(&mut self, payloads: &[Option<&[u8]>]) -> Result<(), RegistryError> {
        for id in distinct_ids(payloads) {
            self.ensure(id).await?;
        }
        Ok(())
    }

    /// Each message's row (in a batch of its schema's) or reason, in order (after
    /// [`AvroMessages::prepare`] of them: an id it did not fetch is a dead letter).
    pub fn decode(&mut self, payloads: &[Option<&[u8]>]) -> MessageRows {
        let mut out = MessageRows {
            batches: Vec::new(),
            slots: Vec::with_capacity(payloads.len()),
        };
        out.slots.resize_with(payloads.len(), || None);
        // Consecutive messages of one schema id, as (id, first index, end index).
        let mut runs: Vec<(u32, usize, usize)> = Vec::new();
        for (i, payload) in payloads.iter().enumerate() {
            let id = match framing(*payload).and_then(|id| kept(&self.decoders, id).map(|_| id)) {
                Ok(id) => id,
                Err(reason) => {
                    out.slots[i] = Some(Slot::Bad(reason));
                    continue;
                }
            };
            match runs.last_mut() {
                Some((last, _, end)) if *last == id && *end == i => *end = i + 1,
                _ => runs.push((id, i, i + 1)),
            }
        }
        // A run holds only messages framing read an id from: each has a value.
        let bodies: Vec<&[u8]> = payloads.iter().map(|p| p.unwrap_or_default()).collect();
        for (id, from, to) in runs {
            if let Some(Ok(schema)) = self.decoders.get_mut(&id) {
                decode_run(id, schema, &bodies, from..to, &mut out);
            }
        }
        out
    }

    /// Fetches schema `id` and builds its decoder, or keeps why its messages are dead
    /// letters. An id the registry does not know is asked again at the next prepare (it
    /// may be registered since); one it answered is kept for the run.
    async fn ensure(&mut self, id: u32) -> Result<(), RegistryError> {
        if self.decoders.contains_key(&id) {
            return Ok(());
        }
        let built = match schema_for(&mut self.registry, id, SchemaKind::Avro, "avro").await? {
            None => return Ok(()),
            Some(Err(why)) => Err(why),
            Some(Ok(s)) => match writer_schema(&mut self.registry, &s).await? {
                Ok(text) => SchemaDecoder::new(id, &text)
                    .map_err(|e| format!("schema id {id} cannot be read: {e}")),
                Err(why) => Err(why),
            },
        };
        if let Err(why) = &built {
            tracing::warn!(id, %why, "messages of this schema id are dead letters");
        }
        self.decoders.insert(id, built);
        Ok(())
    }
}

/// Decodes messages `range` (all of schema `id`) into `out`: batches of rows, or the reason
/// a message is bad. A bad message ends a segment: the decoder is built again, the good
/// messages before it are decoded again without it, and decoding goes on after it.
fn decode_run(
    id: u32,
    schema: &mut SchemaDecoder,
    payloads: &[&[u8]],
    range: std::ops::Range<usize>,
    out: &mut MessageRows,
) {
    let (mut start, to) = (range.start, range.end);
    while start < to {
        let mut bad_at = None;
        for (i, payload) in payloads.iter().copied().enumerate().take(to).skip(start) {
            if let Err(reason) = feed(id, &mut schema.decoder, payload) {
                let reason = truncated_or(id, &schema.store, payload, reason);
                out.slots[i] = Some(Slot::Bad(reason));
                bad_at = Some(i);
                break;
            }
        }
        let end = bad_at.unwrap_or(to);
        if bad_at.is_some() {
            if let Err(why) = schema.reset() {
                // (The same schema built before: not expected to fail now.)
                reject_all(out, start..end, &why);
                start = end + 1;
                continue;
            }
            for payload in &payloads[start..end] {
                if feed(id, &mut schema.decoder, payload).is_err() {
                    // Good a moment ago, so not expected; its segment then is bad whole.
                    let _ = schema.reset();
                    reject_all(out, start..end, "decoding it again failed");
                    break;
                }
            }
        }
        if out.slots[start..end].iter().all(Option::is_none) && end > start {
            match flush(&mut schema.decoder) {
                Ok(batch) if batch.num_rows() == end - start => {
                    let b = out.batches.len();
                    out.batches.push(batch);
                    for slot in &mut out.slots[start..end] {
                        *slot = Some(Slot::Row(b));
                    }
                }
                // A value arrow-avro checks only when it builds the batch (a string that is
                // not UTF-8): each message of the segment on its own finds the bad ones.
                Ok(_) | Err(_) => {
                    let _ = schema.reset();
                    isolate(id, schema, payloads, start..end, out);
                }
            }
        }
        start = end + 1;
    }
}

/// `reason`, or `truncated` for a message that fails because its body ends early (arrow-avro
/// may say "bad varint" for a number cut short): one that decodes with zero bytes added
/// and takes some of them.
fn truncated_or(
    id: u32,
    store: &SchemaStore,
    payload: &[u8],
    reason: RejectReason,
) -> RejectReason {
    if !matches!(reason, RejectReason::SchemaMismatch(_)) {
        return reason;
    }
    // One row: the decoder stops there (the zeros after it would read as another prefix).
    let Ok(mut probe) = build_for(store, 1) else {
        return reason;
    };
    let mut padded = payload.to_vec();
    padded.resize(payload.len() + TRUNCATION_PROBE_BYTES, 0);
    let before = probe.capacity();
    match catch_unwind(AssertUnwindSafe(|| probe.decode(&padded))) {
        Ok(Ok(n)) if n > payload.len() && before - probe.capacity() == 1 => {
            RejectReason::Truncated(format!(
                "the body ends {} bytes before its record of schema id {id} does",
                n - payload.len()
            ))
        }
        _ => reason,
    }
}

/// Zero bytes a possibly truncated message is tried with (each is an empty string, a zero,
/// a first union branch... of a record's remaining fields).
const TRUNCATION_PROBE_BYTES: usize = 64;

/// Decodes each message of `range` on its own (after its segment failed as a whole): those
/// that build a row of their own are rows (one batch), the others dead letters with the
/// reason arrow-avro gives.
fn isolate(
    id: u32,
    schema: &mut SchemaDecoder,
    payloads: &[&[u8]],
    range: std::ops::Range<usize>,
    out: &mut MessageRows,
) {
    let mut rows: Vec<(usize, RecordBatch)> = Vec::new();
    for i in range.clone() {
        let payload = payloads[i];
        let alone = feed(id, &mut schema.decoder, payload).and_then(|()| {
            flush(&mut schema.decoder).map_err(|why| {
                RejectReason::SchemaMismatch(format!(
                    "the payload does not decode as schema id {id}: {why}"
                ))
            })
        });
        match alone {
            Ok(batch) if batch.num_rows() == 1 => rows.push((i, batch)),
            Ok(batch) => {
                out.slots[i] = Some(Slot::Bad(RejectReason::SchemaMismatch(format!(
                    "{} rows for one message of schema id {id}",
                    batch.num_rows()
                ))))
            }
            Err(reason) => {
                let _ = schema.reset();
                out.slots[i] = Some(Slot::Bad(reason));
            }
        }
    }
    let Some((_, first)) = rows.first() else {
        return;
    };
    let batches: Vec<&RecordBatch> = rows.iter().map(|(_, b)| b).collect();
    match deltalake::arrow::compute::concat_batches(&first.schema(), batches) {
        Ok(batch) => {
            let b = out.batches.len();
            out.batches.push(batch);
            for (i, _) in &rows {
                out.slots[*i] = Some(Slot::Row(b));
            }
        }
        Err(e) => reject_all(out, range, &e.to_string()),
    }
}

/// Marks every undecided message of `range` a dead letter (a failure of the decoder itself,
/// not of one message).
fn reject_all(out: &mut MessageRows, range: std::ops::Range<usize>, why: &str) {
    for slot in out.slots[range].iter_mut().filter(|s| s.is_none()) {
        *slot = Some(Slot::Bad(RejectReason::SchemaMismatch(format!(
            "its run of messages could not be decoded: {why}"
        ))));
    }
}

/// Feeds one whole message to `decoder`: it must make exactly one row of all its bytes.
fn feed(id: u32, decoder: &mut Decoder, payload: &[u8]) -> Result<(), RejectReason> {
    let before = decoder.capacity();
    let fed = catch_unwind(AssertUnwindSafe(|| decoder.decode(payload)));
    let mismatch = |why: String| {
        RejectReason::SchemaMismatch(format!(
            "the payload does not decode as schema id {id}: {why}"
        ))
    };
    let consumed = match fed {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => {
            let text = e.to_string();
            return Err(if text.contains("EOF") || text.contains("more data") {
                RejectReason::Truncated(format!(
                    "the body ends before its record of schema id {id} does ({text})"
                ))
            } else {
                mismatch(text)
            });
        }
        Err(panic) => {
            return Err(mismatch(format!(
                "arrow-avro failed on it ({})",
                panic_message(panic.as_ref())
            )))
        }
    };
    let rows = before - decoder.capacity();
    match (rows, consumed == payload.len()) {
        (1, true) => Ok(()),
        (0, _) => Err(RejectReason::Truncated(format!(
            "{} bytes end before the record of schema id {id} does",
            payload.len()
        ))),
        _ => Err(mismatch(format!(
            "{} bytes after its record",
            payload.len().saturating_sub(consumed)
        ))),
    }
}

/// The rows decoded since the last flush: a batch whose rows JSON decoding can read too
/// (a type sluice cannot write as JSON, such as a union of several types, fails it).
fn flush(decoder: &mut Decoder) -> Result<RecordBatch, String> {
    let batch: Option<RecordBatch> = match catch_unwind(AssertUnwindSafe(|| decoder.flush())) {
        Ok(b) => b.map_err(|e| e.to_string())?,
        Err(panic) => return Err(panic_message(panic.as_ref())),
    };
    let batch = batch.unwrap_or_else(|| RecordBatch::new_empty(decoder.schema()));
    crate::rows::json_lines(&batch.slice(0, batch.num_rows().min(1)))
        .map_err(|e| format!("sluice cannot read these rows: {e}"))?;
    Ok(batch)
}

mod references;

#[cfg(test)]
mod tests;
