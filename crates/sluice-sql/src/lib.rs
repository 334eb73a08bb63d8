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
    /// Parses `name=location`, or a bare `location`, named after its last path segment
    /// (`tables/temps` is `temps`; characters an identifier cannot hold become `_`). `None`
    /// when no name can be made (an empty location, or `name=` without one).
    pub fn parse(text: &str) -> Option<TableRef> {
        let named = |name: &str, location: &str| TableRef {
            name: name.to_string(),
            location: location.to_string(),
            version: None,
        };
        if let Some((name, location)) = text.split_once('=') {
            if is_identifier(name) {
                return (!location.is_empty()).then(|| named(name, location));
            }
        }
        let last = text.trim_end_matches('/').rsplit('/').next()?;
        let mut name: String = last
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if name.starts_with(|c: char| c.is_ascii_digit()) {
            name.insert(0, '_');
        }
        (!name.is_empty()).then(|| named(&name, text))
    }
}

/// A plain SQL identifier: letters, digits and `_`, not starting with a digit.
fn is_identifier(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A DataFusion session with every table of `tables` registered.
pub async fn session(
    tables: &[TableRef],
    storage_options: &HashMap<String, String>,
) -> Result<SessionContext, SqlError> {
    let ctx = SessionContext::new();
    for t in tables {
        if !is_identifier(&t.name) {
            return Err(SqlError::BadName(t.name.clone()));
        }
        let table = open_table(&t.location, storage_options, t.version).await?;
        sluice_publish::read_through_table_store(&ctx, &table);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_named_or_named_after_its_location() {
        let parsed = |text: &str| TableRef::parse(text).map(|t| (t.name, t.location));
        let pair = |n: &str, l: &str| Some((n.to_string(), l.to_string()));
        assert_eq!(parsed("events=tables/ev"), pair("events", "tables/ev"));
        assert_eq!(parsed("tables/temps"), pair("temps", "tables/temps"));
        assert_eq!(parsed("tables/temps/"), pair("temps", "tables/temps/"));
        assert_eq!(parsed("s3://b/t-1"), pair("t_1", "s3://b/t-1"));
        // A location holding `=` (a partition-like path) is not a NAME=PATH.
        assert_eq!(parsed("s3://b/x=1/t"), pair("t", "s3://b/x=1/t"));
        assert_eq!(parsed("data/2026"), pair("_2026", "data/2026"));
        assert_eq!(parsed("events="), None);
        assert_eq!(parsed(""), None);
    }
}
