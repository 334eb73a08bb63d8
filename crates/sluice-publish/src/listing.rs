//! Read-only views of a table for people and checks: its windows with their rows, files,
//! coverage and completeness across shards (`sluice windows`), and its schema history.

use std::collections::{BTreeMap, BTreeSet};

use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::ObjectStoreExt;

use sluice_window::{parse_instant, EventTime, Shard};

use crate::table::{app_id, file_of};
use crate::COMMIT_INFO_KEY;

/// The `txn` partition name under which a writer of `shard` records how far its shard has
/// sealed: every window ending at or before that event time (microseconds) is sealed in this
/// shard, so rows of it that arrive later are late data. The app id is
/// `<pipeline>/.shard/<n>/sealed_through_us`; it depends only on the shard, so a reader of the
/// table finds it without knowing the source (`sluice windows`).
pub fn shard_sealed_txn(shard: Shard) -> String {
    format!(".shard/{shard}/sealed_through_us")
}

#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("reading the table state failed: {0}")]
    Delta(#[from] DeltaTableError),
    #[error("reading commit {version} failed: {source}")]
    Log {
        version: u64,
        source: object_store::Error,
    },
}

/// One window (address) of a table, as `sluice windows` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowListing {
    /// `dt=2026-10-03/hour=14`.
    pub address: String,
    pub files: usize,
    pub rows: i64,
    /// The table version that last published the window, when the log still holds it.
    pub version: Option<u64>,
    /// How many retained commits published this window (1 + republications).
    pub publications: usize,
    /// The publisher's clock at publication, milliseconds since the epoch.
    pub published_at_ms: i64,
    /// In a sharded table: how far the window is sealed across the shards.
    pub seal: Option<ShardSeal>,
}

/// A window's state across the shards of a sharded table. The window is complete when every
/// shard has sealed it: no shard still holds rows of it that are not in the table, and rows of
/// it read from now on are late data (published by the late policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSeal {
    /// This listing's shard has sealed the window.
    pub sealed: bool,
    /// How many shards have sealed the window...
    pub shards_sealed: usize,
    /// ...of the shards that have published rows to the table.
    pub shards: usize,
}

impl ShardSeal {
    pub fn complete(&self) -> bool {
        self.shards_sealed == self.shards
    }
}

/// Lists every address of the table with its files, rows and publishing version.
///
/// Versions come from sluice's commit metadata, read newest first from the retained log; a
/// window whose publishing commit was cleaned up shows no version.
pub async fn list_windows(table: &DeltaTable) -> Result<Vec<WindowListing>, ListError> {
    let views: Vec<_> = table
        .get_active_add_actions_by_partitions(&[])
        .try_collect()
        .await?;
    let mut windows: BTreeMap<String, WindowListing> = BTreeMap::new();
    // Keep the table's partition column order, not alphabetical order.
    let columns = table.snapshot()?.metadata().partition_columns().to_vec();
    let mut shard_of: BTreeMap<String, Shard> = BTreeMap::new();
    let mut pipelines: BTreeSet<String> = BTreeSet::new();
    for view in &views {
        let file = file_of(view);
        pipelines.extend(file.pipeline.clone());
        let address = file
            .partition_values
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>();
        let mut ordered: Vec<String> = columns
            .iter()
            .filter_map(|c| {
                address
                    .iter()
                    .find(|a| a.starts_with(&format!("{c}=")))
                    .cloned()
            })
            .collect();
        if ordered.is_empty() {
            ordered.push("(unpartitioned)".into());
        }
        let key = ordered.join("/");
        if let Some(shard) = Shard::of(&file.partition_values) {
            shard_of.insert(key.clone(), shard);
        }
        let entry = windows.entry(key.clone()).or_insert(WindowListing {
            address: key,
            files: 0,
            rows: 0,
            version: None,
            publications: 0,
            published_at_ms: 0,
            seal: None,
        });
        entry.files += 1;
        entry.rows += file.rows.unwrap_or(0);
        entry.published_at_ms = entry.published_at_ms.max(view.modification_time());
    }
    let store = table.object_store();
    let current = table.version().unwrap_or(0);
    // Window ends, from the newest commit that published each window (any layout).
    let mut ends: BTreeMap<String, EventTime> = BTreeMap::new();
    for version in (0..=current).rev() {
        let Some(bytes) = read_commit(store.as_ref(), version).await? else {
            break;
        };
        for line in bytes.split(|b| *b == b'\n') {
            let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
                continue;
            };
            let Some(info) = value.get("commitInfo").and_then(|c| c.get(COMMIT_INFO_KEY)) else {
                continue;
            };
            for published in published_windows_of(info) {
                let Some(window) = published.get("window").and_then(|w| w.as_str()) else {
                    continue;
                };
                if let Some(entry) = windows.get_mut(window) {
                    entry.publications += 1;
                    entry.version.get_or_insert(version);
                    let end = published
                        .get("window_end")
                        .and_then(|w| w.as_str())
                        .and_then(|w| parse_instant(w).ok());
                    if let (Some(end), false) = (end, ends.contains_key(window)) {
                        ends.insert(window.to_string(), end);
                    }
                }
            }
        }
    }
    if !shard_of.is_empty() {
        let sealed = sealed_through(table, &pipelines, shard_of.values().copied()).await?;
        mark_seals(&mut windows, &shard_of, &ends, &sealed);
    }
    Ok(windows.into_values().collect())
}

