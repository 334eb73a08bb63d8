//! The `txn` actions of a table state, read by one replay of its log: the last checkpoint's,
//! then the commits after it. deltalake 1.1 looks a `txn` up only by its app id, replaying
//! the log for each, so `sluice status` (which does not know the app ids in advance) and a
//! run resuming a source of many files (two `txn`s each) read them here instead.

use std::collections::BTreeMap;

use deltalake::arrow::array::{Array, AsArray};
use deltalake::arrow::datatypes::Int64Type;
use deltalake::DeltaTableError;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("reading the table state failed: {0}")]
    Delta(#[from] DeltaTableError),
    #[error("reading {path} failed: {source}")]
    Store {
        path: String,
        source: object_store::Error,
    },
    #[error("reading the checkpoint {path} failed: {source}")]
    Checkpoint {
        path: String,
        source: sluice_stage::StageError,
    },
    #[error("{path} is not a Delta log file sluice can read: {reason}")]
    Log { path: String, reason: String },
}

/// One `txn` of the table state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn {
    /// The `txn` action's `version`: for sluice the resume offset (a byte offset in an NDJSON
    /// file, the next offset of a Kafka partition).
    pub version: i64,
    /// The writer's clock when it committed this `txn`, milliseconds since the epoch.
    pub last_updated_ms: Option<i64>,
}

/// `{offset, version, last_updated_ms}`: `offset` says what the number is; `version`, the
/// same number under the Delta action's name, stays for readers of the first format.
impl serde::Serialize for Txn {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut txn = serializer.serialize_struct("Txn", 3)?;
        txn.serialize_field("offset", &self.version)?;
        txn.serialize_field("version", &self.version)?;
        txn.serialize_field("last_updated_ms", &self.last_updated_ms)?;
        txn.end()
    }
}

/// The `txn`s of a table state, and how they were read.
#[derive(Debug)]
pub(crate) struct Replayed {
    pub txns: BTreeMap<String, Txn>,
    /// The checkpoint the replay started from, and its `_last_checkpoint` record.
    pub checkpoint: Option<(u64, serde_json::Value)>,
    /// Whether every commit after the checkpoint was there.
    pub complete: bool,
}

/// Every `txn` of the table state at `version` by one replay of its log, as
/// [`crate::read_txns`] reads them; `None` when the replay cannot vouch for them: a commit it needs is gone (log
/// cleanup with no `_last_checkpoint` to start after), or the log is not one it reads (a
/// checkpoint it cannot open). Then the caller asks delta-rs, whose lookup replays the log
/// once per app id.
pub(crate) async fn txns_if_complete(
    store: &dyn ObjectStore,
    version: u64,
) -> Option<BTreeMap<String, Txn>> {
    match replay_txns(store, version).await {
        Ok(Replayed {
            txns,
            complete: true,
            ..
        }) => Some(txns),
        _ => None,
    }
}

/// Every `txn` of the table state at `version`: the last checkpoint's, then the commits after
/// it in order (a later `txn` of an app id replaces an earlier one).
pub(crate) async fn replay_txns(
    store: &dyn ObjectStore,
    version: u64,
) -> Result<Replayed, StatusError> {
    let mut complete = true;
    let mut txns = BTreeMap::new();
    let last = read_json(store, "_delta_log/_last_checkpoint").await?;
    let checkpoint = last.as_ref().and_then(|l| {
        let v = l.get("version")?.as_u64()?;
        (v <= version).then_some((v, l))
    });
    let from = match checkpoint {
        Some((v, last)) => {
            let parts = last.get("parts").and_then(|p| p.as_u64());
            let paths: Vec<String> = match parts {
                Some(n) if n > 1 => (1..=n)
                    .map(|i| format!("_delta_log/{v:020}.checkpoint.{i:010}.{n:010}.parquet"))
                    .collect(),
                _ => vec![format!("_delta_log/{v:020}.checkpoint.parquet")],
            };
            for path in paths {
                read_checkpoint_txns(store, &path, &mut txns).await?;
            }
            v + 1
        }
        None => 0,
    };
    for v in from..=version {
        let path = format!("_delta_log/{v:020}.json");
        let Some(bytes) = read_bytes(store, &path).await? else {
            // Cleaned up below a checkpoint that `_last_checkpoint` does not name: its txns
            // are not all here.
            complete = false;
            continue;
        };
        for line in bytes.split(|b| *b == b'\n') {
            let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
                continue;
            };
            let Some(txn) = value.get("txn") else {
                continue;
            };
            let (Some(app_id), Some(v)) = (
                txn.get("appId").and_then(|a| a.as_str()),
                txn.get("version").and_then(|v| v.as_i64()),
            ) else {
                return Err(StatusError::Log {
                    path,
                    reason: format!("a txn action without appId or version: {txn}"),
                });
            };
            txns.insert(
                app_id.to_string(),
                Txn {
                    version: v,
                    last_updated_ms: txn.get("lastUpdated").and_then(|l| l.as_i64()),
                },
            );
        }
    }
    Ok(Replayed {
        txns,
        checkpoint: checkpoint.map(|(v, last)| (v, last.clone())),
        complete,
    })
}

async fn read_checkpoint_txns(
    store: &dyn ObjectStore,
    path: &str,
    txns: &mut BTreeMap<String, Txn>,
) -> Result<(), StatusError> {
    let batches = sluice_stage::read_parquet_columns(store, path, &["txn".to_string()])
        .await
        .map_err(|source| StatusError::Checkpoint {
            path: path.to_string(),
            source,
        })?;
    let bad = |reason: &str| StatusError::Log {
        path: path.to_string(),
        reason: reason.to_string(),
    };
    for batch in batches {
        let Some(column) = batch.column_by_name("txn") else {
            continue; // a checkpoint of a table without txns
        };
        let txn = column
            .as_struct_opt()
            .ok_or_else(|| bad("its txn column is not a struct"))?;
        let app_ids = txn
            .column_by_name("appId")
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(|| bad("txn.appId is not a string column"))?;
        let versions = txn
            .column_by_name("version")
            .and_then(|c| c.as_primitive_opt::<Int64Type>())
            .ok_or_else(|| bad("txn.version is not a long column"))?;
        let updated = txn
            .column_by_name("lastUpdated")
            .and_then(|c| c.as_primitive_opt::<Int64Type>());
        for i in 0..txn.len() {
            if txn.is_null(i) || app_ids.is_null(i) || versions.is_null(i) {
                continue;
            }
            txns.insert(
                app_ids.value(i).to_string(),
                Txn {
                    version: versions.value(i),
                    last_updated_ms: updated.filter(|u| !u.is_null(i)).map(|u| u.value(i)),
                },
            );
        }
    }
    Ok(())
}

pub(crate) async fn read_bytes(
    store: &dyn ObjectStore,
    path: &str,
) -> Result<Option<bytes::Bytes>, StatusError> {
    let store_error = |source| StatusError::Store {
        path: path.to_string(),
        source,
    };
    match store.get(&Path::from(path)).await {
        Ok(r) => r.bytes().await.map(Some).map_err(store_error),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(source) => Err(store_error(source)),
    }
}

async fn read_json(
    store: &dyn ObjectStore,
    path: &str,
) -> Result<Option<serde_json::Value>, StatusError> {
    let Some(bytes) = read_bytes(store, path).await? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StatusError::Log {
            path: path.to_string(),
            reason: e.to_string(),
        })
}
