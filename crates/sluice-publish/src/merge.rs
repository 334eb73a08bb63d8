//! Insert-if-absent by row key: a Delta MERGE restricted to one window's address, with the
//! pipeline's `txn` offsets in the same commit.

use std::sync::Arc;

use deltalake::arrow::array::{ArrayRef, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::datafusion::common::Column;
use deltalake::datafusion::logical_expr::{lit, Expr};
use deltalake::datafusion::prelude::{SessionConfig, SessionContext};
use deltalake::kernel::transaction::{CommitProperties, TransactionError};
use deltalake::DeltaTableError;
use serde_json::json;
use sluice_window::Window;

use crate::commit::{PublishError, Published};
use crate::table::{app_id, WindowTable};
use crate::COMMIT_INFO_KEY;

/// Rows to insert into one window unless a row with the same key is already there.
#[derive(Debug, Clone)]
pub struct MergePublication {
    pub pipeline: String,
    pub window: Window,
    /// Rows in the table's file schema (records, then position columns), one per key.
    pub rows: RecordBatch,
    /// The row key: natural key columns, or the position columns.
    pub key_columns: Vec<String>,
    /// `(partition, resume offset)` for each partition whose resume position advanced.
    pub txns: Vec<(String, i64)>,
    pub position_ranges: serde_json::Value,
    pub published_at_ms: i64,
}

fn target(name: &str) -> Expr {
    Expr::Column(Column::new(Some("t"), name))
}

fn source(name: &str) -> Expr {
    Expr::Column(Column::new(Some("s"), name))
}

impl WindowTable {
    /// One commit: a MERGE whose predicate pins the window's address (typed literals; only
    /// that partition is read and rewritten) and matches the row key; unmatched rows are
    /// inserted, matched ones left alone.
    pub async fn merge_absent(&mut self, m: MergePublication) -> Result<Published, PublishError> {
        let address = self.layout.address(m.window);
        let label = address.label();
        let delta = |source| PublishError::Delta {
            window: label.clone(),
            source,
        };
        if m.key_columns.is_empty() {
            return Err(PublishError::Invalid {
                window: label,
                reason: "a merge needs a row key".into(),
            });
        }
        let n = m.rows.num_rows();
        // The rows plus their address columns.
        let mut fields: Vec<Field> = m
            .rows
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let mut columns: Vec<ArrayRef> = m.rows.columns().to_vec();
        for (k, v) in address.pairs() {
            fields.push(Field::new(k, DataType::Utf8, false));
            columns.push(Arc::new(StringArray::from_iter_values(
                std::iter::repeat_n(v, n),
            )));
        }
        let names: Vec<String> = fields.iter().map(|f| f.name().clone()).collect();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
            .map_err(|e| delta(e.into()))?;
        // Plain string types in, plain string types out: files written by the MERGE must read
        // back with the table's file schema (DataFusion would otherwise use view types).
        let ctx = SessionContext::new_with_config(SessionConfig::new().set_bool(
            "datafusion.execution.parquet.schema_force_view_types",
            false,
        ));
        let df = ctx.read_batch(batch).map_err(|e| delta(e.into()))?;
        let mut predicate: Option<Expr> = None;
        let mut and = |e: Expr| {
            predicate = Some(match predicate.take() {
                Some(p) => p.and(e),
                None => e,
            })
        };
        for (k, v) in address.pairs() {
            and(target(k).eq(lit(v.to_string())));
        }
        for k in &m.key_columns {
            and(target(k).eq(source(k)));
        }
        let predicate = predicate.expect("an address and a key");

        let txns = self.txn_actions(&m.pipeline, &m.txns, m.published_at_ms)?;
        let info = json!({
            "pipeline": m.pipeline,
            "window": address.hive_path(),
            "window_start": m.window.start().to_rfc3339(),
            "window_end": m.window.end().to_rfc3339(),
            "mode": "merge_absent",
            "rows_offered": n,
            "positions": m.position_ranges,
        });
        let properties = CommitProperties::default()
            .with_max_retries(0)
            .with_application_transactions(txns)
            .with_metadata([(COMMIT_INFO_KEY.to_string(), info)]);
        let read_version = self.table.version().unwrap_or_default();
        let result = self
            .table
            .clone()
            .merge(df, predicate)
            .with_session_state(Arc::new(ctx.state()))
            .with_source_alias("s")
            .with_target_alias("t")
            .with_commit_properties(properties)
            .when_not_matched_insert(|insert| {
                names
                    .iter()
                    .fold(insert, |i, c| i.set(c.as_str(), source(c)))
            })
            .map_err(delta)?
            .await;
        let (table, metrics) = match result {
            Ok(done) => done,
            Err(DeltaTableError::Transaction {
                source: TransactionError::MaxCommitAttempts(_),
            })
            | Err(DeltaTableError::VersionAlreadyExists(_)) => {
                return Err(PublishError::TableMoved {
                    window: label,
                    read_version,
                })
            }
            Err(DeltaTableError::Transaction {
                source: TransactionError::CommitConflict(source),
            }) => {
                return Err(PublishError::Conflict {
                    window: label,
                    source,
                })
            }
            Err(source) => return Err(delta(source)),
        };
        self.table = table;
        for (partition, offset) in &m.txns {
            self.txns.insert(app_id(&m.pipeline, partition), *offset);
        }
        Ok(Published {
            version: self.table.version().unwrap_or_default(),
            files_removed: metrics.num_target_files_removed,
            files_added: metrics.num_target_files_added,
            rows: metrics.num_target_rows_inserted as i64,
        })
    }
}