/// The windows sluice's commit metadata `info` says a commit published: the object itself
/// (one window), or each of its `windows` (a group commit).
pub fn published_windows_of(info: &serde_json::Value) -> Vec<&serde_json::Value> {
    match info.get("windows").and_then(|w| w.as_array()) {
        Some(group) => group.iter().collect(),
        None => vec![info],
    }
}

/// Each shard's sealed-through event time ([`shard_sealed_txn`]), the latest over the
/// table's pipelines; `None` for a shard that has recorded none.
async fn sealed_through(
    table: &DeltaTable,
    pipelines: &BTreeSet<String>,
    shards: impl Iterator<Item = Shard>,
) -> Result<BTreeMap<Shard, Option<EventTime>>, ListError> {
    let snapshot = table.snapshot()?;
    let log_store = table.log_store();
    let mut sealed: BTreeMap<Shard, Option<EventTime>> = BTreeMap::new();
    for shard in shards.collect::<BTreeSet<_>>() {
        let mut through: Option<i64> = None;
        for pipeline in pipelines {
            let id = app_id(pipeline, &shard_sealed_txn(shard));
            if let Some(v) = snapshot
                .transaction_version(log_store.as_ref(), &id)
                .await?
            {
                through = Some(through.map_or(v, |t| t.max(v)));
            }
        }
        sealed.insert(shard, through.map(EventTime::from_micros));
    }
    Ok(sealed)
}

/// Sets each sharded listing's [`ShardSeal`]: the shards that published rows to the table,
/// and which of them have sealed the listing's window (its end at or before their
/// sealed-through time). A window whose end is unknown (its publishing commit was cleaned up
/// from the log) gets no seal.
fn mark_seals(
    windows: &mut BTreeMap<String, WindowListing>,
    shard_of: &BTreeMap<String, Shard>,
    ends: &BTreeMap<String, EventTime>,
    sealed: &BTreeMap<Shard, Option<EventTime>>,
) {
    let shards = sealed.len();
    for (key, entry) in windows.iter_mut() {
        let (Some(shard), Some(end)) = (shard_of.get(key), ends.get(key)) else {
            continue;
        };
        let sealed_by = |s: &Shard| sealed.get(s).copied().flatten().is_some_and(|t| *end <= t);
        entry.seal = Some(ShardSeal {
            sealed: sealed_by(shard),
            shards_sealed: sealed.keys().filter(|s| sealed_by(s)).count(),
            shards,
        });
    }
}

/// One change of a table's columns, read from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaStep {
    pub version: u64,
    /// The first metadata the retained log holds: the table's creation (version 0) or, after
    /// log cleanup, the columns as of that version.
    pub baseline: bool,
    /// Columns added by this version (`coupon`, `user.plan`, `items[].qty`); every column for
    /// a baseline.
    pub added: Vec<String>,
    /// Top-level columns after this version.
    pub columns: usize,
}

