//! Merges: window-scope merges published by swap (`--mode merge` with the default
//! `--merge-scope window`, and late rows merged, `--late merge`, insert-if-absent), and
//! table-scope upserts by deltalake's MERGE.
//!
//! In window scope the winner of every key is decided in Rust (the rule of every dedupe,
//! `sluice_window::key_winner`), and a MERGE would read the window's rows anyway: so the
//! merged window is computed here and published by the same commits as swap mode, which
//! costs what a swap costs instead of a DataFusion join and deltalake's MERGE (measured in
//! bench/RESULTS.md: merge mode ran at 0.30x swap mode's rows/s through deltalake's MERGE).
//! The rows end up those the MERGE left:
//!
//! - **The address holds no file** (the common first publication): the MERGE would insert
//!   the deduped rows, which is a swap mode first publication exactly, staged a group of key
//!   buckets at a time (memory bounded by `--flush-bytes-max`). Whether the address is empty
//!   is read from the table at this writer's version, never from coverage: files an earlier
//!   deltalake MERGE wrote carry none.
//! - **No offered row changes the window** (every one loses to, or equals, its key's row in
//!   the table, or, inserting if absent, its key is present): nothing is committed and the
//!   `txn`s stay unwritten, as a MERGE with nothing to change committed nothing.
//! - **Every offered key is absent from the window** (only the window's key columns are
//!   read to tell), or every changing row's is: they are added as one more file
//!   ([`Replace::AddLate`]); the window's files stay.
//! - **Otherwise** the window is rewritten with each key's winner among its rows and the
//!   offered ones ([`Replace::Window`]).
//!
//! The commit removes exactly the files read, at the version read: a concurrent writer's
//! commit at the address makes it conflict or fail ([`sluice_publish::PublishError`]'s
//! conflicts), as the MERGE did. Table scope still goes through deltalake's MERGE: a key
//! may move between windows there, which a swap of one window cannot express.

use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::error::ArrowError;
use sluice_publish::{MergeAction, MergePublication, MergeScope, Published, Replace};
use sluice_stage::{Phase, StagedFile};
use sluice_window::{Address, Window};

use super::{CommitMeta, Committed, Pending, Publisher};
use crate::buffer::{read_rows, WindowBuffer};
use crate::config::IngestError;
use crate::dedupe::{absent_rows, any_key_in, drop_losers, incumbent_columns, windows_of, KeySpec};

/// How a window-scope merge is published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MergeKind {
    /// Every key's winner replaces its row (`--mode merge`).
    Upsert,
    /// Only rows of absent keys are added (`--late merge`).
    InsertAbsent,
}

impl Publisher {
    /// Publishes `window`'s rows in `buffer` merged into the window's rows in the table (see
    /// the module doc): joins the group, or returns an unchanged publication (nothing
    /// committed) at once.
    pub(super) async fn merge_by_swap(
        &mut self,
        window: Window,
        address: &Address,
        buffer: WindowBuffer,
        republish: bool,
        meta: CommitMeta,
        kind: MergeKind,
    ) -> Result<Option<Committed>, IngestError> {
        let buffer_bytes = buffer.total_bytes();
        if self.table.files_at(address).await?.is_empty() {
            let mut pending = self.first_publication(window, address, buffer, meta);
            pending.republish = republish;
            self.join_group(pending);
            return Ok(None);
        }
        let schema = self.file_schema.clone();
        let (offered, parts) = self.offered_rows(buffer).await?;
        if self.keys_absent(address, &offered).await? {
            // Every offered key is new to the window (late rows, most often): whether
            // upserted or inserted if absent, they are added as they are, and only the key
            // columns of the window's files were read.
            let file = self.stager.stage(address, &schema, vec![offered]).await?;
            let replace = Replace::AddLate;
            let pending =
                Pending::staged(window, republish, buffer_bytes, file, replace, parts, meta);
            self.join_group(pending);
            return Ok(None);
        }
        let mut current = self.current_rows(address).await?;
        let columns = self.policy.key_columns();
        let changing = match (kind, &self.policy.key) {
            (MergeKind::Upsert, Some(key)) => {
                let incumbents = project(&current, &incumbent_columns(key))?;
                drop_losers(&offered, &incumbents, key)?
            }
            _ => absent_rows(&offered, &current, &columns)?,
        };
        if changing.num_rows() == 0 {
            self.delete_intermediates(parts).await;
            let version = self.table.version().unwrap_or_default();
            return Ok(Some(Committed {
                window,
                meta,
                published: Published {
                    version,
                    files_removed: 0,
                    files_added: 0,
                    rows: 0,
                    rows_net: 0,
                    bytes_added: 0,
                },
                landed: false,
                republish,
                merge: true,
            }));
        }
        let (rows, replace) = if any_key_in(&changing, &current, &columns)? {
            current.push(changing);
            let merged = self.unique(&schema, &current)?;
            (merged, Replace::Window)
        } else {
            (changing, Replace::AddLate)
        };
        drop(current);
        let file = self.stager.stage(address, &schema, vec![rows]).await?;
        let pending = Pending::staged(window, republish, buffer_bytes, file, replace, parts, meta);
        self.join_group(pending);
        Ok(None)
    }
}

