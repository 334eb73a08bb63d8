//! Staging: a window's rows become Parquet files under the window's address, with the Delta
//! statistics a reader uses for data skipping, and stay invisible until a publish commit adds
//! them to the log.
//!
//! File names carry the window and the attempt (`part-20261003T14-<attempt>-00001.snappy.parquet`),
//! so every attempt writes new names and a file is never overwritten: an attempt that dies
//! leaves orphans for `gc`, never a torn file that a published version points at.

mod busy;
mod ranged;
pub mod schema;
mod stats;

use std::sync::Arc;

use bytes::Bytes;
use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use deltalake::parquet::arrow::{ArrowWriter, ProjectionMask};
use deltalake::parquet::basic::{Compression, ZstdLevel};
use deltalake::parquet::errors::ParquetError;
use deltalake::parquet::file::properties::WriterProperties;
use deltalake::parquet::schema::types::ColumnPath;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use sluice_window::Address;

pub use busy::{Busy, Phase};
pub use ranged::{read_footer, RANGED_READ_BYTES_MIN};
pub use schema::{align_all, align_batch, extends, union, SchemaConflict};
pub use stats::{file_stats, file_stats_from_footer};

#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("encoding Parquet for {path} failed: {source}")]
    Encode { path: String, source: ParquetError },
    #[error("decoding staged Parquet {path} failed: {source}")]
    Decode { path: String, source: ParquetError },
    #[error("object store {op} of {path} failed: {source}")]
    Store {
        op: &'static str,
        path: String,
        source: object_store::Error,
    },
    #[error("staging task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    #[error("invalid object path {path}: {source}")]
    Path {
        path: String,
        source: object_store::path::Error,
    },
}

/// Parquet compression of staged files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Codec {
    #[default]
    Snappy,
    Zstd,
}

impl Codec {
    pub fn parse_name(name: &str) -> Option<Codec> {
        match name {
            "snappy" => Some(Codec::Snappy),
            "zstd" => Some(Codec::Zstd),
            _ => None,
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Codec::Snappy => "snappy",
            Codec::Zstd => "zstd",
        }
    }
}

/// How staged files are encoded.
#[derive(Debug, Clone)]
pub struct StageOptions {
    pub codec: Codec,
    /// Rows per Parquet row group: large enough for readers to scan efficiently.
    pub row_group_rows_max: usize,
    /// Columns written without a dictionary: those whose values are (nearly) unique in a file,
    /// such as a one-column row key after dedupe or the source offset. A dictionary can never
    /// shrink them, and building one (hashing every value, then falling back to plain once the
    /// dictionary page is full) was the largest single cost of encoding.
    pub plain_columns: Vec<String>,
}

impl Default for StageOptions {
    fn default() -> Self {
        StageOptions {
            codec: Codec::Snappy,
            row_group_rows_max: 1 << 20,
            plain_columns: Vec::new(),
        }
    }
}

/// A Parquet file written under a window's address, not yet in the Delta log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedFile {
    /// Relative to the table root, `/`-separated.
    pub path: String,
    pub size_bytes: i64,
    pub rows: i64,
    /// Delta statistics JSON (`numRecords`, `minValues`, `maxValues`, `nullCount`).
    pub stats: String,
}

/// Writes staged files for one attempt. The attempt id comes from the caller and must be
/// unique per stager (two stagers of one attempt would take the same names, and the second's
/// puts fail: staged files are create-only); with the per-stager sequence number it makes every
/// file name unique.
#[derive(Debug)]
pub struct Stager {
    store: Arc<dyn ObjectStore>,
    attempt: String,
    options: StageOptions,
    props: WriterProperties,
    next_part: u64,
    busy: Busy,
}

