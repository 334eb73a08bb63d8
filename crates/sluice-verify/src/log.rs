//! The retained log, read once from its oldest commit to the verified version: which version
//! added each file, each window's last publication and the row count it recorded, the
//! commits that changed a window's rows without naming it, and each `txn` app id's versions
//! in commit order (a source partition's offset only moves forward).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::Value;
use sluice_publish::{published_windows_of, COMMIT_INFO_KEY, STATE_TXN_PREFIX};

use crate::{Check, Finding, VerifyError};

/// Commits read at once.
const COMMIT_READS_CONCURRENT_MAX: usize = 16;

/// A window's last publication in the retained log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Publication {
    pub version: u64,
    /// The window's rows it recorded (a swap, a rewrite, a compaction, a derived window);
    /// `None` for a MERGE, which records the rows it offered, not the window's.
    pub rows: Option<i64>,
    /// Later commits that changed the window's rows without sluice naming it (another
    /// engine's write, a hand edit).
    pub foreign: Vec<u64>,
}

/// What the retained log says, as far as the checks need it.
#[derive(Debug, Default)]
pub(crate) struct LogHistory {
    /// The oldest commit the log holds; files added before it are in the checkpoint only.
    pub first: Option<u64>,
    /// The version whose `add` action added each file (the newest such action).
    pub added_by: HashMap<Path, u64>,
    /// By address (`dt=2026-10-03/hour=14`).
    pub publications: BTreeMap<String, Publication>,
    /// `txn` versions that moved backwards.
    pub regressions: Vec<Finding>,
}

/// Reads the commits the log holds, through `through`; `partition_columns` in the table's
/// order make each action's address.
pub(crate) async fn read_log(
    store: &dyn ObjectStore,
    through: u64,
    partition_columns: &[String],
) -> Result<LogHistory, VerifyError> {
    let versions = retained_versions(store, through).await?;
    let mut history = LogHistory {
        first: versions.first().copied(),
        ..LogHistory::default()
    };
    let reads = versions.clone().into_iter().map(move |version| async move {
        let path = Path::from(format!("_delta_log/{version:020}.json"));
        let bytes = store
            .get(&path)
            .await
            .map_err(|source| VerifyError::Log { version, source })?
            .bytes()
            .await
            .map_err(|source| VerifyError::Log { version, source })?;
        Ok::<_, VerifyError>((version, bytes))
    });
    let mut commits = futures::stream::iter(reads).buffered(COMMIT_READS_CONCURRENT_MAX);
    let mut txns: HashMap<String, (u64, i64)> = HashMap::new();
    while let Some((version, bytes)) = commits.try_next().await? {
        let actions: Vec<Value> = bytes
            .split(|b| *b == b'\n')
            .filter_map(|line| serde_json::from_slice(line).ok())
            .collect();
        let named = history.note_publications(version, &actions);
        for action in &actions {
            history.note_file(version, action, &named, partition_columns);
            if let Some(txn) = action.get("txn") {
                history.note_txn(version, txn, &mut txns);
            }
        }
    }
    Ok(history)
}

/// The versions of the log's commit files, in order, through `through`.
async fn retained_versions(store: &dyn ObjectStore, through: u64) -> Result<Vec<u64>, VerifyError> {
    let listed: Vec<_> = store
        .list(Some(&Path::from("_delta_log")))
        .try_collect()
        .await
        .map_err(VerifyError::ListLog)?;
    let mut versions: Vec<u64> = listed
        .iter()
        .filter_map(|meta| {
            let name = meta.location.filename()?;
            let digits = name.strip_suffix(".json")?;
            (digits.len() == 20)
                .then(|| digits.parse::<u64>().ok())
                .flatten()
        })
        .filter(|v| *v <= through)
        .collect();
    versions.sort_unstable();
    Ok(versions)
}

