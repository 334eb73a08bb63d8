//! A retried create-only put: its own landed write is success, another writer's object is
//! "already exists".

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};

use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::ObjectStoreExt;

use super::*;

/// A store whose first `failing` puts fail after writing `landed` (when set) at the location:
/// a timeout that hid a write, its own or another writer's.
#[derive(Debug)]
struct FlakyPuts {
    inner: InMemory,
    failing: AtomicU32,
    landed: Option<&'static [u8]>,
}

impl fmt::Display for FlakyPuts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FlakyPuts")
    }
}

#[async_trait]
impl ObjectStore for FlakyPuts {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let failing = self
            .failing
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if !failing {
            return self.inner.put_opts(location, payload, opts).await;
        }
        if let Some(bytes) = self.landed {
            self.inner
                .put_opts(location, bytes.into(), opts)
                .await
                .expect("the landed write");
        }
        Err(object_store::Error::Generic {
            store: "FlakyPuts",
            source: "connection reset after the request was sent".into(),
        })
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

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
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
}

fn retrying(failing: u32, landed: Option<&'static [u8]>) -> (Arc<FlakyPuts>, RetryStore) {
    let flaky = Arc::new(FlakyPuts {
        inner: InMemory::new(),
        failing: AtomicU32::new(failing),
        landed,
    });
    let policy = RetryPolicy {
        attempts_max: 4,
        backoff_ms_base: 0,
        backoff_ms_max: 0,
        jitter_seed: 7,
    };
    (flaky.clone(), RetryStore::new(flaky, policy))
}

fn create() -> PutOptions {
    PutOptions::from(PutMode::Create)
}

/// Two chunks, so the comparison walks a payload of more than one piece.
fn payload(bytes: &'static [u8]) -> PutPayload {
    let (a, b) = bytes.split_at(bytes.len() / 2);
    PutPayload::from_iter([bytes::Bytes::from_static(a), bytes::Bytes::from_static(b)])
}

async fn stored(store: &FlakyPuts, location: &Path) -> Vec<u8> {
    let got = store.inner.get(location).await.expect("stored object");
    got.bytes().await.expect("bytes").to_vec()
}

#[tokio::test]
async fn a_create_put_whose_failed_attempt_landed_succeeds() {
    let body: &'static [u8] = b"part-00007 rows";
    let (flaky, store) = retrying(1, Some(body));
    let location = Path::from("w/part-00007.parquet");
    store
        .put_opts(&location, payload(body), create())
        .await
        .expect("the put's own landed write is success");
    assert_eq!(stored(&flaky, &location).await, body);
}

#[tokio::test]
async fn a_create_put_that_finds_other_bytes_after_a_failure_is_already_exists() {
    let (flaky, store) = retrying(1, Some(b"another writer's rows"));
    let location = Path::from("_delta_log/00000000000000000003.json");
    let err = store
        .put_opts(&location, payload(b"this writer's commit"), create())
        .await
        .expect_err("another writer's object is not this put's");
    assert!(
        matches!(err, object_store::Error::AlreadyExists { .. }),
        "{err}"
    );
    assert_eq!(stored(&flaky, &location).await, b"another writer's rows");
}

#[tokio::test]
async fn a_create_put_that_finds_the_same_length_but_other_bytes_is_already_exists() {
    let (_, store) = retrying(1, Some(b"rows of writer B"));
    let err = store
        .put_opts(&Path::from("w/p"), payload(b"rows of writer A"), create())
        .await
        .expect_err("equal length, other bytes");
    assert!(
        matches!(err, object_store::Error::AlreadyExists { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn an_existing_object_without_a_failed_attempt_is_already_exists() {
    // The same bytes, but no attempt of this put failed: the object was there before it, so
    // the name was taken twice and the put must not pretend it wrote it.
    let body: &'static [u8] = b"same bytes";
    let (flaky, store) = retrying(0, None);
    let location = Path::from("w/p");
    flaky.inner.put(&location, payload(body)).await.unwrap();
    let err = store
        .put_opts(&location, payload(body), create())
        .await
        .expect_err("taken before this put");
    assert!(
        matches!(err, object_store::Error::AlreadyExists { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn an_overwriting_put_is_retried_to_success() {
    let (flaky, store) = retrying(2, None);
    let location = Path::from("w/p");
    store
        .put_opts(&location, payload(b"v1"), PutOptions::default())
        .await
        .expect("retried");
    assert_eq!(stored(&flaky, &location).await, b"v1");
}
