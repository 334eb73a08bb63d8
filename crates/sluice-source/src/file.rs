//! One file of a file source, and what can go wrong reading one.

use std::path::PathBuf;
use std::sync::Arc;

use crate::compression::Compression;

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
    /// A source may only grow at its end: bytes appended to the file read last, or new files
    /// (read after the others, whatever their names). Anything else would put new events
    /// *before* positions already published, where they would pass for replays.
    #[error("source file {path} {what}: files are read in the order they arrive, and a file may only grow until a later one is read")]
    NotAppendOnly { path: PathBuf, what: &'static str },
}

/// One input file: its name is its source partition (the `txn` appId suffix).
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub name: Arc<str>,
    /// Where it is (a local path, or an object's URL), for messages and for its store.
    pub path: PathBuf,
    /// Readable length in positions, when the source was opened or refreshed: a run reads
    /// no further (bounded input). A plain file's is its size (a followed source's last file:
    /// up to its last line end); a compressed file's is
    /// [`crate::compression::COMPRESSED_LEN`] (its end, whatever it decompresses to).
    pub len: u64,
    /// Stored bytes.
    pub size: u64,
    pub compression: Compression,
    /// When the file was last written (its modification time), in milliseconds since the
    /// epoch, where the store says.
    pub modified_ms: Option<i64>,
}

impl SourceFile {
    /// Stored bytes after `offset`, as far as they are known: a plain file's bytes after it;
    /// a compressed (or Parquet) file's whole size until it is read to its end.
    pub fn bytes_after(&self, offset: i64) -> u64 {
        if self.len == crate::compression::COMPRESSED_LEN {
            if offset as u64 >= self.len {
                0
            } else {
                self.size
            }
        } else {
            self.len.saturating_sub(offset.max(0) as u64)
        }
    }
}

/// The position ordinal of the `i`th file of a run (see [`crate::Position`]): existing files
/// are odd, the slots between them even.
pub(crate) fn ordinal(i: usize) -> u32 {
    2 * i as u32 + 1
}
