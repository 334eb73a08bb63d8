//! Test support for sluice (not published): an [`ObjectStore`] wrapper that injects faults.
//!
//! sluice takes its object store through one seam (`TableOptions::store`); tests put a
//! [`FaultStore`] there and the library runs unchanged, with no test-only branches.
//!
//! - [`FaultPlan::CrashAfter`]: operations `1..N` run; operation `N`, when it writes, *lands but
//!   reports failure* (the "did it commit or not?" ambiguity of a process that dies before the
//!   response arrives); every operation after `N` fails without touching the store, as if the
//!   process were gone. A fresh pipeline over the inner store is the restarted process.
//! - [`FaultPlan::Transient`]: each operation fails with probability `fail_per_mille / 1000`
//!   from a seeded generator (half of the failing writes land first), optionally after a random
//!   latency.
//! - [`FaultPlan::Outage`]: operations `from..from + ops` fail without touching the store (a
//!   store that was unreachable for a while); every other operation runs.
//! - [`Turnstile`]: orders the Delta commit attempts (`_delta_log/*.json` put-if-absent) of
//!   several writers, so a test can interleave two pipelines deterministically.
//!
//! Operations are numbered in the order they are issued; concurrent operations (Delta log
//! replay reads files in parallel) are numbered in the order the runtime polls them.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetRange, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    UploadPart,
};

mod turnstile;

pub use turnstile::Turnstile;

/// Which faults a [`FaultStore`] injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPlan {
    /// No faults; operations are still counted.
    PassThrough,
    /// Operation `ops` is the last one with an effect (a write lands but reports failure);
    /// every later operation fails.
    CrashAfter { ops: u64 },
    /// Operations `from..from + ops` fail without touching the store; the rest run.
    Outage { from: u64, ops: u64 },
    /// Each operation fails with probability `fail_per_mille / 1000`; each waits up to
    /// `latency_ms_max` first.
    Transient {
        fail_per_mille: u32,
        seed: u64,
        latency_ms_max: u64,
    },
}

/// What one operation did, for reproducing a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpRecord {
    /// 1-based operation number.
    pub n: u64,
    pub kind: &'static str,
    pub path: String,
    pub outcome: Outcome,
    /// The byte ranges a ranged read asked for (a get of a bounded range, a get_ranges);
    /// empty for a read of the whole object and for every other operation.
    pub ranges: Vec<Range<u64>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Ran and reported its result.
    Ran,
    /// Failed without touching the store.
    FailedBefore,
    /// Ran (a write landed), then reported failure.
    FailedAfter,
}

struct State {
    plan: FaultPlan,
    ops: AtomicU64,
    rng: Mutex<u64>,
    log: Mutex<Vec<OpRecord>>,
    turnstile: Option<(Arc<Turnstile>, usize)>,
    /// Runs once, before the first Delta commit attempt goes to the store.
    before_first_commit: Mutex<Option<futures::future::BoxFuture<'static, ()>>>,
}

/// An [`ObjectStore`] that counts operations and injects the faults of its [`FaultPlan`].
#[derive(Clone)]
pub struct FaultStore {
    inner: Arc<dyn ObjectStore>,
    state: Arc<State>,
}

impl fmt::Debug for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultStore({:?}, {})", self.state.plan, self.inner)
    }
}

impl fmt::Display for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultStore({})", self.inner)
    }
}

impl FaultStore {
    pub fn new(inner: Arc<dyn ObjectStore>, plan: FaultPlan) -> Self {
        let seed = match plan {
            FaultPlan::Transient { seed, .. } => seed,
            _ => 0,
        };
        FaultStore {
            inner,
            state: Arc::new(State {
                plan,
                ops: AtomicU64::new(0),
                rng: Mutex::new(seed),
                log: Mutex::new(Vec::new()),
                turnstile: None,
                before_first_commit: Mutex::new(None),
            }),
        }
    }

    /// Makes this store's Delta commit attempts wait for writer `writer`'s turn.
    pub fn with_turnstile(
        inner: Arc<dyn ObjectStore>,
        turnstile: Arc<Turnstile>,
        writer: usize,
    ) -> Self {
        let mut store = FaultStore::new(inner, FaultPlan::PassThrough);
        Arc::get_mut(&mut store.state)
            .expect("a new store's state is not shared")
            .turnstile = Some((turnstile, writer));
        store
    }

