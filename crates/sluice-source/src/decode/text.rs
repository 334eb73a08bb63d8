//! Decoding rows of text fields ([`Chunk::text`]: CSV records) without JSON in between: each
//! field's text is what arrow-json would hand over for the field's JSON value (a literal's
//! text, a string's text; nothing for an empty field), so the read batch is built from the
//! fields as they are and goes through the same conversions, event times, key checks and
//! dead letters as the JSON path's ([`LineDecoder::finish_with`]).
//!
//! A chunk is decoded this way only when that decides every row as the JSON path would: every
//! field is a record field by its own name, every value is UTF-8, and each column is read
//! as text (strings, numbers, timestamps, decimals, binary: converted exactly from text) or
//! is a boolean whose fields are all `true` or `false`. Any other chunk (a new field, a
//! field in another spelling, a date or nested column, a boolean column holding other text)
//! gives `None` and is read as JSON lines, where evolution and arrow-json decide.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use deltalake::arrow::array::{
    new_null_array, Array, ArrayRef, BinaryArray, BooleanArray, RecordBatch, StringArray,
};
use deltalake::arrow::datatypes::DataType;

use super::{DecodeError, Decoded, LineDecoder};
use crate::chunk::Chunk;
use crate::text_rows::TextRows;

impl LineDecoder {
    /// The chunk's text rows decoded directly, or `None` when the JSON path must decide them
    /// (see the module doc). An error or a panic also gives `None`: the JSON path is the
    /// reference, and it isolates a record that causes one (E8).
    pub(super) fn decode_text(&self, chunk: &Chunk, text: &TextRows) -> Option<Decoded> {
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.try_decode_text(chunk, text))) {
            Ok(Ok(decoded)) => decoded,
            Ok(Err(_)) | Err(_) => None,
        }
    }

    fn try_decode_text(
        &self,
        chunk: &Chunk,
        text: &TextRows,
    ) -> Result<Option<Decoded>, DecodeError> {
        let Some(read) = self.read_text(text) else {
            return Ok(None);
        };
        let mut decoded = self.finish_with(
            chunk,
            read,
            text.offsets.clone(),
            chunk.bad.clone(),
            |offset| text.json_line(offset),
        )?;
        decoded.rejects.sort_by_key(|r| r.offset);
        Ok(Some(decoded))
    }

    /// The batch arrow-json would read from the rows' JSON objects (the read schema's
    /// columns), or `None` if it cannot be built from the fields as they are.
    fn read_text(&self, text: &TextRows) -> Option<RecordBatch> {
        let read = &self.read;
        if text.names.iter().any(|name| read.index_of(name).is_err()) {
            return None;
        }
        let rows = text.offsets.len();
        let columns: Option<Vec<ArrayRef>> = read
            .fields()
            .iter()
            .map(|field| {
                let Some(i) = text.names.iter().position(|n| n == field.name()) else {
                    return Some(new_null_array(field.data_type(), rows));
                };
                let fields = &text.columns[i];
                match field.data_type() {
                    DataType::Utf8 => strings(fields),
                    DataType::Boolean => booleans(fields),
                    _ if fields.null_count() == rows => {
                        Some(new_null_array(field.data_type(), rows))
                    }
                    _ => None,
                }
            })
            .collect();
        RecordBatch::try_new(read.clone(), columns?).ok()
    }
}

/// The fields as text, if every one is UTF-8.
fn strings(fields: &BinaryArray) -> Option<ArrayRef> {
    StringArray::try_from_binary(fields.clone())
        .ok()
        .map(|a| Arc::new(a) as ArrayRef)
}

