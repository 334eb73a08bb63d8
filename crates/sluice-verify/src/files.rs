//! The table's files against the store: each file its log references is there, as long as
//! its `add` action says, with the rows its statistics say; and each window holds the rows
//! its last publication recorded.

use std::collections::BTreeMap;
use std::sync::Arc;

use deltalake::DeltaTable;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::log::{address, LogHistory};
use crate::{Check, Finding, VerifyError};

/// Files checked at once (a HEAD and a footer read each).
const FILE_CHECKS_CONCURRENT_MAX: usize = 16;

/// One file of the verified version, as its `add` action describes it.
#[derive(Debug, Clone)]
pub(crate) struct TableFile {
    pub path: Path,
    pub size_bytes: u64,
    /// `numRecords` of its statistics, if written.
    pub rows: Option<i64>,
    /// Its window's address (`dt=2026-10-03/hour=14`).
    pub address: String,
}

/// Every file of the table's loaded version.
pub(crate) async fn table_files(
    table: &DeltaTable,
    partition_columns: &[String],
) -> Result<Vec<TableFile>, VerifyError> {
    let views: Vec<_> = table
        .get_active_add_actions_by_partitions(&[])
        .try_collect()
        .await?;
    Ok(views
        .iter()
        .map(|view| {
            let values = view.partition_values_map();
            TableFile {
                path: view.object_store_path(),
                size_bytes: u64::try_from(view.size()).unwrap_or(0),
                rows: view.num_records().map(|n| n as i64),
                address: address(partition_columns, |c| values.get(c).cloned().flatten()),
            }
        })
        .collect())
}

/// What the store holds of one file: its size and its footer's row count.
enum Stored {
    Missing,
    /// Its footer cannot be read (why).
    Unreadable(String),
    Present {
        size_bytes: u64,
        rows: i64,
    },
}

/// Findings about files that are missing, unreadable, of another size, or of other rows
/// than their statistics; and the paths of the files whose rows can be read (all of them, or
/// `None` when every file can).
pub(crate) async fn check_files(
    store: Arc<dyn ObjectStore>,
    files: &[TableFile],
    log: &LogHistory,
) -> Result<(Vec<Finding>, Option<Vec<String>>), VerifyError> {
    let reads = files.iter().cloned().map(move |file| {
        let store = store.clone();
        async move {
            let stored = stored(store, &file).await?;
            Ok::<_, VerifyError>((file, stored))
        }
    });
    let mut checked = futures::stream::iter(reads).buffered(FILE_CHECKS_CONCURRENT_MAX);
    let mut findings = Vec::new();
    let mut readable = Vec::with_capacity(files.len());
    while let Some((file, stored)) = checked.try_next().await? {
        if matches!(stored, Stored::Present { size_bytes, .. } if size_bytes == file.size_bytes) {
            readable.push(file.path.to_string());
        }
        let finding = |check, message| Finding {
            check,
            version: log.added(&file.path),
            message,
        };
        match stored {
            Stored::Missing => findings.push(finding(
                Check::MissingFile,
                format!(
                    "{} is referenced by the table but not in the store",
                    file.path
                ),
            )),
            Stored::Unreadable(why) => findings.push(finding(
                Check::UnreadableFile,
                format!("{} cannot be read as Parquet: {why}", file.path),
            )),
            Stored::Present { size_bytes, .. } if size_bytes != file.size_bytes => {
                findings.push(finding(
                    Check::FileSize,
                    format!(
                        "{} is {size_bytes} bytes in the store, {} in the log",
                        file.path, file.size_bytes
                    ),
                ))
            }
            Stored::Present { rows, .. } => match file.rows {
                Some(logged) if logged != rows => findings.push(finding(
                    Check::FileRows,
                    format!(
                        "{} holds {rows} rows, its statistics say {logged}",
                        file.path
                    ),
                )),
                _ => {}
            },
        }
    }
    let every = readable.len() == files.len();
    Ok((findings, (!every).then_some(readable)))
}

async fn stored(store: Arc<dyn ObjectStore>, file: &TableFile) -> Result<Stored, VerifyError> {
    let head = match store.head(&file.path).await {
        Ok(head) => head,
        Err(object_store::Error::NotFound { .. }) => return Ok(Stored::Missing),
        Err(source) => {
            return Err(VerifyError::Store {
                path: file.path.to_string(),
                source,
            })
        }
    };
    if head.size != file.size_bytes {
        return Ok(Stored::Present {
            size_bytes: head.size,
            rows: 0,
        });
    }
    let footer = match sluice_stage::read_footer(store, file.path.clone(), head.size).await {
        Ok(footer) => footer,
        Err(sluice_stage::StageError::Decode { source, .. }) => {
            return Ok(Stored::Unreadable(source.to_string()))
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Stored::Present {
        size_bytes: head.size,
        rows: footer.file_metadata().num_rows(),
    })
}

/// Findings about windows whose rows (by the files' statistics) differ from what their
/// last publication recorded. Returns them and the number of windows compared.
pub(crate) fn check_windows(files: &[TableFile], log: &LogHistory) -> (Vec<Finding>, usize) {
    let mut rows: BTreeMap<&str, Option<i64>> = BTreeMap::new();
    for file in files {
        let entry = rows.entry(file.address.as_str()).or_insert(Some(0));
        *entry = entry.and_then(|sum| file.rows.map(|r| sum + r));
    }
    let mut findings = Vec::new();
    let mut compared = 0;
    for (address, held) in rows {
        let Some(publication) = log.publications.get(address) else {
            continue;
        };
        let (Some(held), Some(recorded)) = (held, publication.rows) else {
            continue;
        };
        compared += 1;
        if held == recorded {
            continue;
        }
        let since = match publication.foreign.as_slice() {
            [] => String::new(),
            versions => format!(
                "; changed since without sluice by version(s) {}",
                versions
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        findings.push(Finding {
            check: Check::WindowRows,
            version: Some(publication.foreign.last().copied().unwrap_or(publication.version)),
            message: format!(
                "{address} holds {held} rows, its last publication (version {}) recorded {recorded}{since}",
                publication.version
            ),
        });
    }
    (findings, compared)
}
