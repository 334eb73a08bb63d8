//! Compaction by window: a window's files (a first publication's flushed parts, late rows
//! added to it, MERGE rewrites) become fewer, larger ones, in one commit per window.
//!
//! The commit removes exactly the files it read and adds files holding the same rows, all
//! with `dataChange = false` (a streaming reader of the table skips it: no row changed). The
//! new files keep the tags replay detection relies on: the pipeline, and the highest coverage
//! of the files they replace (what [`crate::WindowTable::published_windows`] reads from the
//! window either way). Its read set is the window's address, so a publication of the same
//! window that lands first makes the compaction conflict; it then re-reads the table and
//! plans that window again, or gives way (the stream always wins). A late-row append to the
//! window that lands first conflicts too (conservative: the appended file would simply stay).
//!
//! The writers of a sharded table retry their commits over other writers' commits that touch
//! other addresses, and keep their address index across them (no one else writes their
//! shard). A compaction of one of their windows breaks that: a commit at another window
//! would retry over it, and the index would still list the files it replaced, so the next
//! swap of the compacted window would leave the compacted files beside its own rows. So every
//! commit of a shard's writer, and every compaction of that shard's windows, carries the
//! shard's fence `txn` ([`shard_fence_txn`]): two such commits always conflict, and the loser
//! re-reads the table. (A table with one writer per pipeline needs none: its writer never
//! retries over another commit.)
//!
//! Idempotent: a window is compacted only when its planned file count is below its current
//! one, so a compacted window is left alone by the next run. Memory is bounded by one output
//! file's rows plus one input file: the window is streamed file by file.

use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::transaction::CommitBuilder;
use deltalake::kernel::Transaction;
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::{DeltaTable, DeltaTableError};
use object_store::ObjectStore;
use serde_json::json;
use sluice_stage::{align_all, StageError, StagedFile, Stager};
use sluice_window::{Address, AddressError, AddressLayout, EventTime, Shard};

use crate::table::commit::{
    address_predicate, file_actions, shard_fence_txn, FileChange, FileTags,
};
use crate::table::error::commit_error;
use crate::table::land::commit_properties;
use crate::table::{
    active_files, address_key, app_id, data_file_schema, open_table_if_exists, pipeline_of,
    PublishedFile, TableOptions, WindowTable, PIPELINE_KEY,
};
use crate::{Coverage, PublishError};

/// Target size of a compacted file (as Delta's OPTIMIZE and Spark's defaults).
pub const TARGET_FILE_BYTES_DEFAULT: i64 = 128 << 20;

/// Attempts at one window's compaction when a concurrent commit conflicts with it; then it
/// gives way to the writer.
const CONFLICTS_MAX: usize = 3;

/// Retries of a `sluice compact` commit over other writers' commits that do not conflict
/// with it (other windows), checked by deltalake's conflict checker. (A writer compacting in
/// its run retries as its publications do: never, in a table with one writer per pipeline,
/// so a zombie's commit is never built upon unseen.)
pub(crate) const COMMIT_RETRIES: usize = 16;

/// Which windows are compacted, and into what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactRule {
    /// Size of the files compaction writes (Parquet bytes, estimated from the files' own
    /// bytes per row).
    pub target_file_bytes: i64,
    /// A window is compacted when it holds more than this many files (and compaction would
    /// leave it fewer).
    pub files_min: usize,
    /// Only windows starting at or after this instant.
    pub from: Option<EventTime>,
    /// Only windows starting before this instant.
    pub to: Option<EventTime>,
}

impl Default for CompactRule {
    fn default() -> Self {
        CompactRule {
            target_file_bytes: TARGET_FILE_BYTES_DEFAULT,
            files_min: 1,
            from: None,
            to: None,
        }
    }
}

impl CompactRule {
    /// How many files `files` become, when fewer than they are now and more than
    /// [`CompactRule::files_min`] are there; `None`: the window is left alone.
    pub fn files_after(&self, files: &[PublishedFile]) -> Option<usize> {
        if files.len() <= self.files_min.max(1) {
            return None;
        }
        let bytes: i64 = files.iter().map(|f| f.size_bytes.max(0)).sum();
        let target = self.target_file_bytes.max(1);
        let planned = usize::try_from((bytes + target - 1) / target)
            .unwrap_or(usize::MAX)
            .max(1);
        (planned < files.len()).then_some(planned)
    }

