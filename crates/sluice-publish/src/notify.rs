//! Window notifications, as the table's own log tells them: which windows of a pipeline
//! became complete or changed at which version ([`ChangeFeed`]), and how far each notify
//! target has been told ([`notified_through`], [`record_notified`]).
//!
//! The log is the queue. A window *becomes complete* at the version whose commit publishes it
//! while its address holds no file; it is *rewritten* at every later version whose commit
//! publishes it again (late rewrite or merge, backfill). Compaction (`dataChange=false`, no
//! window in sluice's commit metadata), expiry and bookkeeping commits change no window here.
//! Delivery is the caller's: it reads the changes after the target's recorded version,
//! delivers them (at least once; each change carries the idempotency key
//! `<table id>/<address>/<version>`, the same on every retry and after any crash), then
//! records the last version it delivered in a `txn` of its own (appId
//! `<pipeline>/.notify/<target>`), in a commit of its own. A restart reads the changes after
//! that version again: what was delivered but not recorded is sent again with the same key,
//! nothing is skipped.
//!
//! In a sharded table (several writers, one shard each) a window is complete only when every
//! shard holding files has sealed past its end: the feed follows the shards' seals in the
//! same commits and notifies `complete` at the version whose commit moved the last seal past
//! it (see `seals`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use deltalake::kernel::transaction::{CommitBuilder, CommitProperties, TransactionError};
use deltalake::kernel::Transaction;
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;
use serde::Serialize;
use serde_json::json;

use sluice_window::{Address, AddressLayout, EventTime, Shard, WindowSize, SHARD_COLUMN};

use crate::listing::{read_commit, shard_sealed_txn, ListError};
pub use crate::marks::{notify_txn, DeliveredMarks};
use crate::table::contract::Contract;
use crate::table::{app_id, file_of, table_id};
use crate::COMMIT_INFO_KEY;
use seals::{label_without_shard, micros_of, split_shard, Pending, Seals, WindowKey};

mod seals;

/// A notify target's name: it names the target's bookkeeping in the table, so it is kept to
/// letters, digits, `_`, `-` and `.` (1 to 64 of them).
pub fn valid_target_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Why a window is notified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeReason {
    /// The window's first publication: its address held no rows before this version.
    Complete,
    /// A later publication of a window that was complete (late rows, merge, backfill).
    Rewritten,
}

impl ChangeReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            ChangeReason::Complete => "complete",
            ChangeReason::Rewritten => "rewritten",
        }
    }

    pub fn parse(s: &str) -> Option<ChangeReason> {
        match s {
            "complete" => Some(ChangeReason::Complete),
            "rewritten" => Some(ChangeReason::Rewritten),
            _ => None,
        }
    }
}

/// One window that became complete or changed at one table version: the body of a
/// notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WindowChange {
    /// The table's location (URL).
    pub table: String,
    /// The table's id (Delta metadata id): stable for the table's life.
    pub table_id: String,
    pub pipeline: String,
    /// `dt=2026-10-03/hour=14`.
    pub address: String,
    /// RFC 3339, UTC.
    pub window_start: String,
    pub window_end: String,
    /// The table version whose commit published this state of the window.
    pub version: u64,
    /// The window's rows at `version`.
    pub rows: i64,
    pub reason: ChangeReason,
    /// `<table id>/<address>/<version>`: the same for every delivery of this change.
    pub idempotency_key: String,
}

#[derive(Debug, thiserror::Error)]
pub enum NotifyLogError {
    #[error("reading the table state failed: {0}")]
    Delta(#[from] DeltaTableError),
    #[error(transparent)]
    Read(#[from] ListError),
    #[error(
        "commit {version} is no longer in the log (log cleanup removed it), so the window \
         changes since version {after} cannot be read and would be skipped; record a newer \
         version for this target (a new target name starts at the current version)"
    )]
    Cleaned { version: u64, after: u64 },
    #[error("commit {version} holds a line that is not a JSON action: {source}")]
    BadCommit {
        version: u64,
        source: serde_json::Error,
    },
    #[error(
        "notify target name {0:?}: use 1 to 64 letters, digits, '_', '-' or '.' (it names \
         the target's bookkeeping in the table)"
    )]
    BadTargetName(String),
    #[error("recording delivery to target {target} through version {version} failed: {source}")]
    Record {
        target: String,
        version: u64,
        source: Box<DeltaTableError>,
    },
}

