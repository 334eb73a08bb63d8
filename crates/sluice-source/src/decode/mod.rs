//! NDJSON lines to Arrow, with every bad line kept as a [`Reject`] and no value or field
//! lost on the way.
//!
//! - Lines are decoded by arrow-json in strict mode, per chunk: a field the record schema
//!   does not have fails the chunk, which is then checked line by line ([`walk`] names the
//!   unknown fields) and handled by the pipeline's [`SchemaEvolution`]: the schema grows
//!   ([`evolve`]), the line is rejected, or the field is ignored and counted.
//! - Integers, decimals, timestamps, binary and the event-time field are read as text and
//!   converted exactly ([`convert`]); a value that does not fit is a `wrong_type` reject.
//! - Every row gets its event time (`missing_time`, `bad_time`) and, with a row key, is
//!   checked to have one (`missing_key`: rows without a key are never merged).
//! - Records that arrive as Arrow rows ([`direct`], [`fit`]: Parquet, Avro) or as text fields
//!   ([`text`]: CSV) skip the JSON text where the chunk's values decide as the JSON path
//!   would decide them, and then go through the same conversions, event times and checks;
//!   otherwise they are read as their JSON lines. The JSON path is the reference.

mod convert;
mod direct;
mod evolve;
mod fit;
mod parallel;
mod rewrite;
mod text;
mod walk;

pub use parallel::{Deal, DecodedChunk, ParallelDecoder};

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use deltalake::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, RecordBatch, TimestampMicrosecondArray,
};
use deltalake::arrow::compute::filter_record_batch;
use deltalake::arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::json::reader::{Decoder, ReaderBuilder};
use sluice_window::{EventTime, TimeSpec};

use crate::chunk::Chunk;
use crate::message_columns::{rows_of, MessageColumns, MessagePart};
use crate::reject::panic_message;
pub use crate::reject::{Reject, RejectReason, RAW_BYTES_MAX};
use crate::schema::{type_name, FieldPath, PathError};
use convert::{read_schema, Reading};

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("time field: {0}")]
    NoTimeField(PathError),
    #[error("time field {field:?} has type {kind}, but time format {format} needs {needs}")]
    TimeFieldType {
        field: String,
        kind: String,
        format: String,
        needs: &'static str,
    },
    #[error("key field: {0}")]
    NoKeyField(PathError),
    #[error("key field {field:?} has type {kind}: a row key is made of scalar fields (string, number, boolean, date, timestamp)")]
    KeyFieldType { field: String, kind: String },
    #[error("sequence field: {0}")]
    NoSequenceField(PathError),
    #[error("sequence field {field:?} has type {kind}: a sequence is an integer, decimal, date, timestamp, string (compared byte by byte) or boolean (false first) field")]
    SequenceFieldType { field: String, kind: String },
    /// `--time-column NAME`: the record schema has no timestamp column NAME to fill (the
    /// opener adds it), or NAME is the time field itself.
    #[error("time column {name:?}: {why}")]
    TimeColumn { name: String, why: String },
    /// `--kafka-columns`: the record schema has a field named like a message column.
    #[error("message column {name:?} (--kafka-columns): {why}")]
    MessageColumn { name: String, why: String },
    #[error("arrow failed on lines it had accepted: {0}")]
    Arrow(#[from] ArrowError),
    #[error("decoding panicked on records that decode on their own (a bug in sluice)")]
    Panicked,
}

/// What happens to a field a record has and the table does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaEvolution {
    /// It becomes a new nullable column (or struct member), typed by its first appearance.
    #[default]
    Add,
    /// The record is a dead letter `unknown_field`, naming the field(s).
    Reject,
    /// The field is left out of the row; the run counts the rows and names the fields.
    Ignore,
}

impl SchemaEvolution {
    pub fn parse_name(name: &str) -> Option<Self> {
        match name {
            "add" => Some(SchemaEvolution::Add),
            "reject" => Some(SchemaEvolution::Reject),
            "ignore" => Some(SchemaEvolution::Ignore),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SchemaEvolution::Add => "add",
            SchemaEvolution::Reject => "reject",
            SchemaEvolution::Ignore => "ignore",
        }
    }
}

/// The most leaf columns (counting nested members) schema evolution grows a table to: an
/// object whose keys are data (user ids, say) would otherwise add a column per key. Past it,
/// records with new fields are dead letters `unknown_field`; declare such a field as a
/// `map<string,T>` in the schema instead.
pub const COLUMNS_MAX_DEFAULT: usize = 1000;

/// The good rows of one chunk, with their positions and event times, and its rejects.
#[derive(Debug)]
pub struct Decoded {
    pub file: u32,
    /// Data columns, in record-schema order (the schema as grown by this chunk, if it did).
    pub batch: RecordBatch,
    /// Byte offset of each row's line.
    pub offsets: Vec<i64>,
    pub event_times: Vec<EventTime>,
    pub rejects: Vec<Reject>,
    /// Fields this chunk added to the record schema (`coupon`, `user.plan`), in order.
    pub added: Vec<String>,
    /// Under [`SchemaEvolution::Ignore`] (and for values with nothing to store, such as `{}`):
    /// rows per field left out.
    pub ignored: BTreeMap<String, u64>,
    /// Rows that had at least one field left out.
    pub ignored_rows: u64,
    /// Kafka tombstones (messages without a value) that an envelope skipped: a change log's
    /// compaction markers, neither rows nor dead letters ([`crate::envelope`]).
    pub tombstones: u64,
}

