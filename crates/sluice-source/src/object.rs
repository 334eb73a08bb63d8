//! An object-store prefix as a file source (`s3://bucket/prefix/`, `gs://`, `az://`,
//! `file://`): its objects are the files, named by their keys below the prefix.
//!
//! Requests, and what they cost:
//! - **Listing.** [`Listing::Full`] lists the whole prefix at every look (one request per
//!   1,000 objects on S3); [`Listing::Incremental`], for prefixes whose names grow (dated
//!   paths, sequence numbers), lists only the names after the last one it has seen (one
//!   request for up to 1,000 new objects), and once every [`FULL_LISTING_EVERY`] looks lists
//!   the whole prefix to find a file that appeared with a name before those already read
//!   (read after them, as any new file). [`ObjectFiles::requests`] counts them.
//! - **Reading.** A file is read by one ranged GET from its resume offset to its end,
//!   streamed (never downloaded whole); a compressed file from its start. A followed
//!   source's last file costs one small ranged GET per look (to find its last line end); a
//!   file whose name has no known extension one 4-byte GET, once, to see if it is compressed.
//!
//! The object store's client runs on a runtime of its own, so the source's blocking calls
//! (from the reader thread, or from a pipeline's async code) never block on a runtime they
//! run on.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};

use sluice_store::{root_store, RetryPolicy, RetryStore};
use url::Url;

use crate::compression::Compression;
use crate::file::{SourceError, SourceFile};
use crate::store::{entry, FileStore};

/// The store an object-store source's URL names (`s3://bucket/prefix/`: rooted at the
/// bucket), built as a table's store is (the same URL schemes, `storage_options` keys and
/// environment), each operation retried by `retry`.
pub fn source_store(
    url: &Url,
    storage_options: &std::collections::HashMap<String, String>,
    retry: RetryPolicy,
) -> Result<Arc<dyn ObjectStore>, deltalake::DeltaTableError> {
    Ok(Arc::new(RetryStore::new(
        root_store(url, storage_options)?,
        retry,
    )))
}

/// How an [`ObjectFiles`] finds new objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// The whole prefix at every look.
    Full,
    /// Only names after the last one seen (names that grow); the whole prefix every
    /// [`FULL_LISTING_EVERY`] looks.
    Incremental,
}

impl Listing {
    pub fn parse_name(name: &str) -> Option<Listing> {
        match name {
            "full" => Some(Listing::Full),
            "incremental" => Some(Listing::Incremental),
            _ => None,
        }
    }
}

/// An incremental listing lists the whole prefix once every this many looks.
pub const FULL_LISTING_EVERY: u64 = 100;

/// Objects listed so far (incremental listings add to them).
#[derive(Debug, Default)]
struct Listed {
    files: BTreeMap<Arc<str>, SourceFile>,
    looks: u64,
}

/// The objects under a prefix of an object store.
#[derive(Debug)]
pub struct ObjectFiles {
    store: Arc<dyn ObjectStore>,
    /// The prefix, without a trailing `/` (empty: the whole bucket).
    prefix: ObjectPath,
    /// `s3://bucket/prefix/`, for messages and file locations.
    url: String,
    listing: Listing,
    /// A source of one object: its name (the others under the prefix are not the source's).
    only: Option<String>,
    listed: Mutex<Listed>,
    requests: AtomicU64,
    runtime: Option<tokio::runtime::Runtime>,
}

