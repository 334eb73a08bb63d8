//! File sources: one file or a directory of files (NDJSON or CSV, plain or compressed) read
//! in the order they arrived ([`crate::arrival`]; name order for the files a run starts
//! with), in chunks that end at record ends, each record named by its position
//! `(file ordinal, byte offset)`. A restart seeks to a position instead of re-reading (a
//! compressed file is decompressed again up to it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::arrival::Arrival;
use crate::chunk::Position;
use crate::compression::COMPRESSED_LEN;
use crate::file::{ordinal, SourceError, SourceFile};
use crate::reader::{FileFormat, FileReader};
use crate::store::{FileStore, LocalFiles};

/// One file, or the regular, non-hidden files of a directory (or of an object-store prefix),
/// in the order they arrived.
#[derive(Debug, Clone)]
pub struct NdjsonSource {
    store: Arc<dyn FileStore>,
    format: FileFormat,
    /// In read order: by [`Arrival`] rank.
    files: Vec<SourceFile>,
    arrival: Arrival,
    /// Followed: the last file may still be written, so it is read only up to its last
    /// newline (a line is an event once it is complete); see [`NdjsonSource::refresh`].
    following: bool,
    /// The stored size each compressed or Parquet file had when it was read to its end, as
    /// the table stores it ([`NdjsonSource::adopt_ends`]): its offset then says "at its end"
    /// whatever its size, so a change of size is the only sign it changed.
    ends: HashMap<String, i64>,
}

impl NdjsonSource {
    /// Whether the source is one file rather than a directory or prefix of files.
    pub fn is_one_file(&self) -> bool {
        self.store.is_one_file()
    }

    /// A bounded source: every file is read to its length at opening, a last line without a
    /// newline included.
    pub fn open(path: &Path) -> Result<Self, SourceError> {
        NdjsonSource::open_store(Arc::new(LocalFiles::new(path)), false, FileFormat::Ndjson)
    }

    /// A followed source: like [`NdjsonSource::open`], but the last file is read only up to
    /// its last complete line, and [`NdjsonSource::refresh`] picks up what was appended.
    pub fn open_following(path: &Path) -> Result<Self, SourceError> {
        NdjsonSource::open_store(Arc::new(LocalFiles::new(path)), true, FileFormat::Ndjson)
    }

    /// The files of `store`, bounded or followed, their records written in `format`.
    pub fn open_store(
        store: Arc<dyn FileStore>,
        following: bool,
        format: FileFormat,
    ) -> Result<Self, SourceError> {
        let mut files = store.list()?;
        if files.is_empty() {
            return Err(SourceError::Empty(PathBuf::from(store.root())));
        }
        let mut arrival = Arrival::default();
        arrival.order(&mut files);
        let mut source = NdjsonSource {
            store,
            format,
            files: Vec::new(),
            arrival,
            following,
            ends: HashMap::new(),
        };
        source.settle(files, None)?;
        Ok(source)
    }

    /// The same files read as `format` (a source opened by path, which reads NDJSON). A
    /// followed source's last file keeps the length found for NDJSON: open with
    /// [`NdjsonSource::open_store`] to give the format first.
    pub fn with_format(mut self, format: FileFormat) -> Self {
        self.format = format;
        for f in &mut self.files {
            if full_len(&self.format, f) == COMPRESSED_LEN {
                f.len = COMPRESSED_LEN;
            }
        }
        self
    }

    pub fn format(&self) -> &FileFormat {
        &self.format
    }

    /// Re-reads the file list and lengths of a followed source; returns whether anything new
    /// can be read. Files that appeared are read after the others, whatever their names
    /// ([`crate::arrival`]); a file may only grow while it is the last one (see
    /// [`SourceError::NotAppendOnly`]), so the ordinals of existing files do not change.
    pub fn refresh(&mut self) -> Result<bool, SourceError> {
        self.refresh_after(&HashMap::new())
    }