#[cfg(test)]
impl Decoded {
    /// Asserts that `other` holds the same columns, bit for bit, column by column (a direct
    /// path's rows against the JSON path's).
    pub(crate) fn assert_same_columns(&self, other: &Decoded) {
        for (i, f) in self.batch.schema().fields().iter().enumerate() {
            assert_eq!(
                self.batch.column(i).to_data(),
                other.batch.column(i).to_data(),
                "column {}",
                f.name()
            );
        }
    }
}

/// How a [`LineDecoder`] reads records, besides the schema.
#[derive(Debug, Clone)]
pub struct DecodeOptions {
    /// The event-time field (a dotted path reaches into structs).
    pub time_field: String,
    pub time: TimeSpec,
    /// Row-key fields (dotted paths): a row missing one is rejected.
    pub key: Vec<String>,
    /// Sequence fields (dotted paths; `--sequence-field`): what orders the changes of one
    /// key. A row missing one is rejected.
    pub sequence: Vec<String>,
    /// How each record wraps its row (`--envelope`): `None`, the record is the row.
    pub envelope: Option<crate::envelope::Envelope>,
    pub evolution: SchemaEvolution,
    /// See [`COLUMNS_MAX_DEFAULT`].
    pub columns_max: usize,
    /// Top-level columns sluice adds to the table (address and position columns): a field
    /// schema evolution adds is never named like one (it is renamed, see `schema::names`).
    pub reserved: Vec<String>,
    /// A top-level `timestamp` column of the record schema that holds each row's event time
    /// as sluice read it (`--time-column`). It is read from a key no record has (see the
    /// opener); a record that does have that key is a dead letter `field_name_clash`.
    pub time_column: Option<String>,
    /// A log message's own fields as columns (`--kafka-columns`), filled from each chunk's
    /// [`crate::MessageMeta`]; the time field may be the message timestamp's column.
    pub message_columns: MessageColumns,
}

impl DecodeOptions {
    /// Reads `time_field` in `time`; no key; new fields added.
    pub fn new(time_field: impl Into<String>, time: impl Into<TimeSpec>) -> Self {
        DecodeOptions {
            time_field: time_field.into(),
            time: time.into(),
            key: Vec::new(),
            sequence: Vec::new(),
            envelope: None,
            evolution: SchemaEvolution::Add,
            columns_max: COLUMNS_MAX_DEFAULT,
            reserved: Vec::new(),
            time_column: None,
            message_columns: MessageColumns::default(),
        }
    }
}

/// Decodes chunks of NDJSON lines against the record schema, which grows under
/// [`SchemaEvolution::Add`] (monotonically: fields are only ever added).
#[derive(Debug, Clone)]
pub struct LineDecoder {
    schema: SchemaRef,
    /// What arrow-json decodes: the record schema with some fields read as text.
    read: SchemaRef,
    time_field: FieldPath,
    key: Vec<FieldPath>,
    sequence: Vec<FieldPath>,
    options: DecodeOptions,
}

/// The fields [`DecodeOptions`] name, resolved against a record schema.
struct Resolved {
    time_field: FieldPath,
    key: Vec<FieldPath>,
    sequence: Vec<FieldPath>,
    read: SchemaRef,
}

impl LineDecoder {
    pub fn new(schema: SchemaRef, options: DecodeOptions) -> Result<Self, DecodeError> {
        let Resolved {
            time_field,
            key,
            sequence,
            read,
        } = Self::check(&schema, &options)?;
        Ok(LineDecoder {
            schema,
            read,
            time_field,
            key,
            sequence,
            options,
        })
    }

    /// Resolves and checks the time and key fields in `schema`; the read schema.
    fn check(schema: &SchemaRef, options: &DecodeOptions) -> Result<Resolved, DecodeError> {
        let time_field =
            FieldPath::resolve(schema, &options.time_field).map_err(DecodeError::NoTimeField)?;
        let kind = time_field
            .field(schema)
            .map_err(DecodeError::NoTimeField)?
            .data_type()
            .clone();
        let epoch = options.time.format.is_epoch();
        let ok = match kind {
            DataType::Utf8 | DataType::Timestamp(..) => true,
            DataType::Date32 => !epoch,
            DataType::Int64 | DataType::Int32 | DataType::Float64 => epoch,
            _ => false,
        };
        if !ok {
            return Err(DecodeError::TimeFieldType {
                field: time_field.to_string(),
                kind: type_name(&kind),
                format: options.time.format.name().to_string(),
                needs: if epoch {
                    "a string, long, integer, double or timestamp"
                } else {
                    "a string, date or timestamp"
                },
            });
        }
        let mut key = Vec::with_capacity(options.key.len());
        for k in &options.key {
            let path = FieldPath::resolve(schema, k).map_err(DecodeError::NoKeyField)?;
            let t = path.field(schema).map_err(DecodeError::NoKeyField)?;
            if matches!(
                t.data_type(),
                DataType::Struct(_) | DataType::List(_) | DataType::Map(..)
            ) {
                return Err(DecodeError::KeyFieldType {
                    field: path.to_string(),
                    kind: type_name(t.data_type()),
                });
            }
            key.push(path);
        }
        let sequence = options
            .sequence
            .iter()
            .map(|f| sequence_field(schema, f))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(name) = &options.time_column {
            let bad = |why: &str| DecodeError::TimeColumn {
                name: name.clone(),
                why: why.to_string(),
            };
            match schema.field_with_name(name).map(|f| f.data_type()) {
                Ok(DataType::Timestamp(TimeUnit::Microsecond, Some(_))) => {}
                Ok(_) => return Err(bad("the records have a field of that name")),
                Err(_) => return Err(bad("not a column of the record schema")),
            }
            if time_field.to_string() == *name {
                return Err(bad("it is the time field itself"));
            }
        }
        let read = Arc::new(read_schema(schema, &time_field));
        Ok(Resolved {
            time_field,
            key,
            sequence,
            read,
        })
    }