impl ObjectFiles {
    /// The objects of `store` (rooted at the bucket) under `prefix` (the store's own key
    /// text, not percent-encoded), which `url` names.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        url: &str,
        listing: Listing,
    ) -> Result<Self, SourceError> {
        let prefix = key_path(prefix.trim_matches('/')).map_err(|e| SourceError::Io {
            path: PathBuf::from(url),
            source: std::io::Error::other(e),
        })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sluice-source-store")
            .enable_all()
            .build()
            .map_err(|source| SourceError::Io {
                path: PathBuf::from(url),
                source,
            })?;
        Ok(ObjectFiles {
            store,
            prefix,
            url: url.to_string(),
            listing,
            only: None,
            listed: Mutex::new(Listed::default()),
            requests: AtomicU64::new(0),
            runtime: Some(runtime),
        })
    }

    /// The source `url` names in `store` (rooted at its bucket), at `url_path` in it (the
    /// URL's path, percent-encoded as a URL holds it): the objects under it as a prefix, or
    /// the one object there when the URL does not end in `/` and an object is there.
    pub fn at(
        store: Arc<dyn ObjectStore>,
        url: &str,
        url_path: &str,
        listing: Listing,
    ) -> Result<Self, SourceError> {
        let io = |e: object_store::path::Error| SourceError::Io {
            path: PathBuf::from(url),
            source: std::io::Error::other(e),
        };
        let key = ObjectPath::from_url_path(url_path).map_err(io)?;
        let path = key.as_ref();
        let is_prefix = path.is_empty() || url_path.ends_with('/');
        let prefix = ObjectFiles::new(store.clone(), path, &with_slash(url), listing)?;
        if is_prefix {
            return Ok(prefix);
        }
        let location = key.clone();
        let head = store.clone();
        prefix.requests.fetch_add(1, Ordering::Relaxed);
        if prefix
            .wait(async move { head.head(&location).await })
            .is_err()
        {
            return Ok(prefix);
        }
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
        let parent_url = url.rsplit_once('/').map_or(url, |(parent, _)| parent);
        let one = ObjectFiles::new(store, parent, &with_slash(parent_url), listing)?.only(name);
        one.requests.fetch_add(prefix.requests(), Ordering::Relaxed);
        Ok(one)
    }

    /// Only the object `name` under the prefix (a source of one file).
    pub fn only(mut self, name: &str) -> Self {
        self.only = Some(name.to_string());
        self
    }

    /// Requests sent to the store so far (lists, GETs).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime
            .as_ref()
            .expect("the runtime lives as long as the store")
    }

    /// Runs `future` on the store's runtime and waits for it, from any thread.
    fn wait<T: Send + 'static>(
        &self,
        future: impl std::future::Future<Output = T> + Send + 'static,
    ) -> T {
        let (tx, rx) = mpsc::sync_channel(1);
        self.runtime().spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv()
            .expect("the store's runtime runs every task to its end")
    }

    /// The store's key of the object `name` (a name as listed: the key's own text after the
    /// prefix). Never percent-encoded again: `dü.ndjson` and `100%.ndjson` are the keys the
    /// store listed, not `d%C3%BC.ndjson` or `100%25.ndjson`.
    fn location(&self, name: &str) -> Result<ObjectPath, SourceError> {
        let key = if self.prefix.as_ref().is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.prefix)
        };
        key_path(&key).map_err(|e| self.error(name, e.into()))
    }

    fn error(&self, name: &str, e: object_store::Error) -> SourceError {
        SourceError::Io {
            path: PathBuf::from(format!("{}{name}", self.url)),
            source: std::io::Error::other(e),
        }
    }

    /// Objects under the prefix whose names sort after `after` (all, without): names, sizes
    /// and modification times.
    fn list_after(&self, after: Option<&str>) -> Result<Vec<ListedObject>, SourceError> {
        let store = self.store.clone();
        let prefix = self.prefix.clone();
        let offset = after.map(|a| self.location(a)).transpose()?;
        let objects = self
            .wait(async move {
                let mut stream = match &offset {
                    Some(o) => store.list_with_offset(Some(&prefix), o),
                    None => store.list(Some(&prefix)),
                };
                let mut objects = Vec::new();
                while let Some(meta) = stream.next().await {
                    objects.push(meta?);
                }
                Ok::<_, object_store::Error>(objects)
            })
            .map_err(|e| self.error("", e))?;
        // A listing page holds up to 1,000 objects (S3, GCS, Azure).
        let pages = (objects.len() as u64).div_ceil(1000).max(1);
        self.requests.fetch_add(pages, Ordering::Relaxed);
        let skip = self.prefix.as_ref().len() + usize::from(!self.prefix.as_ref().is_empty());
        Ok(objects
            .into_iter()
            .filter_map(|meta| {
                let name = meta.location.as_ref().get(skip..)?.to_string();
                // Hidden, as in a directory: any part of the name starting with a dot.
                let hidden = name.split('/').any(|p| p.starts_with('.'));
                let other = self.only.as_ref().is_some_and(|only| *only != name);
                let modified_ms = Some(meta.last_modified.timestamp_millis());
                (!name.is_empty() && !hidden && !other).then_some((name, meta.size, modified_ms))
            })
            .collect())
    }

    /// The first bytes of `name` (to see whether it is compressed).
    fn head(&self, name: &str, size: u64) -> Vec<u8> {
        if size == 0 {
            return Vec::new();
        }
        let store = self.store.clone();
        let Ok(location) = self.location(name) else {
            return Vec::new();
        };
        let to = size.min(Compression::MAGIC_BYTES as u64);
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.wait(async move { store.get_range(&location, 0..to).await })
            .map(|b| b.to_vec())
            .unwrap_or_default()
    }

    fn file(&self, (name, size, modified_ms): ListedObject) -> SourceFile {
        let path = PathBuf::from(format!("{}{name}", self.url));
        entry(name.clone(), path, (size, modified_ms), || {
            self.head(&name, size)
        })
    }
}

/// An object as listed: its name under the prefix, size and modification time.
type ListedObject = (String, u64, Option<i64>);

