//! Bounded, jittered retries of object-store operations.
//!
//! Every store operation sluice issues (staging puts, log reads, commits) goes through a
//! [`RetryStore`]. Failures that may be transient are retried up to
//! [`RetryPolicy::attempts_max`] times with exponential backoff and jitter; answers that are
//! facts about the store (not found, already exists, precondition) are returned at once.
//!
//! A retried put-if-absent is safe: if an attempt landed but reported failure, the retry
//! gets "already exists". The store then reads the object back: holding exactly the bytes
//! being put, it is this put's own write, and the put succeeded (a staged file or a commit
//! is not given up for a timeout that hid a success). Holding other bytes, it is another
//! writer's object, and "already exists" is the answer: a Delta commit then reports that the
//! table moved, and the runner re-reads the table (see `sluice-ingest`).

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

/// How often and how patiently a store operation is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries per operation, the first included (1 = no retries).
    pub attempts_max: u32,
    /// Backoff before the first retry; doubles per retry up to `backoff_ms_max`.
    pub backoff_ms_base: u64,
    pub backoff_ms_max: u64,
    /// Seeds the jitter (the caller's randomness: library code has none of its own).
    pub jitter_seed: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts_max: 6,
            backoff_ms_base: 50,
            backoff_ms_max: 5_000,
            jitter_seed: 0,
        }
    }
}

/// Whether an error may go away by itself.
pub fn is_transient(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    !matches!(
        e,
        E::NotFound { .. }
            | E::AlreadyExists { .. }
            | E::Precondition { .. }
            | E::NotModified { .. }
            | E::NotImplemented { .. }
            | E::NotSupported { .. }
            | E::InvalidPath { .. }
            | E::PermissionDenied { .. }
            | E::Unauthenticated { .. }
            | E::UnknownConfigurationKey { .. }
    )
}

/// An [`ObjectStore`] that retries the transient failures of the store it wraps.
#[derive(Clone)]
pub struct RetryStore {
    inner: Arc<dyn ObjectStore>,
    policy: RetryPolicy,
    rng: Arc<Mutex<u64>>,
}

impl fmt::Debug for RetryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RetryStore({:?}, {})", self.policy, self.inner)
    }
}

impl fmt::Display for RetryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RetryStore({})", self.inner)
    }
}

impl RetryStore {
    pub fn new(inner: Arc<dyn ObjectStore>, policy: RetryPolicy) -> Self {
        RetryStore {
            inner,
            policy,
            rng: Arc::new(Mutex::new(policy.jitter_seed)),
        }
    }

    /// The wait before retry number `retry` (1-based): full backoff, minus up to half as jitter.
    fn backoff(&self, retry: u32) -> Duration {
        let exp = self
            .policy
            .backoff_ms_base
            .saturating_mul(1u64 << retry.saturating_sub(1).min(20));
        let cap = exp.min(self.policy.backoff_ms_max);
        let jitter = if cap >= 2 {
            self.next_u64() % (cap / 2 + 1)
        } else {
            0
        };
        Duration::from_millis(cap - jitter)
    }

