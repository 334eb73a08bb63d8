//! NDJSON lines to Arrow, with every bad line kept as a [`Reject`].

use deltalake::arrow::array::{Array, AsArray, BooleanArray, RecordBatch};
use deltalake::arrow::compute::filter_record_batch;
use deltalake::arrow::datatypes::{
    DataType, Int64Type, SchemaRef, TimeUnit, TimestampMicrosecondType,
};
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::json::reader::{Decoder, ReaderBuilder};
use sluice_window::{EventTime, TimeError, TimeFormat};

use crate::ndjson::Chunk;

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("time field {0:?} is not in the record schema")]
    NoTimeField(String),
    #[error("time field {field:?} has type {kind}, but time format {format} needs {needs}")]
    TimeFieldType {
        field: String,
        kind: DataType,
        format: &'static str,
        needs: &'static str,
    },
    #[error("arrow failed on lines it had accepted: {0}")]
    Arrow(#[from] ArrowError),
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
}

impl RejectReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            RejectReason::MalformedJson(_) => "malformed_json",
            RejectReason::WrongType(_) => "wrong_type",
            RejectReason::NotOneObject => "not_one_object",
            RejectReason::MissingTime => "missing_time",
            RejectReason::BadTime(_) => "bad_time",
        }
    }

    pub fn detail(&self) -> String {
        match self {
            RejectReason::MalformedJson(m) | RejectReason::WrongType(m) => m.clone(),
            RejectReason::NotOneObject => "a line must hold exactly one JSON object".into(),
            RejectReason::MissingTime => "the event-time field is missing or null".into(),
            RejectReason::BadTime(e) => e.to_string(),
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

/// The good rows of one chunk, with their positions and event times, and its rejects.
#[derive(Debug)]
pub struct Decoded {
    pub file: u32,
    /// Data columns, in record-schema order.
    pub batch: RecordBatch,
    /// Byte offset of each row's line.
    pub offsets: Vec<i64>,
    pub event_times: Vec<EventTime>,
    pub rejects: Vec<Reject>,
}

/// Decodes chunks of NDJSON lines against a fixed schema.
#[derive(Debug, Clone)]
pub struct LineDecoder {
    schema: SchemaRef,
    time_index: usize,
    time_format: TimeFormat,
}

impl LineDecoder {
    pub fn new(
        schema: SchemaRef,
        time_field: &str,
        time_format: TimeFormat,
    ) -> Result<Self, DecodeError> {
        let time_index = schema
            .index_of(time_field)
            .map_err(|_| DecodeError::NoTimeField(time_field.to_string()))?;
        let kind = schema.field(time_index).data_type();
        let ok = match time_format {
            TimeFormat::Rfc3339 => matches!(
                kind,
                DataType::Utf8 | DataType::Timestamp(TimeUnit::Microsecond, _)
            ),
            _ => matches!(kind, DataType::Int64 | DataType::Int32),
        };
        if !ok {
            let needs = if time_format == TimeFormat::Rfc3339 {
                "string"
            } else {
                "long"
            };
            return Err(DecodeError::TimeFieldType {
                field: time_field.to_string(),
                kind: kind.clone(),
                format: time_format.name(),
                needs,
            });
        }
        Ok(LineDecoder {
            schema,
            time_index,
            time_format,
        })
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn decoder(&self, rows: usize) -> Result<Decoder, ArrowError> {
        ReaderBuilder::new(self.schema.clone())
            .with_batch_size(rows.max(1))
            .build_decoder()
    }

    pub fn decode(&self, chunk: &Chunk) -> Result<Decoded, DecodeError> {
        let lines: Vec<(i64, &[u8])> = chunk.lines().collect();
        let mut rejects = Vec::new();
        let (batch, offsets) = match self.decode_all(&chunk.data, lines.len()) {
            Some(batch) => (batch, lines.iter().map(|(o, _)| *o).collect::<Vec<_>>()),
            None => {
                // Slow path: find the bad lines one by one, then decode the good ones together.
                let mut good = Vec::with_capacity(chunk.data.len());
                let mut offsets = Vec::with_capacity(lines.len());
                for (offset, line) in &lines {
                    match self.check_line(line) {
                        Ok(()) => {
                            good.extend_from_slice(line);
                            good.push(b'\n');
                            offsets.push(*offset);
                        }
                        Err(reason) => rejects.push(reject(chunk.file, *offset, reason, line)),
                    }
                }
                let batch = self
                    .decode_all(&good, offsets.len())
                    .map_or_else(|| self.decode_strict(&good, offsets.len()), Ok)?;
                (batch, offsets)
            }
        };
        self.extract_times(chunk, &lines, batch, offsets, rejects)
    }

    /// Decodes `data` holding exactly `rows` objects; `None` if any line is bad.
    fn decode_all(&self, data: &[u8], rows: usize) -> Option<RecordBatch> {
        let mut decoder = self.decoder(rows + 1).ok()?;
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
            .unwrap_or_else(|| RecordBatch::new_empty(self.schema.clone()));
        (batch.num_rows() == rows).then_some(batch)
    }

    fn decode_strict(&self, data: &[u8], rows: usize) -> Result<RecordBatch, DecodeError> {
        let mut decoder = self.decoder(rows + 1)?;
        decoder.decode(data)?;
        Ok(decoder
            .flush()?
            .unwrap_or_else(|| RecordBatch::new_empty(self.schema.clone())))
    }

    fn check_line(&self, line: &[u8]) -> Result<(), RejectReason> {
        if line.trim_ascii_start().first() != Some(&b'{') {
            return Err(RejectReason::NotOneObject);
        }
        let mut decoder = self
            .decoder(2)
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

    fn extract_times(
        &self,
        chunk: &Chunk,
        lines: &[(i64, &[u8])],
        batch: RecordBatch,
        offsets: Vec<i64>,
        mut rejects: Vec<Reject>,
    ) -> Result<Decoded, DecodeError> {
        let column = batch.column(self.time_index);
        let mut times = Vec::with_capacity(batch.num_rows());
        let mut keep: Vec<bool> = Vec::with_capacity(batch.num_rows());
        let format = self.time_format;
        for (row, &offset) in offsets.iter().enumerate() {
            let parsed = if column.is_null(row) {
                Err(RejectReason::MissingTime)
            } else {
                match column.data_type() {
                    DataType::Utf8 => format.parse_str(column.as_string::<i32>().value(row)),
                    DataType::Int64 => {
                        format.from_integer(column.as_primitive::<Int64Type>().value(row))
                    }
                    DataType::Int32 => format.from_integer(
                        column
                            .as_primitive::<deltalake::arrow::datatypes::Int32Type>()
                            .value(row) as i64,
                    ),
                    DataType::Timestamp(..) => Ok(EventTime::from_micros(
                        column.as_primitive::<TimestampMicrosecondType>().value(row),
                    )),
                    _ => unreachable!("LineDecoder::new checked the time field's type"),
                }
                .map_err(RejectReason::BadTime)
            };
            match parsed {
                Ok(t) => {
                    times.push(t);
                    keep.push(true);
                }
                Err(reason) => {
                    let line = lines
                        .binary_search_by_key(&offset, |(o, _)| *o)
                        .map(|i| lines[i].1)
                        .unwrap_or_default();
                    rejects.push(reject(chunk.file, offset, reason, line));
                    keep.push(false);
                }
            }
        }
        let (batch, offsets) = if keep.iter().all(|k| *k) {
            (batch, offsets)
        } else {
            let mask = BooleanArray::from(keep.clone());
            let offsets = offsets
                .into_iter()
                .zip(&keep)
                .filter(|(_, k)| **k)
                .map(|(o, _)| o)
                .collect();
            (filter_record_batch(&batch, &mask)?, offsets)
        };
        rejects.sort_by_key(|r| r.offset);
        Ok(Decoded {
            file: chunk.file,
            batch,
            offsets,
            event_times: times,
            rejects,
        })
    }
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
mod tests {
    use std::sync::Arc;

    use deltalake::arrow::datatypes::{Field, Schema};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
        ]))
    }

    fn chunk(text: &str) -> Chunk {
        Chunk {
            file: 1,
            start: 100,
            data: text.as_bytes().to_vec(),
            message_offsets: None,
        }
    }

    #[test]
    fn every_message_is_a_row_or_a_reject_at_its_offset() {
        let d = LineDecoder::new(schema(), "ts", TimeFormat::Rfc3339).unwrap();
        let messages: Vec<(i64, &[u8])> = vec![
            (7, br#"{"ts":"2026-10-03T14:00:00Z","n":1}"#),
            (8, b""),
            (9, b"{\"ts\":\n\"2026-10-03T14:00:01Z\",\"n\":2}"),
            (12, b"not json"),
        ];
        let out = d.decode(&Chunk::messages(1, messages)).unwrap();
        assert_eq!(out.offsets, vec![7, 9]);
        let rejected: Vec<(i64, &str)> = out
            .rejects
            .iter()
            .map(|r| (r.offset, r.reason.as_str()))
            .collect();
        assert_eq!(
            rejected,
            vec![(8, "not_one_object"), (12, "not_one_object")]
        );
        assert_eq!(Chunk::messages(1, [(12i64, &b"x"[..])]).end(), 13);
    }

    #[test]
    fn clean_chunks_decode_in_one_pass() {
        let d = LineDecoder::new(schema(), "ts", TimeFormat::Rfc3339).unwrap();
        let out = d
            .decode(&chunk("{\"ts\":\"2026-10-03T14:00:00Z\",\"n\":1}\n\n{\"ts\":\"2026-10-03T15:00:00Z\",\"n\":2,\"extra\":true}\n"))
            .unwrap();
        assert_eq!(out.batch.num_rows(), 2);
        assert_eq!(out.offsets, vec![100, 137]);
        assert!(out.rejects.is_empty());
        assert_eq!(out.event_times[1].to_rfc3339(), "2026-10-03T15:00:00Z");
    }

    #[test]
    fn bad_lines_are_rejected_with_position_and_reason_and_good_ones_kept() {
        let d = LineDecoder::new(schema(), "ts", TimeFormat::Rfc3339).unwrap();
        let text = [
            r#"{"ts":"2026-10-03T14:00:00Z","n":1}"#,
            r#"{"ts":"2026-10-03T14:00:00Z","n":"#,
            r#"{"ts":"2026-10-03T14:00:00Z","n":"three"}"#,
            r#"{"n":4}"#,
            r#"{"ts":"not a time","n":5}"#,
            r#"{"ts":"2026-10-03T14:00:00Z","n":6} {"ts":"2026-10-03T14:00:00Z","n":7}"#,
            r#"[1,2]"#,
            r#"{"ts":"2026-10-03T14:00:09Z","n":8}"#,
        ]
        .join("\n");
        let out = d.decode(&chunk(&text)).unwrap();
        let ns = out.batch.column(1).as_primitive::<Int64Type>();
        assert_eq!(ns.values().to_vec(), vec![1, 8]);
        let reasons: Vec<&str> = out.rejects.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "malformed_json",
                "wrong_type",
                "missing_time",
                "bad_time",
                "not_one_object",
                "not_one_object"
            ]
        );
        let mut offsets: Vec<i64> = out.offsets.clone();
        offsets.extend(out.rejects.iter().map(|r| r.offset));
        offsets.sort();
        assert_eq!(offsets.len(), 8, "every line is either a row or a reject");
        assert_eq!(out.rejects[0].raw, r#"{"ts":"2026-10-03T14:00:00Z","n":"#);
    }

    #[test]
    fn epoch_times_need_integer_fields() {
        assert!(matches!(
            LineDecoder::new(schema(), "ts", TimeFormat::EpochMillis),
            Err(DecodeError::TimeFieldType { .. })
        ));
        assert!(matches!(
            LineDecoder::new(schema(), "nope", TimeFormat::Rfc3339),
            Err(DecodeError::NoTimeField(_))
        ));
        let d = LineDecoder::new(schema(), "n", TimeFormat::EpochSeconds).unwrap();
        let out = d
            .decode(&chunk("{\"n\":1791037500}\n{\"n\":-99999999999999999}\n"))
            .unwrap();
        assert_eq!(
            out.event_times,
            vec![EventTime::from_micros(1_791_037_500_000_000)]
        );
        assert_eq!(out.rejects[0].reason.as_str(), "bad_time");
    }
}
