//! Write nothing, run everything: a store that reads another and keeps its own writes and
//! deletes in memory ([`Overlay`]), and [`write_to_memory`], which puts one in front of
//! every store the process opens afterwards. `sluice run --dry-run` runs the whole pipeline
//! this way (its files, commits, dead letters and derived tables included, each against the
//! tables as they are), reads back what it would have published, and leaves every store as
//! it found it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use deltalake::logstore::ObjectStoreRef;
use deltalake::logstore::{object_store_factories, ObjectStoreFactory, StorageConfig};
use deltalake::DeltaResult;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyMode, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
    RenameOptions, RenameTargetMode,
};
use url::Url;

/// Reads `base` where it has not written or deleted itself; writes and deletes only in memory.
#[derive(Debug)]
pub struct Overlay {
    base: Arc<dyn ObjectStore>,
    upper: Arc<InMemory>,
    /// Paths deleted through the overlay and not written since: absent, whatever the base
    /// holds.
    deleted: Arc<Mutex<HashSet<Path>>>,
}

impl Overlay {
    pub fn new(base: Arc<dyn ObjectStore>) -> Self {
        Overlay {
            base,
            upper: Arc::new(InMemory::new()),
            deleted: Arc::default(),
        }
    }

    fn is_deleted(&self, location: &Path) -> bool {
        is_deleted(&self.deleted, location)
    }

    fn undelete(&self, location: &Path) {
        self.deleted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(location);
    }

    /// Whether the base holds `location` and the overlay has not deleted it.
    async fn in_base(&self, location: &Path) -> object_store::Result<bool> {
        if self.is_deleted(location) {
            return Ok(false);
        }
        match self.base.head(location).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn is_deleted(deleted: &Mutex<HashSet<Path>>, location: &Path) -> bool {
    deleted
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(location)
}

impl std::fmt::Display for Overlay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Overlay({})", self.base)
    }
}

#[async_trait]
impl ObjectStore for Overlay {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        // A create fails where the base holds the object; the memory store's own create is
        // atomic for what the overlay wrote (the base does not change under a dry run).
        if opts.mode == PutMode::Create && self.in_base(location).await? {
            return Err(object_store::Error::AlreadyExists {
                path: location.to_string(),
                source: "the object exists".into(),
            });
        }
        let put = self.upper.put_opts(location, payload, opts).await?;
        self.undelete(location);
        Ok(put)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let upload = self.upper.put_multipart_opts(location, opts).await?;
        self.undelete(location);
        Ok(upload)
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        match self.upper.get_opts(location, options.clone()).await {
            Err(object_store::Error::NotFound { .. }) if !self.is_deleted(location) => {
                self.base.get_opts(location, options).await
            }
            got => got,
        }
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<bytes::Bytes>> {
        match self.upper.get_ranges(location, ranges).await {
            Err(object_store::Error::NotFound { .. }) if !self.is_deleted(location) => {
                self.base.get_ranges(location, ranges).await
            }
            got => got,
        }
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let (upper, deleted) = (self.upper.clone(), self.deleted.clone());
        locations
            .and_then(move |location| {
                let (upper, deleted) = (upper.clone(), deleted.clone());
                async move {
                    deleted
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(location.clone());
                    match upper.delete(&location).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(location),
                        Err(e) => Err(e),
                    }
                }
            })
            .boxed()
    }

    /// Both stores' objects, in the order of their locations (as S3 lists, and as the Delta
    /// log's readers expect of a listing).
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let upper = self.upper.list(prefix);
        let base = self.base.list(prefix);
        let deleted = self.deleted.clone();
        futures::stream::once(async move {
            let merged = async {
                let mut all: BTreeMap<Path, ObjectMeta> = BTreeMap::new();
                let from_base: Vec<ObjectMeta> = base.try_collect().await?;
                for m in from_base {
                    if !is_deleted(&deleted, &m.location) {
                        all.insert(m.location.clone(), m);
                    }
                }
                let written: Vec<ObjectMeta> = upper.try_collect().await?;
                all.extend(written.into_iter().map(|m| (m.location.clone(), m)));
                Ok::<_, object_store::Error>(all)
            };
            match merged.await {
                Ok(all) => futures::stream::iter(all.into_values().map(Ok)).boxed(),
                Err(e) => futures::stream::iter([Err(e)]).boxed(),
            }
        })
        .flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let upper = self.upper.list_with_delimiter(prefix).await?;
        let base = self.base.list_with_delimiter(prefix).await?;
        let mut objects: HashMap<Path, ObjectMeta> = base
            .objects
            .into_iter()
            .filter(|m| !self.is_deleted(&m.location))
            .map(|m| (m.location.clone(), m))
            .collect();
        objects.extend(upper.objects.into_iter().map(|m| (m.location.clone(), m)));
        let mut common_prefixes = base.common_prefixes;
        common_prefixes.extend(upper.common_prefixes);
        common_prefixes.sort();
        common_prefixes.dedup();
        let mut objects: Vec<ObjectMeta> = objects.into_values().collect();
        objects.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(ListResult {
            common_prefixes,
            objects,
        })
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        let bytes = self
            .get_opts(from, GetOptions::default())
            .await?
            .bytes()
            .await?;
        let mode = match options.mode {
            CopyMode::Overwrite => PutMode::Overwrite,
            CopyMode::Create => PutMode::Create,
        };
        self.put_opts(to, bytes.into(), mode.into()).await?;
        Ok(())
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        let mode = match options.target_mode {
            RenameTargetMode::Overwrite => CopyMode::Overwrite,
            RenameTargetMode::Create => CopyMode::Create,
        };
        self.copy_opts(from, to, CopyOptions::new().with_mode(mode))
            .await?;
        self.delete(from).await
    }
}

