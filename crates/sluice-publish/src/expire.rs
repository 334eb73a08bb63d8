//! Retention by window: whole windows that ended before a cutoff are removed from the table,
//! one commit per batch of windows (a data change: `remove` actions with `dataChange = true`,
//! so a streaming reader of the table sees the rows go). Never part of a window: every file at
//! an expired address goes in the same commit.
//!
//! The cutoff is strict (`end < cutoff`), as the late path's `--max-rewrite-age` is: a run
//! with `--retain D` expires the windows that ended more than D before its watermark, and the
//! same rule sends a late event for such a window to the dead-letter table (`too_late`)
//! instead of publishing it again. `sluice expire --older-than D` takes the caller's clock.
//!
//! Conflicts are those of compaction (see [`crate::compact`]): the read set is the expired
//! addresses, a publication of one of them that lands first makes the expiry re-read the
//! table and decide again, and a sharded table's expiry carries the fence `txn` of every shard
//! it touches.

use std::collections::{BTreeMap, HashMap};

use deltalake::kernel::transaction::CommitBuilder;
use deltalake::kernel::Transaction;
use deltalake::protocol::DeltaOperation;
use deltalake::{DeltaTable, DeltaTableError};
use serde_json::json;
use sluice_window::{Address, AddressLayout, EventTime, WindowSize};

use crate::compact::{fence_of, files_by_address, Fence, COMMIT_RETRIES};
use crate::table::commit::{address_predicate, file_actions, FileChange, FileTags};
use crate::table::error::commit_error;
use crate::table::land::commit_properties;
use crate::table::{
    address_key, open_table_if_exists, pipeline_of, PublishedFile, TableOptions, WindowTable,
    PIPELINE_KEY,
};
use crate::{Contract, PublishError};

/// The most windows one expiry commit removes (a commit's size stays bounded however far
/// behind retention is).
pub const EXPIRE_WINDOWS_PER_COMMIT_MAX: usize = 256;

/// Attempts at a batch when concurrent commits conflict with it.
const CONFLICTS_MAX: usize = 3;

/// Which windows [`expire`] removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpireRule {
    /// Windows whose end is before this instant are removed.
    pub ended_before: EventTime,
    /// The window size of a `window_start` table that records none (written before sluice
    /// recorded its options); `dt_hour` and `dt` tables need none.
    pub window: Option<WindowSize>,
    /// Only report what would be removed.
    pub dry_run: bool,
}

/// One window removed (or, in a dry run, due).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    /// `dt=2026-10-03/hour=14`.
    pub address: String,
    pub window_end: EventTime,
    pub files: usize,
    pub rows: i64,
    /// The commit that removed it; `None` in a dry run.
    pub version: Option<u64>,
}