    /// [`NdjsonSource::refresh`] for a reader whose next read of each file starts at
    /// `read[name]` (0 if absent): a compressed or Parquet file that is not the last may
    /// change while no file after it was read (the reader waits for a file still being
    /// written, and reads the files after it only once it is complete).
    pub fn refresh_after(&mut self, read: &HashMap<String, i64>) -> Result<bool, SourceError> {
        let mut now: HashMap<Arc<str>, SourceFile> = self
            .store
            .list()?
            .into_iter()
            .map(|f| (f.name.clone(), f))
            .collect();
        let last = self.files.len() - 1;
        let mut files = Vec::with_capacity(now.len());
        for (i, old) in self.files.iter().enumerate() {
            let Some(new) = now.remove(&old.name) else {
                return Err(SourceError::NotAppendOnly {
                    path: old.path.clone(),
                    what: "disappeared",
                });
            };
            if new.size < old.size {
                return Err(SourceError::Truncated {
                    path: old.path.clone(),
                    len: new.size,
                    offset: old.size as i64,
                });
            }
            let at_end = read.get(old.name.as_ref()) == Some(&(COMPRESSED_LEN as i64))
                || self.ends.contains_key(old.name.as_ref());
            if at_end && new.size != old.size {
                return Err(SourceError::NotAppendOnly {
                    path: old.path.clone(),
                    what: CHANGED_AT_END,
                });
            }
            let waited_for = full_len(&self.format, old) == COMPRESSED_LEN
                && self.files[i + 1..]
                    .iter()
                    .all(|later| read.get(later.name.as_ref()).is_none_or(|at| *at == 0));
            if i < last && new.size != old.size && !waited_for {
                return Err(SourceError::NotAppendOnly {
                    path: old.path.clone(),
                    what: "changed after later files were read",
                });
            }
            files.push(new);
        }
        let before: u64 = self.files.iter().map(|f| f.size).sum();
        let grew = !now.is_empty() || files.iter().map(|f| f.size).sum::<u64>() > before;
        self.arrival
            .append_new(&mut files, now.into_values().collect());
        let last = self.files.last().cloned();
        self.settle(files, last.as_ref())?;
        Ok(grew)
    }

    /// Takes `files` (in read order) as the source's files, each read whole but the last of
    /// a followed source, read to its last complete line. `last`: the last file before;
    /// when it is still the last, unchanged, its complete lines are what they were (no read
    /// to find its last line end again, which costs a request on an object store).
    fn settle(
        &mut self,
        mut files: Vec<SourceFile>,
        last: Option<&SourceFile>,
    ) -> Result<(), SourceError> {
        for f in &mut files {
            f.len = full_len(&self.format, f);
        }
        let unchanged = match (last, files.last()) {
            (Some(old), Some(new)) => {
                (old.name == new.name && old.size == new.size).then_some(old.len)
            }
            _ => None,
        };
        self.files = files;
        match (unchanged, self.files.last_mut()) {
            (Some(len), Some(last)) => last.len = len,
            _ => self.trim_last()?,
        }
        Ok(())
    }

    /// Takes the read order the table stores (ranks by file name, and the files it has
    /// resume offsets for; see [`Arrival::from_table`]): the files are read in that order
    /// from now on, the ones the table does not know after the others.
    pub fn adopt_ranks(
        &mut self,
        stored: &HashMap<String, i64>,
        committed: &HashMap<String, i64>,
    ) -> Result<(), SourceError> {
        self.arrival = Arrival::from_table(stored, committed);
        let last = self.files.last().cloned();
        let mut files = std::mem::take(&mut self.files);
        self.arrival.order(&mut files);
        // Which file is last may have changed: every other file is read whole.
        self.settle(files, last.as_ref())
    }

    /// The ranks to store with a commit that covers `read`: those of the files up to `read`
    /// that `stored` (by file name) lacks. An empty file before `read` needs none: no
    /// position is in it (if it grows, it is a new file to a later run).
    pub fn ranks_to_store(
        &self,
        stored: &HashMap<String, i64>,
        read: Position,
    ) -> Vec<(String, i64)> {
        let through = (read.file as usize).div_ceil(2).min(self.files.len());
        self.files[..through]
            .iter()
            .enumerate()
            .filter(|(i, f)| f.size > 0 || i + 1 == through)
            .filter(|(_, f)| !stored.contains_key(f.name.as_ref()))
            .filter_map(|(_, f)| Some((f.name.to_string(), self.arrival.rank(&f.name)?)))
            .collect()
    }

    /// Takes the stored sizes the table records for files read to their end (compressed
    /// and Parquet files; see [`NdjsonSource::ends_to_store`]).
    pub fn adopt_ends(&mut self, ends: &HashMap<String, i64>) {
        self.ends = ends.clone();
    }