/// The table's column history in the retained log: its first schema, then each commit that
/// added columns (schema evolution). Read from the commits' metadata actions; commits removed
/// by log cleanup are not seen.
pub async fn schema_history(table: &DeltaTable) -> Result<Vec<SchemaStep>, ListError> {
    use futures::StreamExt;
    let store = table.object_store();
    let current = table.version().unwrap_or(0);
    let reads = (0..=current).map(|version| {
        let store = store.clone();
        async move { (version, read_commit(store.as_ref(), version).await) }
    });
    let mut commits = futures::stream::iter(reads).buffered(16);
    let mut steps: Vec<SchemaStep> = Vec::new();
    let mut previous: Option<Vec<String>> = None;
    while let Some((version, commit)) = commits.next().await {
        let Some(bytes) = commit? else {
            continue; // cleaned up
        };
        for line in bytes.split(|b| *b == b'\n') {
            let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
                continue;
            };
            let Some(schema) = value
                .get("metaData")
                .and_then(|m| m.get("schemaString"))
                .and_then(|s| s.as_str())
                .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
            else {
                continue;
            };
            let paths = schema_paths(&schema);
            let columns = schema
                .get("fields")
                .and_then(|f| f.as_array())
                .map_or(0, Vec::len);
            let (baseline, added) = match &previous {
                None => (
                    true,
                    paths
                        .iter()
                        .filter(|p| !p.contains(['.', '[', '{']))
                        .cloned()
                        .collect(),
                ),
                Some(before) => {
                    let new: Vec<&String> = paths.iter().filter(|p| !before.contains(p)).collect();
                    // A new struct's members are part of it: name the struct alone.
                    let added = new
                        .iter()
                        .filter(|p| !new.iter().any(|q| q != *p && is_inside(p, q)))
                        .map(|p| (*p).clone())
                        .collect::<Vec<_>>();
                    (false, added)
                }
            };
            if baseline || !added.is_empty() {
                steps.push(SchemaStep {
                    version,
                    baseline,
                    added,
                    columns,
                });
            }
            previous = Some(paths);
        }
    }
    Ok(steps)
}

/// Whether path `p` is inside the field at path `q` (`user.plan` in `user`).
fn is_inside(p: &str, q: &str) -> bool {
    p.len() > q.len() && p.starts_with(q) && matches!(p.as_bytes()[q.len()], b'.' | b'[' | b'{')
}

/// Every field path of a Delta schema (JSON): `a`, `a.b`, `list[].b`, `map{}.b`.
fn schema_paths(schema: &serde_json::Value) -> Vec<String> {
    fn walk(t: &serde_json::Value, at: &str, out: &mut Vec<String>) {
        match t.get("type").and_then(|k| k.as_str()) {
            Some("struct") => {
                for f in t
                    .get("fields")
                    .and_then(|f| f.as_array())
                    .into_iter()
                    .flatten()
                {
                    let Some(name) = f.get("name").and_then(|n| n.as_str()) else {
                        continue;
                    };
                    let path = if at.is_empty() {
                        name.to_string()
                    } else {
                        format!("{at}.{name}")
                    };
                    out.push(path.clone());
                    if let Some(inner) = f.get("type").filter(|t| t.is_object()) {
                        walk(inner, &path, out);
                    }
                }
            }
            Some("array") => {
                if let Some(e) = t.get("elementType").filter(|t| t.is_object()) {
                    walk(e, &format!("{at}[]"), out);
                }
            }
            Some("map") => {
                if let Some(v) = t.get("valueType").filter(|t| t.is_object()) {
                    walk(v, &format!("{at}{{}}"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(schema, "", &mut out);
    out
}

/// The addresses (sorted `(column, value)` pairs) whose rows the commits after version
/// `after`, through `through`, changed: the partition values of their `add` and `remove`
/// actions that change data (a compaction's, `dataChange: false`, change no row). `None` when a commit of the range is no longer in the log (cleaned up).
pub async fn addresses_changed(
    table: &DeltaTable,
    after: u64,
    through: u64,
) -> Result<Option<BTreeSet<Vec<(String, String)>>>, ListError> {
    use futures::StreamExt;
    let store = table.object_store();
    let reads = ((after + 1)..=through).map(|version| {
        let store = store.clone();
        async move { read_commit(store.as_ref(), version).await }
    });
    let mut commits = futures::stream::iter(reads).buffered(16);
    let mut changed = BTreeSet::new();
    while let Some(commit) = commits.next().await {
        let Some(bytes) = commit? else {
            return Ok(None);
        };
        for line in bytes.split(|b| *b == b'\n') {
            let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
                continue;
            };
            let Some(action) = ["add", "remove"].iter().find_map(|a| value.get(*a)) else {
                continue;
            };
            // A compaction (`dataChange: false`) moves rows between files, changing none.
            if action.get("dataChange").and_then(|d| d.as_bool()) == Some(false) {
                continue;
            }
            let Some(values) = action.get("partitionValues").and_then(|p| p.as_object()) else {
                continue;
            };
            let mut key: Vec<(String, String)> = values
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect();
            key.sort();
            changed.insert(key);
        }
    }
    Ok(Some(changed))
}

/// The commit file of `version`, or `None` when the log no longer holds it (cleaned up).
pub(crate) async fn read_commit(
    store: &dyn object_store::ObjectStore,
    version: u64,
) -> Result<Option<bytes::Bytes>, ListError> {
    let path = Path::from(format!("_delta_log/{version:020}.json"));
    match store.get(&path).await {
        Ok(r) => r
            .bytes()
            .await
            .map(Some)
            .map_err(|source| ListError::Log { version, source }),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(source) => Err(ListError::Log { version, source }),
    }
}
