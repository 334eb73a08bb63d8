//! The publisher of a run: stages a window's rows (parts while the memory budget is
//! exceeded, then the window's deduped files), commits each publication (a swap of the
//! window, a late-row append or rewrite, or a MERGE) with the `txn`s its [`CommitMeta`] names, and
//! commits dead letters before any data commit that moves offsets past them (`dead_letters`;
//! the staging of a group is `staging`, MERGE publications `merge`). It owns the
//! run's table handles and its group: swap publications decided but not committed yet (a
//! few maybe still staging, see `staging`), committed together by one commit
//! ([`Publisher::finish_pending`]). What a commit means for the run's offsets, derived
//! tables and counts is the runner's to apply ([`Committed`]).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::SchemaRef;
use sluice_publish::{
    Coverage, DeadLetter, DeadLetterTable, MergeScope, Publication, Published, Replace,
    WindowTable, OFFSET_COLUMN, SOURCE_COLUMN,
};
use sluice_stage::{Phase, StageError, StageOptions, StagedFile, Stager};
use sluice_window::{Address, Window};

mod dead_letters;
mod history;
mod merge;
mod staging;
mod tombstones;

use self::merge::MergeKind;
use self::staging::{restage, stage_deduped, Staged, STAGING_TASKS_MAX};
use crate::buffer::{Part, WindowBuffer};
use crate::config::{IngestConfig, IngestError, LatePolicy, PublishMode};
use crate::dedupe::{any_key_in, record_fields, split_by_key, unique_rows, KeySpec, KEY_BUCKETS};

/// How a run publishes, fixed for the run.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    pub pipeline: String,
    pub mode: PublishMode,
    pub key: Option<KeySpec>,
    pub late: LatePolicy,
    pub flush_bytes_max: usize,
    /// The most windows one commit publishes ([`IngestConfig::group_windows_max`]).
    pub group_windows_max: usize,
    /// Which changes are deletes ([`IngestConfig::deletes`]).
    pub deletes: Option<crate::config::DeleteRule>,
    /// With history ([`IngestConfig::history`]), the natural key: [`Policy::key`] is then
    /// the key and the sequence, so that dedupe keeps every change (one row per key and
    /// sequence, a redelivery collapsing into its first delivery).
    pub history_key: Option<KeySpec>,
}

/// The most buffered bytes one group commit publishes: past it the group is committed
/// before the next window is added, so the first window of a large catch-up is not kept
/// waiting for many others to be encoded.
pub const GROUP_BYTES_MAX: usize = 256 << 20;

impl Policy {
    pub fn of(config: &IngestConfig) -> Policy {
        let history_key = config.key.clone().filter(|_| config.history);
        let key = config.key.clone().map(|mut k| {
            if config.history {
                k.columns.extend(k.sequence.iter().cloned());
            }
            k
        });
        Policy {
            pipeline: config.pipeline.clone(),
            mode: config.mode,
            key,
            late: config.late,
            flush_bytes_max: config.flush_bytes_max,
            group_windows_max: config.group_windows_max.max(1),
            deletes: config.deletes.clone(),
            history_key,
        }
    }

    /// The columns that identify a row: the row key, or the source position.
    fn key_columns(&self) -> Vec<String> {
        match &self.key {
            Some(key) => key.columns.clone(),
            None => vec![SOURCE_COLUMN.to_string(), OFFSET_COLUMN.to_string()],
        }
    }
}

/// A commit that landed (or a MERGE that changed nothing), for the runner to apply.
#[derive(Debug)]
pub(crate) struct Committed {
    pub window: Window,
    pub meta: CommitMeta,
    pub published: Published,
    /// Whether a commit was made: a MERGE that changes no row commits nothing, and its
    /// `txn`s stay unwritten.
    pub landed: bool,
    pub republish: bool,
    pub merge: bool,
}