/// A file of the table as the feed follows it: its window (sorted partition values without
/// the shard column), its shard if the table has shards, and its rows.
#[derive(Debug, Clone)]
struct FileState {
    address: WindowKey,
    shard: Option<Shard>,
    rows: i64,
}

impl FileState {
    fn of(partition_values: &[(String, String)], rows: i64) -> FileState {
        let (address, shard) = split_shard(partition_values);
        FileState {
            address,
            shard,
            rows,
        }
    }
}

/// The active files of a table, by path and summed by window (files, rows, over every
/// shard), kept current commit by commit: a commit's windows are classified without walking
/// the whole table.
#[derive(Debug, Default)]
struct ActiveFiles {
    by_path: HashMap<String, FileState>,
    by_address: HashMap<WindowKey, (usize, i64)>,
    /// Files per shard (a sharded table).
    by_shard: BTreeMap<Shard, usize>,
}

impl ActiveFiles {
    fn add(&mut self, path: String, file: FileState) {
        self.remove(&path);
        let entry = self.by_address.entry(file.address.clone()).or_default();
        entry.0 += 1;
        entry.1 += file.rows;
        if let Some(shard) = file.shard {
            *self.by_shard.entry(shard).or_default() += 1;
        }
        self.by_path.insert(path, file);
    }

    fn remove(&mut self, path: &str) {
        let Some(file) = self.by_path.remove(path) else {
            return;
        };
        if let Some(entry) = self.by_address.get_mut(&file.address) {
            entry.0 -= 1;
            entry.1 -= file.rows;
            if entry.0 == 0 {
                self.by_address.remove(&file.address);
            }
        }
        if let Some(shard) = file.shard {
            if let Some(n) = self.by_shard.get_mut(&shard) {
                *n -= 1;
                if *n == 0 {
                    self.by_shard.remove(&shard);
                }
            }
        }
    }

    /// The shards that hold files.
    fn shards(&self) -> impl Iterator<Item = Shard> + '_ {
        self.by_shard.keys().copied()
    }

    /// Files and rows at `address`.
    fn at(&self, address: &[(String, String)]) -> (usize, i64) {
        self.by_address.get(address).copied().unwrap_or_default()
    }
}

/// Follows one pipeline's window changes through a table's log, one commit at a time, from
/// a version on. Holds the table's active files (path, address, rows) as of the last version
/// read, so each commit is classified by what its address held before it.
#[derive(Debug)]
pub struct ChangeFeed {
    pipeline: String,
    table: String,
    table_id: String,
    /// The last version whose commit was read.
    through: u64,
    files: ActiveFiles,
    /// A sharded table's seals and the windows waiting for them; `None` for a table of one
    /// writer per pipeline, where a window's first publication completes it.
    seals: Option<Seals>,
}

impl ChangeFeed {
    /// A feed of the changes after the version `table` is loaded at (its files are the
    /// starting state).
    pub async fn after(table: &DeltaTable, pipeline: &str) -> Result<ChangeFeed, NotifyLogError> {
        let snapshot = table.snapshot()?;
        let through = snapshot.version();
        let table_id = table_id(table).unwrap_or_default();
        let views: Vec<_> = table
            .get_active_add_actions_by_partitions(&[])
            .try_collect()
            .await?;
        let mut files = ActiveFiles::default();
        for view in &views {
            let file = file_of(view);
            files.add(
                file.path.clone(),
                FileState::of(&file.partition_values, file.rows.unwrap_or(0)),
            );
        }
        let sharded = snapshot
            .metadata()
            .partition_columns()
            .iter()
            .any(|c| c == SHARD_COLUMN);
        let seals = if sharded {
            Some(starting_seals(table, pipeline, &files).await?)
        } else {
            None
        };
        Ok(ChangeFeed {
            pipeline: pipeline.to_string(),
            table: table.table_url().to_string(),
            table_id,
            through,
            files,
            seals,
        })
    }

    /// The last version read.
    pub fn through(&self) -> u64 {
        self.through
    }