    fn next_u64(&self) -> u64 {
        let mut s = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    async fn retry<T, F, Fut>(&self, what: &str, path: &Path, mut op: F) -> object_store::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = object_store::Result<T>>,
    {
        let attempts = self.policy.attempts_max.max(1);
        let mut tried = 1;
        loop {
            match op().await {
                Ok(v) => return Ok(v),
                Err(e) if tried < attempts && is_transient(&e) => {
                    tracing::debug!(op = what, %path, attempt = tried, error = %e, "retrying a store operation");
                    metrics::counter!("sluice_store_retries_total", "op" => what.to_string())
                        .increment(1);
                    tokio::time::sleep(self.backoff(tried)).await;
                    tried += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// After a create-only put of `payload` at `location` failed and a retry found the
    /// object there: the object's version if it holds exactly `payload` (an earlier attempt
    /// landed before it reported failure), `None` if it holds anything else or cannot be
    /// read (then "already exists" stands).
    async fn landed_put(&self, location: &Path, payload: &PutPayload) -> Option<PutResult> {
        let got = self
            .retry("get", location, || {
                self.inner.get_opts(location, GetOptions::default())
            })
            .await
            .ok()?;
        if got.meta.size != payload.content_length() as u64 {
            return None;
        }
        let (e_tag, version) = (got.meta.e_tag.clone(), got.meta.version.clone());
        let stored = got.bytes().await.ok()?;
        let mut at = 0;
        for chunk in payload.iter() {
            if stored.get(at..at + chunk.len()) != Some(&chunk[..]) {
                return None;
            }
            at += chunk.len();
        }
        tracing::debug!(%location, "a create-only put that reported failure had landed");
        metrics::counter!("sluice_store_landed_puts_total").increment(1);
        Some(PutResult { e_tag, version })
    }

    /// Lists with retries; a listing that fails part-way is retried from the start.
    fn list_retrying(
        &self,
        what: &'static str,
        prefix: Option<&Path>,
        offset: Option<&Path>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let this = self.clone();
        let prefix = prefix.cloned();
        let offset = offset.cloned();
        futures::stream::once(async move {
            let path = prefix.clone().unwrap_or_default();
            let listed = this
                .retry(what, &path, || {
                    let stream = match &offset {
                        Some(o) => this.inner.list_with_offset(prefix.as_ref(), o),
                        None => this.inner.list(prefix.as_ref()),
                    };
                    stream.try_collect::<Vec<_>>()
                })
                .await;
            match listed {
                Ok(items) => futures::stream::iter(items.into_iter().map(Ok)).boxed(),
                Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
            }
        })
        .flatten()
        .boxed()
    }
}

#[async_trait]
impl ObjectStore for RetryStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let create = matches!(opts.mode, PutMode::Create);
        let failed_before = AtomicBool::new(false);
        let put = self
            .retry("put", location, || {
                let attempt = self.inner.put_opts(location, payload.clone(), opts.clone());
                let failed_before = &failed_before;
                async move {
                    let result = attempt.await;
                    if matches!(&result, Err(e) if is_transient(e)) {
                        failed_before.store(true, Ordering::Relaxed);
                    }
                    result
                }
            })
            .await;
        match put {
            Err(object_store::Error::AlreadyExists { path, source })
                if create && failed_before.load(Ordering::Relaxed) =>
            {
                self.landed_put(location, &payload)
                    .await
                    .ok_or(object_store::Error::AlreadyExists { path, source })
            }
            other => other,
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.retry("put_multipart", location, || {
            self.inner.put_multipart_opts(location, opts.clone())
        })
        .await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.retry("get", location, || {
            self.inner.get_opts(location, options.clone())
        })
        .await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<bytes::Bytes>> {
        self.retry("get_ranges", location, || {
            self.inner.get_ranges(location, ranges)
        })
        .await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let this = self.clone();
        locations
            .then(move |location| {
                let this = this.clone();
                async move {
                    let location = location?;
                    this.retry("delete", &location, || {
                        let one =
                            futures::stream::once(futures::future::ready(Ok(location.clone())))
                                .boxed();
                        let mut deleted = this.inner.delete_stream(one);
                        let location = location.clone();
                        // Deleting what is already gone is done (an earlier attempt may have
                        // landed before reporting failure).
                        async move {
                            match deleted.next().await {
                                Some(Err(object_store::Error::NotFound { .. })) | None => {
                                    Ok(location)
                                }
                                Some(r) => r,
                            }
                        }
                    })
                    .await
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.list_retrying("list", prefix, None)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.list_retrying("list_with_offset", prefix, Some(offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let path = prefix.cloned().unwrap_or_default();
        self.retry("list_with_delimiter", &path, || {
            self.inner.list_with_delimiter(prefix)
        })
        .await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.retry("copy", to, || {
            self.inner.copy_opts(from, to, options.clone())
        })
        .await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.retry("rename", to, || {
            self.inner.rename_opts(from, to, options.clone())
        })
        .await
    }
}

#[cfg(test)]
mod tests;
