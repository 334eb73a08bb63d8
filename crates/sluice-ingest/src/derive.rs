//! Derived tables kept exact by the stream: after every raw commit that changes a window,
//! each derived table's window is recomputed from the raw table (the query over that one
//! window) and published, by swap or by MERGE on the query's key.
//!
//! Exactness across crashes: a derived table records the raw version it has *settled* (every
//! raw change up to it is reflected; see `sluice_publish::DerivedTable`). At start-up, and
//! after any restart from the table, [`Deriver::catch_up`] recomputes the windows the raw log
//! shows changing since then (all windows, if that part of the log is gone or the derived
//! table is new). A recomputed window whose rows equal the published ones is not published,
//! so a replay, a rerun or a second `sluice derive` commits nothing.
//!
//! Where one writer owns all of a window, a window is complete, and derived, as soon as its
//! raw publication commits. In a sharded table (a Kafka run: one writer per partition) a
//! window is complete once every shard holding files has sealed past it:
//! [`Deriver::follow_sharded`] derives the windows the raw table's change feed says became
//! complete or were rewritten while complete.

use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::compute::concat_batches;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::row::{RowConverter, SortField};
use sluice_publish::{
    addresses_changed, ChangeFeed, Contract, DerivedPublication, DerivedTable, ListError,
    NotifyLogError, OpenError, PublishError, TableOptions, WindowTable,
};

use crate::terms;
use sluice_sql::{read_window, same_rows, DeriveQueryError, DerivedQuery};
use sluice_stage::{StageError, StageOptions, StagedFile, Stager};
use sluice_window::{EventTime, Window};

/// Raw versions a sharded table's derived table may lag behind in its record when none of
/// them changed a window it holds (see [`Deriver::follow_sharded`]).
const SETTLE_BEHIND_MAX: u64 = 100;

/// The most derived windows one commit swaps (the raw table's `--group-windows-max`
/// default): a pass over a year of daily windows is 2 commits, not 366.
pub const GROUP_WINDOWS_MAX: usize = 256;

/// One derived table and what the runner knows about it.
struct Target {
    query: DerivedQuery,
    table: DerivedTable,
    stager: Stager,
    output: SchemaRef,
    /// Raw version through which every raw change is reflected in the table (in memory).
    settled: Option<u64>,
    /// The settled version the table records.
    recorded: Option<u64>,
    /// Windows were recomputed since the table last recorded a settled version: recording
    /// `settled` is worth a commit (a run that recomputed nothing commits nothing).
    dirty: bool,
    /// Swaps staged and not yet committed: committed together, in one group commit, by
    /// [`Deriver::flush`] (at [`GROUP_WINDOWS_MAX`] windows, and after every pass).
    pending: Vec<(DerivedPublication, Vec<StagedFile>)>,
}

impl Target {
    /// Re-reads the derived table and the raw version it records as settled. Swaps staged
    /// and not committed are dropped (their files are orphans for `sluice gc`): the windows
    /// are computed again from what the tables hold now, and a window staged twice would be
    /// published twice in one commit.
    async fn reread(&mut self) -> Result<(), DeriveError> {
        self.pending.clear();
        let read = |source| DeriveError::Read {
            name: self.query.name.clone(),
            source: Box::new(source),
        };
        self.table.reload().await.map_err(read)?;
        self.recorded = self.table.settled_raw_version().await.map_err(read)?;
        self.settled = self.recorded;
        Ok(())
    }
}

