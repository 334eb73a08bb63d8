//! Why a record is a dead letter rather than a row, and the bounds on what one keeps.

use sluice_window::TimeError;

/// The message of a caught panic (for a dead letter `internal_error` or `unreadable`).
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Why a record was rejected. The names (`as_str`) are stable: they appear in rejects output
/// and in run summaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RejectReason {
    /// Not valid JSON.
    MalformedJson(String),
    /// Valid JSON whose values do not fit the schema.
    WrongType(String),
    /// Not exactly one JSON object on the line.
    NotOneObject,
    /// The event-time field is absent or null.
    MissingTime,
    /// The event-time field could not be read.
    BadTime(TimeError),
    /// A row-key field is absent or null.
    MissingKey(String),
    /// A sequence field (`--sequence-field`) is absent or null.
    MissingSequence(String),
    /// Fields the table does not have, under `--schema-evolution reject` (or past the column
    /// limit under `add`).
    UnknownField(String),
    /// Two keys of one object name one column (`Amount` and `amount`: Delta column names
    /// are case-insensitive), so the row would have to drop one of the values.
    FieldNameClash(String),
    /// Decoding the record panicked: a bug in sluice, kept from stopping the pipeline.
    Internal(String),
    /// A line longer than the reader takes (its length in bytes; see
    /// [`LINE_BYTES_MAX`]).
    LineTooLong(u64),
    /// A CSV record with more or fewer fields than its file's header.
    WrongFieldCount(String),
    /// A CSV record whose quoted field never closes (the file ends inside it).
    UnterminatedQuote(String),
    /// Bytes that cannot be read as records: the rest of a compressed file that is corrupt
    /// (its earlier lines are rows; one cut short is still being written, and waited for).
    Unreadable(String),
    /// A message with no value (a Kafka tombstone) where a record is expected.
    NullValue,
    /// A message that does not start as the schema registry's wire format does.
    NoMagicByte(String),
    /// A message whose schema id the registry does not know (or holds a schema of another
    /// format, or one sluice cannot read).
    UnknownSchema(String),
    /// A message that ends before its record does.
    Truncated(String),
    /// A message whose bytes do not decode as the schema its id names.
    SchemaMismatch(String),
    /// A record that is not a change event of its envelope (`--envelope debezium`).
    BadEnvelope(String),
    /// A row that broke an expectation whose rows are dropped (`--expect-or-drop`): the
    /// rule's name and condition.
    Expectation { rule: String, sql: String },
}

impl RejectReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            RejectReason::MalformedJson(_) => "malformed_json",
            RejectReason::WrongType(_) => "wrong_type",
            RejectReason::NotOneObject => "not_one_object",
            RejectReason::MissingTime => "missing_time",
            RejectReason::BadTime(_) => "bad_time",
            RejectReason::MissingKey(_) => "missing_key",
            RejectReason::MissingSequence(_) => "missing_sequence",
            RejectReason::UnknownField(_) => "unknown_field",
            RejectReason::FieldNameClash(_) => "field_name_clash",
            RejectReason::Internal(_) => "internal_error",
            RejectReason::LineTooLong(_) => "line_too_long",
            RejectReason::WrongFieldCount(_) => "wrong_field_count",
            RejectReason::UnterminatedQuote(_) => "unterminated_quote",
            RejectReason::Unreadable(_) => "unreadable",
            RejectReason::NullValue => "null_value",
            RejectReason::NoMagicByte(_) => "no_magic_byte",
            RejectReason::UnknownSchema(_) => "unknown_schema_id",
            RejectReason::Truncated(_) => "truncated",
            RejectReason::SchemaMismatch(_) => "schema_mismatch",
            RejectReason::BadEnvelope(_) => "bad_envelope",
            RejectReason::Expectation { .. } => "expectation",
        }
    }

    pub fn detail(&self) -> String {
        match self {
            RejectReason::MalformedJson(m) | RejectReason::WrongType(m) => m.clone(),
            RejectReason::NotOneObject => "a line must hold exactly one JSON object".into(),
            RejectReason::MissingTime => "the event-time field is missing or null".into(),
            RejectReason::BadTime(e) => e.to_string(),
            RejectReason::MissingKey(field) => {
                format!("key field {field} is missing or null: a row without its key is never merged with another")
            }
            RejectReason::MissingSequence(field) => {
                format!("sequence field {field} is missing or null: a change without its sequence cannot be ordered among its key's changes")
            }
            RejectReason::UnknownField(m)
            | RejectReason::FieldNameClash(m)
            | RejectReason::WrongFieldCount(m)
            | RejectReason::UnterminatedQuote(m)
            | RejectReason::Unreadable(m)
            | RejectReason::NoMagicByte(m)
            | RejectReason::UnknownSchema(m)
            | RejectReason::Truncated(m)
            | RejectReason::SchemaMismatch(m)
            | RejectReason::BadEnvelope(m) => m.clone(),
            RejectReason::NullValue => {
                "the message has no value (a tombstone); its key, if any, is not a record".into()
            }
            RejectReason::Internal(m) => {
                format!("decoding this record panicked ({m}); a bug in sluice, please report it")
            }
            RejectReason::Expectation { rule, sql } => {
                format!("{rule}: {sql} is false for this row (--expect-or-drop)")
            }
            RejectReason::LineTooLong(len) => format!(
                "the line is {len} bytes, more than a record may be ({} bytes); its first bytes are kept",
                LINE_BYTES_MAX
            ),
        }
    }
}

/// One rejected input record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reject {
    pub file: u32,
    pub offset: i64,
    pub reason: RejectReason,
    /// The line as read (lossy UTF-8), cut at [`RAW_BYTES_MAX`].
    pub raw: String,
}

/// Rejects keep at most this much of their raw line.
pub const RAW_BYTES_MAX: usize = 1 << 20;

/// A line longer than this is not read into memory (it bounds the reader's memory whatever
/// the input holds): it is a dead letter `line_too_long` with its first bytes ([`crate::Overlong`]).
pub const LINE_BYTES_MAX: usize = 64 << 20;