    /// The record schema (as grown so far).
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    pub fn options(&self) -> &DecodeOptions {
        &self.options
    }

    /// The row-key fields, as paths of column names (`a.b`).
    pub fn key_columns(&self) -> Vec<String> {
        self.key.iter().map(FieldPath::to_string).collect()
    }

    /// The event-time field, as a path of column names.
    pub fn time_column(&self) -> String {
        self.time_field.to_string()
    }

    /// The sequence fields, as paths of column names.
    pub fn sequence_columns(&self) -> Vec<String> {
        self.sequence.iter().map(FieldPath::to_string).collect()
    }

    /// Rejects records without these key fields (`missing_key`) or sequence fields
    /// (`missing_sequence`) from now on: the row key the pipeline dedupes by, which a record
    /// without it must never be merged by, and what orders the changes of one key.
    pub fn set_row_key(
        &mut self,
        key: Vec<String>,
        sequence: Vec<String>,
    ) -> Result<(), DecodeError> {
        let options = DecodeOptions {
            key,
            sequence,
            ..self.options.clone()
        };
        let resolved = Self::check(&self.schema, &options)?;
        self.options = options;
        self.resolved(resolved);
        Ok(())
    }

    /// Decodes against `schema` from now on (a table re-read after another writer grew it).
    pub fn set_schema(&mut self, schema: SchemaRef) -> Result<(), DecodeError> {
        let resolved = Self::check(&schema, &self.options)?;
        self.schema = schema;
        self.resolved(resolved);
        Ok(())
    }

    fn resolved(&mut self, r: Resolved) {
        self.read = r.read;
        self.time_field = r.time_field;
        self.key = r.key;
        self.sequence = r.sequence;
    }

    fn decoder(&self, rows: usize, strict: bool) -> Result<Decoder, ArrowError> {
        ReaderBuilder::new(self.read.clone())
            .with_batch_size(rows.max(1))
            .with_coerce_primitive(true)
            .with_strict_mode(strict)
            .build_decoder()
    }

    /// Decodes a chunk: every record becomes a row or a [`Reject`] with its reason.
    ///
    /// A panic while decoding (a bug: every input has a row or a reason) costs no record but
    /// the one that caused it: the chunk is decoded again with each record on its own to find
    /// it, and that record becomes a reject `internal_error`; the others are decoded as
    /// always (invariant E8).
    pub fn decode(&mut self, chunk: &Chunk) -> Result<Decoded, DecodeError> {
        match self.options.envelope {
            Some(envelope) => {
                let (rows, tombstones) = envelope.unwrap_chunk(chunk);
                let mut decoded = self.decode_records(&rows)?;
                decoded.tombstones = tombstones;
                Ok(decoded)
            }
            None => self.decode_records(chunk),
        }
    }

    /// [`LineDecoder::decode`] of records that are rows (unwrapped from their envelope).
    fn decode_records(&mut self, chunk: &Chunk) -> Result<Decoded, DecodeError> {
        if let Some(text) = &chunk.text {
            return match self.decode_text(chunk, text) {
                Some(decoded) => Ok(decoded),
                None => self.decode_records(&chunk.as_lines()),
            };
        }
        if !chunk.arrow.is_empty() {
            return match self.decode_arrow(chunk) {
                Some(decoded) => Ok(decoded),
                None => self.decode_records(&chunk.as_lines()),
            };
        }
        let before = self.clone();
        let mut decoded =
            match std::panic::catch_unwind(AssertUnwindSafe(|| self.decode_chunk(chunk))) {
                Ok(decoded) => decoded?,
                Err(_) => {
                    *self = before;
                    self.decode_around_panics(chunk)?
                }
            };
        debug_assert_eq!(
            decoded.offsets.len() + decoded.rejects.len(),
            chunk.lines().count(),
            "E8: every record of a chunk is a row or a dead letter"
        );
        if let Some(o) = &chunk.overlong {
            let reason = RejectReason::LineTooLong(o.len);
            decoded
                .rejects
                .push(reject(chunk.file, o.offset, reason, &o.head));
        }
        if !chunk.bad.is_empty() {
            decoded.rejects.extend(chunk.bad.iter().cloned());
            decoded.rejects.sort_by_key(|r| r.offset);
        }
        Ok(decoded)
    }

