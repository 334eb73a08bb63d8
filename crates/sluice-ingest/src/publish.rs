//! The runner's publishing side: staging parts, one commit per sealed window (swap, or the
//! late policy's rewrite or merge), the dead-letter commit that precedes it, and the resume
//! state every commit carries.

use std::collections::HashMap;

use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::SchemaRef;
use serde_json::json;
use sluice_publish::{
    Coverage, MergeAction, MergePublication, MergeScope, Publication, Replace, OFFSET_COLUMN,
    SOURCE_COLUMN,
};
use sluice_source::Position;
use sluice_stage::{StageError, StageSlot, StagedFile};
use sluice_window::{WatermarkState, Window};

use crate::buffer::{read_rows, Part, WindowBuffer};
use crate::config::{IngestError, LatePolicy, PublishMode};
use crate::dedupe::{
    any_key_in, dedupe, dedupe_by_position, drop_losers, incumbent_columns, split_by_key,
    KEY_BUCKETS,
};
use crate::run::Ingester;

impl Ingester<'_> {
    pub(crate) async fn flush_largest(&mut self) -> Result<(), IngestError> {
        let Some(window) = self.buffers.largest() else {
            return Ok(());
        };
        let batches = self.buffers.take_batches(window);
        let address = self.table.address(window);
        let schema = self.file_schema.clone();
        // With a row key, one file per key bucket: the window's publication then dedupes a
        // group of buckets at a time instead of the whole window at once.
        let split: Vec<(Option<u32>, Vec<RecordBatch>)> = match &self.config.key {
            Some(key) => split_by_key(batches, &key.columns, KEY_BUCKETS)?
                .into_iter()
                .enumerate()
                .filter(|(_, b)| !b.is_empty())
                .map(|(i, b)| (Some(i as u32), b))
                .collect(),
            None => vec![(None, batches)],
        };
        for (bucket, batches) in split {
            let file = self.stager.stage(&address, &schema, batches).await?;
            self.buffers.add_part(window, Part { file, bucket });
            self.summary.parts_flushed += 1;
        }
        Ok(())
    }

    /// Publishes every sealed window, except late batches whose interval has not passed
    /// (unless draining); every publication is committed when this returns.
    pub(crate) async fn publish_sealed(&mut self) -> Result<(), IngestError> {
        self.publish_sealed_with(false).await?;
        self.finish_pending().await
    }

    /// As [`Ingester::publish_sealed`], but the last first publication may still be
    /// staging (dedupe and encode on a task of its own) when this returns, so that routing
    /// the next rows overlaps it. A publication whose staging is done is committed first.
    pub(crate) async fn publish_sealed_overlapping(&mut self) -> Result<(), IngestError> {
        if self.pending_ready() {
            self.finish_pending().await?;
        }
        self.publish_sealed_with(true).await
    }

    async fn publish_sealed_with(&mut self, overlap: bool) -> Result<(), IngestError> {
        let now_ms = self.clock.now_ms();
        let mut windows = self.book.sealed(self.watermark.current());
        // Windows of events far ahead of the stream are published on their own, as late
        // batches are: the watermark may never reach them.
        let ahead: Vec<Window> = self
            .ahead_windows
            .iter()
            .copied()
            .filter(|w| self.book.is_open(*w) && !windows.contains(w))
            .collect();
        windows.extend(ahead);
        windows.sort();
        for window in windows {
            let batching = self
                .late_since_ms
                .get(&window)
                .is_some_and(|since| now_ms.saturating_sub(*since) < self.config.late_batch_ms);
            if batching && !self.draining {
                continue;
            }
            self.publish_window(window, overlap).await?;
            self.late_since_ms.remove(&window);
            self.ahead_windows.remove(&window);
        }
        Ok(())
    }

    /// Commits the pending dead letters with the dead-letter offsets moved to the read
    /// position. Runs before every data commit, so no data commit ever moves the resume
    /// position past a dead letter that is not in the dead-letter table.
    pub(crate) async fn commit_dead_letters(&mut self) -> Result<(), IngestError> {
        if self.dead_pending.is_empty() {
            return Ok(());
        }
        let through = advances(&self.source, &self.dead_committed, self.read_position);
        self.dlq
            .append(
                &self.config.pipeline,
                &self.dead_pending,
                &through,
                self.clock.now_ms(),
            )
            .await?;
        self.summary.dead_letter_commits += 1;
        self.dead_pending.clear();
        for (name, offset) in through {
            self.dead_committed.insert(name, offset);
        }
        Ok(())
    }

    /// Publishes `window`. A first publication in swap mode may, with `overlap`, leave its
    /// dedupe and encode running on a task of its own ([`Pending`]); its commit then comes
    /// with the next step of the run, before any other commit of it.
    async fn publish_window(&mut self, window: Window, overlap: bool) -> Result<(), IngestError> {
        self.finish_pending().await?;
        self.commit_dead_letters().await?;
        let buffer = self.buffers.remove(window);
        let republish = self.book.is_published(window);
        let address = self.table.address(window);
        let schema = self.file_schema.clone();
        let plan = self.plan(window, &buffer);
        // From here on the window is published as far as routing goes: rows of it read while
        // its staging runs are late rows, republished after this commit.
        self.book.mark_published(window, self.read_position);
        self.max_before_hold.remove(&window);
        let upsert = match (self.config.mode, &self.config.key) {
            (PublishMode::Merge(scope), Some(key)) => Some((scope, key.clone())),
            _ => None,
        };
        let merge = upsert.is_some() || (republish && self.config.late == LatePolicy::Merge);
        if merge && self.table.schema_change_pending() {
            // deltalake's MERGE cannot carry the new columns (it would write metadata of
            // its own, with a new table id): in window scope the same rows are published by
            // a swap of the window, with the new columns' metadata in its commit.
            if let Some((MergeScope::Table, _)) = upsert {
                return Err(IngestError::MergeCannotGrow {
                    added: self.table.pending_added().join(", "),
                });
            }
            let inputs = read_rows(&self.stager, &buffer.parts, buffer.batches).await?;
            let offered = unique_rows(&schema, &inputs, self.config.key.as_ref())?;
            let mut current: Vec<RecordBatch> = Vec::new();
            for f in self.table.files_at(&address).await? {
                current.extend(self.stager.read(&f.path).await?);
            }
            let rows = match upsert {
                // Every key's winner among the window's rows and the offered ones: what
                // the upsert would leave (the winner rule is the MERGE's).
                Some(_) => {
                    current.push(offered);
                    unique_rows(&schema, &current, self.config.key.as_ref())?
                }
                // Insert-if-absent: the window's rows, and the offered rows of absent keys.
                None => {
                    let key_columns = match &self.config.key {
                        Some(key) => key.columns.clone(),
                        None => vec![SOURCE_COLUMN.to_string(), OFFSET_COLUMN.to_string()],
                    };
                    let absent = crate::dedupe::absent_rows(&offered, &current, &key_columns)?;
                    current.push(absent);
                    crate::dedupe::concat_rows(&schema, &current)?
                }
            };
            let files = vec![self.stager.stage(&address, &schema, vec![rows]).await?];
            self.pending = Some(Pending {
                window,
                republish,
                staging: None,
                files,
                replace: Replace::Window,
                intermediates: buffer.parts.into_iter().map(|p| p.file).collect(),
                plan,
            });
            return self.finish_pending().await;
        }
        if merge {
            let version_before = self.table.version();
            let inputs = read_rows(&self.stager, &buffer.parts, buffer.batches).await?;
            let (rows, key_columns) = match &self.config.key {
                Some(key) => (dedupe(&schema, &inputs, key)?, key.columns.clone()),
                None => (
                    dedupe_by_position(&schema, &inputs)?,
                    vec![SOURCE_COLUMN.to_string(), OFFSET_COLUMN.to_string()],
                ),
            };
            let (rows, action, scope) = match upsert {
                Some((scope, key)) => {
                    let incumbents = self
                        .table
                        .incumbents(window, scope, &key.columns, &rows, &incumbent_columns(&key))
                        .await?;
                    (
                        drop_losers(&rows, &incumbents, &key)?,
                        MergeAction::Upsert,
                        scope,
                    )
                }
                None => (rows, MergeAction::InsertAbsent, MergeScope::Window),
            };
            let published = self
                .table
                .merge(MergePublication {
                    pipeline: self.config.pipeline.clone(),
                    window,
                    action,
                    scope,
                    rows,
                    key_columns,
                    txns: plan.txns.clone(),
                    position_ranges: plan.position_ranges.clone(),
                    published_at_ms: plan.now_ms,
                })
                .await?;
            let flags = Flags { republish, merge };
            let parts = buffer.parts.into_iter().map(|p| p.file).collect();
            return self
                .after_commit(window, plan, published, version_before, parts, flags)
                .await;
        }
        if republish {
            // Dedupe by row key; the late rows are added as one more file when none of their
            // keys is in the window yet, else the window is rewritten with them.
            let inputs = read_rows(&self.stager, &buffer.parts, buffer.batches).await?;
            let mut unique = unique_rows(&schema, &inputs, self.config.key.as_ref())?;
            let mut replace = Replace::Window;
            if self.keys_absent(&address, &unique).await? {
                // The rewrite would keep every published row and add these: adding them as
                // one more file gives the same rows without reading and re-encoding the
                // window.
                replace = Replace::Nothing;
            } else {
                let mut inputs: Vec<RecordBatch> = Vec::new();
                for f in self.table.files_at(&address).await? {
                    inputs.extend(self.stager.read(&f.path).await?);
                }
                inputs.push(unique);
                unique = unique_rows(&schema, &inputs, self.config.key.as_ref())?;
            }
            let files = vec![self.stager.stage(&address, &schema, vec![unique]).await?];
            self.pending = Some(Pending {
                window,
                republish,
                staging: None,
                files,
                replace,
                intermediates: buffer.parts.into_iter().map(|p| p.file).collect(),
                plan,
            });
            return self.finish_pending().await;
        }
        // A first publication: the window's rows (deduped by row key, if there is one).
        let (files, intermediates, staging) = match self.config.key.clone() {
            // Keyed by position: the buffered rows are the window, parts included.
            None => {
                let parts: Vec<StagedFile> = buffer.parts.into_iter().map(|p| p.file).collect();
                if buffer.batches.is_empty() {
                    (parts, Vec::new(), None)
                } else {
                    let slot = self.stager.slot(&address);
                    let batches = buffer.batches;
                    let staging = async move {
                        let file = slot
                            .write_computed(schema, move || Ok::<_, IngestError>(batches))
                            .await?;
                        Ok(vec![file])
                    };
                    (parts, Vec::new(), Some(tokio::spawn(staging)))
                }
            }
            Some(key) => {
                let groups = dedupe_groups(&buffer, self.config.flush_bytes_max);
                let slots = (0..groups).map(|_| self.stager.slot(&address)).collect();
                let parts: Vec<(Option<u32>, String)> = buffer
                    .parts
                    .iter()
                    .map(|p| (p.bucket, p.file.path.clone()))
                    .collect();
                let staging = stage_deduped(slots, schema, parts, buffer.batches, key);
                let intermediates = buffer.parts.into_iter().map(|p| p.file).collect();
                (Vec::new(), intermediates, Some(tokio::spawn(staging)))
            }
        };
        self.pending = Some(Pending {
            window,
            republish,
            staging: staging.map(AbortOnDrop),
            files,
            replace: Replace::Window,
            intermediates,
            plan,
        });
        if overlap {
            Ok(())
        } else {
            self.finish_pending().await
        }
    }

    /// Commits the publication left staging by [`Ingester::publish_window`], once its file
    /// is written. Every commit of the run goes through here or through the merge path, in
    /// the order the windows sealed.
    pub(crate) async fn finish_pending(&mut self) -> Result<(), IngestError> {
        let Some(mut pending) = self.pending.take() else {
            return Ok(());
        };
        if let Some(staging) = pending.staging.as_mut() {
            let staged = (&mut staging.0).await.map_err(StageError::from)??;
            pending.files.extend(staged);
        }
        let version_before = self.table.version();
        let coverage_name = self
            .source
            .name(pending.plan.coverage.file)
            .map(|n| n.to_string())
            .unwrap_or_default();
        let published = self
            .table
            .publish(Publication {
                pipeline: self.config.pipeline.clone(),
                window: pending.window,
                files: std::mem::take(&mut pending.files),
                replace: pending.replace,
                coverage: Coverage {
                    partition: coverage_name,
                    offset: pending.plan.coverage.offset,
                },
                txns: pending.plan.txns.clone(),
                position_ranges: pending.plan.position_ranges.clone(),
                published_at_ms: pending.plan.now_ms,
            })
            .await?;
        let flags = Flags {
            republish: pending.republish,
            merge: false,
        };
        let intermediates = std::mem::take(&mut pending.intermediates);
        self.after_commit(
            pending.window,
            pending.plan,
            published,
            version_before,
            intermediates,
            flags,
        )
        .await
    }

    /// Whether a publication's staging has finished (its commit would not wait).
    pub(crate) fn pending_ready(&self) -> bool {
        self.pending
            .as_ref()
            .is_some_and(|p| p.staging.as_ref().is_none_or(|s| s.0.is_finished()))
    }

    /// What a publication of `window` commits along with its files, as of now.
    fn plan(&self, window: Window, buffer: &WindowBuffer) -> Plan {
        let resume = self.resume_excluding(window);
        let mut txns = advances(&self.source, &self.committed, resume);
        if self.table.shard().is_some() {
            // Every commit of a shard carries its partition's txn, moved or not: a zombie
            // writer of the same partition, or this writer's own earlier attempt that landed
            // unreported, then always conflicts with it (commits of sharded tables retry
            // over non-conflicting commits).
            for f in self.source.files() {
                if !txns.iter().any(|(n, _)| n.as_str() == f.name.as_ref()) {
                    let at = self.committed.get(f.name.as_ref()).copied().unwrap_or(0);
                    txns.push((f.name.to_string(), at));
                }
            }
        }
        let state = self.watermark_before(resume, window);
        if let Some(state) = state {
            // The skew guard's state at the resume position, when it differs from the table's.
            let code = state.ahead_code();
            if self.committed_ahead.unwrap_or(0) != code {
                txns.push((self.ahead_txn.clone(), code));
            }
        }
        if let Some(us) = state.and_then(|s| s.max_seen).map(|t| t.as_micros()) {
            if self.committed_max_event_us.is_none_or(|c| us > c) {
                txns.push((self.watermark_txn.clone(), us));
            }
            // Every window ending by the committed input's watermark is published (rows of
            // it after the resume position are late), so this shard has sealed it.
            let through = us.saturating_sub(self.watermark.lateness_us());
            if let Some(name) = &self.sealed_txn {
                if self.committed_sealed_us.is_none_or(|c| through > c) {
                    txns.push((name.clone(), through));
                }
            }
        }
        let mut ranges: Vec<_> = buffer.ranges.iter().collect();
        ranges.sort();
        let position_ranges = json!(ranges
            .iter()
            .map(|(p, (lo, hi))| json!({"partition": p, "first_offset": lo, "last_offset": hi}))
            .collect::<Vec<_>>());
        Plan {
            txns,
            position_ranges,
            coverage: self.read_position,
            now_ms: self.clock.now_ms(),
        }
    }

    /// The in-memory state after a publication's commit: the offsets it stored, its
    /// intermediate parts deleted, derived tables, the summary.
    async fn after_commit(
        &mut self,
        window: Window,
        plan: Plan,
        published: sluice_publish::Published,
        version_before: Option<u64>,
        intermediates: Vec<StagedFile>,
        flags: Flags,
    ) -> Result<(), IngestError> {
        // A MERGE that changes no row commits nothing (deltalake skips empty commits), and its
        // offsets stay unwritten: the in-memory state must not claim them, or a later commit
        // would leave them out.
        let committed = version_before != Some(published.version);
        if committed {
            for (name, offset) in plan.txns {
                if name == self.watermark_txn {
                    self.committed_max_event_us = Some(offset);
                } else if name == self.ahead_txn {
                    self.committed_ahead = Some(offset);
                } else if self.sealed_txn.as_ref() == Some(&name) {
                    self.committed_sealed_us = Some(offset);
                } else {
                    self.committed.insert(name, offset);
                }
            }
        }
        for part in intermediates {
            // Best effort: an intermediate left behind is an orphan that gc removes.
            if let Err(e) = self.stager.delete(&part.path).await {
                tracing::warn!(path = %part.path, error = %e, "could not delete an intermediate part");
            }
        }
        if committed {
            if let Some(d) = self.deriver.as_mut() {
                d.published(&self.table, window, published.version, plan.now_ms)
                    .await?;
            }
            self.summary.windows_published += 1;
            self.summary.commits += 1;
            self.summary.last_version = Some(published.version);
        } else {
            self.summary.merges_unchanged += 1;
        }
        tracing::info!(
            window = %self.table.address(window).label(),
            version = published.version,
            rows = published.rows,
            files_added = published.files_added,
            files_removed = published.files_removed,
            republish = flags.republish,
            merge = flags.merge,
            "published"
        );
        Ok(())
    }

    /// The lowest position held by an unpublished window other than `window`.
    fn resume_excluding(&self, window: Window) -> Position {
        self.book
            .open_windows()
            .filter(|(w, _)| *w != window)
            .map(|(_, p)| *p)
            .fold(self.read_position, std::cmp::min)
    }

    /// Whether none of `rows`' row keys is at `address` in the table yet: only the key
    /// columns of the window's files are read. A key already there (a duplicate delivery, or
    /// late rows re-read after a restart) means the window must be rewritten, so that the
    /// key's winner is chosen among all its rows.
    async fn keys_absent(
        &mut self,
        address: &sluice_window::Address,
        rows: &RecordBatch,
    ) -> Result<bool, IngestError> {
        let columns = match &self.config.key {
            Some(key) => key.columns.clone(),
            None => vec![SOURCE_COLUMN.to_string(), OFFSET_COLUMN.to_string()],
        };
        let mut present: Vec<RecordBatch> = Vec::new();
        for f in self.table.files_at(address).await? {
            present.extend(self.stager.read_columns(&f.path, &columns).await?);
        }
        Ok(!any_key_in(rows, &present, &columns)?)
    }

    /// The watermark's input before `resume`: everything read, when the stream resumes at
    /// the read position; else what was recorded when the window holding `resume` took its
    /// first event.
    fn watermark_before(&self, resume: Position, publishing: Window) -> Option<WatermarkState> {
        if resume == self.read_position {
            return Some(self.watermark.state());
        }
        self.book
            .open_windows()
            .filter(|(w, p)| *w != publishing && **p == resume)
            .find_map(|(w, _)| self.max_before_hold.get(&w).copied())
    }
}