/// The publisher; see the module doc.
pub(crate) struct Publisher {
    policy: Policy,
    table: WindowTable,
    /// The dead-letter table; `None` for a backfill, which leaves bad lines to the stream.
    dlq: Option<DeadLetterTable>,
    stager: Stager,
    /// Stages the dead-letter table's files (its store, the same attempt as `stager`).
    dlq_stager: Option<Stager>,
    /// The schema of the rows this run buffers and stages: the record fields (the table's,
    /// grown by the records read) and the position columns.
    file_schema: SchemaRef,
    /// The group: swap publications decided but not committed, in the order their windows
    /// sealed, each a different window; at most [`STAGING_TASKS_MAX`] of them may still be
    /// staging (each on a task of its own). They commit together, before any other commit
    /// of the run.
    pending: Vec<Pending>,
    /// The buffered bytes of the group's windows.
    pending_bytes: usize,
    /// Dead letters read but not yet committed, and the bytes they hold.
    dead_pending: Vec<DeadLetter>,
    dead_pending_bytes: usize,
    /// The clock instant before which no dead letter of the pipeline can fall past the
    /// retention ([`Publisher::expire_dead_letters`]); `None`: not looked yet.
    dead_letters_due_ms: Option<i64>,
    /// The tombstone table of a run with deletes, opened on first use.
    tombstones: Option<sluice_publish::TombstoneTable>,
}

impl Publisher {
    /// A publisher into `table`, dead letters into `dlq`, staging with `stager` (whose
    /// attempt names files apart from every other publisher's).
    pub fn new(
        policy: Policy,
        mut table: WindowTable,
        dlq: Option<DeadLetterTable>,
        stager: Stager,
    ) -> Publisher {
        let dlq_stager = dlq.as_ref().map(|d| {
            Stager::new(d.store(), stager.attempt(), StageOptions::default())
                .with_busy(stager.busy().clone())
        });
        // A swap's change data feed compares rows by the pipeline's key.
        table.set_change_key(
            policy
                .key
                .as_ref()
                .map_or(Vec::new(), |k| k.columns.clone()),
        );
        Publisher {
            policy,
            file_schema: table.staging_schema().clone(),
            table,
            dlq,
            stager,
            dlq_stager,
            pending: Vec::new(),
            pending_bytes: 0,
            dead_pending: Vec::new(),
            dead_pending_bytes: 0,
            dead_letters_due_ms: None,
            tombstones: None,
        }
    }

    pub fn table(&self) -> &WindowTable {
        &self.table
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Whether a republication is one MERGE across the table (a mirror, a history), which
    /// decides by itself which offered rows change the table.
    pub fn merges_across_table(&self) -> bool {
        self.is_merge(true)
    }

    pub fn table_mut(&mut self) -> &mut WindowTable {
        &mut self.table
    }

    pub fn into_table(self) -> WindowTable {
        self.table
    }

    pub fn file_schema(&self) -> &SchemaRef {
        &self.file_schema
    }

    /// Stages with the table's (staging) schema from now on; returns its record fields.
    pub fn adopt_table_schema(&mut self) -> SchemaRef {
        self.file_schema = self.table.staging_schema().clone();
        record_fields(&self.file_schema)
    }

    /// Re-reads both tables; a publication still staging is dropped (its task stopped) and
    /// so are dead letters not committed (they are read again): the table decides.
    pub async fn reload(&mut self) -> Result<(), IngestError> {
        self.pending.clear();
        self.pending_bytes = 0;
        self.dead_pending.clear();
        self.dead_pending_bytes = 0;
        self.table.reload().await?;
        if let Some(dlq) = self.dlq.as_mut() {
            dlq.reload().await?;
        }
        Ok(())
    }

    /// Stages `batches` of `window` as parts, to stay within the memory budget. With a row
    /// key, one part per key bucket: the window's publication then dedupes a group of
    /// buckets at a time instead of the whole window at once.
    pub async fn stage_parts(
        &mut self,
        window: Window,
        batches: Vec<RecordBatch>,
    ) -> Result<Vec<Part>, IngestError> {
        let address = self.table.address(window);
        let schema = self.file_schema.clone();
        let split: Vec<(Option<u32>, Vec<RecordBatch>)> = match &self.policy.key {
            Some(key) => split_by_key(batches, &key.columns, KEY_BUCKETS)?
                .into_iter()
                .enumerate()
                .filter(|(_, b)| !b.is_empty())
                .map(|(i, b)| (Some(i as u32), b))
                .collect(),
            None => vec![(None, batches)],
        };
        let mut parts = Vec::with_capacity(split.len());
        for (bucket, batches) in split {
            let file = self.stager.stage(&address, &schema, batches).await?;
            parts.push(Part { file, bucket });
        }
        Ok(parts)
    }

    /// Whether the group is decided and staged (its commit would not wait); `false` for no
    /// group.
    pub fn pending_ready(&self) -> bool {
        !self.pending.is_empty()
            && self
                .pending
                .iter()
                .all(|p| p.staging.as_ref().is_none_or(|s| s.0.is_finished()))
    }

    /// Whether the group must be committed before a publication of `window` with
    /// `buffer_bytes` buffered (`republish`: published before) is decided: the group is
    /// full, holds `window` already (its next publication must read the table with the
    /// previous one in it), or that publication is a MERGE, which commits on its own.
    pub fn must_commit_group_before(
        &self,
        window: Window,
        republish: bool,
        buffer_bytes: usize,
    ) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        self.pending.len() >= self.policy.group_windows_max
            || self.pending.iter().any(|p| p.window == window)
            || self.pending_bytes.saturating_add(buffer_bytes) > GROUP_BYTES_MAX
            || self.is_merge(republish)
    }

