//! History publications (`--scd 2`): the offered changes of a window become versions of
//! their keys' rows ([`crate::history`]), written by one MERGE on the key and the version's
//! start that inserts new versions and moves the end of held ones.
//!
//! Deletes are recorded as tombstones before the MERGE, as in a mirror (see
//! [`sluice_publish::TombstoneTable`]): a delete that ends no version (its key had none, or
//! it follows another delete) is known only there. A crash between the two commits leaves
//! tombstones whose deletes the table does not show yet; the resumed run offers the same
//! changes again and the recomputed versions are the same.

use sluice_publish::{MergeAction, MergeScope, Tombstones};
use sluice_window::Window;

use super::merge::MergeRows;
use super::{CommitMeta, Committed, Publisher};
use crate::buffer::WindowBuffer;
use crate::config::IngestError;
use crate::dedupe::{columns_named, windows_of, KeySpec};
use crate::deletes::{event_times_of, tombstone_values};
use crate::history::{versions, START_AT};

impl Publisher {
    /// Publishes `window`'s changes in `buffer` as versions (see the module doc); `natural`
    /// is the natural key (the run's dedupe keys rows by it and the sequence).
    pub(super) async fn merge_history(
        &mut self,
        window: Window,
        buffer: WindowBuffer,
        republish: bool,
        meta: CommitMeta,
        natural: KeySpec,
    ) -> Result<Option<Committed>, IngestError> {
        // One row per key and sequence: every change, a redelivery once.
        let (offered, parts) = self.offered_rows(buffer).await?;
        let deletes = match &self.policy.deletes {
            Some(rule) if offered.num_rows() > 0 => rule.when.evaluate(&offered)?,
            _ => vec![false; offered.num_rows()],
        };
        // The columns the table has (a schema change may still wait for the MERGE's commit).
        let held_schema = self.table.file_schema().clone();
        let columns: Vec<String> = held_schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let held = self
            .table
            .incumbents(
                window,
                MergeScope::Table,
                &natural.columns,
                &offered,
                &columns,
            )
            .await?;
        let tombstones = match self.policy.deletes.is_some() && offered.num_rows() > 0 {
            true => {
                let keys = columns_named(&offered, &natural.columns)?;
                self.tombstone_table(&natural).await?.of_keys(&keys).await?
            }
            false => Vec::new(),
        };
        let (key, sequence) = (&natural.columns, &natural.sequence[0]);
        let planned = versions(&offered, &deletes, &held, &tombstones, key, sequence)?;
        if !planned.new_tombstones.is_empty() {
            let rows = &planned.new_tombstones;
            let pipeline = self.policy.pipeline.clone();
            let values = tombstone_values(&offered, rows, &natural)?;
            let deleted_at = event_times_of(&offered, rows, &natural)?;
            self.tombstone_table(&natural)
                .await?
                .append(Tombstones {
                    pipeline,
                    values,
                    deleted_at,
                })
                .await?;
        }
        let windows_changed = windows_of(&held, &natural, self.table.size())?;
        let mut key_columns = natural.columns;
        key_columns.push(START_AT.to_string());
        let merged = MergeRows {
            action: MergeAction::Versions,
            rows: planned.rows,
            key_columns,
            deletes: None,
            windows_changed,
        };
        self.commit_merge(window, merged, parts, republish, meta)
            .await
    }
}