    /// [`LineDecoder::decode`] after a panic: the records that panic on their own become
    /// rejects, the chunk without them is decoded.
    fn decode_around_panics(&mut self, chunk: &Chunk) -> Result<Decoded, DecodeError> {
        let mut panicked: Vec<(i64, Vec<u8>, String)> = Vec::new();
        for (offset, line) in chunk.lines() {
            let alone = chunk.only(&[offset]);
            let mut probe = self.clone();
            if let Err(panic) =
                std::panic::catch_unwind(AssertUnwindSafe(|| probe.decode_chunk(&alone)))
            {
                panicked.push((offset, line.to_vec(), panic_message(panic.as_ref())));
            }
        }
        let skip: Vec<i64> = panicked.iter().map(|(o, _, _)| *o).collect();
        let rest = chunk.without(&skip);
        let mut decoded = std::panic::catch_unwind(AssertUnwindSafe(|| self.decode_chunk(&rest)))
            .map_err(|_| DecodeError::Panicked)??;
        for (offset, line, message) in panicked {
            tracing::error!(file = chunk.file, offset, %message, "decoding this record panicked (a bug in sluice): it is a dead letter internal_error");
            decoded.rejects.push(reject(
                chunk.file,
                offset,
                RejectReason::Internal(message),
                &line,
            ));
        }
        decoded.rejects.sort_by_key(|r| r.offset);
        Ok(decoded)
    }

    fn decode_chunk(&mut self, chunk: &Chunk) -> Result<Decoded, DecodeError> {
        let lines: Vec<(i64, &[u8])> = chunk.lines().collect();
        if let Some(batch) = self.decode_all(&chunk.data, lines.len(), true) {
            let offsets = lines.iter().map(|(o, _)| *o).collect();
            return self.finish(chunk, &lines, batch, offsets, Vec::new());
        }
        // A few lines that are not JSON objects at all (cut short, garbage) need not send
        // every line of their chunk one by one.
        if let Some(d) = self.decode_around_malformed(chunk, &lines)? {
            return Ok(d);
        }
        // Every line decodes when unknown fields are left out: if none of those fields has
        // a value (a field that is always null), or they are to be ignored, this is the
        // chunk. (Fields to add or reject take the slow path below.)
        if let Some(d) = self.decode_leaving_out(chunk, &lines)? {
            return Ok(d);
        }
        self.decode_line_by_line(chunk, &lines)
    }

