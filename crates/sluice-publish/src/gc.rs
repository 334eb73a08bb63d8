//! Orphan collection: staged files that no retained table version references.
//!
//! An attempt that dies between staging and publishing leaves its parts under the window's
//! address. They are invisible to readers (no `add` names them) and never become visible
//! later (every attempt writes new names), so deleting them is always safe, with one caveat:
//! a *running* ingester's staged parts are unreferenced too until it publishes. Hence the age
//! threshold: only files older than it are collected.

use std::collections::HashSet;

use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::ObjectStoreExt;

#[derive(Debug, thiserror::Error)]
pub enum GcError {
    #[error("reading the table state failed: {0}")]
    Delta(Box<DeltaTableError>),
    #[error("object store {op} failed: {source}")]
    Store {
        op: &'static str,
        source: object_store::Error,
    },
}

impl From<DeltaTableError> for GcError {
    fn from(e: DeltaTableError) -> Self {
        GcError::Delta(Box::new(e))
    }
}

/// A data file no retained version references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// Relative to the table root.
    pub path: String,
    pub size_bytes: u64,
    pub last_modified_ms: i64,
}

/// Lists orphans last modified at least `older_than_ms` before `now_ms` (the caller's clock).
///
/// Referenced = the current version's files plus the files its retained `remove` actions
/// name (older versions still read them). Paths whose first segment starts with `_` or `.`
/// (the log, checkpoints, temporary files) are never candidates.
pub async fn find_orphans(
    table: &DeltaTable,
    older_than_ms: i64,
    now_ms: i64,
) -> Result<Vec<Orphan>, GcError> {
    let mut referenced: HashSet<String> = HashSet::new();
    let active: Vec<_> = table
        .get_active_add_actions_by_partitions(&[])
        .try_collect()
        .await?;
    referenced.extend(active.iter().map(|f| f.path().to_string()));
    let log_store = table.log_store();
    let tombstones: Vec<_> = table
        .snapshot()?
        .all_tombstones(log_store.as_ref())
        .try_collect()
        .await?;
    referenced.extend(tombstones.iter().map(|t| t.path().to_string()));
    let store = table.object_store();
    let files: Vec<_> = store
        .list(None)
        .try_collect()
        .await
        .map_err(|source| GcError::Store { op: "list", source })?;
    let cutoff = now_ms.saturating_sub(older_than_ms.max(0));
    let mut orphans: Vec<Orphan> = files
        .into_iter()
        .filter(|meta| {
            let first = meta.location.parts().next();
            !first.is_some_and(|p| p.as_ref().starts_with('_') || p.as_ref().starts_with('.'))
        })
        .filter(|meta| !referenced.contains(meta.location.as_ref()))
        .filter(|meta| meta.last_modified.timestamp_millis() <= cutoff)
        .map(|meta| Orphan {
            path: meta.location.to_string(),
            size_bytes: meta.size,
            last_modified_ms: meta.last_modified.timestamp_millis(),
        })
        .collect();
    orphans.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(orphans)
}

/// Deletes the given orphans; a file already gone is not an error.
pub async fn delete_orphans(table: &DeltaTable, orphans: &[Orphan]) -> Result<usize, GcError> {
    let store = table.object_store();
    for o in orphans {
        let location = Path::parse(&o.path).map_err(|e| GcError::Store {
            op: "delete",
            source: e.into(),
        })?;
        match store.delete(&location).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(source) => {
                return Err(GcError::Store {
                    op: "delete",
                    source,
                })
            }
        }
    }
    Ok(orphans.len())
}