impl Stager {
    /// `store` is rooted at the table root.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        attempt: impl Into<String>,
        options: StageOptions,
    ) -> Self {
        let compression = match options.codec {
            Codec::Snappy => Compression::SNAPPY,
            Codec::Zstd => Compression::ZSTD(ZstdLevel::default()),
        };
        let mut props = WriterProperties::builder()
            .set_compression(compression)
            // Exact column chunk statistics: the file's Delta statistics are taken from them
            // (`file_stats_from_footer`), and a truncated bound is no bound.
            .set_statistics_truncate_length(None)
            .set_max_row_group_row_count(Some(options.row_group_rows_max.max(1)));
        for column in &options.plain_columns {
            props = props.set_column_dictionary_enabled(ColumnPath::from(column.as_str()), false);
        }
        let props = props.build();
        Stager {
            store,
            attempt: attempt.into(),
            options,
            props,
            next_part: 0,
            busy: Busy::default(),
        }
    }

    /// Counts this stager's work (dedupe, encode, stats, upload, read back) into `busy`.
    pub fn with_busy(mut self, busy: Busy) -> Self {
        self.busy = busy;
        self
    }

    pub fn busy(&self) -> &Busy {
        &self.busy
    }

    pub fn attempt(&self) -> &str {
        &self.attempt
    }

    fn next_path(&mut self, address: &Address) -> String {
        self.next_part += 1;
        debug_assert!(
            self.attempt
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "paths: an attempt id is safe in a file name"
        );
        format!(
            "{}/part-{}-{}-{:05}.{}.parquet",
            address.hive_path(),
            address.tag(),
            self.attempt,
            self.next_part,
            self.options.codec.extension()
        )
    }

    /// Writes `batches` (all of `schema`, without partition columns) as one Parquet file.
    pub async fn stage(
        &mut self,
        address: &Address,
        schema: &SchemaRef,
        batches: Vec<RecordBatch>,
    ) -> Result<StagedFile, StageError> {
        self.slot(address)
            .write_computed(schema.clone(), move || Ok::<_, StageError>(batches))
            .await
    }

    /// Takes the next file name under `address` now, for rows written later by
    /// [`StageSlot::write_computed`], possibly on another task. Names keep the order in
    /// which slots were taken, whatever order the writes finish in.
    pub fn slot(&mut self, address: &Address) -> StageSlot {
        let path = self.next_path(address);
        self.slot_at(path)
    }

    /// Takes the next file name at the table's root, for a table without partitions (the
    /// dead-letter table): `part-<tag>-<attempt>-<n>.<codec>.parquet`.
    pub fn slot_at_root(&mut self, tag: &str) -> StageSlot {
        self.next_part += 1;
        let path = format!(
            "part-{tag}-{}-{:05}.{}.parquet",
            self.attempt,
            self.next_part,
            self.options.codec.extension()
        );
        self.slot_at(path)
    }

    fn slot_at(&self, path: String) -> StageSlot {
        StageSlot {
            store: self.store.clone(),
            path,
            props: self.props.clone(),
            busy: self.busy.clone(),
        }
    }

    /// Reads a staged or published data file back (for dedupe and rewrites).
    pub async fn read(&self, path: &str) -> Result<Vec<RecordBatch>, StageError> {
        read_back(self.store.as_ref(), &self.busy, path, None).await
    }

    /// Reads only the top-level `columns` (in the file's column order) of a published file of
    /// `size_bytes` (its size in the Delta log): by ranges from [`RANGED_READ_BYTES_MIN`] on.
    pub async fn read_columns(
        &self,
        path: &str,
        size_bytes: u64,
        columns: &[String],
    ) -> Result<Vec<RecordBatch>, StageError> {
        read_columns_back(&self.store, &self.busy, path, size_bytes, columns).await
    }

    /// Deletes a staged file that will never be published. A missing file is not an error.
    pub async fn delete(&self, path: &str) -> Result<(), StageError> {
        match self.store.delete(&object_path(path)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(StageError::Store {
                op: "delete",
                path: path.to_string(),
                source,
            }),
        }
    }
}

/// One staged file's name, taken from a [`Stager`], with what writing it needs. It owns its
/// parts (no borrow of the stager), so a window's staging can run on a task of its own while
/// the run routes the next rows.
#[derive(Debug)]
pub struct StageSlot {
    store: Arc<dyn ObjectStore>,
    path: String,
    props: WriterProperties,
    busy: Busy,
}