    /// The chunk decoded in one pass but for the lines serde_json does not read as one JSON
    /// object, which are judged one by one, when that decides every line as the slow path
    /// would: the others decode together as they are (so each would on its own), and none of
    /// the judged ones is good or grows the schema. `None` otherwise.
    fn decode_around_malformed(
        &self,
        chunk: &Chunk,
        lines: &[(i64, &[u8])],
    ) -> Result<Option<Decoded>, DecodeError> {
        type Lines<'c, 'l> = Vec<&'c (i64, &'l [u8])>;
        let (objects, others): (Lines, Lines) =
            lines.iter().partition(|(_, line)| one_object(line));
        if others.is_empty() {
            return Ok(None);
        }
        let mut data = Vec::with_capacity(chunk.data.len());
        for (_, line) in &objects {
            data.extend_from_slice(line);
            data.push(b'\n');
        }
        let Some(batch) = self.decode_all(&data, objects.len(), true) else {
            return Ok(None);
        };
        let mut rejects = Vec::with_capacity(others.len());
        for &&(offset, line) in &others {
            let mut to_add = Vec::new();
            match self.judge(line, &mut to_add).verdict {
                Verdict::Bad(reason) if to_add.is_empty() => {
                    rejects.push(reject(chunk.file, offset, reason, line))
                }
                _ => return Ok(None),
            }
        }
        let offsets = objects.iter().map(|(o, _)| *o).collect();
        self.finish(chunk, lines, batch, offsets, rejects).map(Some)
    }

    /// The slow path: each line on its own, in order, against the schema as the lines
    /// before it grew it (exactly as if the lines had come one chunk each: a record's fate
    /// never depends on how its stream was cut into chunks, invariant E5); then the good
    /// ones decoded together.
    fn decode_line_by_line(
        &mut self,
        chunk: &Chunk,
        lines: &[(i64, &[u8])],
    ) -> Result<Decoded, DecodeError> {
        let mut added: Vec<String> = Vec::new();
        // Each line's verdict, and the schema it was judged against.
        let mut judged: Vec<(Judged, SchemaRef)> = Vec::with_capacity(lines.len());
        for &(_, line) in lines {
            let j = self.judge_growing(line, &mut added)?;
            judged.push((j, self.schema.clone()));
        }
        // Good lines judged against an older schema than the chunk ends with, that left
        // fields out (`{}`: nothing to store), hold only the fields that schema has: a field
        // added since is not theirs (a line that carried one with a value added it itself),
        // so they decode as they were judged. (Their text was read by serde_json already.)
        for (j, schema) in judged.iter_mut() {
            let left_out = matches!(&j.verdict, Verdict::Good(paths) if !paths.is_empty());
            if left_out && !Arc::ptr_eq(schema, &self.schema) {
                if let Ok(projected) = rewrite::project(&j.line, schema.fields()) {
                    j.line = Cow::Owned(projected);
                }
            }
        }
        let mut rejects = Vec::new();
        let mut good = Vec::with_capacity(chunk.data.len());
        let mut offsets = Vec::with_capacity(lines.len());
        let mut ignored: BTreeMap<String, u64> = BTreeMap::new();
        let mut ignored_rows = 0u64;
        for ((j, _), &(offset, line)) in judged.into_iter().zip(lines) {
            match j.verdict {
                Verdict::Good(left_out) => {
                    good.extend_from_slice(&j.line);
                    good.push(b'\n');
                    offsets.push(offset);
                    if !left_out.is_empty() {
                        ignored_rows += 1;
                        for p in left_out {
                            *ignored.entry(p).or_default() += 1;
                        }
                    }
                }
                Verdict::Bad(reason) => rejects.push(reject(chunk.file, offset, reason, line)),
                // (Decided by `judge_growing`; kept as a reject, not a panic.)
                Verdict::Pending(paths) => rejects.push(reject(
                    chunk.file,
                    offset,
                    RejectReason::UnknownField(paths.join(", ")),
                    line,
                )),
            }
        }
        let batch = match self.decode_all(&good, offsets.len(), false) {
            Some(b) => b,
            None => self.decode_strict(&good, offsets.len())?,
        };
        let mut d = self.finish(chunk, lines, batch, offsets, rejects)?;
        d.added = added;
        d.ignored = ignored;
        d.ignored_rows = ignored_rows;
        Ok(d)
    }

    /// [`LineDecoder::judge`], growing the schema by the line's new fields (schema evolution
    /// `add`) and judging it again against the grown schema; paths added go to `added`.
    fn judge_growing<'l>(
        &mut self,
        line: &'l [u8],
        added: &mut Vec<String>,
    ) -> Result<Judged<'l>, DecodeError> {
        loop {
            let mut to_add: Vec<walk::Unknown> = Vec::new();
            let mut j = self.judge(line, &mut to_add);
            if to_add.is_empty() {
                return Ok(j);
            }
            let w = evolve::widen(
                &self.schema,
                &to_add,
                self.options.columns_max,
                &self.options.reserved,
            );
            if !w.added.is_empty() {
                self.set_schema(w.schema)?;
                added.extend(w.added);
                continue; // the line again, with the grown schema
            }
            // Nothing could be added: past the column limit, or nothing to store ({}).
            if let Verdict::Pending(paths) = &mut j.verdict {
                let over: Vec<&str> = paths
                    .iter()
                    .filter(|p| w.over_limit.contains(p))
                    .map(String::as_str)
                    .collect();
                j.verdict = if over.is_empty() {
                    self.lenient(&j.line, std::mem::take(paths))
                } else {
                    Verdict::Bad(RejectReason::UnknownField(format!(
                        "fields the table does not have: {}; the table has reached {} columns, the most schema evolution adds (declare such a field as map<string,T>)",
                        over.join(", "),
                        self.options.columns_max
                    )))
                };
            }
            return Ok(j);
        }
    }

    /// The chunk decoded in one pass with unknown fields left out, when that loses nothing
    /// the pipeline wants: no unknown field has a value, or they are ignored (and counted).
    /// `None` when a line is bad, or has a field to add or reject.
    fn decode_leaving_out(
        &self,
        chunk: &Chunk,
        lines: &[(i64, &[u8])],
    ) -> Result<Option<Decoded>, DecodeError> {
        let Some(batch) = self.decode_all(&chunk.data, lines.len(), false) else {
            return Ok(None);
        };
        let mut ignored: BTreeMap<String, u64> = BTreeMap::new();
        let mut ignored_rows = 0u64;
        let evolution = self.options.evolution;
        for (_, line) in lines {
            let values = evolution != SchemaEvolution::Ignore;
            let Ok(walked) = walk::walk(line, self.schema.fields(), values) else {
                return Ok(None);
            };
            // Another spelling of a column, or a nested value where a column holds text:
            // arrow-json would leave the one out, and fails on the other.
            if walked.rewrite || !walked.clashes.is_empty() {
                return Ok(None);
            }
            let unknowns = walked.unknown;
            if unknowns.is_empty() {
                continue;
            }
            // Under `add` and `reject`, only values with nothing to store (`{}`) are left
            // out, as below.
            let keep_going = evolution == SchemaEvolution::Ignore
                || unknowns
                    .iter()
                    .all(|u| matches!(evolve::stored_type(u), Ok(None)));
            if !keep_going {
                return Ok(None);
            }
            ignored_rows += 1;
            for u in unknowns {
                *ignored.entry(u.path()).or_default() += 1;
            }
        }
        let offsets = lines.iter().map(|(o, _)| *o).collect();
        let mut d = self.finish(chunk, lines, batch, offsets, Vec::new())?;
        d.ignored = ignored;
        d.ignored_rows = ignored_rows;
        Ok(Some(d))
    }

    /// The slow path's verdict on one line that a whole chunk's decode did not take, and
    /// the line to decode: rewritten when a key names its column in another spelling or a
    /// nested value stands where the column holds text. Fields to add go to `to_add`.
    fn judge<'l>(&self, line: &'l [u8], to_add: &mut Vec<walk::Unknown>) -> Judged<'l> {
        let judged = |verdict| Judged {
            verdict,
            line: Cow::Borrowed(line),
        };
        let strict = match self.check_line(line, true) {
            Ok(()) => return judged(Verdict::Good(Vec::new())),
            Err(RejectReason::NotOneObject) => {
                return judged(Verdict::Bad(RejectReason::NotOneObject))
            }
            Err(strict) => strict,
        };
        // JSON is UTF-8 text (arrow-json finds out only when it builds the strings, and
        // schema evolution must not look into such a line at all).
        if let Err(e) = std::str::from_utf8(line) {
            return judged(Verdict::Bad(RejectReason::MalformedJson(format!(
                "not UTF-8 text: {e}"
            ))));
        }
        let evolution = self.options.evolution;
        let values = evolution != SchemaEvolution::Ignore;
        let walked = match walk::walk(line, self.schema.fields(), values) {
            Ok(w) => w,
            Err(e) => {
                return judged(Verdict::Bad(match strict {
                    RejectReason::MalformedJson(_) => strict,
                    _ => RejectReason::MalformedJson(e.to_string()),
                }))
            }
        };
        if !walked.clashes.is_empty() {
            return judged(Verdict::Bad(RejectReason::FieldNameClash(format!(
                "two keys name the column {} (column names are case-insensitive)",
                walked.clashes.join(", ")
            ))));
        }
        let line = match walked.rewrite {
            true => match rewrite::rewrite(line, self.schema.fields()) {
                Ok(rewritten) => Cow::Owned(rewritten),
                Err(e) => return judged(Verdict::Bad(RejectReason::MalformedJson(e.to_string()))),
            },
            false => Cow::Borrowed(line),
        };
        // Objects with nothing to store are left out, and counted so.
        let mut left_out = walked.emptied;
        if walked.rewrite && self.check_line(&line, true).is_ok() {
            return Judged {
                verdict: Verdict::Good(left_out),
                line,
            };
        }
        // Unknown fields whose value has nothing to store are left out whatever the policy
        // (no column could hold them); the others are the policy's.
        if evolution != SchemaEvolution::Ignore {
            if let Some(Err(e)) = walked
                .unknown
                .iter()
                .map(evolve::stored_type)
                .find(Result::is_err)
            {
                return Judged {
                    verdict: Verdict::Bad(RejectReason::MalformedJson(e.to_string())),
                    line,
                };
            }
        }
        let (storable, empty): (Vec<walk::Unknown>, Vec<walk::Unknown>) =
            walked.unknown.into_iter().partition(|u| {
                evolution == SchemaEvolution::Ignore
                    || matches!(evolve::stored_type(u), Ok(Some(_)))
            });
        left_out.extend(empty.iter().map(walk::Unknown::path));
        // Only such fields, or another fault: the lenient check decides.
        let verdict = if storable.is_empty() {
            self.lenient(&line, left_out)
        } else {
            let paths: Vec<String> = storable.iter().map(walk::Unknown::path).collect();
            match evolution {
                SchemaEvolution::Reject => Verdict::Bad(RejectReason::UnknownField(format!(
                    "fields the table does not have: {}",
                    paths.join(", ")
                ))),
                SchemaEvolution::Ignore => {
                    left_out.extend(paths);
                    self.lenient(&line, left_out)
                }
                // A record grows the schema only if nothing else is wrong with it (a record
                // rejected anyway must not decide a column's type).
                SchemaEvolution::Add => match self.check_line(&line, false) {
                    Err(reason) => Verdict::Bad(reason),
                    Ok(()) => {
                        to_add.extend(storable);
                        left_out.extend(paths);
                        Verdict::Pending(left_out)
                    }
                },
            }
        };
        Judged { verdict, line }
    }

    /// Decodes `data` holding exactly `rows` objects; `None` if any line is bad.
    fn decode_all(&self, data: &[u8], rows: usize, strict: bool) -> Option<RecordBatch> {
        let mut decoder = self.decoder(rows + 1, strict).ok()?;
        let mut at = 0;
        while at < data.len() {
            let n = decoder.decode(&data[at..]).ok()?;
            if n == 0 {
                return None;
            }
            at += n;
        }
        let batch = decoder
            .flush()
            .ok()?
            .unwrap_or_else(|| RecordBatch::new_empty(self.read.clone()));
        (batch.num_rows() == rows).then_some(batch)
    }

    fn decode_strict(&self, data: &[u8], rows: usize) -> Result<RecordBatch, DecodeError> {
        let mut decoder = self.decoder(rows + 1, false)?;
        decoder.decode(data)?;
        Ok(decoder
            .flush()?
            .unwrap_or_else(|| RecordBatch::new_empty(self.read.clone())))
    }

    /// A line decoded leaving out `left_out` (fields the schema does not have).
    fn lenient(&self, line: &[u8], left_out: Vec<String>) -> Verdict {
        match self.check_line(line, false) {
            Ok(()) => Verdict::Good(left_out),
            Err(reason) => Verdict::Bad(reason),
        }
    }

    fn check_line(&self, line: &[u8], strict: bool) -> Result<(), RejectReason> {
        if line.trim_ascii_start().first() != Some(&b'{') {
            return Err(RejectReason::NotOneObject);
        }
        let mut decoder = self
            .decoder(2, strict)
            .map_err(|e| RejectReason::WrongType(e.to_string()))?;
        let n = decoder
            .decode(line)
            .map_err(|e| RejectReason::MalformedJson(e.to_string()))?;
        if n != line.len() || decoder.has_partial_record() {
            return Err(RejectReason::MalformedJson("incomplete JSON value".into()));
        }
        match decoder.flush() {
            Ok(Some(b)) if b.num_rows() == 1 => Ok(()),
            Ok(_) => Err(RejectReason::NotOneObject),
            Err(e) => Err(RejectReason::WrongType(e.to_string())),
        }
    }

    /// Event times, exact conversion to the record's types, and the key check, for the rows
    /// arrow-json decoded (`read`, at `offsets`); rows failing any of them become rejects.
    fn finish(
        &self,
        chunk: &Chunk,
        lines: &[(i64, &[u8])],
        read: RecordBatch,
        offsets: Vec<i64>,
        rejects: Vec<Reject>,
    ) -> Result<Decoded, DecodeError> {
        self.finish_with(chunk, read, offsets, rejects, |offset| {
            lines
                .binary_search_by_key(&offset, |(o, _)| *o)
                .map(|i| lines[i].1.to_vec())
                .unwrap_or_default()
        })
    }

    /// [`LineDecoder::finish`] with each failed row's text from `raw`.
    fn finish_with(
        &self,
        chunk: &Chunk,
        read: RecordBatch,
        offsets: Vec<i64>,
        rejects: Vec<Reject>,
        raw: impl Fn(i64) -> Vec<u8>,
    ) -> Result<Decoded, DecodeError> {
        let n = read.num_rows();
        let mut failed: Vec<Option<RejectReason>> = vec![None; n];
        let times = match self.message_times(chunk, &offsets, &mut failed) {
            Some(times) => times,
            None => self.times(&read, &mut failed)?,
        };
        // The record's own types.
        let reading = Reading {
            time_field: &self.time_field,
            time: &self.options.time,
        };
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        for (i, field) in self.schema.fields().iter().enumerate() {
            let c = reading.column(read.column(i), field)?;
            for (row, why) in c.bad {
                failed[row].get_or_insert(RejectReason::WrongType(why));
            }
            columns.push(c.array);
        }
        // (The read batch's fields are the record's, in the same order.)
        let own = self
            .options
            .time_column
            .as_deref()
            .and_then(|name| self.schema.index_of(name).ok())
            .map(|i| read.column(i).clone());
        let rows = Rows {
            columns,
            times,
            failed,
            offsets,
        };
        self.complete(chunk, rows, own.as_ref(), rejects, raw)
    }

    /// The rest of decoding, for rows in the record schema's `columns`: the time column and
    /// the message columns filled, the key checked, failed rows made rejects (their text from
    /// `raw`). `own_time`: what the records themselves gave the time column (a clash).
    fn complete(
        &self,
        chunk: &Chunk,
        rows: Rows,
        own_time: Option<&ArrayRef>,
        mut rejects: Vec<Reject>,
        raw: impl Fn(i64) -> Vec<u8>,
    ) -> Result<Decoded, DecodeError> {
        let Rows {
            mut columns,
            times,
            mut failed,
            offsets,
        } = rows;
        let n = offsets.len();
        if let Some(name) = &self.options.time_column {
            let none = deltalake::arrow::array::new_null_array(&DataType::Utf8, n);
            let own = own_time.unwrap_or(&none);
            fill_time_column(&self.schema, name, own, &times, &mut failed, &mut columns)?;
        }
        self.fill_message_columns(chunk, &offsets, &mut failed, &mut columns)?;
        let batch = RecordBatch::try_new(self.schema.clone(), columns)?;
        let keys = self.key.iter().map(|k| (k, false));
        for (field, is_sequence) in keys.chain(self.sequence.iter().map(|k| (k, true))) {
            let Some(values) = field.array(&batch) else {
                continue;
            };
            for (row, slot) in failed.iter_mut().enumerate() {
                if values.is_null(row) {
                    slot.get_or_insert_with(|| match is_sequence {
                        true => RejectReason::MissingSequence(field.to_string()),
                        false => RejectReason::MissingKey(field.to_string()),
                    });
                }
            }
        }
        if failed.iter().all(Option::is_none) {
            rejects.sort_by_key(|r| r.offset);
            return Ok(Decoded {
                file: chunk.file,
                batch,
                offsets,
                event_times: times,
                rejects,
                added: Vec::new(),
                ignored: BTreeMap::new(),
                ignored_rows: 0,
                tombstones: 0,
            });
        }
        let keep: Vec<bool> = failed.iter().map(Option::is_none).collect();
        let mut kept_offsets = Vec::with_capacity(n);
        let mut kept_times = Vec::with_capacity(n);
        for (row, reason) in failed.into_iter().enumerate() {
            match reason {
                None => {
                    kept_offsets.push(offsets[row]);
                    kept_times.push(times[row]);
                }
                Some(reason) => {
                    let line = raw(offsets[row]);
                    rejects.push(reject(chunk.file, offsets[row], reason, &line));
                }
            }
        }
        let batch = filter_record_batch(&batch, &BooleanArray::from(keep))?;
        rejects.sort_by_key(|r| r.offset);
        Ok(Decoded {
            file: chunk.file,
            batch,
            offsets: kept_offsets,
            event_times: kept_times,
            rejects,
            added: Vec::new(),
            ignored: BTreeMap::new(),
            ignored_rows: 0,
            tombstones: 0,
        })
    }
}

