//! Vacuum: deletes the data files that table versions older than the retention period
//! removed (deltalake's vacuum, `lite` mode: only files a `remove` action names).
//!
//! What it never touches: files any current version references, files removed more recently
//! than the retention period (time travel to those versions keeps working, and a writer that
//! read the table before a republication still finds the files it read), and files no version
//! ever referenced (staged parts of a running or dead attempt: `sluice gc` collects those,
//! by age). Vacuum makes two commits of its own (`VACUUM START`/`VACUUM END`, no data change);
//! an ingester whose commit races them re-reads the table and goes on, as after any commit of
//! another writer.

use std::sync::Arc;

use deltalake::{DeltaTable, DeltaTableError};
use object_store::path::Path;
use object_store::ObjectStoreExt;

#[derive(Debug, thiserror::Error)]
pub enum VacuumError {
    #[error(
        "a retention of {retention_ms} ms is shorter than the table's minimum ({minimum_hours} hours, delta.deletedFileRetentionDuration): readers of older versions may still need those files; give --force-retention to vacuum anyway"
    )]
    RetentionTooShort {
        retention_ms: i64,
        minimum_hours: i64,
    },
    #[error("vacuuming the table failed: {0}")]
    Delta(Box<DeltaTableError>),
    #[error("checking {path} in the object store failed: {source}")]
    Store {
        path: String,
        source: object_store::Error,
    },
}

/// What a vacuum removed, or would remove (a dry run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vacuumed {
    /// Relative to the table root, sorted.
    pub files: Vec<String>,
    pub dry_run: bool,
}

/// The caller's clock, as deltalake's vacuum asks for one.
#[derive(Debug)]
struct At(i64);

impl deltalake::operations::vacuum::Clock for At {
    fn current_timestamp_millis(&self) -> i64 {
        self.0
    }
}

/// Vacuums `table` as of `now_ms`: deletes (or with `dry_run` lists) the files removed
/// longer than `retention_ms` ago (`None`: the table's `delta.deletedFileRetentionDuration`,
/// 7 days if unset). A retention shorter than the table's is refused unless `force`.
pub async fn vacuum(
    table: DeltaTable,
    retention_ms: Option<i64>,
    force: bool,
    dry_run: bool,
    now_ms: i64,
) -> Result<(DeltaTable, Vacuumed), VacuumError> {
    let delta = |e| VacuumError::Delta(Box::new(e));
    // deltalake refuses a short retention itself, with an error type it does not export:
    // checked here, against the same property, to say what to do about it.
    let minimum_ms = {
        use deltalake::table::config::TablePropertiesExt;
        let snapshot = table.snapshot().map_err(delta)?;
        snapshot
            .table_config()
            .deleted_file_retention_duration()
            .as_millis() as i64
    };
    if let Some(ms) = retention_ms.filter(|ms| *ms < minimum_ms && !force) {
        return Err(VacuumError::RetentionTooShort {
            retention_ms: ms,
            minimum_hours: minimum_ms / 3_600_000,
        });
    }
    // What is due: deltalake lists every expired `remove`, also those an earlier vacuum
    // already deleted (the log keeps them until a checkpoint drops them); only the files
    // still in storage are reported, so a second vacuum says it found nothing.
    let (table, planned) = run(table, retention_ms, force, true, now_ms).await?;
    let store = table.object_store();
    let mut files = Vec::new();
    for path in planned {
        let relative = relative_path(table.table_url().as_str(), &path);
        match store.head(&Path::from(relative.as_str())).await {
            Ok(_) => files.push(relative),
            Err(object_store::Error::NotFound { .. }) => {}
            Err(source) => {
                return Err(VacuumError::Store {
                    path: relative,
                    source,
                })
            }
        }
    }
    files.sort();
    if dry_run || files.is_empty() {
        return Ok((table, Vacuumed { files, dry_run }));
    }
    let (table, _) = run(table, retention_ms, force, false, now_ms).await?;
    Ok((table, Vacuumed { files, dry_run }))
}

/// One deltalake vacuum; returns the files it deleted (or would delete).
async fn run(
    table: DeltaTable,
    retention_ms: Option<i64>,
    force: bool,
    dry_run: bool,
    now_ms: i64,
) -> Result<(DeltaTable, Vec<String>), VacuumError> {
    let mut builder = table
        .vacuum()
        .with_dry_run(dry_run)
        .with_clock(Arc::new(At(now_ms)))
        .with_enforce_retention_duration(!force);
    if let Some(ms) = retention_ms {
        builder = builder.with_retention_period(chrono::Duration::milliseconds(ms));
    }
    let (table, metrics) = builder.await.map_err(|e| VacuumError::Delta(Box::new(e)))?;
    Ok((table, metrics.files_deleted))
}

/// `path` relative to the table root (deltalake reports some paths as URLs or absolute).
fn relative_path(table_url: &str, path: &str) -> String {
    let root = format!("{}/", table_url.trim_end_matches('/'));
    let local_root = root.strip_prefix("file://").unwrap_or(&root);
    path.strip_prefix(root.as_str())
        .or_else(|| path.strip_prefix(local_root))
        .unwrap_or(path)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::relative_path;

    #[test]
    fn reported_paths_are_relative_to_the_table_root() {
        let root = "file:///data/tables/events/";
        for reported in [
            "dt=2026-10-03/hour=14/part-1.parquet",
            "/data/tables/events/dt=2026-10-03/hour=14/part-1.parquet",
            "file:///data/tables/events/dt=2026-10-03/hour=14/part-1.parquet",
        ] {
            assert_eq!(
                relative_path(root, reported),
                "dt=2026-10-03/hour=14/part-1.parquet",
                "{reported}"
            );
        }
        assert_eq!(
            relative_path(
                "s3://lake/events",
                "s3://lake/events/shard=3/part-2.parquet"
            ),
            "shard=3/part-2.parquet"
        );
        // A path outside the table (a sibling whose name starts like it, too) stays as it
        // is, and is then not found in this table's store.
        for outside in [
            "/data/tables/other/part-1.parquet",
            "/data/tables/events-old/part-1.parquet",
        ] {
            assert_eq!(relative_path(root, outside), outside);
        }
    }
}
