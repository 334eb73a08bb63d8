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
    #[error("file {path} is shorter ({len} bytes) than its published position {offset}: was it rewritten?")]
    Truncated {
        path: PathBuf,
        len: u64,
        offset: i64,
    },
    #[error("file {path} has a line longer than {max} bytes at offset {offset}")]
    LineTooLong {
        path: PathBuf,
        offset: i64,
        max: usize,
    },
    #[error("source file name {0:?} is not valid UTF-8")]
    NonUtf8Name(PathBuf),
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
    files: Vec<SourceFile>,
}

impl NdjsonSource {
    pub fn open(path: &Path) -> Result<Self, SourceError> {
        let io = |source| SourceError::Io {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(io)?;
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
        if files.is_empty() {
            return Err(SourceError::Empty(path.to_path_buf()));
        }
        Ok(NdjsonSource { files })
    }

    pub fn files(&self) -> &[SourceFile] {
        &self.files
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
            Ok(i) => 2 * i as u32 + 1,
            Err(i) => 2 * i as u32,
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
            file: 2 * self.files.len() as u32,
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

/// A line longer than this is a source error rather than a record: it bounds the reader's
/// memory whatever the input holds.
pub const LINE_BYTES_MAX: usize = 64 << 20;

/// Complete lines of one file, read in one go.
#[derive(Debug, Clone)]
pub struct Chunk {
    /// Ordinal of the file (see [`Position`]).
    pub file: u32,
    /// Byte offset of `data[0]` in the file.
    pub start: i64,
    /// Whole lines; the last one may lack its newline only at the end of the file.
    pub data: Vec<u8>,
}

impl Chunk {
    /// The offset after the chunk: where the next chunk of this file starts.
    pub fn end(&self) -> i64 {
        self.start + self.data.len() as i64
    }

    /// `(offset in file, line without its newline)` for every non-blank line.
    pub fn lines(&self) -> impl Iterator<Item = (i64, &[u8])> + '_ {
        let mut at = 0usize;
        std::iter::from_fn(move || {
            while at < self.data.len() {
                let rest = &self.data[at..];
                let len = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
                let line = &rest[..len];
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
                        return Err(SourceError::LineTooLong {
                            path: file.path.clone(),
                            offset: *at,
                            max: self.line_bytes_max,
                        })
                    }
                }
            };
            let carry = data.len() - whole;
            data.truncate(whole);
            if carry > 0 {
                f.seek(SeekFrom::Current(-(carry as i64))).map_err(io)?;
            }
            let chunk = Chunk {
                file: 2 * self.index as u32 + 1,
                start: *at,
                data,
            };
            *at = chunk.end();
            return Ok(Some(chunk));
        }
        Ok(None)
    }
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
}