impl LineDecoder {
    /// Event times from the time field's text (or value).
    fn times(
        &self,
        read: &RecordBatch,
        failed: &mut [Option<RejectReason>],
    ) -> Result<Vec<EventTime>, DecodeError> {
        let n = read.num_rows();
        let mut times = Vec::with_capacity(n);
        // The read batch names its columns by the records' own names.
        let text = self
            .time_field
            .by_source_names(&self.schema)
            .array(read)
            .ok_or_else(|| ArrowError::SchemaError(format!("no time field {}", self.time_field)))?;
        let text = text.as_string::<i32>();
        for (row, slot) in failed.iter_mut().enumerate() {
            let parsed = if text.is_null(row) {
                Err(RejectReason::MissingTime)
            } else {
                self.options
                    .time
                    .parse_text(text.value(row))
                    .map_err(RejectReason::BadTime)
            };
            match parsed {
                Ok(t) => times.push(t),
                Err(reason) => {
                    times.push(EventTime::MIN);
                    *slot = Some(reason);
                }
            }
        }
        Ok(times)
    }

    /// Event times from the messages' timestamps, when the time field is their column
    /// (`--time-field kafka_timestamp`); `None` otherwise.
    fn message_times(
        &self,
        chunk: &Chunk,
        offsets: &[i64],
        failed: &mut [Option<RejectReason>],
    ) -> Option<Vec<EventTime>> {
        let columns = &self.options.message_columns;
        let part = MessagePart::Timestamp;
        if !columns.parts.contains(&part) || self.time_field.to_string() != part.column() {
            return None;
        }
        let meta = chunk.meta.as_deref().map_or(&[][..], Vec::as_slice);
        let mut none = vec![None; offsets.len()];
        let filled = columns.fill(part, &rows_of(offsets, meta), &mut none);
        let micros = filled.as_primitive::<deltalake::arrow::datatypes::TimestampMicrosecondType>();
        Some(
            failed
                .iter_mut()
                .enumerate()
                .map(|(row, slot)| {
                    if micros.is_null(row) {
                        *slot = Some(RejectReason::MissingTime);
                        EventTime::MIN
                    } else {
                        EventTime::from_micros(micros.value(row))
                    }
                })
                .collect(),
        )
    }