/// The fields as booleans, if every one is the literal `true` or `false`.
fn booleans(fields: &BinaryArray) -> Option<ArrayRef> {
    let values: Option<BooleanArray> = fields
        .iter()
        .map(|f| match f {
            None => Some(None),
            Some(b"true") => Some(Some(true)),
            Some(b"false") => Some(Some(false)),
            Some(_) => None,
        })
        .collect::<Option<Vec<Option<bool>>>>()
        .map(BooleanArray::from);
    values.map(|a| Arc::new(a) as ArrayRef)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use sluice_window::TimeFormat;

    use crate::decode::{DecodeOptions, Decoded};
    use crate::reader::FileFormat;
    use crate::{CsvOptions, LineDecoder, NdjsonSource};

    /// The chunks of a CSV file of `text`.
    fn chunks(text: impl AsRef<[u8]>) -> Vec<crate::Chunk> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.csv"), text).unwrap();
        let source = NdjsonSource::open(dir.path())
            .unwrap()
            .with_format(FileFormat::Csv(CsvOptions::default()));
        let mut reader = source.reader(&HashMap::new(), 1 << 20).unwrap();
        std::iter::from_fn(|| reader.next_chunk().unwrap()).collect()
    }

    fn decoder(schema: &str) -> LineDecoder {
        let spec: crate::RecordSchema = toml::from_str(schema).unwrap();
        let mut options = DecodeOptions::new("ts", TimeFormat::Rfc3339);
        options.key = vec!["id".into()];
        LineDecoder::new(spec.to_arrow().unwrap(), options).unwrap()
    }

    const SCHEMA: &str = r#"
        fields = [
          { name = "id", type = "long" },
          { name = "ts", type = "timestamp" },
          { name = "amount", type = "decimal(10,2)" },
          { name = "ratio", type = "double" },
          { name = "flag", type = "boolean" },
          { name = "note", type = "string" },
          { name = "day", type = "date" },
        ]
    "#;

    fn fates(d: &Decoded) -> Vec<(i64, String, String)> {
        d.rejects
            .iter()
            .map(|r| (r.offset, r.reason.detail(), r.raw.clone()))
            .collect()
    }

    #[test]
    fn csv_rows_land_directly_as_their_json_lines_would() {
        let text = "id,ts,amount,flag,note,ratio\n\
            1,2026-10-03T14:00:00Z,12.50,true,\"a, \"\"b\"\"\nc\",0.1\n\
            2,2026-10-03T14:00:01+02:00,-0.01,false,007,1e-3\n\
            x3,2026-10-03T14:00:02Z,1,,,\n\
            4,not a time,1.005,true,ü,9007199254740993\n\
            ,2026-10-03T14:00:04Z,,,,\n\
            6,,,,true,\n";
        let chunk = chunks(text).remove(0);
        let decoder = decoder(SCHEMA);
        let direct = decoder
            .decode_text(&chunk, chunk.text.as_ref().unwrap())
            .expect("decided directly");
        let by_json = decoder.clone().decode(&chunk.as_lines()).unwrap();
        assert_eq!(direct.batch, by_json.batch);
        assert_eq!(direct.offsets, by_json.offsets);
        assert_eq!(direct.event_times, by_json.event_times);
        assert_eq!(fates(&direct), fates(&by_json));
        let reasons: Vec<&str> = direct.rejects.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(
            reasons,
            ["wrong_type", "bad_time", "missing_key", "missing_time"],
            "{:?}",
            fates(&direct)
        );
        assert_eq!(direct.batch.num_rows(), 2);
    }

    #[test]
    fn chunks_the_fields_cannot_decide_are_left_to_the_json_path() {
        let decoder = decoder(SCHEMA);
        for text in [
            &b"id,ts,extra\n1,2026-10-03T14:00:00Z,x\n"[..],
            b"ID,ts\n1,2026-10-03T14:00:00Z\n",
            b"id,ts,flag\n1,2026-10-03T14:00:00Z,yes\n",
            b"id,ts,day\n1,2026-10-03T14:00:00Z,2026-10-03\n",
            b"id,ts,note\n1,2026-10-03T14:00:00Z,\xff\n",
        ] {
            let chunk = chunks(text).remove(0);
            let rows = chunk.text.as_ref().unwrap();
            assert!(
                decoder.decode_text(&chunk, rows).is_none(),
                "{}",
                String::from_utf8_lossy(text)
            );
            // Decoding the chunk decides it by its JSON lines.
            let decoded = decoder.clone().decode(&chunk).unwrap();
            let by_json = decoder.clone().decode(&chunk.as_lines()).unwrap();
            assert_eq!(decoded.batch, by_json.batch);
            assert_eq!(fates(&decoded), fates(&by_json));
        }
    }
}