    /// Whether a publication takes deltalake's MERGE, which commits on its own: merge mode
    /// in table scope (a window-scope merge is published by swap: [`merge`]). The same
    /// dispatch as [`Publisher::publish`].
    fn is_merge(&self, republish: bool) -> bool {
        self.merges(republish) && matches!(self.policy.mode, PublishMode::Merge(MergeScope::Table))
    }

    /// Whether the policy merges a window into the table's rows: merge mode, or late rows
    /// merged.
    ///
    /// Every publication in merge mode, a window's first included: files an earlier MERGE
    /// wrote carry no coverage, so after a restart coverage does not tell which windows were
    /// published, and a "first" publication that replaced the window would lose rows
    /// published before it (the SIGKILL soak in merge mode lost them when first publications
    /// were swaps decided by coverage). Whether the window holds rows is read from the table
    /// instead ([`merge`]).
    fn merges(&self, republish: bool) -> bool {
        matches!(
            (self.policy.mode, &self.policy.key),
            (PublishMode::Merge(_), Some(_))
        ) || (republish && self.policy.late == LatePolicy::Merge)
    }

    /// Publishes `window` (its rows in `buffer`; `republish`: it was published before) with
    /// the `txn`s and coverage of `meta`. A MERGE commits at once (the caller commits the
    /// group first: [`Publisher::must_commit_group_before`]) and is returned; every other
    /// publication joins the group, committed by the next [`Publisher::finish_pending`]
    /// (its dedupe and encode may still run on a task of its own then).
    /// The caller commits dead letters first.
    pub async fn publish(
        &mut self,
        window: Window,
        buffer: WindowBuffer,
        republish: bool,
        meta: CommitMeta,
    ) -> Result<Option<Committed>, IngestError> {
        debug_assert!(
            self.pending.iter().all(|p| p.window != window),
            "E2: a commit publishes a window once (it is in the group twice)"
        );
        let address = self.table.address(window);
        let schema = self.file_schema.clone();
        let buffer_bytes = buffer.total_bytes();
        if self.merges(republish) {
            // A merge reads and decides inline: no staging of the group runs beside it.
            self.finish_staging().await?;
            return match (self.policy.mode, self.policy.key.clone()) {
                (PublishMode::Merge(MergeScope::Table), Some(key)) => {
                    match self.policy.history_key.clone() {
                        Some(natural) => {
                            self.merge_history(window, buffer, republish, meta, natural)
                                .await
                        }
                        None => {
                            self.merge_table_scope(window, buffer, republish, meta, key)
                                .await
                        }
                    }
                }
                (PublishMode::Merge(MergeScope::Window), Some(_)) => {
                    self.merge_by_swap(window, &address, buffer, republish, meta, MergeKind::Upsert)
                        .await
                }
                _ => {
                    let kind = MergeKind::InsertAbsent;
                    self.merge_by_swap(window, &address, buffer, republish, meta, kind)
                        .await
                }
            };
        }
        self.make_room(buffer_bytes).await?;
        let pending = if republish {
            let present = self.table.files_at(&address).await?;
            let slot = self.stager.slot(&address);
            let parts = buffer.part_files();
            let (key, columns) = (self.policy.key.clone(), self.policy.key_columns());
            let staging = restage(slot, schema, buffer, present, key, columns);
            Pending {
                window,
                republish,
                staging: Some(AbortOnDrop(tokio::spawn(staging))),
                buffer_bytes,
                files: Vec::new(),
                // Decided by the staging task.
                replace: Replace::Window,
                intermediates: parts,
                meta,
            }
        } else {
            self.first_publication(window, &address, buffer, meta)
        };
        self.join_group(pending);
        Ok(None)
    }