    /// The starts (RFC 3339) of a sharded table's windows of the pipeline that are complete
    /// at [`Self::through`] (every shard holding files sealed past them); `None` for a table
    /// of one writer per pipeline, where every window with files is complete.
    pub fn complete_windows(&self) -> Option<Vec<String>> {
        let seals = self.seals.as_ref()?;
        Some(
            seals
                .complete
                .iter()
                .filter_map(|key| seals.windows.get(key))
                .map(|p| p.start.clone())
                .collect(),
        )
    }

    /// Reads the commits after [`Self::through`] up to `table`'s loaded version and returns
    /// the changes of this pipeline's windows, in version order (within a version, in
    /// address order). All or nothing: every commit is read before any is applied, so a
    /// failed read leaves the feed where it was and the same call can be made again (no
    /// change is passed over).
    pub async fn read(&mut self, table: &DeltaTable) -> Result<Vec<WindowChange>, NotifyLogError> {
        let current = table.snapshot()?.version();
        let store = table.object_store();
        let mut commits = Vec::with_capacity(current.saturating_sub(self.through) as usize);
        for version in self.through + 1..=current {
            let Some(bytes) = read_commit(store.as_ref(), version).await? else {
                return Err(NotifyLogError::Cleaned {
                    version,
                    after: self.through,
                });
            };
            let mut actions = Vec::new();
            for line in bytes.split(|b| *b == b'\n') {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let value: serde_json::Value = serde_json::from_slice(line)
                    .map_err(|source| NotifyLogError::BadCommit { version, source })?;
                actions.push(value);
            }
            commits.push((version, actions));
        }
        let mut changes = Vec::new();
        for (version, actions) in commits {
            changes.extend(self.apply(version, &actions)?);
            self.through = version;
        }
        Ok(changes)
    }