impl FileStore for ObjectFiles {
    fn list(&self) -> Result<Vec<SourceFile>, SourceError> {
        let mut listed = self.listed.lock().expect("no panic while listing");
        listed.looks += 1;
        let full = self.listing == Listing::Full
            || listed.files.is_empty()
            || listed.looks % FULL_LISTING_EVERY == 1;
        let after = if full {
            None
        } else {
            listed.files.keys().next_back().map(|n| n.to_string())
        };
        let objects = self.list_after(after.as_deref())?;
        let mut now = if full {
            BTreeMap::new()
        } else {
            listed.files.clone()
        };
        for object in objects {
            let file = match listed.files.get(object.0.as_str()) {
                Some(known) if known.size == object.1 => known.clone(),
                _ => self.file(object),
            };
            now.insert(file.name.clone(), file);
        }
        listed.files = now;
        Ok(listed.files.values().cloned().collect())
    }

    fn open(&self, file: &SourceFile, from: u64) -> Result<Box<dyn Read + Send>, SourceError> {
        if from >= file.size {
            return Ok(Box::new(std::io::empty()));
        }
        let store = self.store.clone();
        let location = self.location(&file.name)?;
        let range = from..file.size;
        let (tx, rx) = mpsc::sync_channel::<std::io::Result<bytes::Bytes>>(4);
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.runtime().spawn(async move {
            let options = GetOptions {
                range: Some(GetRange::Bounded(range)),
                ..GetOptions::default()
            };
            let mut stream = match store.get_opts(&location, options).await {
                Ok(got) => got.into_stream(),
                Err(e) => {
                    let _ = tx.send(Err(std::io::Error::other(e)));
                    return;
                }
            };
            while let Some(part) = stream.next().await {
                let failed = part.is_err();
                // The reader went away: stop streaming.
                if tx.send(part.map_err(std::io::Error::other)).is_err() || failed {
                    return;
                }
            }
        });
        Ok(Box::new(Streamed {
            parts: rx,
            part: bytes::Bytes::new(),
            at: 0,
        }))
    }

    fn read_range(&self, file: &SourceFile, from: u64, to: u64) -> Result<Vec<u8>, SourceError> {
        let to = to.min(file.size);
        if from >= to {
            return Ok(Vec::new());
        }
        let store = self.store.clone();
        let location = self.location(&file.name)?;
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.wait(async move { store.get_range(&location, from..to).await })
            .map(|b| b.to_vec())
            .map_err(|e| self.error(&file.name, e))
    }

    fn root(&self) -> String {
        self.url.clone()
    }

    fn is_one_file(&self) -> bool {
        self.only.is_some()
    }
}