/// What [`expire`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpireReport {
    /// In address order.
    pub expired: Vec<Expired>,
    /// Windows a concurrent publication kept changing: left as they are (the next expiry
    /// takes them).
    pub gave_way: Vec<String>,
    /// Files at partition values that are not a window address sluice writes: never
    /// touched.
    pub not_windows: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ExpireError {
    #[error("no Delta table at {0}")]
    NoTable(String),
    #[error("opening the table failed: {0}")]
    Open(#[from] crate::OpenError),
    #[error("reading the table state failed: {0}")]
    Delta(#[from] DeltaTableError),
    #[error("the window size of {address} is unknown: the table records no options for its pipeline; give the pipeline's window size")]
    NoWindowSize { address: String },
    #[error(transparent)]
    Publish(#[from] PublishError),
}

impl ExpireError {
    /// A concurrent commit changed a window of the batch (or the table moved).
    pub fn is_conflict(&self) -> bool {
        matches!(self, ExpireError::Publish(e) if e.is_conflict())
    }

    /// Whether re-reading the table may get past this error.
    pub fn is_resumable(&self) -> bool {
        matches!(self, ExpireError::Delta(_))
            || matches!(self, ExpireError::Publish(e) if e.is_resumable())
    }
}

/// A window due: its address, end and files.
struct Due {
    address: Address,
    end: EventTime,
    files: Vec<PublishedFile>,
}

/// Removes the windows of the table at `options.location` that ended before
/// `rule.ended_before`; `at_ms` is the caller's clock (the removals' deletion time).
pub async fn expire(
    options: &TableOptions,
    rule: &ExpireRule,
    at_ms: i64,
) -> Result<ExpireReport, ExpireError> {
    let Some(mut table) = open_table_if_exists(options).await? else {
        return Err(ExpireError::NoTable(options.location.clone()));
    };
    let mut report = ExpireReport::default();
    let mut attempts = 0;
    // One batch per pass, each from a fresh listing of the version it commits on top of (a
    // removal of files another commit already replaced would be no removal at all).
    loop {
        let (due, not_windows) = due_windows(&table, rule).await?;
        report.not_windows = not_windows;
        if due.is_empty() {
            break;
        }
        if rule.dry_run {
            report.expired = due.iter().map(|d| expired(d, None)).collect();
            break;
        }
        let batch = &due[..due.len().min(EXPIRE_WINDOWS_PER_COMMIT_MAX)];
        let owner = owner_of(&table)?;
        let fences: Vec<Fence> = batch
            .iter()
            .filter_map(|d| fence_of(&d.address, &d.files, owner.as_deref()))
            .collect();
        match commit_batch(&table, batch, fences, COMMIT_RETRIES, at_ms).await {
            Ok((version, snapshot)) => {
                table.state = Some(snapshot);
                report
                    .expired
                    .extend(batch.iter().map(|d| expired(d, Some(version))));
            }
            Err(e) if e.is_conflict() && attempts + 1 < CONFLICTS_MAX => {
                attempts += 1;
                tracing::info!(error = %e, "a concurrent commit changed windows due to expire; re-reading the table");
                table.update_state().await?;
            }
            Err(e) if e.is_conflict() => {
                table.update_state().await?;
                let (due, _) = due_windows(&table, rule).await?;
                report.gave_way = due.iter().map(|d| d.address.hive_path()).collect();
                break;
            }
            Err(e) => return Err(e),
        }
    }
    report.expired.sort_by(|a, b| a.address.cmp(&b.address));
    Ok(report)
}

fn expired(d: &Due, version: Option<u64>) -> Expired {
    Expired {
        address: d.address.hive_path(),
        window_end: d.end,
        files: d.files.len(),
        rows: d.files.iter().filter_map(|f| f.rows).sum(),
        version,
    }
}

fn owner_of(table: &DeltaTable) -> Result<Option<String>, DeltaTableError> {
    Ok(table
        .snapshot()?
        .metadata()
        .configuration()
        .get(PIPELINE_KEY)
        .cloned())
}

/// The windows of `table` due under `rule`, and how many files are at partition values that
/// are no window address.
async fn due_windows(
    table: &DeltaTable,
    rule: &ExpireRule,
) -> Result<(Vec<Due>, usize), ExpireError> {
    let configuration = table.snapshot()?.metadata().configuration().clone();
    let owner = configuration.get(PIPELINE_KEY).cloned();
    let mut due = Vec::new();
    let mut not_windows = 0;
    for (key, files) in files_by_address(table).await? {
        let (Ok(address), Some(layout)) = (
            Address::from_partition_values(&key),
            AddressLayout::of_partition_values(&key),
        ) else {
            not_windows += files.len();
            continue;
        };
        let unknown = || ExpireError::NoWindowSize {
            address: address.hive_path(),
        };
        let size = window_size(&key, layout, &configuration, owner.as_deref(), &files)
            .or(rule.window)
            .ok_or_else(unknown)?;
        let end = layout.window_of(size, &key).map_err(|_| unknown())?.end();
        if end < rule.ended_before {
            due.push(Due {
                address,
                end,
                files,
            });
        }
    }
    Ok((due, not_windows))
}

/// The window size at an address: the `window` term the table records for the address's
/// pipeline (with its zone), else the size the `dt_hour` and `dt` layouts fix.
fn window_size(
    key: &[(String, String)],
    layout: AddressLayout,
    configuration: &HashMap<String, String>,
    owner: Option<&str>,
    files: &[PublishedFile],
) -> Option<WindowSize> {
    let recorded = pipeline_of(key, owner, files)
        .and_then(|pipeline| Contract::recorded_in(configuration, &pipeline))
        .and_then(|contract| WindowSize::parse(contract.get("window")?).ok());
    recorded.or(layout.fixed_size())
}

/// One commit removing every file of `batch`'s windows.
async fn commit_batch(
    table: &DeltaTable,
    batch: &[Due],
    fences: Vec<Fence>,
    retries: usize,
    at_ms: i64,
) -> Result<(u64, deltalake::table::state::DeltaTableState), ExpireError> {
    let mut actions = Vec::new();
    for d in batch {
        file_actions(
            &mut actions,
            FileChange {
                address: &d.address,
                removed: &d.files,
                added: &[],
                data_change: true,
                at_ms,
            },
            &FileTags {
                pipeline: None,
                coverage: None,
            },
        );
    }
    let mut txns: BTreeMap<String, Transaction> = BTreeMap::new();
    for fence in fences {
        let txn = fence.txn(at_ms);
        txns.insert(txn.app_id.clone(), txn);
    }
    let label = match batch {
        [one] => one.address.label(),
        [first, .., last] => format!(
            "{} .. {} ({} windows expired in one commit)",
            first.address.label(),
            last.address.label(),
            batch.len()
        ),
        [] => "(none)".into(),
    };
    let info = json!({
        "expired": batch.iter().map(|d| json!({
            "window": d.address.hive_path(),
            "window_end": d.end.to_rfc3339(),
            "files_removed": d.files.len(),
            "rows": d.files.iter().filter_map(|f| f.rows).sum::<i64>(),
        })).collect::<Vec<_>>(),
    });
    let predicate = batch
        .iter()
        .map(|d| address_predicate(&d.address))
        .collect::<Vec<_>>()
        .join(" OR ");
    let snapshot = table.snapshot()?;
    let read_version = snapshot.version();
    let properties = commit_properties(snapshot, txns.into_values().collect(), Some(info), retries);
    let finalized = CommitBuilder::from(properties)
        .with_actions(actions)
        .build(
            Some(snapshot),
            table.log_store(),
            DeltaOperation::Delete {
                predicate: Some(predicate),
            },
        )
        .await
        .map_err(|e| ExpireError::Publish(commit_error(label, read_version, e)))?;
    tracing::info!(
        version = finalized.version(),
        windows = batch.len(),
        "expired"
    );
    Ok((finalized.version(), finalized.snapshot()))
}

impl WindowTable {
    /// Removes this writer's windows (its pipeline and shard) that ended before
    /// `ended_before`, but those `held` says the writer still holds rows of, in commits of at most [`EXPIRE_WINDOWS_PER_COMMIT_MAX`] windows; keeps
    /// the writer's address index exact. Returns the windows removed.
    pub async fn expire_windows(
        &mut self,
        pipeline: &str,
        ended_before: EventTime,
        held: impl Fn(sluice_window::Window) -> bool,
        at_ms: i64,
    ) -> Result<Vec<Expired>, ExpireError> {
        let mut due = Vec::new();
        for window in self.windows().await? {
            if window.end() < ended_before && !held(window) {
                let address = self.address(window);
                let files = self.files_at(&address).await?;
                due.push(Due {
                    address,
                    end: window.end(),
                    files,
                });
            }
        }
        let mut out = Vec::with_capacity(due.len());
        for batch in due.chunks(EXPIRE_WINDOWS_PER_COMMIT_MAX) {
            let fences = self
                .share
                .shard
                .map(|shard| Fence {
                    pipeline: pipeline.to_string(),
                    shard,
                })
                .into_iter()
                .collect();
            self.catch_up().await?;
            let read_version = self.loaded.snapshot()?.version();
            let (version, snapshot) =
                commit_batch(&self.loaded, batch, fences, self.commit_retries, at_ms).await?;
            self.loaded.state = Some(snapshot);
            if version != read_version + 1 && self.share.shard.is_none() {
                self.index = None;
            }
            if let Some(index) = &mut self.index {
                for d in batch {
                    index.remove(&address_key(&d.address));
                }
            }
            out.extend(batch.iter().map(|d| expired(d, Some(version))));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