impl LogHistory {
    /// Records the windows the commit's sluice metadata names; returns their addresses.
    fn note_publications(&mut self, version: u64, actions: &[Value]) -> BTreeSet<String> {
        let mut named = BTreeSet::new();
        let Some(info) = actions
            .iter()
            .find_map(|a| a.get("commitInfo").and_then(|c| c.get(COMMIT_INFO_KEY)))
        else {
            return named;
        };
        let mut record = |window: &Value, rows: Option<i64>| {
            if let Some(address) = window.get("window").and_then(Value::as_str) {
                named.insert(address.to_string());
                self.publications.insert(
                    address.to_string(),
                    Publication {
                        version,
                        rows,
                        foreign: Vec::new(),
                    },
                );
            }
        };
        for compacted in array(info, "compacted") {
            record(compacted, compacted.get("rows").and_then(Value::as_i64));
        }
        for changed in array(info, "windows_changed") {
            record(changed, None);
        }
        if info.get("compacted").is_none() {
            for published in published_windows_of(info) {
                record(
                    published,
                    published.get("window_rows").and_then(Value::as_i64),
                );
            }
        }
        for expired in array(info, "expired") {
            if let Some(address) = expired.get("window").and_then(Value::as_str) {
                named.insert(address.to_string());
                self.publications.remove(address);
            }
        }
        named
    }

    /// Records which version added a file, and a data change at an address the commit's
    /// metadata does not name.
    fn note_file(
        &mut self,
        version: u64,
        action: &Value,
        named: &BTreeSet<String>,
        partition_columns: &[String],
    ) {
        let (file, added) = match (action.get("add"), action.get("remove")) {
            (Some(add), _) => (add, true),
            (None, Some(remove)) => (remove, false),
            (None, None) => return,
        };
        if added {
            if let Some(path) = file.get("path").and_then(Value::as_str) {
                if let Ok(path) = Path::from_url_path(path) {
                    self.added_by.insert(path, version);
                }
            }
        }
        if file.get("dataChange").and_then(Value::as_bool) == Some(false) {
            return;
        }
        let address = address_of(file, partition_columns);
        if named.contains(&address) {
            return;
        }
        if let Some(p) = self.publications.get_mut(&address) {
            if p.foreign.last() != Some(&version) {
                p.foreign.push(version);
            }
        }
    }

    /// Checks that a `txn` app id's version does not go down; `.state.` ids hold state, not
    /// positions, and may.
    fn note_txn(&mut self, version: u64, txn: &Value, seen: &mut HashMap<String, (u64, i64)>) {
        let (Some(id), Some(offset)) = (
            txn.get("appId").and_then(Value::as_str),
            txn.get("version").and_then(Value::as_i64),
        ) else {
            return;
        };
        let last = id.rsplit('/').next().unwrap_or(id);
        if last.starts_with(STATE_TXN_PREFIX) {
            return;
        }
        if let Some(&(before, was)) = seen.get(id) {
            if offset < was {
                self.regressions.push(Finding {
                    check: Check::OffsetRegression,
                    version: Some(version),
                    message: format!("{id} moved back from {was} (version {before}) to {offset}"),
                });
            }
        }
        seen.insert(id.to_string(), (version, offset));
    }

    /// How a finding names the version that added `path`.
    pub fn added(&self, path: &Path) -> Option<u64> {
        self.added_by.get(path).copied()
    }
}

fn array<'a>(info: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    info.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// `dt=2026-10-03/hour=14`: an action's partition values in the table's column order, as
/// sluice names windows ([`address`]).
pub(crate) fn address_of(file: &Value, partition_columns: &[String]) -> String {
    let values = file.get("partitionValues");
    address(partition_columns, |c| {
        values
            .and_then(|v| v.get(c))
            .and_then(Value::as_str)
            .map(str::to_string)
    })
}

/// `dt=2026-10-03/hour=14`: the value `value_of` gives each partition column (empty for
/// none), in the table's column order; [`UNPARTITIONED`] without partition columns.
pub(crate) fn address(
    partition_columns: &[String],
    value_of: impl Fn(&str) -> Option<String>,
) -> String {
    if partition_columns.is_empty() {
        return UNPARTITIONED.to_string();
    }
    partition_columns
        .iter()
        .map(|c| format!("{c}={}", value_of(c).unwrap_or_default()))
        .collect::<Vec<_>>()
        .join("/")
}