impl Drop for ObjectFiles {
    fn drop(&mut self) {
        // A runtime dropped on an async worker would panic; this one ends in the background.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// An object key as the store's path: its text as it is (`ObjectPath::from` would
/// percent-encode `%`, non-ASCII letters and other characters a second time, naming another
/// object). Refused: empty parts (`a//b`), `.` and `..` parts and control characters, which
/// object_store's paths cannot hold.
fn key_path(key: &str) -> Result<ObjectPath, object_store::path::Error> {
    ObjectPath::parse(key)
}

fn with_slash(url: &str) -> String {
    if url.ends_with('/') {
        url.to_string()
    } else {
        format!("{url}/")
    }
}

/// An object's bytes as the GET streams them.
struct Streamed {
    parts: mpsc::Receiver<std::io::Result<bytes::Bytes>>,
    part: bytes::Bytes,
    at: usize,
}

impl Read for Streamed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.part.len() {
            match self.parts.recv() {
                Ok(part) => {
                    self.part = part?;
                    self.at = 0;
                }
                // The stream ended.
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.part.len() - self.at);
        buf[..n].copy_from_slice(&self.part[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::PutPayload;

    fn put(store: &InMemory, rt: &tokio::runtime::Runtime, key: &str, bytes: &[u8]) {
        rt.block_on(store.put(&ObjectPath::from(key), PutPayload::from(bytes.to_vec())))
            .unwrap();
    }

    #[test]
    fn a_prefix_lists_reads_and_follows_its_objects() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let memory = Arc::new(InMemory::new());
        put(
            &memory,
            &rt,
            "in/2026/10/03/a.ndjson",
            b"{\"a\":1}\n{\"a\":2}\n",
        );
        put(&memory, &rt, "in/2026/10/03/.hidden", b"nope\n");
        put(&memory, &rt, "other/x.ndjson", b"{\"x\":1}\n");
        let store: Arc<dyn ObjectStore> = memory.clone();
        let files = ObjectFiles::new(store, "in/", "memory:///in/", Listing::Incremental).unwrap();
        let listed = files.list().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].name.as_ref(), "2026/10/03/a.ndjson");
        assert_eq!(
            listed[0].path,
            PathBuf::from("memory:///in/2026/10/03/a.ndjson")
        );
        let mut text = String::new();
        files
            .open(&listed[0], 8)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "{\"a\":2}\n");
        assert_eq!(files.read_range(&listed[0], 0, 3).unwrap(), b"{\"a");
        // A new object after the last name: found by a listing of what follows it.
        put(&memory, &rt, "in/2026/10/04/b", &[0x1f, 0x8b, 0, 0]);
        let before = files.requests();
        let listed = files.list().unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(
            listed[1].compression,
            Compression::Gzip,
            "by its first bytes"
        );
        assert_eq!(files.requests() - before, 2, "one listing, one 4-byte read");
        // One object named by the URL, or a prefix without its trailing slash.
        let store: Arc<dyn ObjectStore> = memory.clone();
        let one = ObjectFiles::at(
            store.clone(),
            "memory:///other/x.ndjson",
            "/other/x.ndjson",
            Listing::Full,
        )
        .unwrap();
        let listed = one.list().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].path, PathBuf::from("memory:///other/x.ndjson"));
        let prefix = ObjectFiles::at(store, "memory:///in", "/in", Listing::Full).unwrap();
        assert_eq!(prefix.list().unwrap().len(), 2);
    }

    /// Keys are used as the store lists them: a `%` or a non-ASCII letter is not encoded a
    /// second time (which named an object that is not there), in listings, reads and the
    /// incremental listing's offset; a URL's percent-encoded path names the key it encodes.
    #[test]
    fn keys_with_any_character_are_read_by_their_own_names() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let memory = Arc::new(InMemory::new());
        let names = ["dü.ndjson", "100%.ndjson", "a b+c.ndjson", "日本.ndjson"];
        for n in names {
            let key = ObjectPath::parse(format!("in/{n}")).unwrap();
            rt.block_on(memory.put(&key, PutPayload::from(format!("{n}\n").into_bytes())))
                .unwrap();
        }
        let store: Arc<dyn ObjectStore> = memory.clone();
        let files =
            ObjectFiles::at(store.clone(), "memory:///in/", "/in/", Listing::Incremental).unwrap();
        for _ in 0..2 {
            let listed = files.list().unwrap();
            assert_eq!(listed.len(), names.len());
            for f in &listed {
                let mut text = String::new();
                files.open(f, 0).unwrap().read_to_string(&mut text).unwrap();
                assert_eq!(text, format!("{}\n", f.name));
            }
        }
        let one = ObjectFiles::at(
            store,
            "memory:///in/d%C3%BC.ndjson",
            "/in/d%C3%BC.ndjson",
            Listing::Full,
        )
        .unwrap();
        let listed = one.list().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].name.as_ref(), "dü.ndjson");
        assert_eq!(one.read_range(&listed[0], 0, 3).unwrap(), "dü".as_bytes());
    }

    /// A followed source over a prefix listed incrementally: objects whose names sort after
    /// the last one are found at the next look; one that sorts before names already read is
    /// found by the next full listing, and read after them.
    #[test]
    fn an_incremental_listing_finds_new_names_and_its_full_look_finds_late_ones() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let memory = Arc::new(InMemory::new());
        put(&memory, &rt, "in/b.ndjson", b"{\"b\":1}\n");
        let store: Arc<dyn ObjectStore> = memory.clone();
        let files =
            Arc::new(ObjectFiles::new(store, "in", "memory:///in/", Listing::Incremental).unwrap());
        let mut source =
            crate::NdjsonSource::open_store(files.clone(), true, crate::FileFormat::Ndjson)
                .unwrap();
        let lines = |source: &crate::NdjsonSource| {
            let mut reader = source.reader(&Default::default(), 4096).unwrap();
            let mut n = 0;
            while let Some(c) = reader.next_chunk().unwrap() {
                n += c.as_lines().lines().count();
            }
            n
        };
        assert_eq!(lines(&source), 1);
        put(&memory, &rt, "in/c.ndjson", b"{\"c\":1}\n{\"c\":2}\n");
        assert!(source.refresh().unwrap());
        assert_eq!(lines(&source), 3);
        // A name before those read: not listed by the incremental looks...
        put(&memory, &rt, "in/a.ndjson", b"{\"a\":1}\n");
        let mut looks = 2;
        while looks % FULL_LISTING_EVERY != 0 {
            assert!(!source.refresh().unwrap(), "look {looks}");
            looks += 1;
        }
        // ...until the full one, which reads it after the others.
        assert!(source.refresh().unwrap());
        assert_eq!(lines(&source), 4);
        assert_eq!(source.files().last().unwrap().name.as_ref(), "a.ndjson");
    }
}
