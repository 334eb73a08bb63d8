//! Reading a few columns of a large file by ranges: its footer, then only those columns'
//! chunks, instead of the whole object. A late row's key check against a window of a
//! gigabyte then fetches the window's key column, not the gigabyte.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use deltalake::arrow::array::RecordBatch;
use deltalake::parquet::arrow::arrow_reader::ArrowReaderOptions;
use deltalake::parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStreamBuilder};
use deltalake::parquet::arrow::ProjectionMask;
use deltalake::parquet::errors::ParquetError;
use deltalake::parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use futures::future::BoxFuture;
use futures::FutureExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::{object_path, top_level_roots, StageError};

/// The smallest file whose columns are read by ranges. Below it one request for the whole
/// object costs less than two (the footer, then the column chunks): on S3 a request's first
/// byte takes about as long as a few MB take to arrive.
pub const RANGED_READ_BYTES_MIN: u64 = 8 << 20;

/// Reads the top-level `columns` of the Parquet file at `path`, `size_bytes` long (its
/// size in the Delta log), fetching only its footer and those columns' chunks.
pub(crate) async fn read_columns_by_range(
    store: Arc<dyn ObjectStore>,
    path: &str,
    size_bytes: u64,
    columns: &[String],
) -> Result<Vec<RecordBatch>, StageError> {
    let error = |source: ParquetError| stage_error(path, source);
    let reader = RangeReader {
        store,
        path: object_path(path)?,
        size_bytes,
    };
    let builder = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(error)?;
    let roots = top_level_roots(builder.schema(), columns);
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let mut stream = builder.with_projection(mask).build().map_err(error)?;
    let mut batches = Vec::new();
    while let Some(row_group) = stream.next_row_group().await.map_err(error)? {
        // The chunks are fetched; decoding them is CPU work, kept off the async workers.
        let decoded =
            tokio::task::spawn_blocking(move || row_group.collect::<Result<Vec<RecordBatch>, _>>())
                .await?;
        batches.extend(decoded.map_err(|e| error(ParquetError::ArrowError(e.to_string())))?);
    }
    Ok(batches)
}

/// The metadata (footer) of the Parquet file at `path`, `size_bytes` long, fetched by range
/// without reading its column chunks: what a check of a file's row count reads.
pub async fn read_footer(
    store: Arc<dyn ObjectStore>,
    path: Path,
    size_bytes: u64,
) -> Result<Arc<ParquetMetaData>, StageError> {
    let shown = path.to_string();
    let mut reader = RangeReader {
        store,
        path,
        size_bytes,
    };
    reader
        .get_metadata(None)
        .await
        .map_err(|source| stage_error(&shown, source))
}

/// Bytes of the `size_bytes` long object at `path` by ranges: what the Parquet reader asks
/// for (the footer and the metadata first, in one request, then column chunks).
struct RangeReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size_bytes: u64,
}

/// Fetched with the footer's last 8 bytes: the metadata of a file of a few columns and row
/// groups, so that one request usually brings both.
const FOOTER_PREFETCH_BYTES: usize = 64 << 10;

impl AsyncFileReader for RangeReader {
    fn get_bytes(
        &mut self,
        range: Range<u64>,
    ) -> BoxFuture<'_, deltalake::parquet::errors::Result<Bytes>> {
        async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(external)
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, deltalake::parquet::errors::Result<Vec<Bytes>>> {
        async move {
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(external)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, deltalake::parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size_bytes = self.size_bytes;
            let metadata = ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .with_prefetch_hint(Some(FOOTER_PREFETCH_BYTES))
                .load_and_finish(self, size_bytes)
                .await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}

fn external(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

/// A failed fetch is the store's error (as a whole-object read reports it); anything else
/// is the file's.
fn stage_error(path: &str, source: ParquetError) -> StageError {
    match source {
        ParquetError::External(e) => match e.downcast::<object_store::Error>() {
            Ok(store) => StageError::Store {
                op: "get range",
                path: path.to_string(),
                source: *store,
            },
            Err(e) => StageError::Decode {
                path: path.to_string(),
                source: ParquetError::External(e),
            },
        },
        source => StageError::Decode {
            path: path.to_string(),
            source,
        },
    }
}
