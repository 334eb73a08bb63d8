//! The table's files as sluice reads them: with their tags (pipeline, coverage).

use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;

use crate::table::commit::Coverage;
use crate::table::PublishedFile;
use crate::tags;

/// Every file of the table's loaded version, with sluice's tags.
pub async fn active_files(table: &DeltaTable) -> Result<Vec<PublishedFile>, DeltaTableError> {
    let views: Vec<_> = table
        .get_active_add_actions_by_partitions(&[])
        .try_collect()
        .await?;
    Ok(views.iter().map(file_of).collect())
}

pub(crate) fn file_of(view: &deltalake::kernel::LogicalFileView) -> PublishedFile {
    #[allow(deprecated)] // the only public way to the add's tags in deltalake 1.1
    let tags = view.add_action().tags.unwrap_or_default();
    let tag = |k: &str| tags.get(k).cloned().flatten();
    let coverage = match (tag(tags::COVERAGE_PARTITION), tag(tags::COVERAGE_OFFSET)) {
        (Some(partition), Some(offset)) => offset
            .parse()
            .ok()
            .map(|offset| Coverage { partition, offset }),
        _ => None,
    };
    let mut partition_values: Vec<(String, String)> = view
        .partition_values_map()
        .into_iter()
        .map(|(k, v)| (k, v.unwrap_or_default()))
        .collect();
    partition_values.sort();
    PublishedFile {
        path: view.path().to_string(),
        size_bytes: view.size(),
        rows: view.num_records().map(|n| n as i64),
        partition_values,
        pipeline: tag(tags::PIPELINE),
        coverage,
    }
}