/// Counts for the run summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeriveSummary {
    /// Derived windows recomputed.
    pub computed: u64,
    /// Derived windows published (their rows changed).
    pub published: u64,
    /// Commits that only recorded the settled raw version.
    pub settle_commits: u64,
    /// Commits that published derived windows (a group commit of swaps, or a MERGE).
    pub commits: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum DeriveError {
    #[error(transparent)]
    Query(#[from] DeriveQueryError),
    #[error("derived table {name}: {source}")]
    Open {
        name: String,
        source: Box<OpenError>,
    },
    #[error("derived table {name}: {source}")]
    Publish {
        name: String,
        source: Box<PublishError>,
    },
    #[error("derived table {name}: reading it failed: {source}")]
    Read {
        name: String,
        source: Box<deltalake::DeltaTableError>,
    },
    #[error("derived table {name}: reading window {window} failed: {source}")]
    ReadWindow {
        name: String,
        window: String,
        source: Box<deltalake::datafusion::error::DataFusionError>,
    },
    #[error("reading the raw table's log failed: {0}")]
    RawLog(#[from] ListError),
    #[error("following the raw table's windows failed: {0}")]
    Feed(#[from] NotifyLogError),
    #[error("reading the raw table failed: {0}")]
    Raw(Box<deltalake::DeltaTableError>),
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error("derived table {name}: comparing window {window}: {source}")]
    Compare {
        name: String,
        window: String,
        source: ArrowError,
    },
    #[error("derived table {name}: the query's output for window {window} has {rows} rows for {distinct} distinct keys ({key}); with a key, each key must appear once per window")]
    KeyNotUnique {
        name: String,
        window: String,
        key: String,
        rows: usize,
        distinct: usize,
    },
}

impl crate::restart::Resumable for DeriveError {
    fn is_resumable(&self) -> bool {
        DeriveError::is_resumable(self)
    }
}

impl DeriveError {
    /// Whether re-reading the tables may get past this error (see `IngestError`).
    pub fn is_resumable(&self) -> bool {
        match self {
            DeriveError::Publish { source, .. } => matches!(
                **source,
                PublishError::Conflict { .. }
                    | PublishError::TableMoved { .. }
                    | PublishError::Delta { .. }
            ),
            DeriveError::Stage(e) => matches!(e, StageError::Store { .. }),
            DeriveError::Read { .. }
            | DeriveError::RawLog(_)
            | DeriveError::Raw(_)
            | DeriveError::Feed(_) => true,
            _ => false,
        }
    }
}

/// A derived table to keep: its query and where it lives.
#[derive(Debug, Clone)]
pub struct DeriveSpec {
    pub query: DerivedQuery,
    pub options: TableOptions,
}

/// Keeps a pipeline's derived tables.
pub struct Deriver {
    targets: Vec<Target>,
    record: SchemaRef,
    pub summary: DeriveSummary,
}

impl Deriver {
    /// Plans every query against the raw table's schema (a bad query fails here, before
    /// anything is read) and opens or creates each derived table with the query's output.
    pub async fn open(
        specs: Vec<DeriveSpec>,
        raw: &mut WindowTable,
        pipeline: &str,
        attempt: &str,
        stage: StageOptions,
    ) -> Result<Deriver, DeriveError> {
        let record = raw.record_schema();
        let layout = raw.layout();
        let mut targets = Vec::with_capacity(specs.len());
        for spec in specs {
            let raw_table = raw
                .delta_table()
                .await
                .map_err(|e| DeriveError::Raw(Box::new(e)))?;
            let output = spec
                .query
                .plan(raw_table, &record, layout.columns())
                .await?;
            let name = spec.query.name.clone();
            // What the derived table holds: this query over this raw table.
            let options = TableOptions {
                contract: Some(
                    Contract::new()
                        .with(terms::RAW, raw.url())
                        .with(terms::SQL, spec.query.sql.trim())
                        .with(terms::KEY, spec.query.key.join(",")),
                ),
                ..spec.options
            };
            let table = DerivedTable::open_or_create(
                &options,
                pipeline,
                &name,
                &output,
                layout,
                raw.size(),
            )
            .await
            .map_err(|source| DeriveError::Open {
                name: name.clone(),
                source: Box::new(source),
            })?;
            let stager = Stager::new(table.store(), attempt, stage.clone());
            targets.push(Target {
                output: table.file_schema().clone(),
                query: spec.query,
                table,
                stager,
                // Both read from the table by `catch_up`, which runs before any publication.
                settled: None,
                recorded: None,
                dirty: false,
                pending: Vec::new(),
            });
        }
        Ok(Deriver {
            targets,
            record,
            summary: DeriveSummary::default(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// Brings every derived table up to the raw table's loaded version: re-reads each,
    /// recomputes the windows changed since the version it settled, and records the raw
    /// version as settled.
    pub async fn catch_up(&mut self, raw: &mut WindowTable, at_ms: i64) -> Result<(), DeriveError> {
        let Some(raw_version) = raw.version() else {
            return Ok(());
        };
        for i in 0..self.targets.len() {
            let target = &mut self.targets[i];
            let name = target.query.name.clone();
            target.reread().await?;
            if target.recorded == Some(raw_version) {
                continue;
            }
            let changed = match target.recorded {
                Some(v) if v < raw_version => {
                    let raw_table = raw
                        .delta_table()
                        .await
                        .map_err(|e| DeriveError::Raw(Box::new(e)))?;
                    addresses_changed(raw_table, v, raw_version).await?
                }
                _ => None,
            };
            let windows: Vec<Window> = match changed {
                Some(addresses) => addresses
                    .iter()
                    .filter_map(|a| raw.layout().window_of(raw.size(), a).ok())
                    .collect(),
                None => raw
                    .windows()
                    .await
                    .map_err(|e| DeriveError::Raw(Box::new(e)))?,
            };
            tracing::info!(derived = %name, windows = windows.len(), raw_version, settled = ?target.recorded, "catching up a derived table");
            for window in windows {
                self.derive(i, raw, window, None, Compare::Yes, at_ms)
                    .await?;
            }
            self.flush(i).await?;
            let target = &mut self.targets[i];
            target.settled = Some(raw_version);
        }
        self.settle(at_ms).await
    }

    /// A sharded raw table (the writers of a Kafka run, one per partition): brings every
    /// derived table up to the raw table's loaded version, deriving only complete windows
    /// (every shard holding files has sealed past them; the rule of `sluice status` and of
    /// notifications). What is recomputed is what the raw table's change feed tells since
    /// the version the derived table settled: each window that became complete, or was
    /// rewritten while complete; all complete windows for a new derived table (or when that
    /// part of the raw log is gone). A window whose derived rows are unchanged commits
    /// nothing, so several processes following one table compute the same windows and only
    /// the first publishes each; the derived table commits only on the version it read, so
    /// its settled raw version never goes back (a loser re-reads, see
    /// [`DeriveError::is_resumable`]).
    pub async fn follow_sharded(
        &mut self,
        raw: &mut WindowTable,
        pipeline: &str,
        at_ms: i64,
    ) -> Result<(), DeriveError> {
        let Some(raw_version) = raw.version() else {
            return Ok(());
        };
        let raw_error = |e| DeriveError::Raw(Box::new(e));
        for i in 0..self.targets.len() {
            let target = &mut self.targets[i];
            let name = target.query.name.clone();
            target.reread().await?;
            if target.recorded.is_some_and(|r| r >= raw_version) {
                continue;
            }
            let current = raw.delta_table().await.map_err(raw_error)?.clone();
            let changed = match target.recorded {
                Some(settled) => {
                    let mut then = current.clone();
                    match then.load_version(settled).await {
                        Ok(()) => {
                            let mut feed = ChangeFeed::after(&then, pipeline).await?;
                            match feed.read(&current).await {
                                Ok(changes) => Some(
                                    changes
                                        .into_iter()
                                        .map(|c| c.window_start)
                                        .collect::<Vec<_>>(),
                                ),
                                Err(NotifyLogError::Cleaned { .. }) => None,
                                Err(e) => return Err(e.into()),
                            }
                        }
                        // That part of the log is gone: every complete window.
                        Err(_) => None,
                    }
                }
                None => None,
            };
            let windows = match changed {
                Some(windows) => windows,
                None => ChangeFeed::after(&current, pipeline)
                    .await?
                    .complete_windows()
                    .unwrap_or_default(),
            };
            let mut starts: Vec<Window> = windows
                .iter()
                .filter_map(|start| {
                    let t = sluice_window::TimeFormat::Rfc3339.parse_str(start).ok()?;
                    Window::starting_at(raw.size(), t)
                })
                .collect();
            starts.sort();
            starts.dedup();
            tracing::info!(derived = %name, windows = starts.len(), raw_version, settled = ?target.recorded, "deriving the complete windows of a sharded table");
            for window in starts {
                self.derive(i, raw, window, None, Compare::Yes, at_ms)
                    .await?;
            }
            self.flush(i).await?;
            let target = &mut self.targets[i];
            target.settled = Some(raw_version);
            // Commits that changed no window (a notifier's record, other pipelines) are
            // settled with the next derived window, or once they pile up: a run that
            // derived nothing commits nothing, and the next follow reads a bounded log.
            let behind = raw_version.saturating_sub(target.recorded.unwrap_or(0));
            target.dirty |= behind >= SETTLE_BEHIND_MAX;
        }
        self.settle(at_ms).await
    }

    /// After the raw table committed `raw_version`, changing `windows` (one, or a group
    /// commit's several). The settled raw version is recorded only with the last window's
    /// derived commit: a crash between two of them leaves the table settled at the version
    /// before, and the catch-up recomputes every window of the group.
    pub async fn published(
        &mut self,
        raw: &mut WindowTable,
        windows: &[Window],
        raw_version: u64,
        at_ms: i64,
    ) -> Result<(), DeriveError> {
        for i in 0..self.targets.len() {
            // The commit before this one was settled: these windows are the only changes
            // since.
            let follows = self.targets[i]
                .settled
                .is_some_and(|s| s + 1 == raw_version);
            let settles = follows
                .then_some(raw_version)
                .filter(|v| self.targets[i].recorded.is_none_or(|r| *v > r));
            for (n, window) in windows.iter().enumerate() {
                let last = n + 1 == windows.len();
                let settles = settles.filter(|_| last);
                self.derive(i, raw, *window, settles, Compare::No, at_ms)
                    .await?;
            }
            self.flush(i).await?;
            if follows {
                self.targets[i].settled = Some(raw_version);
            }
        }
        Ok(())
    }

    /// After the raw table committed `raw_version` by a MERGE across the table (a mirror, a
    /// history), which changes windows besides its own (`own`): a key's row moves to its
    /// new window, a delete removes one, a version's end moves. Every window whose files the
    /// commit added or removed is recomputed, as [`Deriver::published`] does for `own`.
    pub async fn published_across(
        &mut self,
        raw: &mut WindowTable,
        own: Window,
        raw_version: u64,
        at_ms: i64,
    ) -> Result<(), DeriveError> {
        let mut windows = std::collections::BTreeSet::from([own]);
        let raw_table = raw
            .delta_table()
            .await
            .map_err(|e| DeriveError::Raw(Box::new(e)))?;
        let changed = addresses_changed(raw_table, raw_version.saturating_sub(1), raw_version)
            .await?
            .unwrap_or_default();
        windows.extend(
            changed
                .iter()
                .filter_map(|a| raw.layout().window_of(raw.size(), a).ok()),
        );
        let windows: Vec<Window> = windows.into_iter().collect();
        self.published(raw, &windows, raw_version, at_ms).await
    }

    /// Records each table's settled raw version where the table does not have it yet (the
    /// last windows recomputed needed no new rows). Commits nothing otherwise.
    pub async fn settle(&mut self, at_ms: i64) -> Result<(), DeriveError> {
        for target in &mut self.targets {
            let Some(settled) = target.settled else {
                continue;
            };
            if !target.dirty || target.recorded.is_some_and(|r| r >= settled) {
                continue;
            }
            target
                .table
                .settle(settled, at_ms)
                .await
                .map_err(|source| DeriveError::Publish {
                    name: target.query.name.clone(),
                    source: Box::new(source),
                })?;
            target.recorded = Some(settled);
            target.dirty = false;
            self.summary.settle_commits += 1;
        }
        Ok(())
    }

    /// Recomputes every window of the raw table starting in `[from, to)` (the batch rerun);
    /// publishes those whose rows changed. Reports `(done, total)` as it goes.
    pub async fn derive_range(
        &mut self,
        raw: &mut WindowTable,
        from: EventTime,
        to: EventTime,
        at_ms: i64,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(), DeriveError> {
        let windows: Vec<Window> = raw
            .windows_of_every_shard()
            .await
            .map_err(|e| DeriveError::Raw(Box::new(e)))?
            .into_iter()
            .filter(|w| w.start() >= from && w.start() < to)
            .collect();
        // Swaps staged by a pass that failed are dropped: every window is computed again.
        for target in &mut self.targets {
            target.pending.clear();
        }
        let total = (windows.len() * self.targets.len()) as u64;
        let mut done = 0;
        progress(done, total);
        for i in 0..self.targets.len() {
            for window in &windows {
                self.derive(i, raw, *window, None, Compare::Yes, at_ms)
                    .await?;
                done += 1;
                progress(done, total);
            }
            self.flush(i).await?;
        }
        Ok(())
    }

    /// Commits the swaps of target `i` staged so far, in one commit.
    async fn flush(&mut self, i: usize) -> Result<(), DeriveError> {
        let target = &mut self.targets[i];
        let group = std::mem::take(&mut target.pending);
        let Some(settles) = group.iter().map(|(p, _)| p.settles).max() else {
            return Ok(());
        };
        let windows = group.len();
        let published =
            target
                .table
                .swap_group(group)
                .await
                .map_err(|source| DeriveError::Publish {
                    name: target.query.name.clone(),
                    source: Box::new(source),
                })?;
        if let Some(v) = settles {
            target.recorded = Some(v);
            target.dirty = false;
        }
        self.summary.commits += 1;
        let version = published.first().map(|p| p.version);
        let rows: i64 = published.iter().map(|p| p.rows).sum();
        tracing::info!(derived = %target.query.name, windows, ?version, rows, "published derived windows");
        Ok(())
    }

    /// Recomputes one derived window and publishes it (with `settles` recorded in the same
    /// commit) — with [`Compare::Yes`], only if its rows changed. Returns whether it committed.
    async fn derive(
        &mut self,
        i: usize,
        raw: &mut WindowTable,
        window: Window,
        settles: Option<u64>,
        compare: Compare,
        at_ms: i64,
    ) -> Result<bool, DeriveError> {
        let target = &mut self.targets[i];
        let name = target.query.name.clone();
        let address = raw.layout().address(window);
        let label = address.label();
        let pairs: Vec<(&str, &str)> = address.pairs().collect();
        let raw_table = raw
            .delta_table()
            .await
            .map_err(|e| DeriveError::Raw(Box::new(e)))?;
        let rows = target
            .query
            .compute(raw_table, &self.record, &pairs, &target.output)
            .await?;
        self.summary.computed += 1;
        target.dirty = true;
        let compare_error = |source| DeriveError::Compare {
            name: name.clone(),
            window: label.clone(),
            source,
        };
        if compare == Compare::Yes && target.holds(&pairs, &rows, &label).await? {
            return Ok(false);
        }
        let publication = DerivedPublication {
            window,
            raw_version: raw.version().unwrap_or_default(),
            settles,
            published_at_ms: at_ms,
        };
        let publish = |source| DeriveError::Publish {
            name: name.clone(),
            source: Box::new(source),
        };
        if target.query.key.is_empty() || rows.is_empty() {
            let files = if rows.is_empty() {
                Vec::new()
            } else {
                vec![target.stager.stage(&address, &target.output, rows).await?]
            };
            target.pending.push((publication, files));
            self.summary.published += 1;
            if self.targets[i].pending.len() >= GROUP_WINDOWS_MAX {
                self.flush(i).await?;
            }
            return Ok(true);
        }
        // A MERGE commits on its own, after the swaps staged before it.
        self.flush(i).await?;
        let target = &mut self.targets[i];
        let before = target.table.version();
        let published = {
            let batch = concat_batches(&target.output, &rows).map_err(compare_error)?;
            check_unique(&batch, &target.query.key).map_err(|e| match e {
                Unique::Arrow(source) => compare_error(source),
                Unique::Duplicates { rows, distinct } => DeriveError::KeyNotUnique {
                    name: name.clone(),
                    window: label.clone(),
                    key: target.query.key.join(", "),
                    rows,
                    distinct,
                },
            })?;
            target
                .table
                .merge(publication, batch, &target.query.key)
                .await
                .map_err(publish)?
        };
        if let Some(v) = settles {
            target.recorded = Some(v);
            target.dirty = false;
        }
        self.summary.published += 1;
        if Some(published.version) != before {
            self.summary.commits += 1;
        }
        tracing::info!(derived = %name, window = %label, version = published.version, rows = published.rows, "published a derived window");
        Ok(true)
    }
}

/// Whether a recomputed window is compared with the published one before publishing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compare {
    /// Catch-up and `derive`: most windows are unchanged, and publishing them again would
    /// make replays and reruns commit.
    Yes,
    /// Right after the raw window changed: its derived rows almost always change too, and a
    /// read of the published rows would cost as much as the recomputation.
    No,
}

enum Unique {
    Arrow(ArrowError),
    Duplicates { rows: usize, distinct: usize },
}

/// Fails unless every row of `batch` has a distinct value of the `key` columns.
fn check_unique(batch: &RecordBatch, key: &[String]) -> Result<(), Unique> {
    let schema = batch.schema();
    let mut columns = Vec::with_capacity(key.len());
    let mut fields = Vec::with_capacity(key.len());
    for k in key {
        let i = schema.index_of(k).map_err(Unique::Arrow)?;
        columns.push(batch.column(i).clone());
        fields.push(SortField::new(schema.field(i).data_type().clone()));
    }
    let converter = RowConverter::new(fields).map_err(Unique::Arrow)?;
    let rows = converter.convert_columns(&columns).map_err(Unique::Arrow)?;
    let mut keys: Vec<deltalake::arrow::row::Row<'_>> = rows.iter().collect();
    keys.sort_unstable();
    keys.dedup();
    if keys.len() != batch.num_rows() {
        return Err(Unique::Duplicates {
            rows: batch.num_rows(),
            distinct: keys.len(),
        });
    }
    Ok(())
}

impl Target {
    /// Whether the derived table holds exactly `rows` at the window of `pairs` already.
    async fn holds(
        &mut self,
        pairs: &[(&str, &str)],
        rows: &[RecordBatch],
        label: &str,
    ) -> Result<bool, DeriveError> {
        let name = self.query.name.clone();
        let current = self
            .table
            .delta_table()
            .await
            .map_err(|source| DeriveError::Read {
                name: name.clone(),
                source: Box::new(source),
            })?;
        let current = read_window(current, pairs, &self.output)
            .await
            .map_err(|source| DeriveError::ReadWindow {
                name: name.clone(),
                window: label.to_string(),
                source: Box::new(source),
            })?;
        same_rows(&self.output, rows, &current).map_err(|source| DeriveError::Compare {
            name,
            window: label.to_string(),
            source,
        })
    }
}
