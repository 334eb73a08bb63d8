//! The dead-letter table: every record sluice could not land as a row, with its source
//! position and reason (E6), exactly once under replays.
//!
//! Exactly once works like the data table's offsets: each dead-letter commit carries one
//! `txn(<pipeline>@<table id>/<partition>, offset)` per source partition, meaning "every dead
//! letter of that table below this position is in the table". A replay skips dead letters
//! below it. The runner commits pending dead letters *before* any data commit that moves the
//! resume position past them, so a crash between the two commits re-reads the records (they
//! are skipped by the dead-letter offsets) and never loses one. Each row names the table it
//! was meant for ([`DeadLetterOwner`]): a table removed and created again at its location has
//! a new id, and its run writes (and counts) its own dead letters.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::arrow::array::{
    ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::transaction::{CommitBuilder, TransactionError};
use deltalake::kernel::{Action, Add, MetadataExt, StructField, StructType, Transaction};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::table::state::DeltaTableState;
use deltalake::{DeltaTable, DeltaTableError};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use sluice_stage::{StageError, Stager};

use crate::table::location::open_or_create_table;
use crate::table::{app_id, open_table_if_exists, OpenError, TableOptions, WindowTable};

mod expire;
#[cfg(test)]
mod tests;

pub use expire::{DeadLetterExpiryRule, DeadLettersExpired, MeantFor};

/// The reason of a row recording that the dead letter at its position was replayed into the
/// table (`sluice dead-letters --replay`): not a dead letter itself.
pub const REPLAYED_REASON: &str = "replayed";

/// The dead-letter table's column naming the table a dead letter was meant for (its Delta
/// table id); null in rows written before sluice recorded it.
pub const TABLE_ID_COLUMN: &str = "table_id";

/// Whose dead letters a commit holds: the pipeline, and the table they were meant for. A
/// table removed and created again at the same location has a new id, so the dead letters
/// of the old one are neither counted as the new table's nor taken for written when the new
/// table's run meets the same records (the dead-letter offsets are kept per table id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterOwner {
    pub pipeline: String,
    /// The data table's id ([`crate::table_id`]).
    pub table_id: String,
    /// The pipeline's contract as the table records it ([`Contract::to_property`](crate::Contract::to_property), JSON);
    /// empty when the table records none. Kept with each dead letter: a table that never
    /// landed a row is removed, and its contract with it.
    pub contract: String,
}

impl DeadLetterOwner {
    /// The owner of `pipeline`'s dead letters for `table`.
    pub fn of(table: &WindowTable, pipeline: &str) -> Result<Self, DeltaTableError> {
        Ok(DeadLetterOwner {
            pipeline: pipeline.to_string(),
            table_id: table.id()?,
            contract: table
                .contract(pipeline)?
                .map(|c| c.to_property())
                .unwrap_or_default(),
        })
    }

    /// The `txn` appId of the dead-letter offset of `partition`: `<pipeline>@<table id>/
    /// <partition>` (a pipeline name has no `@`).
    fn app_id(&self, partition: &str) -> String {
        app_id(&format!("{}@{}", self.pipeline, self.table_id), partition)
    }
}

/// One record that did not become a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Source partition (for NDJSON: the file name).
    pub source: String,
    pub offset: i64,
    /// Stable reason code: `malformed_json`, `wrong_type`, `not_one_object`, `missing_time`,
    /// `bad_time`, `missing_key`, `unknown_field`, `field_name_clash`, `line_too_long`,
    /// `wrong_field_count` (CSV), `unreadable` (a damaged compressed file), `internal_error`,
    /// `late`, `too_late`; for schema-registry messages `null_value`, `no_magic_byte`,
    /// `unknown_schema_id`, `truncated`, `schema_mismatch`.
    pub reason: String,
    pub detail: String,
    pub raw: String,
    /// The window's address, when the record had a valid event time.
    pub window: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DeadLetterError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("writing {records} dead letters to {url} failed: {source}")]
    Write {
        url: String,
        records: usize,
        source: DeltaTableError,
    },
    #[error("staging {records} dead letters for {url} failed: {source}")]
    Stage {
        url: String,
        records: usize,
        source: StageError,
    },
    #[error(
        "the dead-letter table {url} moved on since this writer read it; re-read it and retry"
    )]
    TableMoved { url: String },
    #[error("reading the dead-letter table {url} failed: {source}")]
    Read {
        url: String,
        source: DeltaTableError,
    },
    #[error("the table at {url} is not a dead-letter table: it has no {column:?} column")]
    NotDeadLetters { url: String, column: &'static str },
    #[error("removing expired dead letters from {url} failed: {source}")]
    Expire {
        url: String,
        source: DeltaTableError,
    },
    #[error("reading the files of the dead-letter table {url} failed: {source}")]
    ReadBack { url: String, source: StageError },
}

/// The dead-letter table of one or more pipelines.
pub struct DeadLetterTable {
    table: DeltaTable,
    url: String,
    /// See [`TableOptions::commit_retries`]: dead letters of different shards are appends
    /// with different `txn` appIds, so they never conflict.
    commit_retries: usize,
}