impl Publisher {
    /// Publishes `window`'s rows by one deltalake MERGE upserting on `key` across the whole
    /// table (`--merge-scope table`: a key may move to another window, which only a MERGE
    /// expresses). It commits at once; the caller commits the group first
    /// ([`Publisher::must_commit_group_before`]).
    pub(super) async fn merge_table_scope(
        &mut self,
        window: Window,
        buffer: WindowBuffer,
        republish: bool,
        meta: CommitMeta,
        key: KeySpec,
    ) -> Result<Option<Committed>, IngestError> {
        debug_assert!(
            self.pending.is_empty(),
            "E1: a MERGE commits after the swap group before it"
        );
        let (rows, parts) = self.offered_rows(buffer).await?;
        let scope = MergeScope::Table;
        let incumbents = self
            .table
            .incumbents(window, scope, &key.columns, &rows, &incumbent_columns(&key))
            .await?;
        let changing = drop_losers(&rows, &incumbents, &key)?;
        let windows_changed = windows_of(&incumbents, &key, self.table.size())?;
        let (changing, deletes) = self.apply_tombstones(&key, changing).await?;
        let merged = MergeRows {
            action: MergeAction::Upsert,
            rows: changing,
            key_columns: self.policy.key_columns(),
            deletes,
            windows_changed,
        };
        self.commit_merge(window, merged, parts, republish, meta)
            .await
    }

    /// The window's rows in `buffer` (read back from its part files, if any), unique by the
    /// run's row key, with those part files (deleted once the window is published).
    pub(super) async fn offered_rows(
        &self,
        buffer: WindowBuffer,
    ) -> Result<(RecordBatch, Vec<StagedFile>), IngestError> {
        let parts = buffer.part_files();
        let inputs = read_rows(&self.stager, &buffer.parts, buffer.batches).await?;
        Ok((self.unique(&self.file_schema, &inputs)?, parts))
    }

    /// Commits `merged` into the table as `window`'s publication with `meta`'s offsets (one
    /// MERGE across the table, timed as the commit), then deletes the window's intermediate
    /// `parts`.
    pub(super) async fn commit_merge(
        &mut self,
        window: Window,
        merged: MergeRows,
        parts: Vec<StagedFile>,
        republish: bool,
        meta: CommitMeta,
    ) -> Result<Option<Committed>, IngestError> {
        let version_before = self.table.version();
        let busy = self.stager.busy().clone();
        let merging = self.table.merge(MergePublication {
            pipeline: self.policy.pipeline.clone(),
            window,
            action: merged.action,
            scope: MergeScope::Table,
            rows: merged.rows,
            key_columns: merged.key_columns,
            deletes: merged.deletes,
            txns: meta.txns.clone(),
            position_ranges: meta.position_ranges.clone(),
            published_at_ms: meta.now_ms,
            windows_changed: merged.windows_changed.into_iter().collect(),
        });
        let published = busy.time_async(Phase::Commit, merging).await?;
        self.delete_intermediates(parts).await;
        Ok(Some(Committed {
            window,
            landed: version_before != Some(published.version),
            meta,
            published,
            republish,
            merge: true,
        }))
    }
}

/// What a table-scope MERGE writes: its rows, keyed by `key_columns`.
pub(super) struct MergeRows {
    pub action: MergeAction,
    pub rows: RecordBatch,
    pub key_columns: Vec<String>,
    /// Per row: whether it is a delete (see [`MergePublication::deletes`]).
    pub deletes: Option<deltalake::arrow::array::BooleanArray>,
    /// The windows the keys' current rows are in ([`MergePublication::windows_changed`]).
    pub windows_changed: std::collections::BTreeSet<Window>,
}

/// `batches` with only the columns named `columns` (top-level names), in that order.
fn project(batches: &[RecordBatch], columns: &[String]) -> Result<Vec<RecordBatch>, ArrowError> {
    batches
        .iter()
        .map(|b| {
            let schema = b.schema();
            let indices = columns
                .iter()
                .map(|c| schema.index_of(c))
                .collect::<Result<Vec<usize>, ArrowError>>()?;
            b.project(&indices)
        })
        .collect()
}
