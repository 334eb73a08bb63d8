//! The tombstone table: for each key a mirror deleted, the sequence of its delete, kept
//! beside the data table (readers of the data table never see it) so that a change of that key
//! with a lower sequence, arriving late, cannot bring the row back.
//!
//! A delete is recorded here *before* the data commit that removes the row: a crash between
//! the two leaves a tombstone whose row is still in the table, and the replayed delete (its
//! source position is past the table's resume offset) removes the row then, because a delete
//! is applied whenever its sequence is above the row's. The other order would lose the
//! tombstone of a delete whose data commit landed. Rows are appended only (a replay may
//! append a tombstone again; readers take the highest sequence per key) and removed by
//! [`expire_tombstones`] (`sluice expire --tombstones`, or `--table` beside the table) once
//! their delete's event time is older than the retention asked for.
//!
//! Columns: the key fields, then the sequence fields (each named by its path in the record,
//! `source.lsn` for a struct member, typed as the record's), `deleted_at` (the delete's event
//! time) and `pipeline`.

use std::sync::Arc;

use deltalake::arrow::array::{ArrayRef, RecordBatch, StringArray, TimestampMicrosecondArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use deltalake::datafusion::common::Column;
use deltalake::datafusion::logical_expr::{lit, Expr};
use deltalake::datafusion::prelude::JoinType;
use deltalake::datafusion::scalar::ScalarValue;
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableError};
use sluice_window::EventTime;

use crate::table::key_ranges::{file_stats, KeyRanges};
use crate::table::location::open_or_create_table;
use crate::table::merge::plain_types_session;
use crate::table::{OpenError, TableOptions};

/// The column of a tombstone's delete's event time.
pub const DELETED_AT_COLUMN: &str = "deleted_at";
/// The column of the pipeline that recorded a tombstone.
pub const TOMBSTONE_PIPELINE_COLUMN: &str = "pipeline";

#[derive(Debug, thiserror::Error)]
pub enum TombstoneError {
    #[error(transparent)]
    Open(Box<OpenError>),
    #[error("the tombstone table {url} lacks the column {column:?} (its columns: {columns}); is it another table?")]
    Columns {
        url: String,
        column: String,
        columns: String,
    },
    #[error("reading the tombstones of {url} failed: {source}")]
    Read {
        url: String,
        source: Box<DeltaTableError>,
    },
    #[error("writing {rows} tombstones to {url} failed: {source}")]
    Write {
        url: String,
        rows: usize,
        source: Box<DeltaTableError>,
    },
    #[error("expiring the tombstones of {url} failed: {source}")]
    Expire {
        url: String,
        source: Box<DeltaTableError>,
    },
}

impl From<OpenError> for TombstoneError {
    fn from(e: OpenError) -> Self {
        TombstoneError::Open(Box::new(e))
    }
}

/// The tombstones of one pipeline's deletes.
#[derive(Debug, Clone)]
pub struct TombstoneTable {
    table: DeltaTable,
    url: String,
    /// Key fields, then sequence fields: the tombstone table's first columns.
    key_columns: Vec<String>,
    sequence_columns: Vec<String>,
    /// The columns a tombstone is written with.
    schema: SchemaRef,
}

/// Tombstones to record: per deleted key, its key and sequence values (`key_columns` then
/// `sequence_columns` of the table, in that order) and the delete's event time.
#[derive(Debug, Clone)]
pub struct Tombstones {
    pub pipeline: String,
    /// The key and sequence values, one column per field, as [`TombstoneTable`] names them.
    pub values: Vec<ArrayRef>,
    pub deleted_at: Vec<EventTime>,
}

