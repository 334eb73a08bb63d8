use std::collections::{BTreeMap, BTreeSet};

use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::ObjectStoreExt;

use crate::table::file_of;
use crate::COMMIT_INFO_KEY;

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
    for view in &views {
        let file = file_of(view);
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
        let entry = windows.entry(key.clone()).or_insert(WindowListing {
            address: key,
            files: 0,
            rows: 0,
            version: None,
            publications: 0,
            published_at_ms: 0,
        });
        entry.files += 1;
        entry.rows += file.rows.unwrap_or(0);
        entry.published_at_ms = entry.published_at_ms.max(view.modification_time());
    }
    let store = table.object_store();
    let current = table.version().unwrap_or(0);
    for version in (0..=current).rev() {
        let Some(bytes) = read_commit(store.as_ref(), version).await? else {
            break;
        };
        for line in bytes.split(|b| *b == b'\n') {
            let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
                continue;
            };
            let Some(window) = value
                .get("commitInfo")
                .and_then(|c| c.get(COMMIT_INFO_KEY))
                .and_then(|s| s.get("window"))
                .and_then(|w| w.as_str())
            else {
                continue;
            };
            if let Some(entry) = windows.get_mut(window) {
                entry.publications += 1;
                entry.version.get_or_insert(version);
            }
        }
    }
    Ok(windows.into_values().collect())
}

/// The addresses (sorted `(column, value)` pairs) whose rows the commits after version
/// `after`, through `through`, changed: the partition values of their `add` and `remove`
/// actions. `None` when a commit of the range is no longer in the log (cleaned up).
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
            let Some(values) = ["add", "remove"]
                .iter()
                .find_map(|a| value.get(*a))
                .and_then(|a| a.get("partitionValues"))
                .and_then(|p| p.as_object())
            else {
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
async fn read_commit(
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
