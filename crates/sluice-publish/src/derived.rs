//! Derived tables: per-window results of a SQL query over a raw table, at the raw table's
//! addresses, published by swap (or by MERGE on a key within the address).
//!
//! What a derived table records about its raw table: `txn(<pipeline>/.raw_version)`, the
//! raw table version through which every raw window change is reflected in the derived
//! table ("settled"). A publisher writes it only once that holds (after deriving every
//! window a raw commit up to that version changed), in the same commit as a derived window,
//! or alone in a commit of its own ([`DerivedTable::settle`]). A restart recomputes the
//! windows the raw log shows changing after it; a derived window whose recomputed rows equal
//! the published ones is not published again, so replays and reruns commit nothing.

use std::sync::Arc;

use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::datafusion::common::Column;
use deltalake::datafusion::logical_expr::{lit, Expr};
use deltalake::DeltaTableError;
use serde_json::json;
use sluice_stage::StagedFile;
use sluice_window::{Address, AddressLayout, Window, WindowSize};

use crate::table::commit::{AddressChange, FileCommit, Published, Replace};
use crate::table::error::{commit_error, PublishError};
use crate::table::land::commit_properties;
use crate::table::merge::{merge_builder, merge_source, source, target};
use crate::table::{OpenError, TableOptions, WindowTable};

/// The `txn` partition name of the settled raw version (leading dot: no source partition
/// has such a name).
pub const RAW_VERSION_TXN: &str = ".raw_version";

/// A derived table of one pipeline.
pub struct DerivedTable {
    inner: WindowTable,
    pipeline: String,
    name: String,
}

impl std::fmt::Debug for DerivedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DerivedTable")
            .field("name", &self.name)
            .field("url", &self.inner.url)
            .finish()
    }
}

/// One derived window's new contents.
#[derive(Debug, Clone)]
pub struct DerivedPublication {
    pub window: Window,
    /// The raw table version the rows were computed from (commit metadata).
    pub raw_version: u64,
    /// The settled raw version to record with this commit, if it moved.
    pub settles: Option<u64>,
    pub published_at_ms: i64,
}

