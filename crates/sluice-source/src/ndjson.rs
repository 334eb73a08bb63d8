//! NDJSON sources: one file or a directory of files read in name order, in chunks that end
//! at line ends, each line named by its position `(file ordinal, byte offset)`. A restart
//! seeks to a position instead of re-reading.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where one event is in an NDJSON source, ordered as the source is read.
///
/// `file` is an ordinal of the file name within the sorted file list of this run: existing
/// files get odd ordinals (`2i + 1`), names that are not (or no longer) in the directory get
/// the even ordinal of the slot where they would sort. So positions read back from the table
/// compare correctly with positions of this run even if files were added or removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub file: u32,
    pub offset: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("cannot read source {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("source {0} has no files")]
    Empty(PathBuf),
    /// The source is a stream (standard input, a pipe, a device, a socket), not a file: a
    /// position is a byte offset that a restart seeks back to, and a stream cannot be read
    /// again (read as a file, a pipe looks empty).
    #[error("{path} is {kind}, not a file: sluice reads sources it can read again after a restart (a position is a byte offset a rerun seeks to), which a stream cannot offer; write the stream to a file first (`cat > events.ndjson`, `zcat events.gz > events.ndjson`) and give that file, with --follow to read it while it is written")]
    NotAFile { path: PathBuf, kind: &'static str },
    #[error("file {path} is shorter ({len} bytes) than its published position {offset}: was it rewritten?")]
    Truncated {
        path: PathBuf,
        len: u64,
        offset: i64,
    },
    #[error("source file name {0:?} is not valid UTF-8")]
    NonUtf8Name(PathBuf),
    /// A source may only grow at its end: bytes appended to its last file, or new files whose
    /// names sort after every existing one. Anything else would put new events *before*
    /// positions already published, where they would pass for replays.
    #[error("source file {path} {what}: append only to the last file, and name new files so they sort after the existing ones")]
    NotAppendOnly { path: PathBuf, what: &'static str },
}

/// One input file: its name is its source partition (the `txn` appId suffix).
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub name: Arc<str>,
    pub path: PathBuf,
    /// Length when the source was opened: a run reads no further (bounded input).
    pub len: u64,
}

/// One NDJSON file, or the regular, non-hidden files of a directory sorted by name.
#[derive(Debug, Clone)]
pub struct NdjsonSource {
    root: PathBuf,
    files: Vec<SourceFile>,
    /// Followed: the last file may still be written, so it is read only up to its last
    /// newline (a line is an event once it is complete); see [`NdjsonSource::refresh`].
    following: bool,
}

impl NdjsonSource {
    /// A bounded source: every file is read to its length at opening, a last line without a
    /// newline included.
    pub fn open(path: &Path) -> Result<Self, SourceError> {
        let files = list(path)?;
        if files.is_empty() {
            return Err(SourceError::Empty(path.to_path_buf()));
        }
        Ok(NdjsonSource {
            root: path.to_path_buf(),
            files,
            following: false,
        })
    }

    /// A followed source: like [`NdjsonSource::open`], but the last file is read only up to
    /// its last complete line, and [`NdjsonSource::refresh`] picks up what was appended.
    pub fn open_following(path: &Path) -> Result<Self, SourceError> {
        let mut source = NdjsonSource::open(path)?;
        source.following = true;
        source.trim_last()?;
        Ok(source)
    }

    /// Re-reads the file list and lengths of a followed source; returns whether anything new
    /// can be read. The source must only have grown at its end (see
    /// [`SourceError::NotAppendOnly`]), so the ordinals of existing files do not change.
    pub fn refresh(&mut self) -> Result<bool, SourceError> {
        let now = list(&self.root)?;
        let not_append_only = |f: &SourceFile, what| SourceError::NotAppendOnly {
            path: f.path.clone(),
            what,
        };
        let last = self.files.len() - 1;
        for (i, old) in self.files.iter().enumerate() {
            let Some(new) = now.get(i).filter(|n| n.name == old.name) else {
                let added = now
                    .iter()
                    .find(|n| !self.files.iter().any(|o| o.name == n.name));
                return Err(match added {
                    Some(new) if new.name < old.name => {
                        not_append_only(new, "appeared before files already read")
                    }
                    _ => not_append_only(old, "disappeared"),
                });
            };
            if new.len < old.len {
                return Err(SourceError::Truncated {
                    path: old.path.clone(),
                    len: new.len,
                    offset: old.len as i64,
                });
            }
            if i < last && new.len != old.len {
                return Err(not_append_only(old, "changed after later files were read"));
            }
        }
        let before: u64 = self.files.iter().map(|f| f.len).sum();
        self.files = now;
        self.trim_last()?;
        Ok(self.files.iter().map(|f| f.len).sum::<u64>() > before)
    }

    /// Checks that the source only grew at its end since `committed` (resume offsets per file
    /// name) was written: no file before the last one with a committed offset has unread
    /// bytes. (Such bytes would sort before published positions and pass for replays.)
    pub fn check_append_only(&self, committed: &HashMap<String, i64>) -> Result<(), SourceError> {
        let Some(last_started) = self
            .files
            .iter()
            .rposition(|f| committed.get(f.name.as_ref()).is_some_and(|o| *o > 0))
        else {
            return Ok(());
        };
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
    /// sources only).
    fn trim_last(&mut self) -> Result<(), SourceError> {
        if !self.following {
            return Ok(());
        }
        if let Some(last) = self.files.last_mut() {
            last.len = complete_lines_len(&last.path, last.len)?;
        }
        Ok(())
    }

    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    /// Up to `lines` first lines of the first file (to infer a record schema from).
    pub fn head_lines(&self, lines: usize) -> Result<Vec<Vec<u8>>, SourceError> {
        use std::io::BufRead;
        let first = self
            .files
            .first()
            .ok_or_else(|| SourceError::Empty(PathBuf::new()))?;
        let io = |source| SourceError::Io {
            path: first.path.clone(),
            source,
        };
        let mut reader = std::io::BufReader::new(File::open(&first.path).map_err(io)?);
        let mut taken = Vec::new();
        while taken.len() < lines {
            let mut line = Vec::new();
            if reader.read_until(b'\n', &mut line).map_err(io)? == 0 {
                break;
            }
            taken.push(line);
        }
        Ok(taken)
    }

    /// The position ordinal of the `i`th file of this run (see [`Position`]).
    pub(crate) fn ordinal(i: usize) -> u32 {
        2 * i as u32 + 1
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

    /// The position of `offset` in the file called `name`, which may not exist in this run.
    pub fn position_of(&self, name: &str, offset: i64) -> Position {
        let file = match self.files.binary_search_by(|f| f.name.as_ref().cmp(name)) {
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
    ) -> Result<NdjsonReader, SourceError> {
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
        Ok(NdjsonReader {
            files: self.files.clone(),
            starts,
            index: 0,
            open: None,
            // Any size works (a line longer than a chunk is read whole); the CLI asks for >= 4 KiB.
            chunk_bytes: chunk_bytes.max(1),
            line_bytes_max: LINE_BYTES_MAX,
        })
    }
}

/// The regular, non-hidden files of a directory sorted by name, or the one file `path` names.
fn list(path: &Path) -> Result<Vec<SourceFile>, SourceError> {
    let io = |source| SourceError::Io {
        path: path.to_path_buf(),
        source,
    };
    if path.as_os_str() == "-" {
        return Err(SourceError::NotAFile {
            path: path.to_path_buf(),
            kind: "standard input",
        });
    }
    let meta = std::fs::metadata(path).map_err(io)?;
    if let Some(kind) = stream_kind(&meta) {
        return Err(SourceError::NotAFile {
            path: path.to_path_buf(),
            kind,
        });
    }
    let mut files = Vec::new();
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = entry.file_name();
            let name = name
                .to_str()
                .ok_or_else(|| SourceError::NonUtf8Name(entry.path()))?
                .to_string();
            let meta = entry.metadata().map_err(io)?;
            if name.starts_with('.') || !meta.is_file() {
                continue;
            }
            files.push(SourceFile {
                name: name.into(),
                path: entry.path(),
                len: meta.len(),
            });
        }
        files.sort_by(|a, b| a.name.cmp(&b.name));
    } else {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| SourceError::NonUtf8Name(path.to_path_buf()))?;
        files.push(SourceFile {
            name: name.into(),
            path: path.to_path_buf(),
            len: meta.len(),
        });
    }
    Ok(files)
}

/// What a path that is neither a regular file nor a directory is (a stream, whose length
/// says nothing about what it carries).
fn stream_kind(meta: &std::fs::Metadata) -> Option<&'static str> {
    if meta.is_file() || meta.is_dir() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return Some("a pipe");
        }
        if t.is_socket() {
            return Some("a socket");
        }
        if t.is_char_device() || t.is_block_device() {
            return Some("a device");
        }
    }
    Some("neither a file nor a directory")
}

