//! SQL over sluice tables: a DataFusion session with Delta tables registered by name, and
//! result formatting for people (aligned table) and programs (CSV, JSON lines).

mod derive;

pub use derive::{read_window, same_rows, DeriveQueryError, DerivedQuery, WINDOW_VIEW};

use std::collections::HashMap;

use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::util::pretty::pretty_format_batches;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::prelude::SessionContext;
use sluice_publish::{open_table, OpenError};

#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    #[error(transparent)]
    Open(Box<OpenError>),
    #[error("registering table {name}: {source}")]
    Register {
        name: String,
        source: DataFusionError,
    },
    #[error("table name {0:?} is not a plain SQL identifier (letters, digits, _; not starting with a digit)")]
    BadName(String),
    #[error("{0}")]
    Query(#[from] DataFusionError),
}

impl From<OpenError> for SqlError {
    fn from(e: OpenError) -> Self {
        SqlError::Open(Box::new(e))
    }
}

/// A table to register: `name` in SQL, at `location`, optionally at an older `version`.
#[derive(Debug, Clone)]
pub struct TableRef {
    pub name: String,
    pub location: String,
    pub version: Option<u64>,
}

impl TableRef {
    /// Parses `name=location`.
    pub fn parse(text: &str) -> Option<TableRef> {
        let (name, location) = text.split_once('=')?;
        (!name.is_empty() && !location.is_empty()).then(|| TableRef {
            name: name.to_string(),
            location: location.to_string(),
            version: None,
        })
    }
}

/// A DataFusion session with every table of `tables` registered.
pub async fn session(
    tables: &[TableRef],
    storage_options: &HashMap<String, String>,
) -> Result<SessionContext, SqlError> {
    let ctx = SessionContext::new();
    for t in tables {
        let valid = t
            .name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && t.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(SqlError::BadName(t.name.clone()));
        }
        let table = open_table(&t.location, storage_options, t.version).await?;
        let provider = table
            .table_provider()
            .await
            .map_err(|source| SqlError::Register {
                name: t.name.clone(),
                source,
            })?;
        ctx.register_table(t.name.as_str(), provider)?;
    }
    Ok(ctx)
}

/// Runs one SQL statement and collects its result.
pub async fn query(ctx: &SessionContext, sql: &str) -> Result<Vec<RecordBatch>, SqlError> {
    Ok(ctx.sql(sql).await?.collect().await?)
}

/// Runs one SQL statement; its result's schema (known even without rows) and batches, at
/// least one (an empty batch when there are no rows).
pub async fn query_with_schema(
    ctx: &SessionContext,
    sql: &str,
) -> Result<Vec<RecordBatch>, SqlError> {
    let frame = ctx.sql(sql).await?;
    let schema = std::sync::Arc::new(frame.schema().as_arrow().clone());
    let batches = frame.collect().await?;
    if batches.is_empty() {
        Ok(vec![RecordBatch::new_empty(schema)])
    } else {
        Ok(batches)
    }
}

/// How query results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Json,
}

impl Format {
    pub fn parse_name(name: &str) -> Option<Format> {
        match name {
            "table" => Some(Format::Table),
            "csv" => Some(Format::Csv),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// Renders batches as an aligned table, CSV with a header, or JSON Lines (one object per row,
/// null fields written as `null`; no rows, no lines). For a header without rows, pass an empty
/// batch of the result's schema (see [`query_with_schema`]).
pub fn format(batches: &[RecordBatch], format: Format) -> Result<String, ArrowError> {
    match format {
        Format::Table => Ok(pretty_format_batches(batches)?.to_string()),
        Format::Csv => {
            let mut out = Vec::new();
            {
                let mut w = deltalake::arrow::csv::WriterBuilder::new()
                    .with_header(true)
                    .build(&mut out);
                for b in batches {
                    w.write(b)?;
                }
            }
            Ok(String::from_utf8_lossy(&out).into_owned())
        }
        Format::Json => {
            let mut out = Vec::new();
            {
                // Null fields kept: every line has every column.
                let mut w = deltalake::arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, deltalake::arrow::json::writer::LineDelimited>(&mut out);
                let refs: Vec<&RecordBatch> = batches.iter().collect();
                w.write_batches(&refs)?;
                w.finish()?;
            }
            Ok(String::from_utf8_lossy(&out).into_owned())
        }
    }
}