impl std::fmt::Debug for DeadLetterTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeadLetterTable({})", self.url)
    }
}

/// Columns of the dead-letter table.
pub fn dead_letter_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("pipeline", DataType::Utf8, false),
        Field::new("source_partition", DataType::Utf8, false),
        Field::new("source_offset", DataType::Int64, false),
        Field::new("reason", DataType::Utf8, false),
        Field::new("detail", DataType::Utf8, false),
        Field::new("raw", DataType::Utf8, false),
        Field::new("window", DataType::Utf8, true),
        Field::new(
            "detected_at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        // Added after the first release: last, and nullable, so older tables grow them
        // ([`DeadLetterTable::append`]).
        Field::new(TABLE_ID_COLUMN, DataType::Utf8, true),
        Field::new("contract", DataType::Utf8, true),
    ]))
}

/// The rows of `letters`, detected at `detected_at_ms`, in the dead-letter table's columns.
fn dead_letter_batch(
    owner: &DeadLetterOwner,
    letters: &[DeadLetter],
    detected_at_ms: i64,
) -> Result<RecordBatch, deltalake::arrow::error::ArrowError> {
    let pipeline = owner.pipeline.as_str();
    let strings = |f: &dyn Fn(&DeadLetter) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(letters.iter().map(f)))
    };
    RecordBatch::try_new(
        dead_letter_schema(),
        vec![
            Arc::new(StringArray::from_iter_values(
                letters.iter().map(|_| pipeline),
            )),
            strings(&|d| d.source.as_str()),
            Arc::new(Int64Array::from_iter_values(
                letters.iter().map(|d| d.offset),
            )),
            strings(&|d| d.reason.as_str()),
            strings(&|d| d.detail.as_str()),
            strings(&|d| d.raw.as_str()),
            Arc::new(StringArray::from_iter(
                letters.iter().map(|d| d.window.as_deref()),
            )),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    letters.iter().map(|_| detected_at_ms.saturating_mul(1000)),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from_iter_values(
                letters.iter().map(|_| owner.table_id.as_str()),
            )),
            Arc::new(StringArray::from_iter(letters.iter().map(|_| {
                (!owner.contract.is_empty()).then_some(owner.contract.as_str())
            }))),
        ],
    )
}

/// For a dead-letter table written before the owner columns existed, the metadata action
/// that adds them (committed with the next dead letters: rows written before keep nulls).
fn owner_columns(snapshot: &DeltaTableState) -> Result<Option<Action>, DeltaTableError> {
    if snapshot.schema().field(TABLE_ID_COLUMN).is_some() {
        return Ok(None);
    }
    let mut fields: Vec<StructField> = snapshot.schema().fields().cloned().collect();
    let wanted: StructType = dead_letter_schema()
        .as_ref()
        .try_into_kernel()
        .map_err(|e| DeltaTableError::Generic(e.to_string()))?;
    for field in wanted.fields() {
        if snapshot.schema().field(field.name()).is_none() {
            fields.push(field.clone());
        }
    }
    let schema = StructType::try_new(fields)?;
    Ok(Some(Action::Metadata(
        snapshot.metadata().clone().with_schema(&schema)?,
    )))
}

/// `stats` with the bounds of `detected_at`, which every row of the file shares (the
/// statistics of staged files leave timestamps out; expiry plans with these).
fn with_detected_at(stats: &str, detected_at_ms: i64) -> String {
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(stats) else {
        return stats.to_string();
    };
    let Some(at) = chrono::DateTime::from_timestamp_millis(detected_at_ms) else {
        return stats.to_string();
    };
    let at = at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    for side in ["minValues", "maxValues"] {
        if let Some(bounds) = value.get_mut(side).and_then(|b| b.as_object_mut()) {
            bounds.insert("detected_at".into(), serde_json::Value::String(at.clone()));
        }
    }
    value.to_string()
}

impl DeadLetterTable {
    /// Opens the table, or creates it; through the same store seam and retries as the data
    /// table (`options.store`, `options.retry`).
    pub async fn open_or_create(options: &TableOptions) -> Result<Self, DeadLetterError> {
        let (table, url_text) = open_or_create_table(options, &dead_letter_schema()).await?;
        Ok(DeadLetterTable {
            table,
            url: url_text,
            commit_retries: options.commit_retries,
        })
    }

    /// Opens an existing dead-letter table (a missing one is [`OpenError::NoTable`]; a table
    /// without the dead-letter columns sluice plans with is refused).
    pub async fn open(options: &TableOptions) -> Result<Self, DeadLetterError> {
        // Nothing is created where nothing is (not even a local directory).
        let Some(table) = open_table_if_exists(options).await? else {
            return Err(OpenError::NoTable(options.location.clone()).into());
        };
        let url_text = table.table_url().to_string();
        let delta = |source| OpenError::Delta {
            url: url_text.clone(),
            source,
        };
        let schema = table.snapshot().map_err(delta)?.schema();
        for column in ["pipeline", "detected_at"] {
            if schema.field(column).is_none() {
                return Err(DeadLetterError::NotDeadLetters {
                    url: url_text,
                    column,
                });
            }
        }
        Ok(DeadLetterTable {
            table,
            url: url_text,
            commit_retries: options.commit_retries,
        })
    }