    /// The stored sizes to record with a commit whose offsets are `advanced`: those of the
    /// compressed and Parquet files it moves to their end (whose offset then no longer tells
    /// how much of them was read) that `stored` lacks at that size.
    pub fn ends_to_store(
        &self,
        stored: &HashMap<String, i64>,
        advanced: &[(String, i64)],
    ) -> Vec<(String, i64)> {
        advanced
            .iter()
            .filter(|(_, offset)| *offset as u64 == COMPRESSED_LEN)
            .filter_map(|(name, _)| self.files.iter().find(|f| f.name.as_ref() == name))
            .filter(|f| stored.get(f.name.as_ref()) != Some(&(f.size as i64)))
            .map(|f| (f.name.to_string(), f.size as i64))
            .collect()
    }

    /// Checks that the source only grew at its end since `committed` (resume offsets per file
    /// name) was written: no file before the last one with a committed offset has unread
    /// bytes, and no file read to its end changed since (its stored size, [`Self::ends`]).
    /// (Such bytes would sort before published positions and pass for replays, or be
    /// passed over.)
    pub fn check_append_only(&self, committed: &HashMap<String, i64>) -> Result<(), SourceError> {
        let Some(last_started) = self
            .files
            .iter()
            .rposition(|f| committed.get(f.name.as_ref()).is_some_and(|o| *o > 0))
        else {
            return Ok(());
        };
        for f in &self.files {
            let at_end = committed.get(f.name.as_ref()).copied().unwrap_or(0) as u64 >= f.len;
            if at_end
                && self
                    .ends
                    .get(f.name.as_ref())
                    .is_some_and(|s| *s != f.size as i64)
            {
                return Err(SourceError::NotAppendOnly {
                    path: f.path.clone(),
                    what: CHANGED_AT_END,
                });
            }
        }
        for f in &self.files[..last_started] {
            let offset = committed.get(f.name.as_ref()).copied().unwrap_or(0);
            if (offset as u64) < f.len {
                return Err(SourceError::NotAppendOnly {
                    path: f.path.clone(),
                    what: if offset == 0 {
                        "appeared before files already read"
                    } else {
                        "grew after later files were read"
                    },
                });
            }
        }
        Ok(())
    }

    /// Whether this source is followed (see [`NdjsonSource::open_following`]).
    pub fn is_following(&self) -> bool {
        self.following
    }

    /// Cuts the last file's readable length to the end of its last complete line (followed
    /// sources only; a compressed file is read to the end of its stream).
    fn trim_last(&mut self) -> Result<(), SourceError> {
        if !self.following {
            return Ok(());
        }
        if let Some(last) = self.files.last_mut() {
            if full_len(&self.format, last) != COMPRESSED_LEN {
                last.len = complete_lines_len(self.store.as_ref(), last)?;
            }
        }
        Ok(())
    }

    /// For a Parquet source: the column types the first readable file's footer declares
    /// (see [`crate::parquet::footer_types`]); `None` for other formats.
    pub fn footer_types(&self) -> Option<deltalake::arrow::datatypes::SchemaRef> {
        if self.format != FileFormat::Parquet {
            return None;
        }
        self.files
            .iter()
            .find_map(|f| crate::parquet::footer_types(self.store.clone(), f))
    }

    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    /// Up to `lines` first records of the source, as JSON lines (to infer a record schema
    /// from).
    pub fn head_lines(&self, lines: usize) -> Result<Vec<Vec<u8>>, SourceError> {
        let mut reader = self.reader(&HashMap::new(), 1 << 20)?;
        let mut taken = Vec::new();
        while taken.len() < lines {
            let Some(chunk) = reader.next_chunk()? else {
                break;
            };
            let chunk = chunk.as_lines();
            taken.extend(
                chunk
                    .lines()
                    .take(lines - taken.len())
                    .map(|(_, l)| l.to_vec()),
            );
        }
        Ok(taken)
    }

    /// The position ordinal of the `i`th file of this run (see [`Position`]).
    pub(crate) fn ordinal(i: usize) -> u32 {
        ordinal(i)
    }

    pub fn file(&self, ordinal: u32) -> Option<&SourceFile> {
        if ordinal % 2 == 1 {
            self.files.get((ordinal / 2) as usize)
        } else {
            None
        }
    }

    /// The name of the file at `ordinal` (for positions of this run).
    pub fn name(&self, ordinal: u32) -> Option<&Arc<str>> {
        self.file(ordinal).map(|f| &f.name)
    }

    /// The position of `offset` in the file called `name`, which may not exist in this run
    /// (it then sorts where its rank puts it).
    pub fn position_of(&self, name: &str, offset: i64) -> Position {
        let key = self.arrival.key(name);
        let file = match self
            .files
            .binary_search_by(|f| self.arrival.key(&f.name).cmp(&key))
        {
            Ok(i) => NdjsonSource::ordinal(i),
            Err(i) => NdjsonSource::ordinal(i) - 1,
        };
        Position { file, offset }
    }

