//! A table's state for the people who run it (`sluice status`): per pipeline, its resume
//! position in every source partition and the watermark's input there, its windows (complete
//! across shards or not), its files per window (small-file debt); for the table, the last
//! commit, the log's size and the last checkpoint.
//!
//! Read from the snapshot, not from every commit: the files from the table state, the `txn`
//! actions from the last checkpoint plus the commits after it (deltalake 1.1 looks a `txn` up
//! only by its app id, and status does not know them in advance), so a table of 10,000
//! versions costs one checkpoint and at most a checkpoint interval of commits.

use std::collections::{BTreeMap, BTreeSet};

use deltalake::DeltaTable;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use sluice_window::{Address, AddressLayout, EventTime, Shard, WindowSize};

use crate::listing::shard_sealed_txn;
use crate::log_txns::{read_bytes, replay_txns, Replayed};
pub use crate::log_txns::{StatusError, Txn};
use crate::table::{active_files, pipeline_of, PublishedFile, PIPELINE_KEY};
use crate::{Contract, COMMIT_INFO_KEY};

/// How many windows [`PipelineStatus::most_files`] lists.
pub const MOST_FILES_LISTED: usize = 5;

/// A contract's options with null for those not set (stored as empty text).
fn options_or_null<S: serde::Serializer>(
    options: &BTreeMap<String, String>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(
        options
            .iter()
            .map(|(k, v)| (k, Some(v).filter(|v| !v.is_empty()))),
    )
}