impl DerivedTable {
    /// Opens the derived table at `options.location`, or creates it with `output` (the
    /// query's output schema) plus the address columns. An existing table must have exactly
    /// these columns and partitions.
    pub async fn open_or_create(
        options: &TableOptions,
        pipeline: &str,
        name: &str,
        output: &SchemaRef,
        layout: AddressLayout,
        size: WindowSize,
    ) -> Result<Self, OpenError> {
        let mut inner =
            WindowTable::open_or_create_with(options, Some(output), layout, size, false, true)
                .await?;
        // The query and raw table were checked against a recorded contract by the open; a
        // table written before contracts records them now.
        inner.record_contract(options).await?;
        Ok(DerivedTable {
            inner,
            pipeline: pipeline.to_string(),
            name: name.to_string(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn url(&self) -> &str {
        self.inner.url()
    }

    /// The stored columns (the query's output, without the address columns).
    pub fn file_schema(&self) -> &SchemaRef {
        self.inner.file_schema()
    }

    pub fn store(&self) -> Arc<dyn object_store::ObjectStore> {
        self.inner.store()
    }

    pub fn version(&self) -> Option<u64> {
        self.inner.version()
    }

    /// See [`WindowTable::delta_table`].
    pub async fn delta_table(&mut self) -> Result<&deltalake::DeltaTable, DeltaTableError> {
        self.inner.delta_table().await
    }

    pub async fn reload(&mut self) -> Result<(), DeltaTableError> {
        self.inner.reload().await
    }

    /// The raw version this table says it has settled (see the module docs).
    pub async fn settled_raw_version(&mut self) -> Result<Option<u64>, DeltaTableError> {
        let found = self
            .inner
            .resume_offsets(&self.pipeline, &[RAW_VERSION_TXN.to_string()])
            .await?;
        Ok(found.get(RAW_VERSION_TXN).map(|v| *v as u64))
    }

    fn info(
        &self,
        p: &DerivedPublication,
        address: &Address,
        mode: &str,
        rows: i64,
    ) -> serde_json::Value {
        json!({
            "pipeline": self.pipeline,
            "derived": self.name,
            "window": address.hive_path(),
            "window_start": p.window.start().to_rfc3339(),
            "window_end": p.window.end().to_rfc3339(),
            "mode": mode,
            "window_rows": rows,
            "raw_version": p.raw_version,
        })
    }

    fn txns(&self, settles: Option<u64>) -> Vec<(String, i64)> {
        settles
            .map(|v| (RAW_VERSION_TXN.to_string(), v as i64))
            .into_iter()
            .collect()
    }

    /// Replaces the files of one or more windows, each with its own (none: its result is
    /// empty, and its files are removed), in one commit (a group commit, as the raw table's):
    /// each window is swapped whole, so a reader sees each as of one computation. The settled
    /// raw version recorded is the latest any publication settles. Returns one
    /// [`Published`] per window, in order.
    pub async fn swap_group(
        &mut self,
        group: Vec<(DerivedPublication, Vec<StagedFile>)>,
    ) -> Result<Vec<Published>, PublishError> {
        let addresses: Vec<Address> = group
            .iter()
            .map(|(p, _)| self.inner.address(p.window))
            .collect();
        let mut seen = std::collections::HashSet::new();
        for ((_, files), address) in group.iter().zip(&addresses) {
            let invalid = |reason: String| PublishError::Invalid {
                window: address.label(),
                reason,
            };
            if !seen.insert(address.hive_path()) {
                return Err(invalid("the window appears twice in one commit".into()));
            }
            let prefix = format!("{}/", address.hive_path());
            if let Some(f) = files.iter().find(|f| !f.path.starts_with(&prefix)) {
                return Err(invalid(format!(
                    "file {} is not under the window's address {prefix}",
                    f.path
                )));
            }
        }
        let Some(at_ms) = group.iter().map(|(p, _)| p.published_at_ms).max() else {
            return Ok(Vec::new());
        };
        let txns = self.txns(group.iter().filter_map(|(p, _)| p.settles).max());
        let txn_actions = self.inner.txn_actions(&self.pipeline, &txns, at_ms)?;
        let mut infos: Vec<serde_json::Value> = group
            .iter()
            .zip(&addresses)
            .map(|((p, files), address)| {
                let rows = files.iter().map(|f| f.rows).sum();
                self.info(p, address, "swap", rows)
            })
            .collect();
        let info = if infos.len() == 1 {
            infos.remove(0)
        } else {
            json!({"pipeline": self.pipeline, "derived": self.name, "windows": infos})
        };
        let changes = group
            .iter()
            .zip(&addresses)
            .map(|((_, files), address)| AddressChange {
                address,
                files,
                replace: Replace::Window,
                coverage: None,
            })
            .collect();
        let (version, removed) = self
            .inner
            .commit_files(FileCommit {
                changes,
                pipeline: &self.pipeline,
                txns: txn_actions,
                info,
                at_ms,
            })
            .await?;
        self.inner.remember_txns(&self.pipeline, &txns);
        Ok(group
            .iter()
            .zip(removed)
            .map(|((_, files), removed)| {
                let rows: i64 = files.iter().map(|f| f.rows).sum();
                Published {
                    version,
                    files_removed: removed.files,
                    files_added: files.len(),
                    rows,
                    rows_net: rows - removed.rows,
                    bytes_added: files.iter().map(|f| f.size_bytes).sum(),
                }
            })
            .collect())
    }

    /// Makes the window's rows equal `rows` by one MERGE on `key` within the window's
    /// address: matched rows updated, absent keys inserted, rows of the address whose key is
    /// not offered deleted. `rows` must be unique by key (the caller checks).
    pub async fn merge(
        &mut self,
        p: DerivedPublication,
        rows: RecordBatch,
        key: &[String],
    ) -> Result<Published, PublishError> {
        let address = self.inner.address(p.window);
        let label = address.label();
        let delta = |source| PublishError::Delta {
            window: label.clone(),
            source,
        };
        if key.is_empty() {
            return Err(PublishError::Invalid {
                window: label,
                reason: "a merge needs a key".into(),
            });
        }
        let n = rows.num_rows() as i64;
        let (ctx, df, names) = merge_source(&rows, &address).map_err(delta)?;
        let in_address = address
            .pairs()
            .map(|(k, v)| target(k).eq(lit(v.to_string())))
            .reduce(Expr::and);
        let Some(in_address) = in_address else {
            return Err(PublishError::Invalid {
                window: label,
                reason: "an address has at least one column".into(),
            });
        };
        let predicate = key
            .iter()
            .map(|k| target(k).eq(source(k)))
            .fold(in_address.clone(), Expr::and);
        let txns = self.txns(p.settles);
        let txn_actions = self
            .inner
            .txn_actions(&self.pipeline, &txns, p.published_at_ms)?;
        self.inner.catch_up().await.map_err(delta)?;
        let info = self.info(&p, &address, "merge", n);
        let snapshot = self.inner.loaded.snapshot().map_err(delta)?;
        let read_version = snapshot.version();
        let properties = commit_properties(snapshot, txn_actions, Some(info), 0);
        let result = merge_builder(&self.inner.loaded, &ctx, df, predicate, properties)
            .when_matched_update(|u| {
                // Columns by name as they are: a name is never parsed (`a.b`, quotes).
                names
                    .iter()
                    .fold(u, |u, c| u.update(Column::new_unqualified(c), source(c)))
            })
            .and_then(|b| {
                b.when_not_matched_insert(|i| {
                    names
                        .iter()
                        .fold(i, |i, c| i.set(Column::new_unqualified(c), source(c)))
                })
            })
            .and_then(|b| b.when_not_matched_by_source_delete(|d| d.predicate(in_address)))
            .map_err(delta)?
            .await;
        let (table, metrics) = result.map_err(|e| commit_error(label.clone(), read_version, e))?;
        let committed = table.version() != self.inner.version();
        self.inner.loaded = table;
        self.inner.index = None;
        if committed {
            self.inner.remember_txns(&self.pipeline, &txns);
        }
        Ok(Published {
            version: self.inner.version().unwrap_or_default(),
            files_removed: metrics.num_target_files_removed,
            files_added: metrics.num_target_files_added,
            rows: n,
            rows_net: metrics.num_target_rows_inserted as i64
                - metrics.num_target_rows_deleted as i64,
            bytes_added: 0,
        })
    }

    /// Records `raw_version` as settled in a commit of its own (no data change): for when the
    /// windows the raw table changed needed no new derived rows.
    pub async fn settle(&mut self, raw_version: u64, at_ms: i64) -> Result<u64, PublishError> {
        let txns = self.txns(Some(raw_version));
        let txn_actions = self.inner.txn_actions(&self.pipeline, &txns, at_ms)?;
        let info = json!({
            "pipeline": self.pipeline,
            "derived": self.name,
            "mode": "settle",
            "raw_version": raw_version,
        });
        let version = self
            .inner
            .commit_txns_only(txn_actions, info, "settle")
            .await?;
        self.inner.remember_txns(&self.pipeline, &txns);
        Ok(version)
    }
}
