//! Reads a file source's files in order, in chunks of whole records: NDJSON lines, or CSV
//! records as rows of text fields ([`crate::csv`]); from stored or decompressed bytes
//! ([`crate::compression`]); or Parquet rows as Arrow batches ([`crate::parquet`]). Each
//! file starts at its resume offset.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::chunk::{blank_bom, Chunk, Overlong};
use crate::compression::{is_cut_short, Compression, COMPRESSED_LEN};
use crate::csv::{CsvOptions, Header};
use crate::file::{ordinal, SourceError, SourceFile};
use crate::reject::{Reject, RejectReason, LINE_BYTES_MAX};
use crate::store::FileStore;

/// How a file source's records are written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FileFormat {
    /// One JSON object per line.
    #[default]
    Ndjson,
    Csv(CsvOptions),
    /// Parquet files: a record is a row, its position its row number.
    Parquet,
}

impl FileFormat {
    pub fn name(&self) -> &'static str {
        match self {
            FileFormat::Ndjson => "ndjson",
            FileFormat::Csv(_) => "csv",
            FileFormat::Parquet => "parquet",
        }
    }

    /// The end of the last whole record of `data` (which starts at a record).
    fn last_record_end(&self, data: &[u8]) -> Option<usize> {
        match self {
            FileFormat::Ndjson => memchr::memrchr(b'\n', data).map(|i| i + 1),
            FileFormat::Csv(o) => o.last_record_end(data),
            FileFormat::Parquet => None,
        }
    }

    /// Whether `tail`, a file's last record without its line end, is whole: a complete JSON
    /// value, or a CSV record whose quotes close with at least as many fields as `header`
    /// names.
    fn is_whole_record(&self, tail: &[u8], header: Option<&Header>) -> bool {
        match self {
            FileFormat::Ndjson => serde_json::from_slice::<serde::de::IgnoredAny>(tail).is_ok(),
            FileFormat::Csv(o) => o.is_whole_record(tail, header.map(|h| h.names().len())),
            FileFormat::Parquet => true,
        }
    }
}

/// The file being read: its stream, and the bytes read past the last chunk.
struct Open {
    stream: Box<dyn Read + Send>,
    /// Stored bytes read so far, and when the last chunk was cut (compressed files).
    stored: Arc<AtomicU64>,
    stored_at_cut: u64,
    /// Offset of `carry[0]` in the file (decompressed, for a compressed file).
    at: i64,
    carry: Vec<u8>,
    eof: bool,
    /// A CSV file's columns.
    header: Option<Header>,
}

/// Reads the files of a source in order, in chunks of whole records.
pub struct FileReader {
    store: Arc<dyn FileStore>,
    files: Vec<SourceFile>,
    starts: Vec<i64>,
    index: usize,
    open: Option<Open>,
    /// The Parquet file being read.
    rows: Option<crate::parquet::Rows>,
    chunk_bytes: usize,
    line_bytes_max: usize,
    format: FileFormat,
    /// A followed run: it looks again every poll interval, so a wait is said at info level
    /// (a bounded run warns), and the last file's torn last line waits for its line end.
    following: bool,
}

impl FileReader {
    /// Reads `files` of `store` (their records written in `format`), each from its offset
    /// in `starts`; `following`: the last file may still be written.
    pub(crate) fn new(
        store: Arc<dyn FileStore>,
        files: Vec<SourceFile>,
        starts: Vec<i64>,
        chunk_bytes: usize,
        format: FileFormat,
        following: bool,
    ) -> Self {
        FileReader {
            store,
            files,
            starts,
            index: 0,
            open: None,
            rows: None,
            // Any size works (a line longer than a chunk is read whole); the CLI asks for >= 4 KiB.
            chunk_bytes: chunk_bytes.max(1),
            line_bytes_max: LINE_BYTES_MAX,
            format,
            following,
        }
    }

    /// Lines longer than `bytes` are dead letters (tests; [`LINE_BYTES_MAX`] otherwise).
    pub fn with_line_bytes_max(mut self, bytes: usize) -> Self {
        self.line_bytes_max = bytes.max(1);
        self
    }