    /// Waits for the group's staging tasks, whichever finishes first each time, until one
    /// more staging of `bytes` buffered may start: at most [`STAGING_TASKS_MAX`] run at once,
    /// and the windows they stage hold at most `--flush-bytes-max` together (one always may
    /// run). Not oldest first: a late-row rewrite reads its whole window back, and the small
    /// late-row appends queued behind it would leave the other core idle meanwhile (seen at
    /// the end of a run, where the drain's republications and last window stage together).
    async fn make_room(&mut self, bytes: usize) -> Result<(), IngestError> {
        loop {
            let running = self.pending.iter().filter(|p| p.staging.is_some());
            let (count, running_bytes) = running.fold((0usize, 0usize), |(n, b), p| {
                (n + 1, b.saturating_add(p.buffer_bytes))
            });
            if count == 0
                || (count < STAGING_TASKS_MAX
                    && running_bytes.saturating_add(bytes) <= self.policy.flush_bytes_max)
            {
                return Ok(());
            }
            self.finish_first_staging().await?;
        }
    }

    /// Waits for whichever of the group's running staging tasks finishes first (there is at
    /// least one) and keeps its files.
    async fn finish_first_staging(&mut self) -> Result<(), IngestError> {
        let pending = &mut self.pending;
        let (index, joined) = std::future::poll_fn(|cx| {
            for (index, p) in pending.iter_mut().enumerate() {
                if let Some(staging) = p.staging.as_mut() {
                    if let Poll::Ready(joined) = Pin::new(&mut staging.0).poll(cx) {
                        return Poll::Ready((index, joined));
                    }
                }
            }
            Poll::Pending
        })
        .await;
        let finished = &mut self.pending[index];
        finished.staging = None;
        finished.keep(joined.map_err(StageError::from)??);
        Ok(())
    }

    fn join_group(&mut self, pending: Pending) {
        self.pending_bytes = self.pending_bytes.saturating_add(pending.buffer_bytes);
        self.pending.push(pending);
    }

    /// Waits for the group's staging tasks, if any run, and keeps their files.
    async fn finish_staging(&mut self) -> Result<(), IngestError> {
        for pending in &mut self.pending {
            pending.finish_staging().await?;
        }
        Ok(())
    }