    /// One commit: the changes it makes to this pipeline's windows, then its file actions
    /// applied to the state.
    fn apply(
        &mut self,
        version: u64,
        actions: &[serde_json::Value],
    ) -> Result<Vec<WindowChange>, NotifyLogError> {
        // Windows this pipeline's commit metadata says the commit published.
        let mut published: BTreeMap<Vec<(String, String)>, (String, String, String)> =
            BTreeMap::new();
        for action in actions {
            let Some(info) = action
                .get("commitInfo")
                .and_then(|c| c.get(COMMIT_INFO_KEY))
            else {
                continue;
            };
            if info.get("pipeline").and_then(|p| p.as_str()) != Some(self.pipeline.as_str()) {
                continue;
            }
            // A MERGE across the table also names the other windows whose rows it changed.
            let changed = info.get("windows_changed").and_then(|w| w.as_array());
            let windows = crate::published_windows_of(info)
                .into_iter()
                .chain(changed.into_iter().flatten());
            for w in windows {
                let field = |k: &str| w.get(k).and_then(|v| v.as_str()).map(str::to_string);
                let (Some(window), Some(start), Some(end)) =
                    (field("window"), field("window_start"), field("window_end"))
                else {
                    continue; // compaction, expiry, bookkeeping: no window published
                };
                let (key, _) = split_shard(&address_of_hive_path(&window));
                published.insert(key, (label_without_shard(&window), start, end));
            }
        }
        let held_before: Vec<bool> = published.keys().map(|a| self.files.at(a).0 > 0).collect();
        for action in actions {
            if let Some(txn) = action.get("txn") {
                let app = txn.get("appId").and_then(|a| a.as_str());
                let v = txn.get("version").and_then(|v| v.as_i64());
                if let (Some(seals), Some(app), Some(v)) = (self.seals.as_mut(), app, v) {
                    seals.txn(&self.pipeline, app, v);
                }
            } else if let Some(add) = action.get("add") {
                let Some(path) = add.get("path").and_then(|p| p.as_str()) else {
                    continue;
                };
                let address = partition_values(add);
                let rows = add
                    .get("stats")
                    .and_then(|s| s.as_str())
                    .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
                    .and_then(|s| s.get("numRecords").and_then(|n| n.as_i64()))
                    .unwrap_or(0);
                self.files
                    .add(path.to_string(), FileState::of(&address, rows));
            } else if let Some(remove) = action.get("remove") {
                if let Some(path) = remove.get("path").and_then(|p| p.as_str()) {
                    self.files.remove(path);
                }
            }
        }
        let Some(seals) = self.seals.as_mut() else {
            let mut changes = Vec::with_capacity(published.len());
            for ((address, (window, start, end)), held) in published.into_iter().zip(held_before) {
                let reason = if held {
                    ChangeReason::Rewritten
                } else {
                    ChangeReason::Complete
                };
                let rows = self.files.at(&address).1;
                changes.push(self.change(window, start, end, version, rows, reason));
            }
            return Ok(changes);
        };
        // A sharded table: a window is complete at a version when every shard holding files
        // in the table has sealed past its end (the rule of `sluice status`, a function of
        // the version alone). It is notified `complete` at each version where that becomes
        // true, and `rewritten` when a commit publishes it while it stays complete. (A shard
        // whose first files appear lowers the threshold, and windows it has not sealed are
        // complete again only once it has: a feed started at any version sees the same.)
        for (key, (label, start, end)) in &published {
            seals.windows.insert(
                key.clone(),
                Pending {
                    label: label.clone(),
                    start: start.clone(),
                    end: end.clone(),
                    end_us: micros_of(end),
                },
            );
        }
        let files = &self.files;
        // A window left without files (a MERGE moved its last rows out) is no longer held;
        // had it been complete, its rows changed: it is rewritten, to nothing.
        let emptied: BTreeSet<WindowKey> = seals
            .windows
            .keys()
            .filter(|key| files.at(key).0 == 0 && seals.complete.contains(*key))
            .cloned()
            .collect();
        seals.windows.retain(|key, _| files.at(key).0 > 0);
        let threshold = seals.threshold(self.files.shards());
        let now: BTreeSet<WindowKey> = seals
            .windows
            .iter()
            .filter(|(_, p)| matches!((p.end_us, threshold), (Some(end), Some(t)) if end <= t))
            .map(|(key, _)| key.clone())
            .collect();
        let before = std::mem::replace(&mut seals.complete, now);
        let mut rewritten = Vec::new();
        for (key, (label, start, end)) in published {
            if before.contains(&key) && (seals.complete.contains(&key) || emptied.contains(&key)) {
                rewritten.push((key, label, start, end));
            }
        }
        let completed: Vec<(WindowKey, Pending)> = seals
            .complete
            .difference(&before)
            .filter_map(|key| seals.windows.get(key).map(|p| (key.clone(), p.clone())))
            .collect();
        let mut changes: Vec<(WindowKey, WindowChange)> = Vec::new();
        for (key, label, start, end) in rewritten {
            let rows = self.files.at(&key).1;
            let change = self.change(label, start, end, version, rows, ChangeReason::Rewritten);
            changes.push((key, change));
        }
        for (key, p) in completed {
            let rows = self.files.at(&key).1;
            let change = self.change(
                p.label,
                p.start,
                p.end,
                version,
                rows,
                ChangeReason::Complete,
            );
            changes.push((key, change));
        }
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(changes.into_iter().map(|(_, c)| c).collect())
    }

    /// The change of window `label` at `version`.
    fn change(
        &self,
        label: String,
        start: String,
        end: String,
        version: u64,
        rows: i64,
        reason: ChangeReason,
    ) -> WindowChange {
        WindowChange {
            table: self.table.clone(),
            table_id: self.table_id.clone(),
            pipeline: self.pipeline.clone(),
            idempotency_key: format!("{}/{label}/{version}", self.table_id),
            address: label,
            window_start: start,
            window_end: end,
            version,
            rows,
            reason,
        }
    }
}