/// How many groups of key buckets a window's dedupe takes, one after the other: enough for
/// each group's rows to hold at most half of `flush_bytes_max` in memory (its dedupe holds
/// them about twice: the rows and the winners), a power of two up to [`KEY_BUCKETS`] (so
/// that a group is `bucket % groups` of the parts' buckets and of the in-memory rows alike).
/// Parts without buckets (none are staged that way with a key) make it one group.
fn dedupe_groups(buffer: &WindowBuffer, flush_bytes_max: usize) -> u32 {
    if buffer.parts.iter().any(|p| p.bucket.is_none()) {
        return 1;
    }
    let group_bytes_max = (flush_bytes_max / 2).max(1);
    let wanted = buffer.total_bytes().div_ceil(group_bytes_max);
    (wanted.clamp(1, KEY_BUCKETS as usize) as u32).next_power_of_two()
}

/// Stages a window's rows deduped by `key`, one group of key buckets at a time (one file per
/// group that has rows, in `slots`' names): each group's parts are read, joined by its
/// in-memory rows, deduped and encoded, and dropped before the next group is read. Rows of
/// one key are in one group, so the winners are those of one dedupe over the whole window.
async fn stage_deduped(
    slots: Vec<StageSlot>,
    schema: SchemaRef,
    parts: Vec<(Option<u32>, String)>,
    batches: Vec<RecordBatch>,
    key: crate::dedupe::KeySpec,
) -> Result<Vec<StagedFile>, IngestError> {
    let groups = slots.len().max(1) as u32;
    let mut in_memory = if groups == 1 {
        vec![batches]
    } else {
        let columns = key.columns.clone();
        tokio::task::spawn_blocking(move || split_by_key(batches, &columns, groups))
            .await
            .map_err(StageError::from)??
    };
    let mut files = Vec::with_capacity(slots.len());
    for (group, slot) in slots.into_iter().enumerate() {
        let mut inputs: Vec<RecordBatch> = Vec::new();
        for (bucket, path) in &parts {
            if bucket.map_or(group == 0, |b| b % groups == group as u32) {
                inputs.extend(slot.read(path).await?);
            }
        }
        inputs.append(&mut in_memory[group]);
        if groups > 1 && inputs.iter().all(|b| b.num_rows() == 0) {
            continue; // no rows of this group: no file (its name stays unused)
        }
        let (dedupe_schema, key) = (schema.clone(), key.clone());
        let file = slot
            .write_computed(schema.clone(), move || {
                Ok::<_, IngestError>(vec![dedupe(&dedupe_schema, &inputs, &key)?])
            })
            .await?;
        files.push(file);
    }
    Ok(files)
}

