//! The table's files as sluice reads them: with their tags (pipeline, coverage).

use std::collections::BTreeMap;

use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;
use sluice_window::Window;

use crate::table::window_table::Coverage;
use crate::table::window_table::{PublishedFile, PublishedWindow, WindowTable};
use crate::{tags, OFFSET_COLUMN};

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

impl WindowTable {
    /// Every window of `pipeline` in the table (in this writer's shard), with its coverage.
    pub async fn published_windows(
        &mut self,
        pipeline: &str,
    ) -> Result<Vec<PublishedWindow>, DeltaTableError> {
        self.catch_up().await?;
        let mut windows: BTreeMap<Window, Coverage> = BTreeMap::new();
        for file in active_files(&self.loaded).await? {
            let (Some(p), Some(coverage)) = (file.pipeline.as_deref(), file.coverage) else {
                continue;
            };
            if p != pipeline {
                continue;
            }
            let Some(window) = self.share.window_of(&file.partition_values) else {
                continue;
            };
            windows
                .entry(window)
                .and_modify(|c| {
                    if coverage > *c {
                        *c = coverage.clone();
                    }
                })
                .or_insert(coverage);
        }
        Ok(windows
            .into_iter()
            .map(|(window, coverage)| PublishedWindow { window, coverage })
            .collect())
    }

    /// The lowest source offset among the rows of each window of `pipeline` (in this
    /// writer's shard), from the files' Delta statistics (`minValues`); `None` for a window
    /// with a file that has none. What a backfill from a source that no longer holds every
    /// event (a Kafka topic past its retention) checks before it replaces a window.
    pub async fn first_offsets(
        &mut self,
        pipeline: &str,
    ) -> Result<BTreeMap<Window, Option<i64>>, DeltaTableError> {
        self.catch_up().await?;
        let views: Vec<_> = self
            .loaded
            .get_active_add_actions_by_partitions(&[])
            .try_collect()
            .await?;
        let mut first: BTreeMap<Window, Option<i64>> = BTreeMap::new();
        for view in &views {
            let file = file_of(view);
            if file.pipeline.as_deref() != Some(pipeline) {
                continue;
            }
            let Some(window) = self.share.window_of(&file.partition_values) else {
                continue;
            };
            let offset = view
                .stats()
                .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
                .and_then(|s| s["minValues"][OFFSET_COLUMN].as_i64());
            let entry = first.entry(window).or_insert(offset);
            *entry = match (*entry, offset) {
                (Some(a), Some(b)) => Some(a.min(b)),
                _ => None,
            };
        }
        Ok(first)
    }
}
