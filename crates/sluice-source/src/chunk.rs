//! What a source hands over: chunks of records at their positions.

use std::sync::Arc;

use crate::message_columns::MessageMeta;
use crate::reject::Reject;
use crate::text_rows::TextRows;

/// Where one event is in an NDJSON source, ordered as the source is read.
///
/// `file` is an ordinal of the file within the file list of this run, in read order (the
/// order the files arrived, [`crate::arrival`]): existing files get odd ordinals (`2i + 1`),
/// names that are not (or no longer) in the directory get the even ordinal of the slot where
/// they would sort. So positions read back from the table
/// compare correctly with positions of this run even if files were added or removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub file: u32,
    pub offset: i64,
}

/// A line longer than the reader takes, left out of its chunk: where it starts, how long it
/// is, where the next line starts, and its first [`crate::RAW_BYTES_MAX`] bytes. Decoding
/// makes it a dead letter `line_too_long`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlong {
    pub offset: i64,
    /// Bytes of the line, without its newline.
    pub len: u64,
    /// The offset after the line (and its newline).
    pub end: i64,
    pub head: Vec<u8>,
}

/// Complete lines of one file, read in one go; or messages of one log partition (Kafka), one
/// per line; or a CSV file's records as rows of text fields (at the records' offsets); or
/// rows that arrived as Arrow (Avro messages, a Parquet file's rows at their row numbers).
#[derive(Debug, Clone, Default)]
pub struct Chunk {
    /// Ordinal of the file (see [`Position`]).
    pub file: u32,
    /// Byte offset of `data[0]` in the file; for messages, the offset of the first one.
    pub start: i64,
    /// Whole lines; the last one may lack its newline only at the end of the file.
    pub data: Vec<u8>,
    /// For messages: the log offset of each line of `data`, ascending. `None` for a file,
    /// whose lines are at their byte offsets and whose blank lines are not records.
    pub message_offsets: Option<Vec<i64>>,
    /// A line too long to read, after `data` (which is then empty): the chunk ends after it.
    pub overlong: Option<Overlong>,
    /// Where the next chunk of the file starts, when `data` does not say: after the last
    /// record of a CSV chunk, or [`crate::compression::COMPRESSED_LEN`] after the last
    /// chunk of a compressed file.
    pub end_at: Option<i64>,
    /// Records the reader could not make a line of (a CSV record with the wrong field
    /// count, the damaged rest of a compressed file): dead letters as they are.
    pub bad: Vec<Reject>,
    /// Stored bytes of the file read for this chunk, when `data` is not them: a compressed
    /// file's (about: what was decompressed for it), a CSV file's (its records' bytes).
    pub stored_bytes: Option<u64>,
    /// For messages read with their own fields (`--kafka-columns`): each message's, in
    /// offset order.
    pub meta: Option<Arc<Vec<MessageMeta>>>,
    /// Records that arrived as Arrow rows (Avro messages, Parquet rows), in offset order, besides `data`'s
    /// lines (then none): decoding takes them into the record schema's columns as they are
    /// when they fit (`decode::fit`), else reads them as JSON lines ([`Chunk::as_lines`]).
    pub arrow: Vec<ArrowRows>,
    /// Records that arrived as named text fields (a CSV file's), besides `data`'s lines
    /// (then none): decoding reads their fields into the record schema's columns directly
    /// where it can decide the whole chunk that way, else reads them as JSON lines
    /// ([`Chunk::as_lines`]).
    pub text: Option<TextRows>,
}

/// Rows that arrived as Arrow, each at its record's offset.
#[derive(Debug, Clone)]
pub struct ArrowRows {
    pub batch: deltalake::arrow::array::RecordBatch,
    /// One per row, ascending.
    pub offsets: Vec<i64>,
}

impl ArrowRows {
    /// The row at `offset` as a JSON object's text, without its newline (empty if there is no
    /// row there, or it cannot be written as JSON).
    pub fn json_line(&self, offset: i64) -> Vec<u8> {
        let Ok(row) = self.offsets.binary_search(&offset) else {
            return Vec::new();
        };
        let mut text = crate::rows::json_lines(&self.batch.slice(row, 1)).unwrap_or_default();
        if text.last() == Some(&b'\n') {
            text.pop();
        }
        text
    }
}

impl Chunk {
    /// This chunk with its Arrow rows and text rows as JSON lines at their offsets (rows of
    /// a batch that cannot be written as JSON become dead letters `schema_mismatch`); a
    /// chunk of lines as it is.
    pub fn as_lines(&self) -> Chunk {
        if self.arrow.is_empty() && self.text.is_none() {
            return self.clone();
        }
        let mut rows: Vec<(i64, Vec<u8>)> = Vec::new();
        if let Some(text) = &self.text {
            rows.extend(text.json_lines());
        }
        let mut bad = self.bad.clone();
        for a in &self.arrow {
            match crate::rows::json_lines(&a.batch) {
                Ok(text) => rows.extend(
                    a.offsets
                        .iter()
                        .copied()
                        .zip(text.split(|b| *b == b'\n').map(<[u8]>::to_vec)),
                ),
                Err(e) => bad.extend(a.offsets.iter().map(|o| Reject {
                    file: self.file,
                    offset: *o,
                    reason: crate::reject::RejectReason::SchemaMismatch(format!(
                        "sluice cannot read this row: {e}"
                    )),
                    raw: String::new(),
                })),
            }
        }
        rows.sort_by_key(|(o, _)| *o);
        let mut chunk = Chunk::messages(self.file, rows.iter().map(|(o, l)| (*o, l.as_slice())));
        chunk.start = self.start;
        chunk.end_at = self.end_at;
        chunk.stored_bytes = self.stored_bytes;
        chunk.meta = self.meta.clone();
        chunk.bad = bad;
        chunk
    }