/// Puts an [`Overlay`] in front of every store that the store factories registered now
/// (deltalake's, which sluice opens every table and object-store source through) build from
/// here on: one overlay per store root (scheme and authority), so every table of one bucket
/// sees the others' writes. For the rest of the process: nothing it writes reaches a store.
pub fn write_to_memory() {
    let registry = object_store_factories();
    let registered: Vec<(Url, Arc<dyn ObjectStoreFactory>)> = registry
        .iter()
        .map(|e| (e.key().clone(), e.value().clone()))
        .collect();
    for (scheme, inner) in registered {
        let overlays = Arc::new(OverlayFactory {
            inner,
            roots: Mutex::default(),
        });
        registry.insert(scheme, overlays);
    }
}

/// Builds the stores of one URL scheme as `inner` does, each behind the overlay of its root.
struct OverlayFactory {
    inner: Arc<dyn ObjectStoreFactory>,
    roots: Mutex<HashMap<String, Arc<Overlay>>>,
}

impl ObjectStoreFactory for OverlayFactory {
    fn parse_url_opts(
        &self,
        url: &Url,
        config: &StorageConfig,
    ) -> DeltaResult<(ObjectStoreRef, Path)> {
        let (store, path) = self.inner.parse_url_opts(url, config)?;
        let root = format!("{}://{}", url.scheme(), url.authority());
        let overlay = self
            .roots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(root)
            .or_insert_with(|| Arc::new(Overlay::new(store)))
            .clone();
        Ok((overlay, path))
    }
}

#[cfg(test)]
mod tests {
    use object_store::local::LocalFileSystem;

    use super::*;

    async fn listed(store: &dyn ObjectStore, prefix: &Path) -> Vec<String> {
        let mut names: Vec<String> = store
            .list(Some(prefix))
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        names.sort();
        names
    }

    #[tokio::test]
    async fn reads_the_base_writes_only_memory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("t/_delta_log")).unwrap();
        std::fs::write(dir.path().join("t/_delta_log/0.json"), b"zero").unwrap();
        std::fs::write(dir.path().join("t/a.parquet"), b"a").unwrap();
        let before = std::fs::read_dir(dir.path().join("t")).unwrap().count();
        let base: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new());
        let o = Overlay::new(base.clone());
        let t = Path::from_filesystem_path(dir.path().join("t")).unwrap();
        let at = |name: &str| t.clone().join(name);
        let log = |v: &str| t.clone().join("_delta_log").join(v);

        // A commit that exists in the base cannot be created again; a new one can, once.
        let create = || PutOptions::from(PutMode::Create);
        let exists = o.put_opts(&log("0.json"), "x".into(), create()).await;
        assert!(matches!(
            exists,
            Err(object_store::Error::AlreadyExists { .. })
        ));
        o.put_opts(&log("1.json"), "one".into(), create())
            .await
            .unwrap();
        let again = o.put_opts(&log("1.json"), "x".into(), create()).await;
        assert!(matches!(
            again,
            Err(object_store::Error::AlreadyExists { .. })
        ));
        let read = |p: Path| {
            let o = &o;
            async move { o.get(&p).await.unwrap().bytes().await.unwrap() }
        };
        assert_eq!(read(log("1.json")).await.as_ref(), b"one");
        assert_eq!(read(log("0.json")).await.as_ref(), b"zero");

        // Deleted: gone from reads and listings, still in the base; written again: back.
        o.delete(&at("a.parquet")).await.unwrap();
        assert!(matches!(
            o.get(&at("a.parquet")).await,
            Err(object_store::Error::NotFound { .. })
        ));
        o.put(&at("b.parquet"), "b".into()).await.unwrap();
        o.copy(&at("b.parquet"), &at("c.parquet")).await.unwrap();
        o.rename(&at("c.parquet"), &at("d.parquet")).await.unwrap();
        assert_eq!(
            listed(&o, &t).await,
            [
                log("0.json"),
                log("1.json"),
                at("b.parquet"),
                at("d.parquet")
            ]
            .map(|p| p.to_string())
        );
        let top = o.list_with_delimiter(Some(&t)).await.unwrap();
        let names: Vec<String> = top.objects.iter().map(|m| m.location.to_string()).collect();
        assert_eq!(
            names,
            [at("b.parquet"), at("d.parquet")].map(|p| p.to_string())
        );
        assert_eq!(top.common_prefixes, [t.clone().join("_delta_log")]);
        o.put(&at("a.parquet"), "new a".into()).await.unwrap();
        assert_eq!(read(at("a.parquet")).await.as_ref(), b"new a");

        // The base is as it was.
        assert_eq!(
            std::fs::read_dir(dir.path().join("t")).unwrap().count(),
            before
        );
        assert_eq!(std::fs::read(dir.path().join("t/a.parquet")).unwrap(), b"a");
        assert!(!dir.path().join("t/_delta_log/1.json").exists());
        assert_eq!(listed(base.as_ref(), &t).await.len(), 2);
    }
}