    /// Runs `hook` once, before this store's first Delta commit attempt (`_delta_log/*.json`
    /// put-if-absent) goes to the store: another writer's commit placed exactly between a
    /// writer's reads and its commit.
    pub fn with_hook_before_first_commit(
        inner: Arc<dyn ObjectStore>,
        hook: futures::future::BoxFuture<'static, ()>,
    ) -> Self {
        let store = FaultStore::new(inner, FaultPlan::PassThrough);
        *store.state.before_first_commit.lock().expect("hook lock") = Some(hook);
        store
    }

    /// Operations issued so far.
    pub fn ops(&self) -> u64 {
        self.state.ops.load(Ordering::SeqCst)
    }

    /// Every operation issued so far, with its outcome.
    pub fn log(&self) -> Vec<OpRecord> {
        self.state.log.lock().expect("log lock").clone()
    }

    /// Operations that failed (before or after running).
    pub fn faults(&self) -> usize {
        self.log()
            .iter()
            .filter(|r| r.outcome != Outcome::Ran)
            .count()
    }

    fn next_u64(&self) -> u64 {
        let mut s = self.state.rng.lock().expect("rng lock");
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Numbers the operation and decides its fate (after any injected latency).
    async fn begin(
        &self,
        kind: &'static str,
        path: &Path,
        writes: bool,
        ranges: Vec<Range<u64>>,
    ) -> (u64, Outcome) {
        let n = self.state.ops.fetch_add(1, Ordering::SeqCst) + 1;
        let outcome = match self.state.plan {
            FaultPlan::PassThrough => Outcome::Ran,
            FaultPlan::CrashAfter { ops } => {
                if n < ops || (n == ops && !writes) {
                    Outcome::Ran
                } else if n == ops {
                    Outcome::FailedAfter
                } else {
                    Outcome::FailedBefore
                }
            }
            FaultPlan::Outage { from, ops } => {
                if (from..from.saturating_add(ops)).contains(&n) {
                    Outcome::FailedBefore
                } else {
                    Outcome::Ran
                }
            }
            FaultPlan::Transient {
                fail_per_mille,
                latency_ms_max,
                ..
            } => {
                if latency_ms_max > 0 {
                    let ms = self.next_u64() % (latency_ms_max + 1);
                    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                }
                let roll = self.next_u64();
                if roll % 1000 < u64::from(fail_per_mille) {
                    if writes && (roll >> 32).is_multiple_of(2) {
                        Outcome::FailedAfter
                    } else {
                        Outcome::FailedBefore
                    }
                } else {
                    Outcome::Ran
                }
            }
        };
        self.state.log.lock().expect("log lock").push(OpRecord {
            n,
            kind,
            path: path.to_string(),
            outcome,
            ranges,
        });
        (n, outcome)
    }

    fn error(n: u64, kind: &str, path: &Path, outcome: Outcome) -> object_store::Error {
        let what = match outcome {
            Outcome::FailedAfter => "ran, then reported failure",
            _ => "failed",
        };
        object_store::Error::Generic {
            store: "sluice-faults",
            source: format!("injected fault: operation {n} ({kind} {path}) {what}").into(),
        }
    }

    /// Runs a single-result operation under the plan.
    async fn run<T, F>(
        &self,
        kind: &'static str,
        path: &Path,
        writes: bool,
        op: F,
    ) -> object_store::Result<T>
    where
        F: std::future::Future<Output = object_store::Result<T>>,
    {
        self.run_reading(kind, path, writes, Vec::new(), op).await
    }

    /// As [`FaultStore::run`], recording the byte `ranges` the operation reads.
    async fn run_reading<T, F>(
        &self,
        kind: &'static str,
        path: &Path,
        writes: bool,
        ranges: Vec<Range<u64>>,
        op: F,
    ) -> object_store::Result<T>
    where
        F: std::future::Future<Output = object_store::Result<T>>,
    {
        let (n, outcome) = self.begin(kind, path, writes, ranges).await;
        match outcome {
            Outcome::Ran => op.await,
            Outcome::FailedBefore => Err(Self::error(n, kind, path, outcome)),
            Outcome::FailedAfter => {
                let _ = op.await;
                Err(Self::error(n, kind, path, outcome))
            }
        }
    }

    fn is_commit(path: &Path, opts: &PutOptions) -> bool {
        let p = path.as_ref();
        opts.mode == PutMode::Create && p.contains("_delta_log/") && p.ends_with(".json")
    }
}

#[async_trait]
impl ObjectStore for FaultStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if Self::is_commit(location, &opts) {
            let hook = self
                .state
                .before_first_commit
                .lock()
                .expect("hook lock")
                .take();
            if let Some(hook) = hook {
                hook.await;
            }
        }
        let gate = match &self.state.turnstile {
            Some((t, w)) if Self::is_commit(location, &opts) => Some((t.clone(), *w)),
            _ => None,
        };
        if let Some((t, w)) = &gate {
            t.enter(*w).await;
        }
        let result = self
            .run(
                "put",
                location,
                true,
                self.inner.put_opts(location, payload, opts),
            )
            .await;
        if let Some((t, w)) = &gate {
            t.leave(*w, result.is_ok());
        }
        result
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let upload = self
            .run(
                "put_multipart",
                location,
                false,
                self.inner.put_multipart_opts(location, opts),
            )
            .await?;
        Ok(Box::new(FaultUpload {
            store: self.clone(),
            path: location.clone(),
            inner: upload,
        }))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let kind = if options.head { "head" } else { "get" };
        let ranges = match &options.range {
            Some(GetRange::Bounded(r)) => vec![r.clone()],
            _ => Vec::new(),
        };
        self.run_reading(
            kind,
            location,
            false,
            ranges,
            self.inner.get_opts(location, options),
        )
        .await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<bytes::Bytes>> {
        self.run_reading(
            "get_ranges",
            location,
            false,
            ranges.to_vec(),
            self.inner.get_ranges(location, ranges),
        )
        .await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let store = self.clone();
        locations
            .then(move |location| {
                let store = store.clone();
                async move {
                    let location = location?;
                    let inner = store.inner.clone();
                    let path = location.clone();
                    let done = location.clone();
                    store
                        .run("delete", &location, true, async move {
                            let mut one = inner.delete_stream(
                                futures::stream::once(async move { Ok(path) }).boxed(),
                            );
                            match one.next().await {
                                Some(r) => r,
                                None => Ok(done),
                            }
                        })
                        .await
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.list_checked("list", prefix, self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.list_checked(
            "list_with_offset",
            prefix,
            self.inner.list_with_offset(prefix, offset),
        )
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let path = prefix.cloned().unwrap_or_default();
        self.run(
            "list_with_delimiter",
            &path,
            false,
            self.inner.list_with_delimiter(prefix),
        )
        .await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.run("copy", to, true, self.inner.copy_opts(from, to, options))
            .await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.run(
            "rename",
            to,
            true,
            self.inner.rename_opts(from, to, options),
        )
        .await
    }
}

impl FaultStore {
    /// A listing is one operation, decided when its first item is polled.
    fn list_checked(
        &self,
        kind: &'static str,
        prefix: Option<&Path>,
        inner: BoxStream<'static, object_store::Result<ObjectMeta>>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let store = self.clone();
        let path = prefix.cloned().unwrap_or_default();
        futures::stream::once(async move {
            let (n, outcome) = store.begin(kind, &path, false, Vec::new()).await;
            match outcome {
                Outcome::Ran => inner,
                _ => {
                    futures::stream::once(
                        async move { Err(FaultStore::error(n, kind, &path, outcome)) },
                    )
                    .boxed()
                }
            }
        })
        .flatten()
        .boxed()
    }
}

/// A multipart upload whose completion is one (writing) operation of its store.
#[derive(Debug)]
struct FaultUpload {
    store: FaultStore,
    path: Path,
    inner: Box<dyn MultipartUpload>,
}

#[async_trait]
impl MultipartUpload for FaultUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        let store = self.store.clone();
        let path = self.path.clone();
        store
            .run("complete_multipart", &path, true, self.inner.complete())
            .await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests;
