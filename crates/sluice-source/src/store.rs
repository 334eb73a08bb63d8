//! Where a file source's files are stored, behind one narrow trait: [`FileStore`] lists the
//! files and opens a file's stored bytes from an offset. [`LocalFiles`] is a local file or
//! directory; an object-store prefix (S3, GCS, Azure) is one too, in the `object` module.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::compression::{Compression, COMPRESSED_LEN};
use crate::file::{SourceError, SourceFile};

/// A source's storage: lists its files, opens their stored bytes.
pub trait FileStore: Send + Sync + std::fmt::Debug {
    /// Every file of the source (not sorted), each with its stored size and compression.
    fn list(&self) -> Result<Vec<SourceFile>, SourceError>;

    /// The stored bytes of `file` from `from` to its stored size, as a stream.
    fn open(&self, file: &SourceFile, from: u64) -> Result<Box<dyn Read + Send>, SourceError>;

    /// The stored bytes `from..to` of `file` (short if the file is).
    fn read_range(&self, file: &SourceFile, from: u64, to: u64) -> Result<Vec<u8>, SourceError>;

    /// What the source is, for messages (`/data/in`, `s3://bucket/prefix/`).
    fn root(&self) -> String;

    /// Whether the source is one file, not a directory or a prefix that lists any number
    /// of them (however many it holds now).
    fn is_one_file(&self) -> bool {
        false
    }
}

/// A file source's entry before its compression is known: its name, location, size and
/// modification time.
pub(crate) fn entry(
    name: String,
    path: PathBuf,
    (size, modified_ms): (u64, Option<i64>),
    head: impl FnOnce() -> Vec<u8>,
) -> SourceFile {
    let compression = match Compression::of_name(&name) {
        Some(c) => c,
        None if Compression::plain_name(&name) => Compression::None,
        None => Compression::of_magic(&head()),
    };
    SourceFile {
        name: name.into(),
        path,
        size,
        len: if compression.is_compressed() {
            COMPRESSED_LEN
        } else {
            size
        },
        compression,
        modified_ms,
    }
}

/// A local file's size and modification time.
fn size_and_time(meta: &std::fs::Metadata) -> (u64, Option<i64>) {
    let modified_ms = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_millis()).ok());
    (meta.len(), modified_ms)
}

/// One local file, or the regular, non-hidden files of a local directory.
#[derive(Debug, Clone)]
pub struct LocalFiles {
    root: PathBuf,
}

impl LocalFiles {
    pub fn new(root: &Path) -> Self {
        LocalFiles {
            root: root.to_path_buf(),
        }
    }
}

impl FileStore for LocalFiles {
    fn is_one_file(&self) -> bool {
        std::fs::metadata(&self.root).is_ok_and(|m| m.is_file())
    }

    fn list(&self) -> Result<Vec<SourceFile>, SourceError> {
        let path = &self.root;
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
                let path = entry.path();
                files.push(crate::store::entry(
                    name,
                    path.clone(),
                    size_and_time(&meta),
                    || local_head(&path),
                ));
            }
        } else {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| SourceError::NonUtf8Name(path.to_path_buf()))?;
            files.push(entry(
                name.to_string(),
                path.clone(),
                size_and_time(&meta),
                || local_head(path),
            ));
        }
        Ok(files)
    }

    fn open(&self, file: &SourceFile, from: u64) -> Result<Box<dyn Read + Send>, SourceError> {
        let io = |source| SourceError::Io {
            path: file.path.clone(),
            source,
        };
        let mut f = File::open(&file.path).map_err(io)?;
        f.seek(SeekFrom::Start(from)).map_err(io)?;
        Ok(Box::new(f.take(file.size.saturating_sub(from))))
    }

    fn read_range(&self, file: &SourceFile, from: u64, to: u64) -> Result<Vec<u8>, SourceError> {
        let io = |source| SourceError::Io {
            path: file.path.clone(),
            source,
        };
        let mut f = File::open(&file.path).map_err(io)?;
        f.seek(SeekFrom::Start(from)).map_err(io)?;
        let mut out = Vec::with_capacity(to.saturating_sub(from) as usize);
        f.take(to.saturating_sub(from))
            .read_to_end(&mut out)
            .map_err(io)?;
        Ok(out)
    }

    fn root(&self) -> String {
        self.root.display().to_string()
    }
}

/// The first bytes of a local file (empty if it cannot be read: the reader says why).
fn local_head(path: &Path) -> Vec<u8> {
    let mut head = Vec::with_capacity(Compression::MAGIC_BYTES);
    if let Ok(f) = File::open(path) {
        let _ = f
            .take(Compression::MAGIC_BYTES as u64)
            .read_to_end(&mut head);
    }
    head
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