    /// A window's first publication: its rows, deduped by row key if there is one, staged on
    /// a task of its own one group of key buckets at a time (memory bounded by the budget).
    fn first_publication(
        &mut self,
        window: Window,
        address: &Address,
        buffer: WindowBuffer,
        meta: CommitMeta,
    ) -> Pending {
        let schema = self.file_schema.clone();
        let buffer_bytes = buffer.total_bytes();
        let (files, intermediates, staging) = match self.policy.key.clone() {
            // Keyed by position: the buffered rows are the window, parts included.
            None => {
                let parts: Vec<StagedFile> = buffer.parts.into_iter().map(|p| p.file).collect();
                if buffer.batches.is_empty() {
                    (parts, Vec::new(), None)
                } else {
                    let slot = self.stager.slot(address);
                    let batches = buffer.batches;
                    let staging = async move {
                        let file = slot
                            .write_computed(schema, move || Ok::<_, IngestError>(batches))
                            .await?;
                        Ok(Staged::files(vec![file]))
                    };
                    (parts, Vec::new(), Some(tokio::spawn(staging)))
                }
            }
            Some(key) => {
                let groups = dedupe_groups(&buffer, self.policy.flush_bytes_max);
                let slots = (0..groups).map(|_| self.stager.slot(address)).collect();
                let parts: Vec<(Option<u32>, String)> = buffer
                    .parts
                    .iter()
                    .map(|p| (p.bucket, p.file.path.clone()))
                    .collect();
                let staging = async move {
                    Ok(Staged::files(
                        stage_deduped(slots, schema, parts, buffer.batches, key).await?,
                    ))
                };
                let intermediates = buffer.parts.into_iter().map(|p| p.file).collect();
                (Vec::new(), intermediates, Some(tokio::spawn(staging)))
            }
        };
        Pending {
            window,
            republish: false,
            staging: staging.map(AbortOnDrop),
            buffer_bytes,
            files,
            replace: Replace::Window,
            intermediates,
            meta,
        }
    }

    /// Commits the group left by [`Publisher::publish`] in one commit, once its files are
    /// written; returns one [`Committed`] per window, in order (none for no group). Every
    /// commit of the run goes through here or through the merge path, in the order the
    /// windows sealed.
    pub async fn finish_pending(&mut self) -> Result<Vec<Committed>, IngestError> {
        if self.pending.is_empty() {
            return Ok(Vec::new());
        }
        self.finish_staging().await?;
        let mut group = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        let publications = group
            .iter_mut()
            .map(|p| Publication {
                pipeline: self.policy.pipeline.clone(),
                window: p.window,
                files: std::mem::take(&mut p.files),
                replace: p.replace,
                coverage: p.meta.coverage.clone(),
                txns: p.meta.txns.clone(),
                position_ranges: p.meta.position_ranges.clone(),
                published_at_ms: p.meta.now_ms,
            })
            .collect();
        let version_before = self.table.version();
        let busy = self.stager.busy().clone();
        let commit = self.table.publish_group(publications);
        let published = busy.time_async(Phase::Commit, commit).await?;
        let mut committed = Vec::with_capacity(group.len());
        for (pending, published) in group.into_iter().zip(published) {
            self.delete_intermediates(pending.intermediates).await;
            committed.push(Committed {
                window: pending.window,
                landed: version_before != Some(published.version),
                meta: pending.meta,
                published,
                republish: pending.republish,
                merge: false,
            });
        }
        Ok(committed)
    }

    /// Compacts `window` when `rule` finds it holds more files than it needs (see
    /// [`WindowTable::compact_window`]); its files are staged under this run's attempt.
    pub async fn compact(
        &mut self,
        window: Window,
        rule: &sluice_publish::CompactRule,
        at_ms: i64,
    ) -> Result<Option<sluice_publish::Compacted>, IngestError> {
        Ok(self
            .table
            .compact_window(window, &self.policy.pipeline, &mut self.stager, rule, at_ms)
            .await?)
    }

    /// Removes this writer's windows that ended before `ended_before`, but those in
    /// `held` (rows not yet published: they are published first, and removed after).
    pub async fn expire(
        &mut self,
        ended_before: sluice_window::EventTime,
        held: impl Fn(Window) -> bool,
        at_ms: i64,
    ) -> Result<Vec<sluice_publish::Expired>, IngestError> {
        Ok(self
            .table
            .expire_windows(&self.policy.pipeline, ended_before, held, at_ms)
            .await?)
    }

    /// Drops a window's rows without publishing them (its staged parts deleted).
    pub async fn discard(&self, buffer: WindowBuffer) {
        self.delete_intermediates(buffer.parts.into_iter().map(|p| p.file).collect())
            .await;
    }

