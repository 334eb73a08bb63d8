//! Parquet files as a file source's records (`parquet:PATH`): a landing zone of Parquet
//! files read row group by row group, a record's position its row number in its file.
//!
//! Each row group is handed on as the Arrow batches the Parquet reader decodes
//! ([`Chunk::arrow`], at the rows' numbers): decoding puts their columns into the table's
//! types directly where every value fits exactly, and reads a batch as the JSON objects of
//! its rows (binary as base64 text, times as RFC 3339 text, nested columns as nested JSON)
//! where one does not, so decoding, evolution, keys and dead letters hold for Parquet
//! exactly as for JSON; a new table takes its column types from the first file's footer
//! ([`footer_types`]) rather than from values. A file is read by
//! ranges: its footer, then the column chunks of each row group from the resume row's on
//! (a restart skips the row groups before it). A file that cannot be read as Parquet (the
//! reader fails, or panics on it) is one dead letter `unreadable` and the run goes on; the
//! source's last file, in any run, if it starts as Parquet and has no footer yet, is waited
//! for (a Parquet file is complete once its footer is written; [`still_written`]).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use deltalake::arrow::datatypes::{Field, Schema, SchemaRef};
use deltalake::parquet::arrow::arrow_reader::{
    ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use deltalake::parquet::errors::ParquetError;
use deltalake::parquet::file::reader::{ChunkReader, Length};

use deltalake::arrow::array::RecordBatch;

use crate::chunk::{ArrowRows, Chunk};
use crate::compression::COMPRESSED_LEN;
use crate::file::SourceFile;
use crate::reject::{panic_message, Reject, RejectReason};
use crate::rows::table_field;
use crate::store::FileStore;

/// Rows per chunk: a few MB for typical rows, like an NDJSON chunk.
pub const ROWS_PER_CHUNK: usize = 8192;

/// A file's stored bytes by ranges, as the Parquet reader asks for them.
#[derive(Clone)]
struct StoredBytes {
    store: Arc<dyn FileStore>,
    file: SourceFile,
    /// The file's stored size (its `len` counts rows).
    size: u64,
    /// Stored bytes fetched so far.
    fetched: Arc<AtomicU64>,
}

impl Length for StoredBytes {
    fn len(&self) -> u64 {
        self.size
    }
}

impl ChunkReader for StoredBytes {
    type T = Box<dyn std::io::Read + Send>;

    fn get_read(&self, start: u64) -> Result<Self::T, ParquetError> {
        let inner = self
            .store
            .open(&self.file, start)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        // The reader takes one column chunk from here, not the rest of the file: what it
        // reads is counted as it reads it.
        Ok(Box::new(Counted {
            inner,
            fetched: self.fetched.clone(),
        }))
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes, ParquetError> {
        let bytes = self
            .store
            .read_range(&self.file, start, start + length as u64)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        self.fetched
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        if bytes.len() < length {
            return Err(ParquetError::EOF(format!(
                "{} bytes at {start} asked for, {} there",
                length,
                bytes.len()
            )));
        }
        Ok(Bytes::from(bytes))
    }
}

/// A reader of stored bytes that counts the bytes read through it.
struct Counted {
    inner: Box<dyn std::io::Read + Send>,
    fetched: Arc<AtomicU64>,
}

impl std::io::Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.fetched.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// One Parquet file being read, from a row on.
pub(crate) struct Rows {
    reader: ParquetRecordBatchReader,
    /// The row number of the next row.
    row: i64,
    fetched: Arc<AtomicU64>,
    fetched_at_cut: u64,
    ended: bool,
}

impl Rows {
    /// Opens `file` at row `start` (reading its footer): the row groups before the one
    /// holding `start` are skipped unread. An error says why the file cannot be read.
    pub fn open(store: Arc<dyn FileStore>, file: &SourceFile, start: i64) -> Result<Rows, String> {
        match catch_unwind(AssertUnwindSafe(|| Rows::try_open(store, file, start))) {
            Ok(opened) => opened.map_err(|e| e.to_string()),
            Err(panic) => Err(panicked(panic.as_ref())),
        }
    }

    fn try_open(
        store: Arc<dyn FileStore>,
        file: &SourceFile,
        start: i64,
    ) -> Result<Rows, ParquetError> {
        let fetched = Arc::new(AtomicU64::new(0));
        let bytes = StoredBytes {
            store,
            file: file.clone(),
            size: file.size,
            fetched: fetched.clone(),
        };
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)?;
        // The row groups from the one holding `start` on, and of those the rows from `start`
        // on (the others are not decoded).
        let (mut groups, mut skip, mut selected) = (Vec::new(), 0usize, 0i64);
        let mut first_row = 0i64;
        for (i, group) in builder.metadata().row_groups().iter().enumerate() {
            let end_row = first_row + group.num_rows();
            if end_row > start {
                if groups.is_empty() {
                    skip = (start - first_row).max(0) as usize;
                }
                groups.push(i);
                selected += group.num_rows();
            }
            first_row = end_row;
        }
        let selection = RowSelection::from(vec![
            RowSelector::skip(skip),
            RowSelector::select((selected as usize).saturating_sub(skip)),
        ]);
        let reader = builder
            .with_row_groups(groups)
            .with_row_selection(selection)
            .with_batch_size(ROWS_PER_CHUNK)
            .build()?;
        Ok(Rows {
            reader,
            row: start.max(0),
            fetched,
            fetched_at_cut: 0,
            ended: false,
        })
    }

    /// The next chunk of rows of the file (`ordinal`); at its end one empty chunk that ends
    /// it (its offset then says it was read to its end), then `None`. A row group that
    /// cannot be decoded ends the file with a dead letter `unreadable` at its first row.
    pub fn next_chunk(&mut self, ordinal: u32) -> Option<Chunk> {
        if self.ended {
            return None;
        }
        let mut chunk = match self.next_batch() {
            Some(Ok(batch)) => {
                let n = batch.num_rows() as i64;
                let offsets: Vec<i64> = (self.row..self.row + n).collect();
                let start = self.row;
                self.row += n;
                Chunk {
                    file: ordinal,
                    start,
                    // Rows, not lines: `data` holds none.
                    message_offsets: Some(Vec::new()),
                    end_at: Some(self.row),
                    arrow: vec![ArrowRows { batch, offsets }],
                    ..Chunk::default()
                }
            }
            Some(Err(why)) => self.unreadable(ordinal, &why),
            None => {
                self.ended = true;
                end_chunk(ordinal, self.row, Vec::new())
            }
        };
        let now = self.fetched.load(Ordering::Relaxed);
        chunk.stored_bytes = Some(now - std::mem::replace(&mut self.fetched_at_cut, now));
        Some(chunk)
    }

    /// The reader's next batch; an error (or a panic of the reader) says why the rest of the
    /// file cannot be read.
    fn next_batch(&mut self) -> Option<Result<RecordBatch, String>> {
        let next = catch_unwind(AssertUnwindSafe(|| {
            self.reader.next().map(|r| r.map_err(|e| e.to_string()))
        }));
        next.unwrap_or_else(|panic| Some(Err(panicked(panic.as_ref()))))
    }

    /// The rest of the file as one dead letter.
    fn unreadable(&mut self, ordinal: u32, why: &str) -> Chunk {
        self.ended = true;
        end_chunk(ordinal, self.row, vec![unreadable(ordinal, self.row, why)])
    }
}

/// The chunk that ends a Parquet file (`ordinal`) at row `start`, with the dead letters
/// `bad`: its offset then says the file was read to its end.
/// Whether `file`, which cannot be read as Parquet, may be a Parquet file still being
/// written: it is empty or starts as one (`PAR1`) but does not end as one yet (its footer is
/// written last). A file that does not start as Parquet never becomes one.
pub(crate) fn still_written(store: &dyn FileStore, file: &SourceFile) -> bool {
    const MAGIC: &[u8] = b"PAR1";
    if file.size < MAGIC.len() as u64 {
        return true;
    }
    let starts = store.read_range(file, 0, MAGIC.len() as u64);
    let ends = store.read_range(file, file.size - MAGIC.len() as u64, file.size);
    matches!((starts, ends), (Ok(s), Ok(e)) if s == MAGIC && (e != MAGIC || file.size < 12))
}

pub(crate) fn end_chunk(ordinal: u32, start: i64, bad: Vec<Reject>) -> Chunk {
    Chunk {
        file: ordinal,
        start,
        message_offsets: Some(Vec::new()),
        end_at: Some(COMPRESSED_LEN as i64),
        bad,
        ..Chunk::default()
    }
}

/// Why a file cannot be read, when the Parquet reader panicked on it.
fn panicked(panic: &(dyn std::any::Any + Send)) -> String {
    format!("the Parquet reader failed on it ({})", panic_message(panic))
}

/// A dead letter for the rows of a Parquet file from `row` on.
pub(crate) fn unreadable(ordinal: u32, row: i64, why: &str) -> Reject {
    Reject {
        file: ordinal,
        offset: row,
        reason: RejectReason::Unreadable(format!(
            "not readable as Parquet from row {row} on: {why}"
        )),
        raw: String::new(),
    }
}

/// The column types of the Parquet file `file`, from its footer, as the types a table
/// stores (see [`table_field`]); `None` for a file that cannot be read as Parquet.
pub fn footer_types(store: Arc<dyn FileStore>, file: &SourceFile) -> Option<SchemaRef> {
    let bytes = StoredBytes {
        store,
        file: file.clone(),
        size: file.size,
        fetched: Arc::new(AtomicU64::new(0)),
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).ok()?;
    let fields: Vec<Field> = builder
        .schema()
        .fields()
        .iter()
        .map(|f| table_field(f))
        .collect();
    Some(Arc::new(Schema::new(fields)))
}

#[cfg(test)]
mod tests;