impl TombstoneTable {
    /// Opens the tombstone table at `options.location`, or creates it with the key fields'
    /// and sequence fields' types (`fields`: `(path, type)`, keys first).
    pub async fn open_or_create(
        options: &TableOptions,
        keys: &[(String, DataType)],
        sequence: &[(String, DataType)],
    ) -> Result<Self, TombstoneError> {
        let mut fields: Vec<Field> = keys
            .iter()
            .chain(sequence)
            .map(|(name, t)| Field::new(name, t.clone(), false))
            .collect();
        fields.push(Field::new(
            DELETED_AT_COLUMN,
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ));
        fields.push(Field::new(TOMBSTONE_PIPELINE_COLUMN, DataType::Utf8, false));
        let schema: SchemaRef = Arc::new(Schema::new(fields));
        let (table, url) = open_or_create_table(options, &schema).await?;
        check_columns(
            &table,
            &url,
            schema.fields().iter().map(|f| f.name().as_str()),
        )?;
        Ok(TombstoneTable {
            table,
            url,
            key_columns: keys.iter().map(|(n, _)| n.clone()).collect(),
            sequence_columns: sequence.iter().map(|(n, _)| n.clone()).collect(),
            schema,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The tombstones holding any key of `keys` (one column per key field, in order), as
    /// batches of the key columns then the sequence columns. Reads the latest version.
    pub async fn of_keys(&mut self, keys: &[ArrayRef]) -> Result<Vec<RecordBatch>, TombstoneError> {
        let read = |source: DeltaTableError| TombstoneError::Read {
            url: self.url.clone(),
            source: Box::new(source),
        };
        let df_error = |e: deltalake::datafusion::error::DataFusionError| read(e.into());
        if keys.first().is_none_or(|k| k.is_empty()) {
            return Ok(Vec::new());
        }
        self.table.update_state().await.map_err(read)?;
        let ctx = plain_types_session();
        crate::table::read_through_table_store(&ctx, &self.table);
        let provider = self.table.table_provider().await.map_err(df_error)?;
        let mut current = ctx.read_table(provider).map_err(df_error)?;
        // Only the files whose statistics admit an offered key are read (as a mirror's MERGE).
        let first = (keys.first(), self.key_columns.first());
        if let (Some(offered), Some(column)) = first {
            let stats = file_stats(&self.table).await.map_err(read)?;
            match KeyRanges::new(offered.as_ref(), column, stats) {
                Some(ranges) if ranges.excludes_every_file() => return Ok(Vec::new()),
                Some(ranges) => {
                    let column = Expr::Column(Column::new_unqualified(column));
                    current = current.filter(ranges.predicate(column)).map_err(df_error)?;
                }
                None => {}
            }
        }
        let renamed: Vec<String> = (0..keys.len()).map(|i| format!("__k{i}")).collect();
        let offered = RecordBatch::try_new(
            Arc::new(Schema::new(
                keys.iter()
                    .zip(&renamed)
                    .map(|(k, n)| Field::new(n, k.data_type().clone(), true))
                    .collect::<Vec<_>>(),
            )),
            keys.to_vec(),
        )
        .map_err(|e| read(e.into()))?;
        let offered = ctx.read_batch(offered).map_err(df_error)?;
        let left: Vec<&str> = self.key_columns.iter().map(String::as_str).collect();
        let right: Vec<&str> = renamed.iter().map(String::as_str).collect();
        let columns: Vec<Expr> = self
            .key_columns
            .iter()
            .chain(&self.sequence_columns)
            .map(|c| Expr::Column(Column::new_unqualified(c)))
            .collect();
        current
            .join(offered, JoinType::LeftSemi, &left, &right, None)
            .and_then(|df| df.select(columns))
            .map_err(df_error)?
            .collect()
            .await
            .map_err(df_error)
    }

    /// Appends `tombstones` in one commit (none: no commit).
    pub async fn append(&mut self, tombstones: Tombstones) -> Result<(), TombstoneError> {
        let rows = tombstones.deleted_at.len();
        if rows == 0 {
            return Ok(());
        }
        let write = |source: DeltaTableError| TombstoneError::Write {
            url: self.url.clone(),
            rows,
            source: Box::new(source),
        };
        let mut columns = tombstones.values;
        columns.push(Arc::new(
            TimestampMicrosecondArray::from_iter_values(
                tombstones.deleted_at.iter().map(|t| t.as_micros()),
            )
            .with_timezone("UTC"),
        ));
        columns.push(Arc::new(StringArray::from_iter_values(
            std::iter::repeat_n(tombstones.pipeline.as_str(), rows),
        )));
        let batch =
            RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| write(e.into()))?;
        self.table = self
            .table
            .clone()
            .write(vec![batch])
            .with_save_mode(SaveMode::Append)
            .await
            .map_err(write)?;
        Ok(())
    }
}

/// Removes (or, in a dry run, counts) the tombstones of deletes before `before` (their event
/// time) in the tombstone table at `options.location`, every pipeline's, in one commit;
/// returns how many (0: nothing committed), or `None` where there is no table (nothing is
/// created).
pub async fn expire_tombstones(
    options: &TableOptions,
    before: EventTime,
    dry_run: bool,
) -> Result<Option<u64>, TombstoneError> {
    let Some(table) = crate::table::open_table_if_exists(options).await? else {
        return Ok(None);
    };
    let url = table.table_url().to_string();
    check_columns(&table, &url, [DELETED_AT_COLUMN])?;
    let expire = |source: DeltaTableError| TombstoneError::Expire {
        url: url.clone(),
        source: Box::new(source),
    };
    let cutoff = ScalarValue::TimestampMicrosecond(Some(before.as_micros()), Some("UTC".into()));
    let predicate = Expr::Column(Column::new_unqualified(DELETED_AT_COLUMN)).lt(lit(cutoff));
    if dry_run {
        let provider = table.table_provider().await.map_err(|e| expire(e.into()))?;
        let ctx = plain_types_session();
        crate::table::read_through_table_store(&ctx, &table);
        let due = ctx
            .read_table(provider)
            .and_then(|df| df.filter(predicate))
            .map_err(|e| expire(e.into()))?
            .count()
            .await
            .map_err(|e| expire(e.into()))?;
        return Ok(Some(due as u64));
    }
    // deltalake's own session (its planner runs the delete), reading through the table's
    // store.
    let ctx = deltalake::delta_datafusion::DeltaSessionContext::new().into_inner();
    crate::table::read_through_table_store(&ctx, &table);
    let (_, metrics) = table
        .delete()
        .with_session_state(Arc::new(ctx.state()))
        .with_predicate(predicate)
        .await
        .map_err(expire)?;
    Ok(Some(metrics.num_deleted_rows.unwrap_or(0) as u64))
}

/// Refuses a table at the tombstones' location that lacks one of `columns`.
fn check_columns<'a>(
    table: &DeltaTable,
    url: &str,
    columns: impl IntoIterator<Item = &'a str>,
) -> Result<(), TombstoneError> {
    let present = table
        .snapshot()
        .map_err(|source| TombstoneError::Read {
            url: url.to_string(),
            source: Box::new(source),
        })?
        .schema();
    for column in columns {
        if present.field(column).is_none() {
            let names: Vec<String> = present.fields().map(|f| f.name().clone()).collect();
            return Err(TombstoneError::Columns {
                url: url.to_string(),
                column: column.to_string(),
                columns: names.join(", "),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