impl StageSlot {
    /// Reads a staged or published data file of the same table back.
    pub async fn read(&self, path: &str) -> Result<Vec<RecordBatch>, StageError> {
        read_back(self.store.as_ref(), &self.busy, path, None).await
    }

    /// As [`Stager::read_columns`]: only the top-level `columns` of a published file of
    /// `size_bytes`.
    pub async fn read_columns(
        &self,
        path: &str,
        size_bytes: u64,
        columns: &[String],
    ) -> Result<Vec<RecordBatch>, StageError> {
        read_columns_back(&self.store, &self.busy, path, size_bytes, columns).await
    }

    /// Runs `compute` (dedupe, say) on a blocking thread, timed as [`Phase::Dedupe`]: CPU
    /// work that must not hold up the async workers.
    pub async fn compute<T, E, F>(&self, compute: F) -> Result<T, E>
    where
        F: FnOnce() -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StageError> + Send + 'static,
    {
        let busy = self.busy.clone();
        tokio::task::spawn_blocking(move || busy.time(Phase::Dedupe, compute))
            .await
            .map_err(|e| E::from(StageError::from(e)))?
    }

    /// Computes the rows with `compute` (dedupe, say) and encodes them, on one blocking
    /// thread: both are CPU work that must not hold up the async workers; then writes the
    /// file. Rows written before the schema grew are written as `schema` (new columns null).
    pub async fn write_computed<E, F>(self, schema: SchemaRef, compute: F) -> Result<StagedFile, E>
    where
        F: FnOnce() -> Result<Vec<RecordBatch>, E> + Send + 'static,
        E: From<StageError> + Send + 'static,
    {
        let StageSlot {
            store,
            path,
            props,
            busy,
        } = self;
        let encode_path = path.clone();
        let timed = busy.clone();
        let (bytes, rows, stats) = tokio::task::spawn_blocking(move || {
            let busy = timed;
            let encode = |source| StageError::Encode {
                path: encode_path.clone(),
                source,
            };
            let computed = busy.time(Phase::Dedupe, compute)?;
            let encoded = busy.time(Phase::Encode, || {
                let batches = align_all(&computed, &schema)
                    .map_err(|e| encode(ParquetError::ArrowError(e.to_string())))?;
                debug_assert_eq!(
                    batches.iter().map(RecordBatch::num_rows).sum::<usize>(),
                    computed.iter().map(RecordBatch::num_rows).sum::<usize>(),
                    "E6: rows aligned to the table's schema are all there"
                );
                drop(computed);
                let mut writer = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props))
                    .map_err(encode)?;
                for batch in &batches {
                    writer.write(batch).map_err(encode)?;
                }
                let footer = writer.finish().map_err(encode)?;
                // Finished: the footer is written and flushed into the buffer.
                let bytes = std::mem::take(writer.inner_mut());
                Ok::<_, StageError>((batches, bytes, footer))
            });
            let (batches, bytes, footer) = encoded?;
            let stats = busy.time(Phase::Stats, || {
                file_stats_from_footer(&schema, &batches, &footer)
            });
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            debug_assert_eq!(
                footer.file_metadata().num_rows(),
                rows as i64,
                "E6: a staged file's footer counts every row written to it"
            );
            Ok::<_, E>((Bytes::from(bytes), rows as i64, stats))
        })
        .await
        .map_err(StageError::from)??;
        let size_bytes = bytes.len() as i64;
        let put = put_new(store.as_ref(), &path, PutPayload::from_bytes(bytes));
        busy.time_async(Phase::Upload, put).await?;
        Ok(StagedFile {
            path,
            size_bytes,
            rows,
            stats,
        })
    }
}