    /// The first position of the source (before any file).
    pub fn start(&self) -> Position {
        Position { file: 0, offset: 0 }
    }

    /// The position after everything this run can read.
    pub fn end(&self) -> Position {
        Position {
            file: NdjsonSource::ordinal(self.files.len()) - 1,
            offset: 0,
        }
    }

    /// A reader that starts each file at its resume offset (`resume[name]`, default 0).
    pub fn reader(
        &self,
        resume: &HashMap<String, i64>,
        chunk_bytes: usize,
    ) -> Result<FileReader, SourceError> {
        let mut starts = Vec::with_capacity(self.files.len());
        for f in &self.files {
            let offset = resume.get(f.name.as_ref()).copied().unwrap_or(0);
            if offset < 0 || offset as u64 > f.len {
                return Err(SourceError::Truncated {
                    path: f.path.clone(),
                    len: f.len,
                    offset,
                });
            }
            starts.push(offset);
        }
        Ok(FileReader::new(
            self.store.clone(),
            self.files.clone(),
            starts,
            chunk_bytes,
            self.format.clone(),
            self.following,
        ))
    }
}

/// What a compressed or Parquet file did that its offset cannot place: read to its end
/// (gzip members appended, a damaged file rewritten), its new records would be passed over.
const CHANGED_AT_END: &str = "changed after it was read to its end (its new records cannot be placed after the ones already published: give it a new name to read it as a new file, or move it out of the source)";

/// A file's readable length in positions, read whole: a Parquet file (positions are rows)
/// and a compressed one (decompressed offsets) are read to their ends ([`COMPRESSED_LEN`]),
/// a plain one to its size.
fn full_len(format: &FileFormat, f: &SourceFile) -> u64 {
    if f.compression.is_compressed() || *format == FileFormat::Parquet {
        COMPRESSED_LEN
    } else {
        f.size
    }
}