/// The address of every file of a table without partition columns.
const UNPARTITIONED: &str = "(unpartitioned)";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn commit(history: &mut LogHistory, version: u64, actions: &[Value], columns: &[String]) {
        let named = history.note_publications(version, actions);
        let mut seen = HashMap::new();
        for a in actions {
            history.note_file(version, a, &named, columns);
            if let Some(txn) = a.get("txn") {
                history.note_txn(version, txn, &mut seen);
            }
        }
    }

    fn add(address: (&str, &str), path: &str, data_change: bool) -> Value {
        json!({"add": {"path": path, "partitionValues": {"dt": address.0, "hour": address.1},
            "dataChange": data_change}})
    }

    #[test]
    fn publications_compactions_merges_expiries_and_foreign_writes() {
        let columns = vec!["dt".to_string(), "hour".to_string()];
        let mut h = LogHistory::default();
        let w14 = "dt=2026-10-03/hour=14";
        let w15 = "dt=2026-10-03/hour=15";
        // A group commit of two windows.
        commit(
            &mut h,
            1,
            &[
                json!({"commitInfo": {"sluice": {"pipeline": "p", "windows": [
                    {"window": w14, "window_rows": 3}, {"window": w15, "window_rows": 2}]}}}),
                add(
                    ("2026-10-03", "14"),
                    "dt=2026-10-03/hour=14/a.parquet",
                    true,
                ),
                add(
                    ("2026-10-03", "15"),
                    "dt=2026-10-03/hour=15/b.parquet",
                    true,
                ),
            ],
            &columns,
        );
        assert_eq!(h.publications[w14].rows, Some(3));
        assert_eq!(
            h.added(&Path::from("dt=2026-10-03/hour=15/b.parquet")),
            Some(1)
        );
        // Another engine appends to 14; a compaction of 15 records its rows.
        commit(
            &mut h,
            2,
            &[add(
                ("2026-10-03", "14"),
                "dt=2026-10-03/hour=14/x.parquet",
                true,
            )],
            &columns,
        );
        commit(
            &mut h,
            3,
            &[
                json!({"commitInfo": {"sluice": {"compacted": [{"window": w15, "rows": 2}]}}}),
                add(
                    ("2026-10-03", "15"),
                    "dt=2026-10-03/hour=15/c.parquet",
                    false,
                ),
            ],
            &columns,
        );
        assert_eq!(h.publications[w14].foreign, vec![2]);
        assert_eq!(
            h.publications[w15],
            Publication {
                version: 3,
                rows: Some(2),
                foreign: vec![]
            }
        );
        // A MERGE into 15 that moves a row out of 14: neither count is recorded now.
        commit(
            &mut h,
            4,
            &[
                json!({"commitInfo": {"sluice": {"window": w15, "mode": "merge_upsert",
                "windows_changed": [{"window": w14}]}}}),
            ],
            &columns,
        );
        assert_eq!(h.publications[w14].rows, None);
        assert_eq!(h.publications[w15].rows, None);
        // An expiry forgets the window.
        commit(
            &mut h,
            5,
            &[json!({"commitInfo": {"sluice": {"expired": [{"window": w14}]}}})],
            &columns,
        );
        assert!(!h.publications.contains_key(w14));
    }

    #[test]
    fn offsets_only_move_forward_but_state_may() {
        let mut h = LogHistory::default();
        let mut seen = HashMap::new();
        let txn = |id: &str, v: i64| json!({"appId": id, "version": v});
        h.note_txn(1, &txn("p/a.ndjson", 10), &mut seen);
        h.note_txn(1, &txn("p/.shard/0/.state.fence", 10), &mut seen);
        h.note_txn(2, &txn("p/a.ndjson", 10), &mut seen);
        h.note_txn(2, &txn("p/.shard/0/.state.fence", 5), &mut seen);
        assert!(h.regressions.is_empty());
        h.note_txn(3, &txn("p/a.ndjson", 4), &mut seen);
        assert_eq!(h.regressions.len(), 1);
        assert_eq!(h.regressions[0].version, Some(3));
        assert_eq!(
            h.regressions[0].message,
            "p/a.ndjson moved back from 10 (version 2) to 4"
        );
    }
}