    /// Deletes parts whose rows a commit published in other files. Best effort: an
    /// intermediate left behind is an orphan that gc removes.
    async fn delete_intermediates(&self, parts: Vec<StagedFile>) {
        for part in parts {
            if let Err(e) = self.stager.delete(&part.path).await {
                tracing::warn!(path = %part.path, error = %e, "could not delete an intermediate part");
            }
        }
    }

    /// `inputs` deduped by the run's row key (or by source position), timed as
    /// [`Phase::Dedupe`].
    fn unique(
        &self,
        schema: &SchemaRef,
        inputs: &[RecordBatch],
    ) -> Result<RecordBatch, IngestError> {
        let key = self.policy.key.as_ref();
        self.stager
            .busy()
            .time(Phase::Dedupe, || Ok(unique_rows(schema, inputs, key)?))
    }

    /// The rows the table holds at `address`.
    pub(crate) async fn current_rows(
        &mut self,
        address: &Address,
    ) -> Result<Vec<RecordBatch>, IngestError> {
        let mut rows: Vec<RecordBatch> = Vec::new();
        for f in self.table.files_at(address).await? {
            rows.extend(self.stager.read(&f.path).await?);
        }
        Ok(rows)
    }

    /// Whether none of `rows`' row keys is at `address` in the table yet: only the key
    /// columns of the window's files are read. A key already there (a duplicate delivery, or
    /// late rows re-read after a restart) means the window must be rewritten, so that the
    /// key's winner is chosen among all its rows.
    async fn keys_absent(
        &mut self,
        address: &Address,
        rows: &RecordBatch,
    ) -> Result<bool, IngestError> {
        let columns = self.policy.key_columns();
        let mut present: Vec<RecordBatch> = Vec::new();
        for f in self.table.files_at(address).await? {
            present.extend(
                self.stager
                    .read_columns(&f.path, staging::file_size(&f), &columns)
                    .await?,
            );
        }
        Ok(!any_key_in(rows, &present, &columns)?)
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

/// What a publication commits besides its files, fixed when its window is published: the
/// resume offsets (and watermark) as of then, the window's position ranges, the read
/// position its coverage records.
#[derive(Debug, Clone)]
pub(crate) struct CommitMeta {
    pub txns: Vec<(String, i64)>,
    pub position_ranges: serde_json::Value,
    /// The source position the publication covers: rows up to it are in the window.
    pub coverage: Coverage,
    pub now_ms: i64,
}

/// A task staging a publication's file; dropping it (a reload, an abandoned partition)
/// stops the task, and a file it wrote anyway is an orphan for gc.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<Result<Staged, IngestError>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A publication decided but not committed yet: its files (one of them maybe still being
/// staged) and what its commit records.
#[derive(Debug)]
struct Pending {
    window: Window,
    republish: bool,
    staging: Option<AbortOnDrop>,
    /// The window's buffered bytes (in memory and in parts): what its staging holds.
    buffer_bytes: usize,
    files: Vec<StagedFile>,
    replace: Replace,
    intermediates: Vec<StagedFile>,
    meta: CommitMeta,
}

impl Pending {
    /// Waits for the publication's staging task, if one runs, and keeps what it wrote.
    async fn finish_staging(&mut self) -> Result<(), IngestError> {
        if let Some(mut staging) = self.staging.take() {
            let staged = (&mut staging.0).await.map_err(StageError::from)??;
            self.keep(staged);
        }
        Ok(())
    }

    /// Keeps what the publication's staging task wrote.
    fn keep(&mut self, staged: Staged) {
        self.files.extend(staged.files);
        if let Some(replace) = staged.replace {
            self.replace = replace;
        }
    }

    /// A publication whose one file is staged: `parts` are the intermediates it replaces,
    /// `buffer_bytes` the window's buffered bytes.
    fn staged(
        window: Window,
        republish: bool,
        buffer_bytes: usize,
        file: StagedFile,
        replace: Replace,
        parts: Vec<StagedFile>,
        meta: CommitMeta,
    ) -> Pending {
        Pending {
            window,
            republish,
            staging: None,
            buffer_bytes,
            files: vec![file],
            replace,
            intermediates: parts,
            meta,
        }
    }
}
