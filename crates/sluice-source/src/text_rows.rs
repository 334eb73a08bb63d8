//! Records of named text fields (a CSV file's records), handed to decoding as columns of
//! their fields' bytes rather than as JSON text.
//!
//! A field means what it would as a JSON value: a number or boolean literal as it stands
//! (`42`, `-1.5e3`, `true`), any other text a string; an empty field is null. Decoding reads
//! the columns into the record's types directly ([`crate::decode`]); where it cannot decide
//! a chunk that way (a field it does not know, text that is not UTF-8, a column type it does
//! not read from text), it reads the rows as the JSON objects [`TextRows::json_lines`]
//! writes, so a record lands the same either way.

use std::sync::Arc;

use deltalake::arrow::array::{Array, BinaryArray, BinaryBuilder};

/// Rows of named text fields, each at its record's offset.
#[derive(Debug, Clone)]
pub struct TextRows {
    /// The fields' names, one per column.
    pub names: Arc<[String]>,
    /// The names as JSON strings (`"name"`), as [`TextRows::json_lines`] writes them.
    pub keys: Arc<[Vec<u8>]>,
    /// One per name: each row's field; null where the field is empty.
    pub columns: Vec<BinaryArray>,
    /// One per row, ascending.
    pub offsets: Vec<i64>,
}

impl TextRows {
    /// The rows as JSON lines, each row's object (empty fields left out) at its offset.
    pub fn json_lines(&self) -> impl Iterator<Item = (i64, Vec<u8>)> + '_ {
        self.offsets.iter().enumerate().map(|(row, offset)| {
            let mut line = Vec::new();
            self.write_object(row, &mut line);
            (*offset, line)
        })
    }

    /// The row at `offset` as a JSON object's text (empty if there is none).
    pub fn json_line(&self, offset: i64) -> Vec<u8> {
        let mut line = Vec::new();
        if let Ok(row) = self.offsets.binary_search(&offset) {
            self.write_object(row, &mut line);
        }
        line
    }

    /// `{"a":1,"b":"x"}`, leaving out empty fields.
    fn write_object(&self, row: usize, out: &mut Vec<u8>) {
        let fields = self
            .columns
            .iter()
            .map(|c| (!c.is_null(row)).then(|| c.value(row)));
        write_object(&self.keys, fields, out);
    }
}

/// Builds [`TextRows`] record by record.
pub(crate) struct TextRowsBuilder {
    columns: Vec<BinaryBuilder>,
    offsets: Vec<i64>,
}

impl TextRowsBuilder {
    pub fn new(fields: usize, bytes: usize) -> Self {
        TextRowsBuilder {
            columns: (0..fields)
                .map(|_| BinaryBuilder::with_capacity(1024, bytes / fields.max(1)))
                .collect(),
            offsets: Vec::new(),
        }
    }

    /// A record at `offset` with one field per column.
    pub fn push<'f>(&mut self, offset: i64, fields: impl Iterator<Item = &'f [u8]>) {
        self.offsets.push(offset);
        for (column, field) in self.columns.iter_mut().zip(fields) {
            match field.is_empty() {
                true => column.append_null(),
                false => column.append_value(field),
            }
        }
    }

    pub fn rows(&self) -> usize {
        self.offsets.len()
    }

    pub fn finish(mut self, names: Arc<[String]>, keys: Arc<[Vec<u8>]>) -> TextRows {
        TextRows {
            names,
            keys,
            columns: self.columns.iter_mut().map(BinaryBuilder::finish).collect(),
            offsets: self.offsets,
        }
    }
}

/// `{"a":1,"b":"x"}` of `keys` (JSON strings) and their fields, leaving out empty (`None`)
/// ones.
pub(crate) fn write_object<'f>(
    keys: &[Vec<u8>],
    fields: impl Iterator<Item = Option<&'f [u8]>>,
    out: &mut Vec<u8>,
) {
    out.push(b'{');
    let mut first = true;
    for (key, value) in keys.iter().zip(fields) {
        let Some(value) = value.filter(|v| !v.is_empty()) else {
            continue;
        };
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(key);
        out.push(b':');
        if is_json_literal(value) {
            out.extend_from_slice(value);
        } else {
            json_string(value, out);
        }
    }
    out.push(b'}');
}

/// Whether `text` is a JSON number or boolean literal as it stands.
pub(crate) fn is_json_literal(text: &[u8]) -> bool {
    if let b"true" | b"false" = text {
        return true;
    }
    let mut i = 0;
    let digits = |i: &mut usize| {
        let from = *i;
        while *i < text.len() && text[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > from
    };
    if text.first() == Some(&b'-') {
        i += 1;
    }
    match text.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            digits(&mut i);
        }
        _ => return false,
    }
    if text.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(text.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(text.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == text.len()
}

/// `text` as a JSON string (its bytes as they are; bad UTF-8 makes the line malformed JSON,
/// a dead letter as for a JSON file).
pub(crate) fn json_string(text: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    // Runs of bytes that need no escape are copied whole (most fields are one such run).
    let mut from = 0;
    for (i, &b) in text.iter().enumerate() {
        if b != b'"' && b != b'\\' && b >= 0x20 {
            continue;
        }
        out.extend_from_slice(&text[from..i]);
        from = i + 1;
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
        }
    }
    out.extend_from_slice(&text[from..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_literals_are_told_from_text() {
        for yes in ["0", "-1", "12.5", "1e9", "-0.5E-3", "true", "false"] {
            assert!(is_json_literal(yes.as_bytes()), "{yes}");
        }
        for no in [
            "007", "1.", ".5", "+1", "1e", "True", "NaN", "1,5", " 1", "0x10", "-",
        ] {
            assert!(!is_json_literal(no.as_bytes()), "{no}");
        }
    }
}