/// The state of a table; see the module doc.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TableStatus {
    pub table: String,
    pub version: u64,
    pub last_commit: Option<LastCommit>,
    pub checkpoint: Option<CheckpointStatus>,
    pub log: LogStatus,
    /// Every file of the table.
    pub files: usize,
    pub bytes: i64,
    pub rows: i64,
    pub pipelines: Vec<PipelineStatus>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LastCommit {
    pub version: u64,
    /// The committer's clock, milliseconds since the epoch.
    pub timestamp_ms: Option<i64>,
    /// `WRITE`, `MERGE`, `DELETE` (an expiry), `VACUUM END`, ...
    pub operation: Option<String>,
    /// What sluice's commit metadata says it did: `publish`, `compact`, `expire`, or `None`
    /// for a commit sluice did not describe.
    pub sluice: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CheckpointStatus {
    pub version: u64,
    /// Actions the checkpoint holds, as `_last_checkpoint` says.
    pub actions: Option<u64>,
    /// Commits since (the log read on top of it).
    pub commits_since: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogStatus {
    /// The oldest commit the log still holds (time travel reaches back to it).
    pub oldest_commit: Option<u64>,
    /// Commit files the log holds: from the oldest to the table's version.
    pub commits: u64,
    /// Objects under `_delta_log/` (commits, checkpoints, `_last_checkpoint`) and their
    /// bytes: only when asked for ([`log_size`]), as counting them lists the whole log.
    pub objects: Option<usize>,
    pub bytes: Option<u64>,
}

/// One pipeline's share of the table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PipelineStatus {
    pub pipeline: String,
    /// Resume offset per source partition (`txn` `<pipeline>/<partition>`): where a restart
    /// reads from.
    pub positions: BTreeMap<String, Txn>,
    /// The largest event time read before the resume position, per watermark (one, or one
    /// per shard), RFC 3339: the watermark's input after a restart.
    pub max_event_time: BTreeMap<String, String>,
    /// The last table version delivered to each notify target (`txn`
    /// `<pipeline>/.notify/<target>`): a restart notifies the window changes after it.
    pub notified: BTreeMap<String, i64>,
    /// The options the table records for the pipeline (window, key, mode, ...); an option
    /// not set is empty (null in JSON).
    #[serde(serialize_with = "options_or_null")]
    pub contract: BTreeMap<String, String>,
    pub windows: usize,
    /// In a sharded table: windows every shard has sealed (rows of them read from now on are
    /// late data), and those some shard has not; `None` elsewhere (a published window is
    /// sealed).
    pub windows_complete: Option<usize>,
    pub windows_incomplete: Option<usize>,
    pub shards: Option<usize>,
    pub files: usize,
    pub bytes: i64,
    pub rows: i64,
    pub mean_file_bytes: i64,
    /// Windows of more than one file (what `sluice compact` would rewrite).
    pub windows_of_several_files: usize,
    /// The windows with the most files, most first.
    pub most_files: Vec<WindowFiles>,
    /// The first and last window start, RFC 3339.
    pub first_window: Option<String>,
    pub last_window: Option<String>,
    /// The first and last window's address (`dt=2026-10-03/hour=14`, without the pipeline
    /// and shard columns): where its files are.
    pub first_address: Option<String>,
    pub last_address: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WindowFiles {
    pub window: String,
    pub files: usize,
    pub bytes: i64,
}

/// The status of `table` (loaded at the version to report).
pub async fn status(table: &DeltaTable) -> Result<TableStatus, StatusError> {
    let snapshot = table.snapshot()?;
    let version = snapshot.version();
    let configuration = snapshot.metadata().configuration().clone();
    let store = table.object_store();
    let (txns, checkpoint) = read_txns(store.as_ref(), version).await?;
    let files = active_files(table).await?;
    let owner = configuration.get(PIPELINE_KEY).cloned();

    // Files by pipeline, then by address.
    type ByAddress = BTreeMap<Vec<(String, String)>, Vec<PublishedFile>>;
    let mut by_pipeline: BTreeMap<String, ByAddress> = BTreeMap::new();
    for f in &files {
        let pipeline = pipeline_of(
            &f.partition_values,
            owner.as_deref(),
            std::slice::from_ref(f),
        )
        .unwrap_or_default();
        by_pipeline
            .entry(pipeline)
            .or_default()
            .entry(f.partition_values.clone())
            .or_default()
            .push(f.clone());
    }
    // Pipelines named only by their txns or their contract (nothing published yet) too.
    for app_id in txns.keys() {
        if let Some((p, _)) = app_id.split_once('/') {
            by_pipeline.entry(p.to_string()).or_default();
        }
    }
    for key in configuration.keys() {
        if let Some(p) = key.strip_prefix(crate::CONTRACT_KEY_PREFIX) {
            by_pipeline.entry(p.to_string()).or_default();
        }
    }
    let mut pipelines = Vec::new();
    for (pipeline, windows) in by_pipeline {
        let contract = Contract::recorded_in(&configuration, &pipeline).unwrap_or_default();
        pipelines.push(pipeline_status(&pipeline, &windows, &txns, contract));
    }
    let last_commit = last_commit(store.as_ref(), version).await?;
    let oldest_commit = oldest_commit(store.as_ref(), version).await?;
    let log = LogStatus {
        oldest_commit,
        commits: oldest_commit.map_or(0, |o| version - o + 1),
        objects: None,
        bytes: None,
    };
    Ok(TableStatus {
        table: table.table_url().to_string(),
        version,
        last_commit,
        checkpoint,
        log,
        files: files.len(),
        bytes: files.iter().map(|f| f.size_bytes).sum(),
        rows: files.iter().filter_map(|f| f.rows).sum(),
        pipelines,
    })
}
/// The `txn`s of the pipeline whose app ids start with `prefix`, by what they record: resume
/// positions by source partition, the latest event time by watermark, and the version each
/// notify target was delivered through.
fn pipeline_txns(
    prefix: &str,
    txns: &BTreeMap<String, Txn>,
) -> (
    BTreeMap<String, Txn>,
    BTreeMap<String, String>,
    BTreeMap<String, i64>,
) {
    let mut positions = BTreeMap::new();
    let mut max_event_time = BTreeMap::new();
    let mut notified = BTreeMap::new();
    for (app_id, txn) in txns {
        let Some(rest) = app_id.strip_prefix(prefix) else {
            continue;
        };
        let last = rest.rsplit('/').next().unwrap_or(rest);
        if last == ".max_event_time_us" {
            let watermark = rest
                .strip_suffix("/.max_event_time_us")
                .unwrap_or("(all partitions)");
            max_event_time.insert(
                watermark.to_string(),
                EventTime::from_micros(txn.version).to_rfc3339(),
            );
        } else if let Some(target) = rest.strip_prefix(".notify/") {
            notified.insert(target.to_string(), txn.version);
        } else if !last.starts_with('.')
            && !rest.starts_with(".shard/")
            && !rest.starts_with(crate::RANK_TXN_PREFIX)
            && !rest.starts_with(crate::END_TXN_PREFIX)
        {
            positions.insert(rest.to_string(), txn.clone());
        }
    }
    (positions, max_event_time, notified)
}

fn pipeline_status(
    pipeline: &str,
    windows: &BTreeMap<Vec<(String, String)>, Vec<PublishedFile>>,
    txns: &BTreeMap<String, Txn>,
    contract: Contract,
) -> PipelineStatus {
    let prefix = format!("{pipeline}/");
    let (positions, max_event_time, notified) = pipeline_txns(&prefix, txns);
    let size = contract
        .get("window")
        .and_then(|w| WindowSize::parse(w).ok());
    // Sharded: a window is complete when every shard has sealed it.
    let shards: BTreeSet<Shard> = windows.keys().filter_map(|k| Shard::of(k)).collect();
    let sealed_through: Option<i64> = shards
        .iter()
        .map(|s| {
            txns.get(&format!("{prefix}{}", shard_sealed_txn(*s)))
                .map(|t| t.version)
        })
        .collect::<Option<Vec<i64>>>()
        .and_then(|v| v.into_iter().min());
    // Each window's end, by start (in a sharded table a window is one address per shard).
    let mut ends: BTreeMap<EventTime, Option<i64>> = BTreeMap::new();
    let mut addresses: BTreeMap<EventTime, String> = BTreeMap::new();
    let mut per_window: Vec<WindowFiles> = Vec::new();
    let (mut files, mut bytes, mut rows) = (0usize, 0i64, 0i64);
    for (key, list) in windows {
        files += list.len();
        let b: i64 = list.iter().map(|f| f.size_bytes).sum();
        bytes += b;
        rows += list.iter().filter_map(|f| f.rows).sum::<i64>();
        per_window.push(WindowFiles {
            window: Address::from_partition_values(key)
                .map(|a| a.hive_path())
                .unwrap_or_else(|_| format!("{key:?}")),
            files: list.len(),
            bytes: b,
        });
        let Some(layout) = AddressLayout::of_partition_values(key) else {
            continue;
        };
        let start = match layout.window_at(size, key) {
            Some(w) => {
                ends.insert(w.start(), Some(w.end().as_micros()));
                w.start()
            }
            None => match layout.start_of(key) {
                Ok(start) => {
                    ends.insert(start, None);
                    start
                }
                Err(_) => continue,
            },
        };
        addresses.entry(start).or_insert_with(|| {
            layout
                .columns()
                .iter()
                .filter_map(|c| key.iter().find(|(k, _)| k == c))
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("/")
        });
    }
    let complete = ends
        .values()
        .filter(|end| matches!((end, sealed_through), (Some(end), Some(t)) if *end <= t))
        .count();
    per_window.sort_by(|a, b| b.files.cmp(&a.files).then(a.window.cmp(&b.window)));
    let windows_of_several_files = per_window.iter().filter(|w| w.files > 1).count();
    per_window.truncate(MOST_FILES_LISTED);
    per_window.retain(|w| w.files > 1);
    PipelineStatus {
        pipeline: pipeline.to_string(),
        positions,
        max_event_time,
        notified,
        contract: contract
            .terms()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        windows: ends.len(),
        windows_complete: (!shards.is_empty()).then_some(complete),
        windows_incomplete: (!shards.is_empty()).then_some(ends.len() - complete),
        shards: (!shards.is_empty()).then_some(shards.len()),
        files,
        bytes,
        rows,
        mean_file_bytes: if files == 0 { 0 } else { bytes / files as i64 },
        windows_of_several_files,
        most_files: per_window,
        first_window: ends.keys().next().map(|t| t.to_rfc3339()),
        last_window: ends.keys().next_back().map(|t| t.to_rfc3339()),
        first_address: addresses.values().next().cloned(),
        last_address: addresses.values().next_back().cloned(),
    }
}

/// Every `txn` of the table state at `version`: the last checkpoint's, then the commits after
/// it in order (a later `txn` of an app id replaces an earlier one); and that checkpoint.
pub async fn read_txns(
    store: &dyn ObjectStore,
    version: u64,
) -> Result<(BTreeMap<String, Txn>, Option<CheckpointStatus>), StatusError> {
    let Replayed {
        txns, checkpoint, ..
    } = replay_txns(store, version).await?;
    let checkpoint = checkpoint.map(|(v, last)| CheckpointStatus {
        version: v,
        actions: last.get("size").and_then(|s| s.as_u64()),
        commits_since: version - v,
    });
    Ok((txns, checkpoint))
}

async fn last_commit(
    store: &dyn ObjectStore,
    version: u64,
) -> Result<Option<LastCommit>, StatusError> {
    let Some(bytes) = read_bytes(store, &format!("_delta_log/{version:020}.json")).await? else {
        return Ok(None);
    };
    let info = bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .find_map(|v| v.get("commitInfo").cloned());
    Ok(Some(LastCommit {
        version,
        timestamp_ms: info
            .as_ref()
            .and_then(|i| i.get("timestamp"))
            .and_then(|t| t.as_i64()),
        operation: info
            .as_ref()
            .and_then(|i| i.get("operation"))
            .and_then(|o| o.as_str())
            .map(str::to_string),
        sluice: info.as_ref().and_then(|i| i.get(COMMIT_INFO_KEY)).map(|s| {
            if s.get("compacted").is_some() {
                "compact"
            } else if s.get("expired").is_some() {
                "expire"
            } else {
                "publish"
            }
            .to_string()
        }),
    }))
}

/// The oldest commit file the log holds, below or at `version`: the log's cleanup removes
/// commits from the oldest up, so the commits present are one run ending at `version`, found
/// by a binary search of `HEAD`s (about log2(version) requests, never a listing of the log).
async fn oldest_commit(store: &dyn ObjectStore, version: u64) -> Result<Option<u64>, StatusError> {
    let exists = |v: u64| async move {
        let path = format!("_delta_log/{v:020}.json");
        match store.head(&Path::from(path.as_str())).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(source) => Err(StatusError::Store { path, source }),
        }
    };
    if exists(0).await? {
        return Ok(Some(0));
    }
    if !exists(version).await? {
        return Ok(None);
    }
    // exists(lo) is false, exists(hi) is true.
    let (mut lo, mut hi) = (0, version);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if exists(mid).await? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(Some(hi))
}

/// The objects under the table's `_delta_log/` and their bytes: a listing of the whole log
/// (on S3 a request per thousand objects), so `sluice status` counts them only when asked
/// (`--log-size`).
pub async fn log_size(table: &DeltaTable) -> Result<(usize, u64), StatusError> {
    let prefix = Path::from("_delta_log");
    let objects: Vec<_> = table
        .object_store()
        .list(Some(&prefix))
        .try_collect()
        .await
        .map_err(|source| StatusError::Store {
            path: "_delta_log/".into(),
            source,
        })?;
    Ok((objects.len(), objects.iter().map(|o| o.size).sum()))
}

#[cfg(test)]
mod tests;

/// The retained commits, oldest first: version, the committer's time (ms) and Delta's
/// operation (for `sluice status --html`).
pub async fn commit_history(
    table: &DeltaTable,
) -> Result<Vec<(u64, Option<i64>, String)>, deltalake::DeltaTableError> {
    let newest = table.version().unwrap_or(0);
    let infos: Vec<_> = table.history(None).try_collect().await?;
    // Newest first, one per retained version.
    let mut out: Vec<(u64, Option<i64>, String)> = infos
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let version = newest.saturating_sub(i as u64);
            (version, c.timestamp, c.operation.unwrap_or_default())
        })
        .collect();
    out.reverse();
    Ok(out)
}