/// A sharded table's seals as `table` holds them, and its windows of `pipeline` sorted into
/// complete (every shard holding files sealed past the window's end) and pending.
async fn starting_seals(
    table: &DeltaTable,
    pipeline: &str,
    files: &ActiveFiles,
) -> Result<Seals, NotifyLogError> {
    let snapshot = table.snapshot()?;
    let log_store = table.log_store();
    let mut seals = Seals::default();
    for shard in files.shards() {
        let id = app_id(pipeline, &shard_sealed_txn(shard));
        if let Some(v) = snapshot
            .transaction_version(log_store.as_ref(), &id)
            .await?
        {
            seals.seal(shard, v);
        }
    }
    let threshold = seals.threshold(files.shards());
    let size = Contract::recorded_in(snapshot.metadata().configuration(), pipeline)
        .and_then(|c| c.get("window").and_then(|w| WindowSize::parse(w).ok()));
    for key in files.by_address.keys() {
        let other_pipeline = key
            .iter()
            .any(|(k, v)| k == sluice_window::PIPELINE_COLUMN && v != pipeline);
        let Some(layout) = AddressLayout::of_partition_values(key) else {
            continue;
        };
        let (Ok(start), Ok(address)) = (layout.start_of(key), Address::from_partition_values(key))
        else {
            continue;
        };
        if other_pipeline {
            continue;
        }
        let window = layout.window_at(size, key);
        let start = window.map_or(start, |w| w.start());
        let end_us = window.map(|w| w.end().as_micros());
        if matches!((end_us, threshold), (Some(end), Some(t)) if end <= t) {
            seals.complete.insert(key.clone());
        }
        seals.windows.insert(
            key.clone(),
            Pending {
                label: address.hive_path(),
                start: start.to_rfc3339(),
                end: end_us
                    .map(|e| EventTime::from_micros(e).to_rfc3339())
                    .unwrap_or_default(),
                end_us,
            },
        );
    }
    Ok(seals)
}

/// `dt=2026-10-03/hour=14` as sorted partition values (sluice's addresses need no escaping).
fn address_of_hive_path(path: &str) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = path
        .split('/')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    pairs.sort();
    pairs
}

/// An `add` action's partition values, sorted (null values left out, as sluice writes none).
fn partition_values(action: &serde_json::Value) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = action
        .get("partitionValues")
        .and_then(|p| p.as_object())
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default();
    pairs.sort();
    pairs
}

/// The last table version recorded as delivered to `target`, if any.
pub async fn notified_through(
    table: &DeltaTable,
    pipeline: &str,
    target: &str,
) -> Result<Option<u64>, NotifyLogError> {
    if !valid_target_name(target) {
        return Err(NotifyLogError::BadTargetName(target.to_string()));
    }
    let id = app_id(pipeline, &notify_txn(target));
    let version = table
        .snapshot()?
        .transaction_version(table.log_store().as_ref(), &id)
        .await?;
    Ok(version.map(|v| v.max(0) as u64))
}

/// Records, in a commit of its own (a `txn` and commit metadata, no data change), that every
/// change through table version `through` was delivered to `target`. Never moves the record
/// back: when it already says `through` or later (another process delivered further), nothing
/// is committed and `None` is returned. A conflict with a concurrent commit re-reads the
/// table and tries again (up to 10 times). `table` is left at the version it last read.
pub async fn record_notified(
    table: &mut DeltaTable,
    pipeline: &str,
    target: &str,
    through: u64,
    at_ms: i64,
) -> Result<Option<u64>, NotifyLogError> {
    const ATTEMPTS_MAX: usize = 10;
    let record = |source| NotifyLogError::Record {
        target: target.to_string(),
        version: through,
        source: Box::new(source),
    };
    let id = app_id(pipeline, &notify_txn(target));
    let mut attempt = 0;
    loop {
        attempt += 1;
        if notified_through(table, pipeline, target)
            .await?
            .is_some_and(|v| v >= through)
        {
            return Ok(None);
        }
        let info = json!({
            "pipeline": pipeline,
            "notified": {"target": target, "through_version": through},
        });
        let properties = CommitProperties::default()
            .with_application_transactions(vec![Transaction::new_with_last_update(
                id.clone(),
                through as i64,
                Some(at_ms),
            )])
            .with_metadata([(COMMIT_INFO_KEY.to_string(), info)]);
        let snapshot = table.snapshot()?;
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: None,
            predicate: None,
        };
        let result = CommitBuilder::from(properties)
            .with_actions(Vec::new())
            .build(Some(snapshot), table.log_store(), operation)
            .await;
        match result {
            Ok(finalized) => {
                let version = finalized.version();
                table.state = Some(finalized.snapshot());
                return Ok(Some(version));
            }
            Err(DeltaTableError::Transaction {
                source: TransactionError::CommitConflict(_) | TransactionError::MaxCommitAttempts(_),
            })
            | Err(DeltaTableError::VersionAlreadyExists(_))
                if attempt < ATTEMPTS_MAX =>
            {
                table.update_incremental(None).await.map_err(record)?;
            }
            Err(e) => return Err(record(e)),
        }
    }
}

#[cfg(test)]
mod tests;