/// `(file, offset)` for each file whose position in `committed` moves up to `to`.
pub(crate) fn advances(
    source: &sluice_source::NdjsonSource,
    committed: &HashMap<String, i64>,
    to: Position,
) -> Vec<(String, i64)> {
    let mut moved = Vec::new();
    for (i, file) in source.files().iter().enumerate() {
        let ordinal = 2 * i as u32 + 1;
        let target = match ordinal.cmp(&to.file) {
            std::cmp::Ordering::Less => file.len as i64,
            std::cmp::Ordering::Equal => to.offset,
            std::cmp::Ordering::Greater => break,
        };
        if target > committed.get(file.name.as_ref()).copied().unwrap_or(0) {
            moved.push((file.name.to_string(), target));
        }
    }
    moved
}

/// The rows of `inputs` that win by row key (or source position, without a key).
pub(crate) fn unique_rows(
    schema: &deltalake::arrow::datatypes::SchemaRef,
    inputs: &[RecordBatch],
    key: Option<&crate::dedupe::KeySpec>,
) -> Result<RecordBatch, IngestError> {
    Ok(match key {
        Some(key) => dedupe(schema, inputs, key)?,
        None => dedupe_by_position(schema, inputs)?,
    })
}

/// What a publication commits besides its files, fixed when its window is published: the
/// resume offsets (and watermark) as of then, the window's position ranges, the read
/// position its coverage records.
#[derive(Debug)]
struct Plan {
    txns: Vec<(String, i64)>,
    position_ranges: serde_json::Value,
    coverage: Position,
    now_ms: i64,
}

/// What kind of publication a commit was, for the log.
#[derive(Debug, Clone, Copy)]
struct Flags {
    republish: bool,
    merge: bool,
}

/// A task staging a publication's file; dropping it (a reload, an abandoned partition)
/// stops the task, and a file it wrote anyway is an orphan for gc.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(tokio::task::JoinHandle<Result<Vec<StagedFile>, IngestError>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A publication decided but not committed yet: its files (one of them maybe still being
/// staged) and what its commit records.
#[derive(Debug)]
pub(crate) struct Pending {
    window: Window,
    republish: bool,
    staging: Option<AbortOnDrop>,
    files: Vec<StagedFile>,
    replace: Replace,
    intermediates: Vec<StagedFile>,
    plan: Plan,
}