/// The length of the complete lines of a file of length `len`: up to and including its last
/// newline. (A tail of any length without a newline is a line still being written.)
fn complete_lines_len(path: &Path, len: u64) -> Result<u64, SourceError> {
    let io = |source| SourceError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let mut end = len;
    let mut block = vec![0u8; 64 << 10];
    while end > 0 {
        let n = block.len().min(end as usize);
        let at = end - n as u64;
        file.seek(SeekFrom::Start(at)).map_err(io)?;
        file.read_exact(&mut block[..n]).map_err(io)?;
        if let Some(i) = block[..n].iter().rposition(|b| *b == b'\n') {
            return Ok(at + i as u64 + 1);
        }
        end = at;
    }
    Ok(0)
}

/// A line longer than this is not read into memory (it bounds the reader's memory whatever
/// the input holds): it is a dead letter `line_too_long` with its first bytes ([`Overlong`]).
pub const LINE_BYTES_MAX: usize = 64 << 20;

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
/// per line.
#[derive(Debug, Clone)]
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
}

impl Chunk {
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
        Chunk {
            file,
            start: offsets.first().copied().unwrap_or(0),
            data,
            message_offsets: Some(offsets),
            overlong: None,
        }
    }

    /// The offset after the chunk: where the next chunk of this file starts (for messages:
    /// the offset after the last one).
    pub fn end(&self) -> i64 {
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
                overlong: None,
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
            message_offsets: None,
            overlong: self.overlong.clone(),
        }
    }

    /// The record at `offset` (empty if there is none).
    pub fn line_at(&self, offset: i64) -> &[u8] {
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
fn blank_bom(data: &mut [u8]) {
    if data.starts_with(crate::schema::BOM) {
        data[..3].fill(b' ');
    }
}

/// Reads the files of a source in order, in chunks of whole lines.
pub struct NdjsonReader {
    files: Vec<SourceFile>,
    starts: Vec<i64>,
    index: usize,
    open: Option<(File, i64)>,
    chunk_bytes: usize,
    line_bytes_max: usize,
}

impl NdjsonReader {
    /// Lines longer than `bytes` are dead letters (tests; [`LINE_BYTES_MAX`] otherwise).
    pub fn with_line_bytes_max(mut self, bytes: usize) -> Self {
        self.line_bytes_max = bytes.max(1);
        self
    }

    /// The next chunk, or `None` at the end of the last file.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, SourceError> {
        while self.index < self.files.len() {
            let file = &self.files[self.index];
            let io = |source| SourceError::Io {
                path: file.path.clone(),
                source,
            };
            if self.open.is_none() {
                let start = self.starts[self.index];
                if start as u64 >= file.len {
                    self.index += 1;
                    continue;
                }
                let mut f = File::open(&file.path).map_err(io)?;
                f.seek(SeekFrom::Start(start as u64)).map_err(io)?;
                self.open = Some((f, start));
            }
            let (f, at) = self.open.as_mut().expect("opened above");
            let remaining = file.len - *at as u64;
            if remaining == 0 {
                self.open = None;
                self.index += 1;
                continue;
            }
            let mut data = Vec::with_capacity(self.chunk_bytes.min(remaining as usize));
            let mut want = self.chunk_bytes.min(remaining as usize);
            loop {
                let before = data.len();
                f.by_ref()
                    .take(want as u64)
                    .read_to_end(&mut data)
                    .map_err(io)?;
                let read_all = data.len() as u64 == remaining;
                if data.len() == before && !read_all {
                    // The file shrank under us: stop at what we have.
                    break;
                }
                if read_all || data[before..].contains(&b'\n') || data.len() > self.line_bytes_max {
                    break;
                }
                want = self.chunk_bytes.min(remaining as usize - data.len());
            }
            let whole = if data.len() as u64 == remaining {
                data.len()
            } else {
                match data.iter().rposition(|b| *b == b'\n') {
                    Some(i) => i + 1,
                    None => {
                        // One line longer than the reader takes: skipped to its end, and
                        // handed over as a dead letter.
                        let offset = *at;
                        let overlong = skip_line(f, offset, data, remaining).map_err(io)?;
                        *at = overlong.end;
                        return Ok(Some(Chunk {
                            file: NdjsonSource::ordinal(self.index),
                            start: offset,
                            data: Vec::new(),
                            message_offsets: None,
                            overlong: Some(overlong),
                        }));
                    }
                }
            };
            let carry = data.len() - whole;
            data.truncate(whole);
            if *at == 0 {
                blank_bom(&mut data);
            }
            if carry > 0 {
                f.seek(SeekFrom::Current(-(carry as i64))).map_err(io)?;
            }
            let chunk = Chunk {
                file: NdjsonSource::ordinal(self.index),
                start: *at,
                data,
                message_offsets: None,
                overlong: None,
            };
            *at = chunk.end();
            return Ok(Some(chunk));
        }
        Ok(None)
    }
}