    fn selects(&self, start: EventTime) -> bool {
        self.from.is_none_or(|from| start >= from) && self.to.is_none_or(|to| start < to)
    }
}

/// One window's compaction, committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// `dt=2026-10-03/hour=14`.
    pub address: String,
    pub version: u64,
    pub files_before: usize,
    pub files_after: usize,
    pub rows: i64,
    pub bytes_before: i64,
    pub bytes_after: i64,
}

impl Compacted {
    /// Its entry in the commit's metadata (`compacted`).
    fn info(&self) -> serde_json::Value {
        json!({
            "window": self.address,
            "files_removed": self.files_before,
            "files_added": self.files_after,
            "rows": self.rows,
            "bytes_removed": self.bytes_before,
            "bytes_added": self.bytes_after,
        })
    }
}

/// What [`compact`] did to a table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// The windows compacted, in address order.
    pub compacted: Vec<Compacted>,
    /// Windows a concurrent publication kept changing: left to the writer, as they are.
    pub gave_way: Vec<String>,
    /// Windows selected that compaction would not shrink (already compacted, or too few
    /// files).
    pub left_alone: usize,
    /// Files at partition values that are not a window address sluice writes: never
    /// touched.
    pub not_windows: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error("no Delta table at {0}")]
    NoTable(String),
    #[error("opening the table failed: {0}")]
    Open(#[from] crate::OpenError),
    #[error("reading the table state failed: {0}")]
    Delta(#[from] DeltaTableError),
    #[error("rewriting the files of {address} failed: {source}")]
    Stage { address: String, source: StageError },
    #[error("the files of {address} cannot be read as the table's columns: {reason}")]
    Schema { address: String, reason: String },
    #[error("file {path} of {address} holds {read} rows where the table's log says {logged}; nothing was committed")]
    RowsDiffer {
        address: String,
        path: String,
        read: i64,
        logged: i64,
    },
    #[error("{address} holds files of pipelines {first:?} and {second:?}; a window address belongs to one pipeline, so nothing of it was compacted")]
    MixedPipelines {
        address: String,
        first: String,
        second: String,
    },
    #[error("{address} has files without a row count in the log; compaction checks every row it rewrites, so it leaves this window alone")]
    NoRowCount { address: String },
    #[error(transparent)]
    Publish(#[from] PublishError),
    #[error("partition values of the table: {0}")]
    Address(#[from] AddressError),
}

impl CompactError {
    /// A concurrent commit changed the window (or the table moved): re-read and decide again.
    pub fn is_conflict(&self) -> bool {
        matches!(self, CompactError::Publish(e) if e.is_conflict())
    }

    /// Whether re-reading the table may get past this error: conflicts, and store failures
    /// that outlasted their retries (a writer then resumes from the table).
    pub fn is_resumable(&self) -> bool {
        match self {
            CompactError::Publish(e) => e.is_resumable(),
            CompactError::Delta(_) => true,
            CompactError::Stage { source, .. } => matches!(source, StageError::Store { .. }),
            _ => false,
        }
    }
}

/// Compacts the windows of the table at `options.location` that `rule` selects, one commit
/// per window. Staged files are named by `stager`'s attempt id (unique per run, from the
/// caller); `at_ms` is the caller's clock.
pub async fn compact(
    options: &TableOptions,
    rule: &CompactRule,
    attempt: &str,
    at_ms: i64,
) -> Result<CompactReport, CompactError> {
    let Some(mut table) = open_table_if_exists(options).await? else {
        return Err(CompactError::NoTable(options.location.clone()));
    };
    let mut stager = Stager::new(table.object_store(), attempt, Default::default());
    let mut report = CompactReport::default();
    // The files of each address, as of the version the next commit reads: rebuilt whenever
    // another writer's commits came in between (a commit that removes files another commit
    // already replaced would bring their rows back).
    let mut by_address = files_by_address(&table).await?;
    let mut listed_version = table.version();
    let owner = table
        .snapshot()?
        .metadata()
        .configuration()
        .get(PIPELINE_KEY)
        .cloned();
    let keys: Vec<Vec<(String, String)>> = by_address.keys().cloned().collect();
    for key in keys {
        if table.version() != listed_version {
            by_address = files_by_address(&table).await?;
            listed_version = table.version();
        }
        let files = by_address.get(&key).cloned().unwrap_or_default();
        let (Ok(address), Some(layout)) = (
            Address::from_partition_values(&key),
            AddressLayout::of_partition_values(&key),
        ) else {
            report.not_windows += files.len();
            continue;
        };
        if !rule.selects(layout.start_of(&key)?) {
            continue;
        }
        let mut files = files;
        let mut attempts = 0;
        loop {
            if rule.files_after(&files).is_none() {
                report.left_alone += 1;
                break;
            }
            let fence = fence_of(&address, &files, owner.as_deref());
            let how = How {
                fence,
                retries: COMMIT_RETRIES,
                at_ms,
            };
            let read_version = table.version();
            match compact_files(&table, &mut stager, &address, &files, rule, how).await {
                Ok(Some(done)) => {
                    let own = read_version.map(|v| v + 1) == Some(done.compacted.version);
                    table.state = Some(done.snapshot);
                    if own && listed_version == read_version {
                        // Only this commit since the listing: the listing stays exact.
                        by_address.insert(key.clone(), done.files);
                        listed_version = table.version();
                    }
                    report.compacted.push(done.compacted);
                    break;
                }
                Ok(None) => {
                    report.left_alone += 1;
                    break;
                }
                Err(e) if e.is_conflict() && attempts + 1 < CONFLICTS_MAX => {
                    attempts += 1;
                    tracing::info!(window = %address.label(), error = %e, "a concurrent commit changed the window; re-reading it");
                    table.update_state().await?;
                    files = active_files(&table)
                        .await?
                        .into_iter()
                        .filter(|f| f.partition_values == key)
                        .collect();
                }
                Err(e) if e.is_conflict() => {
                    tracing::warn!(window = %address.label(), error = %e, "giving way to the writer of the window");
                    table.update_state().await?;
                    report.gave_way.push(address.hive_path());
                    break;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(report)
}

/// The table's files, by address (sorted `(column, value)` pairs), in address order.
pub(crate) async fn files_by_address(
    table: &DeltaTable,
) -> Result<std::collections::BTreeMap<Vec<(String, String)>, Vec<PublishedFile>>, DeltaTableError>
{
    let mut by_address: std::collections::BTreeMap<_, Vec<PublishedFile>> = Default::default();
    for file in active_files(table).await? {
        by_address
            .entry(file.partition_values.clone())
            .or_default()
            .push(file);
    }
    Ok(by_address)
}

/// The fence `txn` of a sharded address, for the pipeline whose files are there.
pub(crate) fn fence_of(
    address: &Address,
    files: &[PublishedFile],
    owner: Option<&str>,
) -> Option<Fence> {
    let key = address_key(address);
    let shard = Shard::of(&key)?;
    let pipeline = pipeline_of(&key, owner, files)?;
    Some(Fence { pipeline, shard })
}

/// Whose fence `txn` a compaction carries.
pub(crate) struct Fence {
    pub pipeline: String,
    pub shard: Shard,
}

impl Fence {
    /// The fence's `txn`, its version the committer's clock.
    pub(crate) fn txn(&self, at_ms: i64) -> Transaction {
        let id = app_id(&self.pipeline, &shard_fence_txn(self.shard));
        Transaction::new_with_last_update(id, at_ms, Some(at_ms))
    }
}

impl WindowTable {
    /// Compacts this writer's `window` (in its own shard and pipeline) when `rule` says it
    /// gains from it; keeps the writer's address index exact. `None`: left alone.
    pub async fn compact_window(
        &mut self,
        window: sluice_window::Window,
        pipeline: &str,
        stager: &mut Stager,
        rule: &CompactRule,
        at_ms: i64,
    ) -> Result<Option<Compacted>, CompactError> {
        let address = self.address(window);
        let files = self.files_at(&address).await?;
        if rule.files_after(&files).is_none() {
            return Ok(None);
        }
        let fence = self.share.shard.map(|shard| Fence {
            pipeline: pipeline.to_string(),
            shard,
        });
        self.catch_up().await?;
        let read_version = self.loaded.snapshot()?.version();
        let how = How {
            fence,
            retries: self.commit_retries,
            at_ms,
        };
        let Some(Done {
            compacted,
            snapshot,
            files: added,
        }) = compact_files(&self.loaded, stager, &address, &files, rule, how).await?
        else {
            return Ok(None);
        };
        self.loaded.state = Some(snapshot);
        if compacted.version != read_version + 1 && self.share.shard.is_none() {
            self.index = None; // retried over other commits: re-read on next use
        }
        if let Some(index) = &mut self.index {
            index.insert(address_key(&address), added);
        }
        Ok(Some(compacted))
    }
}

/// The tags the files of a compaction keep: their one pipeline, their highest coverage; the
/// first two pipelines named if the files name more than one.
fn kept_tags(
    files: &[PublishedFile],
) -> Result<(Option<String>, Option<Coverage>), (String, String)> {
    let mut pipeline: Option<String> = None;
    for p in files.iter().filter_map(|f| f.pipeline.as_ref()) {
        match &pipeline {
            Some(first) if first != p => return Err((first.clone(), p.clone())),
            _ => pipeline = Some(p.clone()),
        }
    }
    let coverage = files.iter().filter_map(|f| f.coverage.clone()).max();
    Ok((pipeline, coverage))
}

/// A staged file as the table holds it once the compaction committed.
fn published(
    f: &sluice_stage::StagedFile,
    address: &Address,
    pipeline: &Option<String>,
    coverage: &Option<Coverage>,
) -> PublishedFile {
    PublishedFile {
        path: f.path.clone(),
        size_bytes: f.size_bytes,
        rows: Some(f.rows),
        partition_values: address_key(address),
        pipeline: pipeline.clone(),
        coverage: coverage.clone(),
    }
}

/// Rewrites `files` (all at `address`) into fewer files and commits the swap; returns what
/// it did, the snapshot after the commit and the files now at the address. `None` when the
/// rule finds nothing to gain (no fewer files).
async fn compact_files(
    table: &DeltaTable,
    stager: &mut Stager,
    address: &Address,
    files: &[PublishedFile],
    rule: &CompactRule,
    how: How,
) -> Result<Option<Done>, CompactError> {
    let (fence, retries, at_ms) = (how.fence, how.retries, how.at_ms);
    let Some(planned) = rule.files_after(files) else {
        return Ok(None);
    };
    let label = address.hive_path();
    let Some(rows_total) = files.iter().map(|f| f.rows).sum::<Option<i64>>() else {
        return Err(CompactError::NoRowCount { address: label });
    };
    let (pipeline, coverage) =
        kept_tags(files).map_err(|(first, second)| CompactError::MixedPipelines {
            address: label.clone(),
            first,
            second,
        })?;
    let schema = data_file_schema(table.snapshot()?)?;
    let staged = rewrite(
        table.object_store().as_ref(),
        &schema,
        stager,
        address,
        files,
        rows_total,
        planned,
    )
    .await?;
    let staged_rows: i64 = staged.iter().map(|f| f.rows).sum();
    assert_eq!(
        staged_rows, rows_total,
        "E9 compaction: {label} staged other rows than it read"
    );
    assert!(
        staged.len() <= planned,
        "E9 compaction: {label} staged more files than it planned"
    );
    let mut actions = Vec::with_capacity(files.len() + staged.len() + 1);
    file_actions(
        &mut actions,
        FileChange {
            address,
            removed: files,
            added: &staged,
            data_change: false,
            at_ms,
        },
        &FileTags {
            pipeline: pipeline.as_deref(),
            coverage: coverage.as_ref(),
        },
    );
    let txns = fence.map_or_else(Vec::new, |fence| vec![fence.txn(at_ms)]);
    // Its version is set once the commit lands; the commit's metadata does not name it.
    let compacted = Compacted {
        address: label.clone(),
        version: 0,
        files_before: files.len(),
        files_after: staged.len(),
        rows: rows_total,
        bytes_before: files.iter().map(|f| f.size_bytes).sum(),
        bytes_after: staged.iter().map(|f| f.size_bytes).sum(),
    };
    let info = json!({"compacted": [compacted.info()], "pipeline": pipeline});
    let snapshot = table.snapshot()?;
    let read_version = snapshot.version();
    let properties = commit_properties(snapshot, txns, Some(info), retries);
    // A Write with the address as predicate: deltalake's conflict checker reads that as the
    // commit's read set (an OPTIMIZE operation has none and would conflict with every
    // removal anywhere in the table); the actions themselves say `dataChange = false`.
    let operation = DeltaOperation::Write {
        mode: SaveMode::Overwrite,
        partition_by: None,
        predicate: Some(address_predicate(address)),
    };
    let finalized = CommitBuilder::from(properties)
        .with_actions(actions)
        .build(Some(snapshot), table.log_store(), operation)
        .await
        .map_err(|e| CompactError::Publish(commit_error(label.clone(), read_version, e)))?;
    let version = finalized.version();
    let added = (staged.iter())
        .map(|f| published(f, address, &pipeline, &coverage))
        .collect();
    let compacted = Compacted {
        version,
        ..compacted
    };
    tracing::info!(window = %compacted.address, version, files_before = compacted.files_before, files_after = compacted.files_after, rows = rows_total, "compacted");
    Ok(Some(Done {
        compacted,
        snapshot: finalized.snapshot(),
        files: added,
    }))
}

/// How a compaction commits: with the shard's fence (if any), over this many retries, at
/// this time.
struct How {
    fence: Option<Fence>,
    retries: usize,
    at_ms: i64,
}

/// A compaction's commit: what it did, the snapshot after it, the window's files now.
struct Done {
    compacted: Compacted,
    snapshot: deltalake::table::state::DeltaTableState,
    files: Vec<PublishedFile>,
}

/// Streams `files` (in path order) into `planned` files of about equal rows, each checked
/// against the row count the log gives it.
async fn rewrite(
    store: &dyn ObjectStore,
    schema: &SchemaRef,
    stager: &mut Stager,
    address: &Address,
    files: &[PublishedFile],
    rows_total: i64,
    planned: usize,
) -> Result<Vec<StagedFile>, CompactError> {
    let label = address.hive_path();
    let stage = |source| CompactError::Stage {
        address: label.clone(),
        source,
    };
    let planned_i64 = i64::try_from(planned.max(1)).unwrap_or(i64::MAX);
    let rows_per_file = usize::try_from(((rows_total + planned_i64 - 1) / planned_i64).max(1))
        .unwrap_or(usize::MAX);
    let mut ordered: Vec<&PublishedFile> = files.iter().collect();
    ordered.sort_by(|a, b| a.path.cmp(&b.path));
    let mut staged = Vec::with_capacity(planned);
    let mut pending: Vec<RecordBatch> = Vec::new();
    let mut pending_rows = 0usize;
    for file in ordered {
        let batches = sluice_stage::read_parquet(store, &file.path)
            .await
            .map_err(stage)?;
        let batches = align_all(&batches, schema).map_err(|e| CompactError::Schema {
            address: label.clone(),
            reason: e.to_string(),
        })?;
        let read: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let logged = file.rows.unwrap_or_default();
        if read as i64 != logged {
            return Err(CompactError::RowsDiffer {
                address: label.clone(),
                path: file.path.clone(),
                read: read as i64,
                logged,
            });
        }
        for batch in batches {
            pending_rows += batch.num_rows();
            pending.push(batch);
            while pending_rows >= rows_per_file {
                let (full, rest) = split_rows(std::mem::take(&mut pending), rows_per_file);
                pending = rest;
                pending_rows -= rows_per_file;
                staged.push(write(stager, address, schema, full).await.map_err(stage)?);
            }
        }
    }
    if pending_rows > 0 {
        staged.push(
            write(stager, address, schema, pending)
                .await
                .map_err(stage)?,
        );
    }
    Ok(staged)
}

async fn write(
    stager: &mut Stager,
    address: &Address,
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
) -> Result<StagedFile, StageError> {
    stager
        .slot(address)
        .write_computed(schema.clone(), move || Ok::<_, StageError>(batches))
        .await
}

/// The first `n` rows of `batches`, and the rest.
fn split_rows(batches: Vec<RecordBatch>, n: usize) -> (Vec<RecordBatch>, Vec<RecordBatch>) {
    let mut head = Vec::new();
    let mut tail = Vec::new();
    let mut taken = 0usize;
    for batch in batches {
        if taken >= n {
            tail.push(batch);
        } else if taken + batch.num_rows() <= n {
            taken += batch.num_rows();
            head.push(batch);
        } else {
            let k = n - taken;
            head.push(batch.slice(0, k));
            tail.push(batch.slice(k, batch.num_rows() - k));
            taken = n;
        }
    }
    (head, tail)
}

#[cfg(test)]
mod tests;