    /// Puts the messages' own fields in their columns (`--kafka-columns`).
    fn fill_message_columns(
        &self,
        chunk: &Chunk,
        offsets: &[i64],
        failed: &mut [Option<RejectReason>],
        columns: &mut [ArrayRef],
    ) -> Result<(), ArrowError> {
        let message_columns = &self.options.message_columns;
        if message_columns.is_empty() {
            return Ok(());
        }
        let meta = chunk.meta.as_deref().map_or(&[][..], Vec::as_slice);
        let rows = rows_of(offsets, meta);
        for part in &message_columns.parts {
            let i = self.schema.index_of(&part.column())?;
            let mut why = vec![None; offsets.len()];
            columns[i] = message_columns.fill(*part, &rows, &mut why);
            for (slot, why) in failed.iter_mut().zip(why) {
                if let Some(why) = why {
                    slot.get_or_insert(RejectReason::WrongType(why));
                }
            }
        }
        Ok(())
    }
}

/// Puts each row's event time in the time column `name` (`--time-column`); a row whose
/// record gave that column a value of its own is failed (`field_name_clash`): its value is
/// never replaced unseen.
fn fill_time_column(
    schema: &SchemaRef,
    name: &str,
    own: &ArrayRef,
    times: &[EventTime],
    failed: &mut [Option<RejectReason>],
    columns: &mut [ArrayRef],
) -> Result<(), ArrowError> {
    let i = schema.index_of(name)?;
    let DataType::Timestamp(_, zone) = schema.field(i).data_type() else {
        return Err(ArrowError::SchemaError(format!(
            "time column {name} is not a timestamp"
        )));
    };
    for (row, slot) in failed.iter_mut().enumerate() {
        if own.is_valid(row) {
            slot.get_or_insert_with(|| {
                RejectReason::FieldNameClash(format!(
                    "field {name} is the time column sluice fills (--time-column)"
                ))
            });
        }
    }
    let values: TimestampMicrosecondArray = times
        .iter()
        .zip(failed.iter())
        .map(|(t, f)| f.is_none().then_some(t.as_micros()))
        .collect();
    columns[i] = Arc::new(values.with_timezone_opt(zone.clone()));
    Ok(())
}