/// The line at `offset`, of which `read` (no newline among them) was read and `f` stands
/// after: read on to its newline (or the end of the file's `remaining` bytes), keeping its
/// first bytes; `f` is left at the next line.
fn skip_line(
    f: &mut File,
    offset: i64,
    mut read: Vec<u8>,
    remaining: u64,
) -> std::io::Result<Overlong> {
    let mut len = read.len() as u64;
    read.truncate(crate::RAW_BYTES_MAX);
    let mut block = vec![0u8; 1 << 20];
    let mut newline = false;
    while len < remaining {
        let want = block.len().min((remaining - len) as usize);
        let n = f.read(&mut block[..want])?;
        if n == 0 {
            break;
        }
        match block[..n].iter().position(|b| *b == b'\n') {
            Some(i) => {
                len += i as u64;
                newline = true;
                f.seek(SeekFrom::Current(i as i64 + 1 - n as i64))?;
                break;
            }
            None => len += n as u64,
        }
    }
    Ok(Overlong {
        offset,
        len,
        end: offset + len as i64 + i64::from(newline),
        head: read,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
            for (offset, line) in c.lines() {
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

        // Growth of a file that is not the last, or a file sorting before others: refused.
        write(
            dir.path(),
            "a",
            "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n{\"a\":4}\n",
        );
        let err = source.refresh().unwrap_err();
        assert!(matches!(err, SourceError::NotAppendOnly { .. }), "{err}");
        write(dir.path(), "a", "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
        write(dir.path(), "0", "{}\n");
        let err = source.refresh().unwrap_err();
        assert!(
            err.to_string()
                .contains("appeared before files already read"),
            "{err}"
        );
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