    /// The next chunk, or `None` at the end of the last file.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, SourceError> {
        if self.format == FileFormat::Parquet {
            return Ok(self.next_rows());
        }
        while self.index < self.files.len() {
            if self.open.is_none() {
                let start = self.starts[self.index];
                if start as u64 >= self.files[self.index].len {
                    self.index += 1;
                    continue;
                }
                match self.open_file(start)? {
                    Some(open) => self.open = Some(open),
                    None => {
                        self.index = self.files.len();
                        break;
                    }
                }
            }
            if let Some(chunk) = self.read_chunk()? {
                return Ok(Some(chunk));
            }
            self.open = None;
            self.index += 1;
        }
        Ok(None)
    }

    /// The next chunk of Parquet rows. A file that cannot be opened as Parquet is one dead
    /// letter, unless it is the last of a followed source (its footer may not be written
    /// yet: it is read again at the next look).
    fn next_rows(&mut self) -> Option<Chunk> {
        while self.index < self.files.len() {
            let ordinal = self.ordinal();
            let rows = match self.rows.take() {
                Some(rows) => rows,
                None => {
                    let start = self.starts[self.index];
                    if start as u64 >= self.file().len {
                        self.index += 1;
                        continue;
                    }
                    match crate::parquet::Rows::open(self.store.clone(), self.file(), start) {
                        Ok(rows) => rows,
                        Err(_)
                            if crate::parquet::still_written(self.store.as_ref(), self.file()) =>
                        {
                            self.wait_for_file("it has no Parquet footer yet");
                            return None;
                        }
                        Err(why) => {
                            self.index += 1;
                            let bad = crate::parquet::unreadable(ordinal, start, &why);
                            return Some(crate::parquet::end_chunk(ordinal, start, vec![bad]));
                        }
                    }
                }
            };
            if let Some(chunk) = self.rows.insert(rows).next_chunk(ordinal) {
                return Some(chunk);
            }
            self.rows = None;
            self.index += 1;
        }
        None
    }

    fn file(&self) -> &SourceFile {
        &self.files[self.index]
    }

    fn ordinal(&self) -> u32 {
        ordinal(self.index)
    }

    /// The file being read is incomplete (`why`): still being written. It is read no
    /// further in this pass, nor are the files after it (files are read in the order they
    /// arrived, and a file's records come before the next file's): the next pass, or the
    /// next run, reads on from its last whole record once it is complete. Never a dead
    /// letter: an incomplete file is not a damaged one.
    /// A bounded run warns (the next run reads on); a followed one, which looks again every
    /// poll interval, says so at info level.
    fn wait_for_file(&mut self, why: &str) {
        let later = self.files.len() - self.index - 1;
        let file = self.file().path.display();
        let never = match later {
            0 => "",
            _ => " (move it out of the source if it never will be)",
        };
        if self.following {
            tracing::info!(%file, later_files = later, "waiting for a file still being written: {why}");
        } else {
            tracing::warn!(%file, later_files = later, "waiting for a file still being written: {why}; the next run reads it (and the files after it) once it is complete{never}");
        }
        self.index = self.files.len();
    }

    /// Whether the file being read is the source's last: it may still be written, in any
    /// run (a file is read to its end only once it is complete).
    fn is_last(&self) -> bool {
        self.index + 1 == self.files.len()
    }

    fn is_last_followed(&self) -> bool {
        self.following && self.is_last()
    }

    fn io(&self, source: std::io::Error) -> SourceError {
        SourceError::Io {
            path: self.file().path.clone(),
            source,
        }
    }

    /// Opens the current file at `start`; `None` if it is a compressed file still being
    /// written (cut short before `start`).
    fn open_file(&mut self, start: i64) -> Result<Option<Open>, SourceError> {
        let file = self.file();
        let csv = match &self.format {
            FileFormat::Csv(o) if o.header => Some(o),
            _ => None,
        };
        let mut from = start as u64;
        let mut header = None;
        if let Some(options) = csv {
            let (h, header_end) = self.read_header(options)?;
            header = Some(h);
            from = from.max(header_end);
        }
        let stored = Arc::new(AtomicU64::new(0));
        let opened = match file.compression {
            Compression::None => self.store.open(file, from),
            c => self.store.open(file, 0).and_then(|s| {
                let counted = Box::new(Counting(s, stored.clone()));
                c.decompress(counted, from).map_err(|e| self.io(e))
            }),
        };
        let stream = match opened {
            Ok(s) => s,
            Err(SourceError::Io { source, .. })
                if file.compression.is_compressed() && is_cut_short(&source) =>
            {
                self.wait_for_file("its compressed stream ends before it is complete");
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        Ok(Some(Open {
            stream,
            // The stored bytes read to enter the stream count with its first chunk.
            stored_at_cut: 0,
            stored,
            at: from as i64,
            carry: Vec::new(),
            eof: false,
            header,
        }))
    }

    /// A CSV file's header and the offset after it.
    fn read_header(&self, options: &CsvOptions) -> Result<(Header, u64), SourceError> {
        let file = self.file();
        let mut stream = match file.compression {
            Compression::None => self.store.open(file, 0)?,
            c => c
                .decompress(self.store.open(file, 0)?, 0)
                .map_err(|e| self.io(e))?,
        };
        let mut head = Vec::new();
        loop {
            let n = stream
                .by_ref()
                .take(64 << 10)
                .read_to_end(&mut head)
                .map_err(|e| self.io(e))?;
            if let Some(end) = options.first_record_end(&head) {
                let text = &head[..end];
                let text = text.strip_prefix(crate::schema::BOM).unwrap_or(text);
                return Ok((options.header(text), end as u64));
            }
            if n == 0 || head.len() > self.line_bytes_max {
                let text = head.strip_prefix(crate::schema::BOM).unwrap_or(&head);
                return Ok((options.header(text), head.len() as u64));
            }
        }
    }

    /// The next chunk of the open file, or `None` at its end.
    fn read_chunk(&mut self) -> Result<Option<Chunk>, SourceError> {
        // A followed source's last file is read to its last whole record only (the rest is
        // still being written); any other file to its end.
        let to_whole_records = self.is_last_followed();
        loop {
            let open = self.open.as_mut().expect("a file is open");
            let full = open.carry.len() >= self.chunk_bytes;
            if full || open.eof {
                let eof = open.eof;
                if eof && !to_whole_records {
                    self.leave_incomplete_tail();
                }
                if let Some(chunk) = self.take_records(eof && !to_whole_records) {
                    return Ok(Some(chunk));
                }
                let open = self.open.as_mut().expect("a file is open");
                if open.eof {
                    return Ok(self.close());
                }
                if open.carry.len() > self.line_bytes_max {
                    return self.skip_overlong().map(Some);
                }
            }
            let open = self.open.as_mut().expect("a file is open");
            // Up to a chunk's worth; a record longer than that reads on a chunk at a time.
            let want = match self.chunk_bytes.checked_sub(open.carry.len()) {
                Some(n) if n > 0 => n,
                _ => self.chunk_bytes,
            };
            let read = open
                .stream
                .by_ref()
                .take(want as u64)
                .read_to_end(&mut open.carry);
            match read {
                Ok(n) if n < want => open.eof = true,
                Ok(_) => {}
                Err(e) => return self.damaged(e),
            }
        }
    }

    /// At the end of the data of a bounded run's last plain file: a last record that does
    /// not end with a line end and is not whole (a JSON value cut short, a CSV record with
    /// fewer fields than its header or a quote still open) is being written. It is left
    /// unread: the run's position stays at its start, and the next run reads it once it is
    /// complete. (A compressed file's data ends where its stream does: complete.)
    fn leave_incomplete_tail(&mut self) {
        if !self.is_last() || self.file().compression.is_compressed() {
            return;
        }
        let format = self.format.clone();
        let open = self.open.as_mut().expect("a file is open");
        if open.carry.last().is_none_or(|b| matches!(b, b'\n' | b'\r')) {
            return;
        }
        let end = format.last_record_end(&open.carry).unwrap_or(0);
        let tail = &open.carry[end..];
        let tail = match open.at + end as i64 {
            0 => tail.strip_prefix(crate::schema::BOM).unwrap_or(tail),
            _ => tail,
        };
        if tail.iter().all(u8::is_ascii_whitespace)
            || format.is_whole_record(tail, open.header.as_ref())
        {
            return;
        }
        tracing::warn!(
            file = %self.files[self.index].path.display(),
            offset = open.at + end as i64,
            bytes = tail.len(),
            "the last record of the last file is incomplete (still being written?): left for the next run"
        );
        open.carry.truncate(end);
    }

    /// A chunk of the carried bytes' whole records, if they hold one; at the end of the file
    /// (`eof`), of all of them. CSV is parsed once: the parse that finds where the whole
    /// records end also converts them.
    fn take_records(&mut self, eof: bool) -> Option<Chunk> {
        let ordinal = self.ordinal();
        let open = self.open.as_mut().expect("a file is open");
        match &self.format {
            // (Parquet files are read by rows, never as bytes: see `next_rows`.)
            FileFormat::Ndjson | FileFormat::Parquet => {
                let end = if eof {
                    Some(open.carry.len()).filter(|n| *n > 0)
                } else {
                    self.format.last_record_end(&open.carry)
                };
                end.map(|end| self.cut(end, None))
            }
            FileFormat::Csv(options) => {
                let (converted, end) = crate::csv::convert_records(
                    options,
                    &mut open.header,
                    ordinal,
                    open.at,
                    &open.carry,
                    eof,
                );
                (end > 0).then(|| self.cut(end, Some(converted)))
            }
        }
    }

    /// The chunk of the open file's first `end` carried bytes (whole records); for CSV, their
    /// records as `converted` holds them (converted here if not).
    fn cut(&mut self, end: usize, converted: Option<crate::csv::Converted>) -> Chunk {
        let ordinal = self.ordinal();
        let compressed = self.file().compression.is_compressed();
        let open = self.open.as_mut().expect("a file is open");
        let rest = open.carry.split_off(end);
        let mut data = std::mem::replace(&mut open.carry, rest);
        let start = open.at;
        open.at += end as i64;
        if start == 0 && self.format == FileFormat::Ndjson {
            // (CSV's parser leaves a byte-order mark out itself.)
            blank_bom(&mut data);
        }
        // A compressed file's last chunk ends at the file's end (its readable length).
        let closes = compressed && open.eof && open.carry.is_empty();
        let stored_bytes = if compressed {
            let now = open.stored.load(Ordering::Relaxed);
            now - std::mem::replace(&mut open.stored_at_cut, now)
        } else {
            end as u64
        };
        let mut chunk = match (&self.format, &mut open.header) {
            (FileFormat::Csv(options), header) => {
                let c = converted
                    .unwrap_or_else(|| crate::csv::convert(options, header, ordinal, start, &data));
                Chunk {
                    file: ordinal,
                    start,
                    // Records, not lines: `data` holds none.
                    message_offsets: Some(Vec::new()),
                    end_at: Some(open.at),
                    bad: c.bad,
                    stored_bytes: Some(stored_bytes),
                    text: c.rows,
                    ..Chunk::default()
                }
            }
            (FileFormat::Ndjson | FileFormat::Parquet, _) => Chunk {
                file: ordinal,
                start,
                data,
                stored_bytes: compressed.then_some(stored_bytes),
                ..Chunk::default()
            },
        };
        if closes {
            chunk.end_at = Some(COMPRESSED_LEN as i64);
            open.at = COMPRESSED_LEN as i64;
        }
        chunk
    }

    /// The end of the open file: an empty chunk that ends a compressed file (so its offset
    /// says it was read to its end), nothing for a plain one.
    fn close(&mut self) -> Option<Chunk> {
        if !self.file().compression.is_compressed() {
            return None;
        }
        let open = self.open.as_mut().expect("a file is open");
        if open.at == COMPRESSED_LEN as i64 {
            return None;
        }
        let start = std::mem::replace(&mut open.at, COMPRESSED_LEN as i64);
        let stored_bytes = open.stored.load(Ordering::Relaxed) - open.stored_at_cut;
        Some(Chunk {
            file: self.ordinal(),
            start,
            end_at: Some(COMPRESSED_LEN as i64),
            stored_bytes: Some(stored_bytes),
            message_offsets: matches!(self.format, FileFormat::Csv(_)).then(Vec::new),
            ..Chunk::default()
        })
    }

    /// A read error of the open file. A compressed stream cut short, in any run, is waited
    /// for (the chunk of its whole records now, the rest on a later read: it is still being
    /// written; see [`FileReader::wait_for_file`]);
    /// any other damage to a compressed stream ends the file: its whole records, then the
    /// rest as one dead letter `unreadable`. A plain file's read error is the run's.
    fn damaged(&mut self, e: std::io::Error) -> Result<Option<Chunk>, SourceError> {
        if !self.file().compression.is_compressed() {
            return Err(self.io(e));
        }
        let wait = is_cut_short(&e);
        let open = self.open.as_mut().expect("a file is open");
        if wait {
            let end = self.format.last_record_end(&open.carry);
            let chunk = end.map(|end| self.cut(end, None));
            // Nothing after this chunk is read in this pass: the file is read again, from
            // the chunk's end, once it has grown.
            self.open = None;
            self.wait_for_file("its compressed stream ends before it is complete");
            return Ok(chunk);
        }
        if let Some(end) = self.format.last_record_end(&open.carry) {
            // The whole records first; the damage on the next call (the stream errs again).
            let chunk = self.cut(end, None);
            let open = self.open.as_mut().expect("a file is open");
            open.eof = false;
            self.pending_damage(e);
            return Ok(Some(chunk));
        }
        let ordinal = self.ordinal();
        let open = self.open.as_mut().expect("a file is open");
        let head = &open.carry[..open.carry.len().min(crate::RAW_BYTES_MAX)];
        let reject = Reject {
            file: ordinal,
            offset: open.at,
            reason: RejectReason::Unreadable(format!(
                "the {} stream is damaged after byte {} of its decompressed data ({e}); the file's records before it are read",
                self.files[self.index].compression.name(),
                open.at + open.carry.len() as i64,
            )),
            raw: String::from_utf8_lossy(head).into_owned(),
        };
        let start = open.at;
        open.carry.clear();
        open.eof = true;
        open.at = COMPRESSED_LEN as i64;
        Ok(Some(Chunk {
            file: ordinal,
            start,
            end_at: Some(COMPRESSED_LEN as i64),
            bad: vec![reject],
            message_offsets: matches!(self.format, FileFormat::Csv(_)).then(Vec::new),
            ..Chunk::default()
        }))
    }

    /// Makes the open stream fail with `e` on its next read (after the chunk before the
    /// damage was handed over).
    fn pending_damage(&mut self, e: std::io::Error) {
        let open = self.open.as_mut().expect("a file is open");
        open.stream = Box::new(Failing(Some(e)));
    }

    /// A record longer than the reader takes, at the start of the carried bytes: read on to
    /// its end, keeping its first bytes, and handed over as a dead letter `line_too_long`.
    fn skip_overlong(&mut self) -> Result<Chunk, SourceError> {
        let ordinal = self.ordinal();
        let csv = matches!(self.format, FileFormat::Csv(_));
        let open = self.open.as_mut().expect("a file is open");
        let offset = open.at;
        let mut head = std::mem::take(&mut open.carry);
        let mut len = head.len() as u64;
        head.truncate(crate::RAW_BYTES_MAX);
        // Blocks no longer than a line may be: what follows the line end is carried.
        let block_bytes = (1u64 << 20).min(self.line_bytes_max as u64);
        let mut block = Vec::with_capacity(block_bytes as usize);
        let mut rest = Vec::new();
        let mut newline = false;
        loop {
            block.clear();
            let n = open
                .stream
                .by_ref()
                .take(block_bytes)
                .read_to_end(&mut block);
            let n = match n {
                Ok(n) => n,
                Err(e) => {
                    let path = self.files[self.index].path.clone();
                    return Err(SourceError::Io { path, source: e });
                }
            };
            if n == 0 {
                open.eof = true;
                break;
            }
            // For CSV, a line end inside quotes is missed here: the record is skipped to the
            // first line end, and what follows is read as records (a dead letter, at worst).
            if let Some(i) = memchr::memchr(b'\n', &block) {
                len += i as u64;
                newline = true;
                rest.extend_from_slice(&block[i + 1..]);
                break;
            }
            len += n as u64;
        }
        let end = offset + len as i64 + i64::from(newline);
        open.at = end;
        open.carry = rest;
        Ok(Chunk {
            file: ordinal,
            start: offset,
            overlong: Some(Overlong {
                offset,
                len,
                end,
                head,
            }),
            message_offsets: csv.then(Vec::new),
            ..Chunk::default()
        })
    }
}

/// A stored stream that counts the bytes read from it.
struct Counting(Box<dyn Read + Send>, Arc<AtomicU64>);

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        self.1.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A stream that fails once with the error it holds, then ends.
struct Failing(Option<std::io::Error>);

impl Read for Failing {
    fn read(&mut self, _buf: &mut [u8]) -> std::io::Result<usize> {
        match self.0.take() {
            Some(e) => Err(e),
            None => Ok(0),
        }
    }
}

#[cfg(test)]
#[path = "reader_tests.rs"]
mod tests;