/// The length of the complete lines of a plain file: up to and including its last newline.
/// (A tail of any length without a newline is a line still being written.)
fn complete_lines_len(store: &dyn FileStore, file: &SourceFile) -> Result<u64, SourceError> {
    let mut end = file.size;
    let block = 64u64 << 10;
    while end > 0 {
        let at = end.saturating_sub(block);
        let bytes = store.read_range(file, at, end)?;
        if let Some(i) = memchr::memrchr(b'\n', &bytes) {
            return Ok(at + i as u64 + 1);
        }
        end = at;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::Chunk;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    fn read_all(
        source: &NdjsonSource,
        resume: &HashMap<String, i64>,
        chunk: usize,
    ) -> Vec<(u32, i64, String)> {
        let mut reader = source.reader(resume, chunk).unwrap();
        let mut out = Vec::new();
        while let Some(c) = reader.next_chunk().unwrap() {
            for (offset, line) in c.as_lines().lines() {
                out.push((c.file, offset, String::from_utf8(line.to_vec()).unwrap()));
            }
        }
        out
    }

    /// A line longer than the reader takes is handed over on its own, left out of the
    /// chunks: its offset, length and first bytes, the next chunk at the next line; decoding
    /// makes it a dead letter `line_too_long`, and the lines around it are rows.
    #[test]
    fn a_line_too_long_is_a_dead_letter_and_the_next_line_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let good = |i: u32| format!("{{\"ts\":\"2026-10-03T00:00:0{i}Z\"}}\n");
        let long = format!(
            "{{\"ts\":\"2026-10-03T00:00:09Z\",\"x\":\"{}\"}}\n",
            "y".repeat(5000)
        );
        let text = format!("{}{}{}{long}", good(1), long, good(2));
        write(dir.path(), "a.ndjson", &text);
        let source = NdjsonSource::open(dir.path()).unwrap();
        let mut reader = source
            .reader(&HashMap::new(), 64)
            .unwrap()
            .with_line_bytes_max(1000);
        let schema = std::sync::Arc::new(deltalake::arrow::datatypes::Schema::new(vec![
            deltalake::arrow::datatypes::Field::new(
                "ts",
                deltalake::arrow::datatypes::DataType::Utf8,
                true,
            ),
        ]));
        let mut decoder = crate::LineDecoder::new(
            schema,
            crate::DecodeOptions::new("ts", sluice_window::TimeFormat::Rfc3339),
        )
        .unwrap();
        let (mut rows, mut rejects, mut end) = (Vec::new(), Vec::new(), 0);
        while let Some(c) = reader.next_chunk().unwrap() {
            assert_eq!(c.start, end, "chunks follow each other");
            end = c.end();
            let d = decoder.decode(&c).unwrap();
            rows.extend(d.offsets);
            for r in d.rejects {
                assert!(
                    r.raw.len() > 1000 && long.starts_with(&r.raw),
                    "its first bytes"
                );
                rejects.push((r.offset, r.reason.as_str()));
            }
        }
        let first = good(1).len() as i64;
        let third = first + long.len() as i64;
        assert_eq!(rows, [0, third]);
        let last = third + good(2).len() as i64;
        assert_eq!(rejects, [(first, "line_too_long"), (last, "line_too_long")]);
        assert_eq!(end, text.len() as i64);
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.ndjson", "\u{feff}{\"a\":1}\n{\"a\":2}\n");
        let source = NdjsonSource::open(dir.path()).unwrap();
        let lines = read_all(&source, &HashMap::new(), 4096);
        assert_eq!(lines[0], (1, 0, "   {\"a\":1}".to_string()));
        assert_eq!(lines[1].1, 11);
        let chunk = Chunk::messages(1, [(5i64, "\u{feff}{}".as_bytes())]);
        assert_eq!(chunk.data, b"   {}\n");
    }

    #[test]
    fn reads_files_in_name_order_with_line_offsets() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "b.ndjson", "{\"a\":3}\n");
        write(dir.path(), "a.ndjson", "{\"a\":1}\n\n{\"a\":2}");
        write(dir.path(), ".hidden", "nope\n");
        let source = NdjsonSource::open(dir.path()).unwrap();
        let names: Vec<_> = source.files().iter().map(|f| f.name.to_string()).collect();
        assert_eq!(names, ["a.ndjson", "b.ndjson"]);
        for chunk in [4096, 5000] {
            let lines = read_all(&source, &HashMap::new(), chunk);
            assert_eq!(
                lines,
                vec![
                    (1, 0, "{\"a\":1}".to_string()),
                    (1, 9, "{\"a\":2}".to_string()),
                    (3, 0, "{\"a\":3}".to_string())
                ]
            );
        }
        let resume = HashMap::from([("a.ndjson".to_string(), 9)]);
        assert_eq!(read_all(&source, &resume, 4096).len(), 2);
        let bad = HashMap::from([("a.ndjson".to_string(), 999)]);
        assert!(matches!(
            source.reader(&bad, 4096),
            Err(SourceError::Truncated { .. })
        ));
    }

    #[test]
    fn chunks_hold_whole_lines_only() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..5000).map(|i| format!("{{\"i\":{i}}}\n")).collect();
        write(dir.path(), "x.ndjson", &text);
        let source = NdjsonSource::open(&dir.path().join("x.ndjson")).unwrap();
        let lines = read_all(&source, &HashMap::new(), 4096);
        assert_eq!(lines.len(), 5000);
        let mut expected = 0i64;
        for (i, (_, offset, line)) in lines.iter().enumerate() {
            assert_eq!(*offset, expected);
            assert_eq!(line, &format!("{{\"i\":{i}}}"));
            expected += line.len() as i64 + 1;
        }
    }

    #[test]
    fn positions_of_missing_files_sort_between_existing_ones() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "b", "{}\n");
        write(dir.path(), "d", "{}\n");
        let source = NdjsonSource::open(dir.path()).unwrap();
        let a = source.position_of("a", 100);
        let b = source.position_of("b", 0);
        let c = source.position_of("c", 5);
        let d = source.position_of("d", 0);
        assert!(a < b && b < c && c < d && d < source.end());
        assert_eq!(source.name(b.file).map(|n| n.as_ref()), Some("b"));
        assert_eq!(source.name(c.file), None);
    }

    #[test]
    fn a_followed_source_reads_complete_lines_and_only_grows_at_its_end() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a", "{\"a\":1}\n{\"a\":2}\n{\"a\"");
        let mut source = NdjsonSource::open_following(dir.path()).unwrap();
        assert_eq!(
            source.files()[0].len,
            16,
            "the torn line is not readable yet"
        );
        assert_eq!(read_all(&source, &HashMap::new(), 4096).len(), 2);
        assert!(!source.refresh().unwrap());

        std::fs::write(dir.path().join("a"), "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n").unwrap();
        write(dir.path(), "b", "{\"b\":1}");
        assert!(source.refresh().unwrap());
        // `a` is no longer last: read whole; `b` is last: its line has no newline yet.
        assert_eq!(source.files()[0].len, 24);
        assert_eq!(source.files()[1].len, 0);
        assert_eq!(read_all(&source, &HashMap::new(), 4096).len(), 3);

        // Growth of a file that is not the last: refused.
        write(
            dir.path(),
            "a",
            "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n{\"a\":4}\n",
        );
        let err = source.refresh().unwrap_err();
        assert!(matches!(err, SourceError::NotAppendOnly { .. }), "{err}");
        write(dir.path(), "a", "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
        // A new file whose name sorts first is read after the others (the order they
        // arrived in); `b` is no longer last, so its line without a newline is a record.
        write(dir.path(), "0", "{\"z\":0}\n");
        assert!(source.refresh().unwrap());
        let names: Vec<&str> = source.files().iter().map(|f| f.name.as_ref()).collect();
        assert_eq!(names, ["a", "b", "0"]);
        let lines = read_all(&source, &HashMap::new(), 4096);
        assert_eq!(lines.len(), 5);
        assert_eq!(lines.last().unwrap().2, "{\"z\":0}");
        assert!(lines
            .windows(2)
            .all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)));
    }

    /// A run resumes in the order the table stores (ranks by name), the files it does not
    /// know after the others; positions of files that are gone sort by their ranks.
    #[test]
    fn files_are_read_in_the_order_the_table_ranks_them() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b", "c", "d"] {
            write(dir.path(), name, "{}\n");
        }
        let mut source = NdjsonSource::open(dir.path()).unwrap();
        let stored: HashMap<String, i64> =
            [("d".into(), 1), ("gone".into(), 2), ("b".into(), 3)].into();
        let committed: HashMap<String, i64> = [("d".into(), 3), ("b".into(), 1)].into();
        source.adopt_ranks(&stored, &committed).unwrap();
        let names: Vec<&str> = source.files().iter().map(|f| f.name.as_ref()).collect();
        assert_eq!(names, ["d", "b", "c"]);
        let (d, gone, b, c) = (
            source.position_of("d", 0),
            source.position_of("gone", 7),
            source.position_of("b", 0),
            source.position_of("c", 0),
        );
        assert!(d < gone && gone < b && b < c && c < source.end());
        assert_eq!(source.name(gone.file), None);
        // A commit covering `b` stores the ranks of the files up to it the table lacks.
        let read = source.position_of("b", 1);
        assert_eq!(
            source.ranks_to_store(&stored, read),
            Vec::<(String, i64)>::new()
        );
        let read = source.position_of("c", 1);
        assert_eq!(source.ranks_to_store(&stored, read), [("c".to_string(), 4)]);
        // Empty files before the read position get no rank; the read position's own does.
        write(dir.path(), "e", "");
        write(dir.path(), "f", "");
        source.refresh().unwrap();
        let (e, f) = (source.position_of("e", 0), source.position_of("f", 0));
        assert_eq!(
            source.ranks_to_store(&stored, f),
            [("c".to_string(), 4), ("f".to_string(), 6)]
        );
        assert_eq!(
            source.ranks_to_store(&stored, e),
            [("c".to_string(), 4), ("e".to_string(), 5)]
        );
        assert!(source.check_append_only(&committed).is_ok());
    }

    #[test]
    fn resume_offsets_reveal_a_source_that_did_not_grow_at_its_end() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "b", "{}\n");
        write(dir.path(), "c", "{}\n{}\n");
        let source = NdjsonSource::open(dir.path()).unwrap();
        let resumed = |pairs: &[(&str, i64)]| {
            let committed: HashMap<String, i64> =
                pairs.iter().map(|(n, o)| (n.to_string(), *o)).collect();
            source.check_append_only(&committed)
        };
        assert!(resumed(&[]).is_ok());
        assert!(resumed(&[("b", 3), ("c", 3)]).is_ok());
        assert!(resumed(&[("b", 1)]).is_ok(), "still reading the first file");
        let err = resumed(&[("b", 2), ("c", 3)]).unwrap_err();
        assert!(
            err.to_string().contains("grew after later files were read"),
            "{err}"
        );
        let err = resumed(&[("c", 3)]).unwrap_err();
        assert!(
            err.to_string()
                .contains("appeared before files already read"),
            "{err}"
        );
    }
}