/// Decoded rows in the record schema's columns, before the last checks.
struct Rows {
    columns: Vec<ArrayRef>,
    times: Vec<EventTime>,
    failed: Vec<Option<RejectReason>>,
    offsets: Vec<i64>,
}

/// What the slow path decided for one line, and the line to decode.
struct Judged<'l> {
    verdict: Verdict,
    line: Cow<'l, [u8]>,
}

/// What the slow path decided for one line.
enum Verdict {
    /// Decoded, with the paths of fields left out.
    Good(Vec<String>),
    Bad(RejectReason),
    /// Has fields to add to the schema; decided after the schema grows.
    Pending(Vec<String>),
}

/// Whether serde_json reads `line` as one JSON object (without building its values).
fn one_object(line: &[u8]) -> bool {
    line.trim_ascii_start().first() == Some(&b'{')
        && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok()
}

fn reject(file: u32, offset: i64, reason: RejectReason, line: &[u8]) -> Reject {
    let raw = String::from_utf8_lossy(&line[..line.len().min(RAW_BYTES_MAX)]).into_owned();
    Reject {
        file,
        offset,
        reason,
        raw,
    }
}

#[cfg(test)]
mod tests;

/// Resolves a sequence field: one whose values order the changes of a key.
fn sequence_field(schema: &SchemaRef, name: &str) -> Result<FieldPath, DecodeError> {
    let path = FieldPath::resolve(schema, name).map_err(DecodeError::NoSequenceField)?;
    let t = path.field(schema).map_err(DecodeError::NoSequenceField)?;
    let orderable = t.data_type().is_integer()
        || matches!(
            t.data_type(),
            DataType::Decimal128(..)
                | DataType::Decimal256(..)
                | DataType::Date32
                | DataType::Timestamp(..)
                | DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Boolean
        );
    if !orderable {
        return Err(DecodeError::SequenceFieldType {
            field: path.to_string(),
            kind: type_name(t.data_type()),
        });
    }
    Ok(path)
}
