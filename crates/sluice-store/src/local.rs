//! A cheaper "list after offset" for tables on a local file system.
//!
//! Every commit makes deltalake list the log after the last version it knows
//! (`list_with_offset`). S3, GCS and Azure answer that from the offset on, but object_store's
//! `LocalFileSystem` walks the whole `_delta_log` directory and converts every entry's path
//! through a URL before it compares it with the offset, so a commit at version 10,000 paid for
//! 10,000 path conversions (measured: median publish latency 10.5 ms at version 10, 57.9 ms at
//! version 10,000; `sluice-bench log-growth`). [`LocalListing`] reads the directory once and
//! compares plain names, converting and `stat`ing only the entries after the offset.
//!
//! It answers only the case it can answer exactly like `LocalFileSystem`: a directory holding
//! regular files with plain names (`[A-Za-z0-9._-]`, as every Delta log file name is) under a
//! plain prefix. Anything else (a subdirectory, a symlink, a name that needs escaping or is an
//! in-flight upload) goes to the wrapped store unchanged.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

/// Wraps the `LocalFileSystem` store rooted at the file system root (`/`).
#[derive(Debug)]
pub struct LocalListing {
    inner: Arc<dyn ObjectStore>,
}

impl LocalListing {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        LocalListing { inner }
    }
}

impl std::fmt::Display for LocalListing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LocalListing({})", self.inner)
    }
}

/// A name object_store keeps as it is in a path (no escaping, not an upload in flight).
fn plain(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The entries of `dir` after `offset`, or `None` where the wrapped store must answer.
fn list_after(dir: &str, offset: &str) -> Option<Vec<ObjectMeta>> {
    let entries = match std::fs::read_dir(PathBuf::from(format!("/{dir}"))) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(Vec::new()),
        Err(_) => return None,
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.ok()?;
        let name = entry.file_name();
        let name = name.to_str().filter(|n| plain(n))?;
        if !entry.file_type().ok()?.is_file() {
            // A directory (listed recursively) or a symlink (followed): not answered here.
            return None;
        }
        let location = format!("{dir}/{name}");
        if location.as_str() <= offset {
            continue;
        }
        let metadata = entry.metadata().ok()?;
        found.push(ObjectMeta {
            last_modified: metadata.modified().ok()?.into(),
            size: metadata.len(),
            e_tag: Some(etag(&metadata)),
            version: None,
            location: Path::from(location),
        });
    }
    Some(found)
}

/// `LocalFileSystem`'s ETag: inode, modification time (µs) and size, in hex.
fn etag(metadata: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    let mtime = metadata
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .unwrap_or_default()
        .as_micros();
    format!("{:x}-{mtime:x}-{:x}", metadata.ino(), metadata.len())
}

#[async_trait]
impl ObjectStore for LocalListing {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<bytes::Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let Some(dir) = prefix
            .map(|p| p.as_ref().to_string())
            .filter(|p| !p.is_empty() && p.split('/').all(plain))
        else {
            return self.inner.list_with_offset(prefix, offset);
        };
        let inner = self.inner.clone();
        let (prefix, offset) = (prefix.cloned(), offset.clone());
        futures::stream::once(async move {
            let listed = {
                let (dir, offset) = (dir.clone(), offset.to_string());
                tokio::task::spawn_blocking(move || list_after(&dir, &offset))
                    .await
                    .ok()
                    .flatten()
            };
            match listed {
                Some(found) => futures::stream::iter(found.into_iter().map(Ok)).boxed(),
                None => inner.list_with_offset(prefix.as_ref(), &offset),
            }
        })
        .flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use futures::TryStreamExt;
    use object_store::local::LocalFileSystem;

    use super::*;

    async fn listed(store: &dyn ObjectStore, prefix: &Path, offset: &Path) -> Vec<ObjectMeta> {
        let mut all: Vec<ObjectMeta> = store
            .list_with_offset(Some(prefix), offset)
            .try_collect()
            .await
            .unwrap();
        all.sort_by(|a, b| a.location.cmp(&b.location));
        all
    }

    #[tokio::test]
    async fn lists_after_an_offset_exactly_as_the_local_file_system_does() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("t/_delta_log");
        std::fs::create_dir_all(&log).unwrap();
        for v in 0..30u64 {
            std::fs::write(log.join(format!("{v:020}.json")), vec![b'x'; v as usize]).unwrap();
        }
        std::fs::write(log.join("00000000000000000020.checkpoint.parquet"), b"p").unwrap();
        std::fs::write(log.join("_last_checkpoint"), b"{}").unwrap();
        let inner: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new());
        assert_eq!(inner.to_string(), "LocalFileSystem(file:///)");
        let fast = LocalListing::new(inner.clone());
        let prefix = Path::from_filesystem_path(&log).unwrap();
        let missing = Path::from_filesystem_path(dir.path())
            .unwrap()
            .clone()
            .join("nothing");
        for offset in [
            prefix.clone().join("00000000000000000000.json"),
            prefix.clone().join("00000000000000000019.json"),
            prefix.clone().join("00000000000000000029.json"),
            prefix.clone().join("zzz"),
        ] {
            let expected = listed(inner.as_ref(), &prefix, &offset).await;
            assert_eq!(listed(&fast, &prefix, &offset).await, expected, "{offset}");
        }
        assert_eq!(
            listed(
                &fast,
                &prefix,
                &prefix.clone().join("00000000000000000019.json")
            )
            .await
            .len(),
            12
        );
        assert!(listed(&fast, &missing, &missing.clone().join("0"))
            .await
            .is_empty());
        // A subdirectory (listed recursively) and an escaped name: the wrapped store answers.
        std::fs::create_dir_all(log.join("_commits")).unwrap();
        std::fs::write(log.join("_commits/00000000000000000031.json"), b"c").unwrap();
        std::fs::write(log.join("a b.json"), b"s").unwrap();
        let offset = prefix.clone().join("00000000000000000025.json");
        let expected = listed(inner.as_ref(), &prefix, &offset).await;
        assert_eq!(expected.len(), 7, "{expected:?}");
        assert_eq!(listed(&fast, &prefix, &offset).await, expected);
    }
}