    /// The table's store, rooted at the table (for the [`Stager`] of [`DeadLetterTable::append`]).
    pub fn store(&self) -> Arc<dyn ObjectStore> {
        self.table.object_store()
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Re-reads the table state.
    pub async fn reload(&mut self) -> Result<(), DeadLetterError> {
        self.table
            .update_state()
            .await
            .map_err(|source| DeadLetterError::Read {
                url: self.url.clone(),
                source,
            })
    }

    /// Per partition, the position below which every dead letter of `owner` is in the table.
    pub async fn committed_offsets(
        &self,
        owner: &DeadLetterOwner,
        partitions: &[String],
    ) -> Result<HashMap<String, i64>, DeadLetterError> {
        let read = |source| DeadLetterError::Read {
            url: self.url.clone(),
            source,
        };
        let snapshot = self.table.snapshot().map_err(read)?;
        let log_store = self.table.log_store();
        let lookups = partitions.iter().map(|p| {
            let id = owner.app_id(p);
            let log_store = log_store.clone();
            async move {
                let v = snapshot
                    .transaction_version(log_store.as_ref(), &id)
                    .await?;
                Ok::<_, DeltaTableError>((p.clone(), v))
            }
        });
        let found: Vec<_> = futures::stream::iter(lookups)
            .buffered(8)
            .try_collect()
            .await
            .map_err(read)?;
        Ok(found
            .into_iter()
            .filter_map(|(p, v)| v.map(|v| (p, v)))
            .collect())
    }

    /// Appends `letters` in one commit that also moves each partition's dead-letter offset to
    /// `through` (every dead letter below it is then in the table), staging their file with
    /// `stager` (one of this table's store, [`DeadLetterTable::store`]). The commit does not retry
    /// blindly: if the table moved, the caller re-reads it.
    pub async fn append(
        &mut self,
        owner: &DeadLetterOwner,
        letters: &[DeadLetter],
        through: &[(String, i64)],
        detected_at_ms: i64,
        stager: &mut Stager,
    ) -> Result<u64, DeadLetterError> {
        let n = letters.len();
        debug_assert!(
            letters
                .iter()
                .all(|l| !l.reason.is_empty() && !l.source.is_empty()),
            "E6: a dead letter names its source and its reason"
        );
        let batch = dead_letter_batch(owner, letters, detected_at_ms).map_err(|e| {
            DeadLetterError::Write {
                url: self.url.clone(),
                records: n,
                source: e.into(),
            }
        })?;
        let txns: Vec<Transaction> = through
            .iter()
            .map(|(p, offset)| {
                Transaction::new_with_last_update(owner.app_id(p), *offset, Some(detected_at_ms))
            })
            .collect();
        // Staged as the data is (sluice's own Parquet writer and statistics), then committed
        // with one `add`: no query plan per commit.
        let file = stager
            .slot_at_root("dlq")
            .write_computed(dead_letter_schema(), move || {
                Ok::<_, StageError>(vec![batch])
            })
            .await
            .map_err(|source| DeadLetterError::Stage {
                url: self.url.clone(),
                records: n,
                source,
            })?;
        debug_assert_eq!(
            file.rows, n as i64,
            "E6: the dead-letter file holds every letter appended"
        );
        let write_error = |source| DeadLetterError::Write {
            url: self.url.clone(),
            records: n,
            source,
        };
        let snapshot = self.table.snapshot().map_err(write_error)?;
        let grown = owner_columns(snapshot).map_err(write_error)?;
        let properties =
            crate::table::land::commit_properties(snapshot, txns, None, self.commit_retries);
        let add = Action::Add(Add {
            path: file.path,
            partition_values: Default::default(),
            size: file.size_bytes,
            modification_time: detected_at_ms,
            data_change: true,
            stats: Some(with_detected_at(&file.stats, detected_at_ms)),
            ..Default::default()
        });
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: None,
            predicate: None,
        };
        let result = CommitBuilder::from(properties)
            .with_actions(grown.into_iter().chain([add]).collect())
            .build(Some(snapshot), self.table.log_store(), operation)
            .await;
        match result {
            Ok(finalized) => {
                self.table.state = Some(finalized.snapshot());
                Ok(finalized.version())
            }
            Err(DeltaTableError::Transaction {
                source: TransactionError::MaxCommitAttempts(_),
            })
            | Err(DeltaTableError::VersionAlreadyExists(_)) => Err(DeadLetterError::TableMoved {
                url: self.url.clone(),
            }),
            Err(source) => Err(DeadLetterError::Write {
                url: self.url.clone(),
                records: n,
                source,
            }),
        }
    }
}