    /// Messages of one log partition as a chunk: one line each. A line break inside a
    /// message is read as a space (JSON allows it only as whitespace between tokens; inside
    /// a string it is invalid JSON either way); an empty message (a Kafka tombstone) stays an
    /// empty line, which decoding rejects: no message is skipped silently.
    pub fn messages<'m>(file: u32, messages: impl IntoIterator<Item = (i64, &'m [u8])>) -> Chunk {
        let mut data = Vec::new();
        let mut offsets = Vec::new();
        for (offset, payload) in messages {
            offsets.push(offset);
            let start = data.len();
            data.extend(
                payload
                    .iter()
                    .map(|b| if *b == b'\n' || *b == b'\r' { b' ' } else { *b }),
            );
            blank_bom(&mut data[start..]);
            data.push(b'\n');
        }
        debug_assert!(
            offsets.windows(2).all(|w| w[0] < w[1]),
            "E1: a chunk's messages are at increasing offsets"
        );
        Chunk {
            file,
            start: offsets.first().copied().unwrap_or(0),
            data,
            message_offsets: Some(offsets),
            ..Chunk::default()
        }
    }

    /// The source bytes this chunk took: what a run's progress and byte counts count.
    pub fn bytes_read(&self) -> u64 {
        self.stored_bytes.unwrap_or(self.data.len() as u64)
    }

    /// The offset after the chunk: where the next chunk of this file starts (for messages:
    /// the offset after the last one).
    pub fn end(&self) -> i64 {
        if let Some(end) = self.end_at {
            return end;
        }
        if let Some(o) = &self.overlong {
            return o.end;
        }
        match &self.message_offsets {
            Some(offsets) => offsets.last().map_or(self.start, |o| o + 1),
            None => self.start + self.data.len() as i64,
        }
    }

    /// `(offset, line without its newline)` for every record: every non-blank line of a
    /// file, every message.
    pub fn lines(&self) -> impl Iterator<Item = (i64, &[u8])> + '_ {
        let mut at = 0usize;
        let mut k = 0usize;
        std::iter::from_fn(move || {
            while at < self.data.len() {
                let rest = &self.data[at..];
                let len = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
                let line = &rest[..len];
                if let Some(offsets) = &self.message_offsets {
                    let offset = *offsets.get(k)?;
                    k += 1;
                    at += len + 1;
                    return Some((offset, line));
                }
                let offset = self.start + at as i64;
                at += len + 1;
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                if !line.iter().all(u8::is_ascii_whitespace) {
                    return Some((offset, line));
                }
            }
            None
        })
    }

    /// The chunk with only the records at `offsets` (at their own positions).
    pub fn only(&self, offsets: &[i64]) -> Chunk {
        self.filtered(|o| offsets.contains(&o))
    }

    /// The chunk without the records at `offsets` (the others at their own positions).
    pub fn without(&self, offsets: &[i64]) -> Chunk {
        self.filtered(|o| !offsets.contains(&o))
    }

    fn filtered(&self, keep: impl Fn(i64) -> bool) -> Chunk {
        if self.message_offsets.is_some() {
            let mut data = Vec::new();
            let mut offsets = Vec::new();
            for (offset, line) in self.lines().filter(|(o, _)| keep(*o)) {
                offsets.push(offset);
                data.extend_from_slice(line);
                data.push(b'\n');
            }
            return Chunk {
                file: self.file,
                start: offsets.first().copied().unwrap_or(self.start),
                data,
                message_offsets: Some(offsets),
                end_at: self.end_at,
                meta: self.meta.clone(),
                ..Chunk::default()
            };
        }
        // A file's records are at byte offsets: a record left out becomes blank (spaces),
        // which is no record.
        let mut data = self.data.clone();
        for (offset, line) in self.lines().filter(|(o, _)| !keep(*o)) {
            let from = (offset - self.start) as usize;
            data[from..from + line.len()].fill(b' ');
        }
        Chunk {
            file: self.file,
            start: self.start,
            data,
            overlong: self.overlong.clone(),
            end_at: self.end_at,
            ..Chunk::default()
        }
    }

    /// The record at `offset` as its text (empty if there is none): its line, or a row that
    /// arrived as Arrow as its JSON object (as [`Chunk::as_lines`] reads it).
    pub fn line_at(&self, offset: i64) -> std::borrow::Cow<'_, [u8]> {
        // Offsets ascend in each batch: a binary search (a dead letter per late row of a
        // chunk must not scan the chunk).
        let holds = |offsets: &[i64]| offsets.binary_search(&offset).is_ok();
        if let Some(rows) = self.arrow.iter().find(|a| holds(&a.offsets)) {
            return std::borrow::Cow::Owned(rows.json_line(offset));
        }
        if let Some(text) = self.text.as_ref().filter(|t| holds(&t.offsets)) {
            return std::borrow::Cow::Owned(text.json_line(offset));
        }
        std::borrow::Cow::Borrowed(self.text_line_at(offset))
    }

    fn text_line_at(&self, offset: i64) -> &[u8] {
        if self.message_offsets.is_some() {
            return self
                .lines()
                .find(|(o, _)| *o == offset)
                .map_or(&[][..], |(_, l)| l);
        }
        let at = (offset - self.start).clamp(0, self.data.len() as i64) as usize;
        let rest = &self.data[at..];
        &rest[..rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len())]
    }
}

/// A UTF-8 byte-order mark at the start of `data` (of a file, or of a message) becomes
/// spaces: JSON whitespace, so positions stay byte offsets and the first line still parses.
pub(crate) fn blank_bom(data: &mut [u8]) {
    if data.starts_with(crate::schema::BOM) {
        data[..3].fill(b' ');
    }
}
