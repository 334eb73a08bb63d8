//! Decoding rows that arrived as Arrow ([`Chunk::arrow`]: Avro messages) without JSON in
//! between, when they fit the record schema as they are ([`super::fit`]): the same event
//! times, time column, message columns, key checks and dead letters as the JSON path gives
//! them (through [`LineDecoder::complete`]), at the cost of a column copy at most.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;

use deltalake::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use deltalake::arrow::compute::concat_batches;
use deltalake::arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType};
use sluice_window::EventTime;

use super::fit::{MICROS_MAX, MICROS_MIN};
use super::{fit, DecodeError, Decoded, LineDecoder, RejectReason, Rows};
use crate::chunk::{ArrowRows, Chunk};

impl LineDecoder {
    /// The chunk's Arrow rows decoded directly, or `None` when a batch does not fit the
    /// record schema, or its time field is neither text nor a timestamp with a zone (the
    /// caller then reads them as JSON lines, where evolution and conversions decide). An
    /// error or a panic also gives `None`: the JSON path is the reference, and it isolates
    /// a record that causes one (E8).
    pub(super) fn decode_arrow(&self, chunk: &Chunk) -> Option<Decoded> {
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.try_decode_arrow(chunk))) {
            Ok(Ok(decoded)) => decoded,
            Ok(Err(_)) | Err(_) => None,
        }
    }

    fn try_decode_arrow(&self, chunk: &Chunk) -> Result<Option<Decoded>, DecodeError> {
        let mut parts: Vec<Decoded> = Vec::with_capacity(chunk.arrow.len());
        for rows in &chunk.arrow {
            match self.decode_rows(chunk, rows)? {
                Some(decoded) => parts.push(decoded),
                None => return Ok(None),
            }
        }
        let batches: Vec<&RecordBatch> = parts.iter().map(|d| &d.batch).collect();
        let batch = concat_batches(&self.schema, batches)?;
        let mut rejects = chunk.bad.clone();
        let (mut offsets, mut event_times) = (Vec::new(), Vec::new());
        for d in parts {
            offsets.extend(d.offsets);
            event_times.extend(d.event_times);
            rejects.extend(d.rejects);
        }
        rejects.sort_by_key(|r| r.offset);
        Ok(Some(Decoded {
            file: chunk.file,
            batch,
            offsets,
            event_times,
            rejects,
            added: Vec::new(),
            ignored: BTreeMap::new(),
            ignored_rows: 0,
            tombstones: 0,
        }))
    }

    /// One batch of Arrow rows, if it fits.
    fn decode_rows(&self, chunk: &Chunk, rows: &ArrowRows) -> Result<Option<Decoded>, DecodeError> {
        let Some(columns) = fit::columns(&self.schema, &rows.batch) else {
            return Ok(None);
        };
        let mut failed = vec![None; rows.batch.num_rows()];
        let times = match self.message_times(chunk, &rows.offsets, &mut failed) {
            Some(times) => times,
            None => match self.arrow_times(&columns, &mut failed) {
                Some(times) => times,
                None => return Ok(None),
            },
        };
        let decoded_rows = Rows {
            columns,
            times,
            failed,
            offsets: rows.offsets.clone(),
        };
        // A failed row's dead letter holds its JSON text, as the JSON path's would.
        let raw = |offset: i64| rows.json_line(offset);
        self.complete(chunk, decoded_rows, None, Vec::new(), raw)
            .map(Some)
    }

    /// Event times from the time field's column: text read in the time format, or a
    /// timestamp's instants; `None` for a column of another type.
    fn arrow_times(
        &self,
        columns: &[ArrayRef],
        failed: &mut [Option<RejectReason>],
    ) -> Option<Vec<EventTime>> {
        let batch = RecordBatch::try_new(self.schema.clone(), columns.to_vec()).ok()?;
        let array = self.time_field.array(&batch)?;
        let time = |row: usize| -> Result<EventTime, RejectReason> {
            if array.is_null(row) {
                return Err(RejectReason::MissingTime);
            }
            match array.data_type() {
                DataType::Utf8 => self
                    .options
                    .time
                    .parse_text(array.as_string::<i32>().value(row))
                    .map_err(RejectReason::BadTime),
                _ => Ok(EventTime::from_micros(
                    array.as_primitive::<TimestampMicrosecondType>().value(row),
                )),
            }
        };
        match array.data_type() {
            DataType::Utf8 => {}
            DataType::Timestamp(TimeUnit::Microsecond, Some(_))
                if !self.options.time.format.is_epoch() =>
            {
                // Instants of years 1 to 9999 only: the JSON path reads others' text itself.
                let micros = array.as_primitive::<TimestampMicrosecondType>();
                if micros
                    .values()
                    .iter()
                    .any(|v| !(MICROS_MIN..=MICROS_MAX).contains(v))
                {
                    return None;
                }
            }
            _ => return None,
        }
        Some(
            failed
                .iter_mut()
                .enumerate()
                .map(|(row, slot)| match time(row) {
                    Ok(t) => t,
                    Err(reason) => {
                        *slot = Some(reason);
                        EventTime::MIN
                    }
                })
                .collect(),
        )
    }
}