/// Writes a new object at `path`, never over an existing one: a staged file's name is
/// unique by construction (attempt and sequence number), and a name taken twice would replace
/// the rows of a file a published version may point at. The put is create-only
/// ([`PutMode::Create`]) where the store supports it; a store without conditional puts gets a
/// plain put. An existing object is [`StageError::Store`] with [`object_store::Error::AlreadyExists`]
/// (resumable: a run re-reads the table and stages under the next name; the object left is
/// an orphan for `gc` when it was this writer's own put that landed before a retry).
async fn put_new(
    store: &dyn ObjectStore,
    path: &str,
    payload: PutPayload,
) -> Result<(), StageError> {
    let location = object_path(path)?;
    let store_error = |op, source| StageError::Store {
        op,
        path: path.to_string(),
        source,
    };
    let create = PutOptions::from(PutMode::Create);
    match store.put_opts(&location, payload.clone(), create).await {
        Ok(_) => Ok(()),
        Err(object_store::Error::NotImplemented { .. }) => store
            .put(&location, payload)
            .await
            .map(|_| ())
            .map_err(|source| store_error("put", source)),
        Err(source) => Err(store_error("put (create only)", source)),
    }
}

/// Reads only the top-level `columns` of a Parquet file in `store` (a Delta checkpoint's
/// `txn` column, say).
pub async fn read_parquet_columns(
    store: &dyn ObjectStore,
    path: &str,
    columns: &[String],
) -> Result<Vec<RecordBatch>, StageError> {
    read_projected(store, path, Some(columns.to_vec())).await
}

/// Reads a whole Parquet file from `store` into record batches.
pub async fn read_parquet(
    store: &dyn ObjectStore,
    path: &str,
) -> Result<Vec<RecordBatch>, StageError> {
    read_projected(store, path, None).await
}

/// A file of the table read back (only its top-level `columns`, if given), timed as
/// [`Phase::ReadBack`].
async fn read_back(
    store: &dyn ObjectStore,
    busy: &Busy,
    path: &str,
    columns: Option<&[String]>,
) -> Result<Vec<RecordBatch>, StageError> {
    let read = read_projected(store, path, columns.map(<[String]>::to_vec));
    busy.time_async(Phase::ReadBack, read).await
}

/// The top-level `columns` of a published file of `size_bytes`, timed as
/// [`Phase::ReadBack`]: a large file by ranges, a small one whole in one request.
async fn read_columns_back(
    store: &Arc<dyn ObjectStore>,
    busy: &Busy,
    path: &str,
    size_bytes: u64,
    columns: &[String],
) -> Result<Vec<RecordBatch>, StageError> {
    if size_bytes >= RANGED_READ_BYTES_MIN {
        let read = ranged::read_columns_by_range(store.clone(), path, size_bytes, columns);
        busy.time_async(Phase::ReadBack, read).await
    } else {
        read_back(store.as_ref(), busy, path, Some(columns)).await
    }
}

/// The indices of the top-level fields named in `columns` (by field: a name may hold a '.').
fn top_level_roots(schema: &SchemaRef, columns: &[String]) -> Vec<usize> {
    schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| columns.iter().any(|c| c == f.name()))
        .map(|(i, _)| i)
        .collect()
}

async fn read_projected(
    store: &dyn ObjectStore,
    path: &str,
    columns: Option<Vec<String>>,
) -> Result<Vec<RecordBatch>, StageError> {
    let location = object_path(path)?;
    let bytes = store
        .get(&location)
        .await
        .map_err(|source| StageError::Store {
            op: "get",
            path: path.to_string(),
            source,
        })?
        .bytes()
        .await
        .map_err(|source| StageError::Store {
            op: "get",
            path: path.to_string(),
            source,
        })?;
    let path = path.to_string();
    tokio::task::spawn_blocking(move || {
        let decode = |source| StageError::Decode {
            path: path.clone(),
            source,
        };
        let mut builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(decode)?;
        if let Some(columns) = &columns {
            let roots = top_level_roots(builder.schema(), columns);
            let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
            builder = builder.with_projection(mask);
        }
        let reader = builder.build().map_err(decode)?;
        reader
            .map(|b| b.map_err(|e| decode(ParquetError::ArrowError(e.to_string()))))
            .collect::<Result<Vec<_>, _>>()
    })
    .await?
}

fn object_path(path: &str) -> Result<Path, StageError> {
    Path::parse(path).map_err(|source| StageError::Path {
        path: path.to_string(),
        source,
    })
}

#[cfg(test)]
mod ranged_tests;
#[cfg(test)]
mod tests;
