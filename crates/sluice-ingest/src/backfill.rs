//! Backfill: recompute a range of windows from a bounded source, the batch rerun of the same
//! definition the stream uses (windows, row keys, dedupe winners), through the stream's own
//! path: rows routed by its [`WindowState`] (under [`Rules::batch`]: nothing is late) and
//! buffered within `--flush-bytes-max` (parts staged per key bucket above it), each
//! window published by the [`Publisher`] as a stream's first publication (deduped one group of
//! key buckets at a time), so a day-long window costs the memory a stream's does.

use std::collections::HashMap;

use sluice_publish::{Coverage, TableOptions, WindowTable};
use sluice_source::{Chunk, FileReader, LineDecoder, NdjsonSource};
use sluice_stage::{Busy, Phase, Stager};
use sluice_window::{EventTime, Window};

use crate::config::{Clock, IngestConfig, IngestError, PublishMode};
use crate::ledger::Ledger;
use crate::publisher::{CommitMeta, Committed, Policy, Publisher};
use crate::restart::Restarts;
use crate::run::{buffer_groups, with_ranges};
use crate::state::{Rules, WindowState};

/// What a backfill did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackfillSummary {
    /// Input bytes read.
    pub bytes: u64,
    /// Rows in the range.
    pub rows: u64,
    /// Rows outside the range, ignored.
    pub outside: u64,
    /// Bad lines, ignored here (the stream's dead-letter table holds them).
    pub rejected: u64,
    /// The bad lines by reason, and the first.
    pub rejections: crate::Rejections,
    /// Rows that broke each expectation, by rule.
    pub expectations: crate::expectations::Violations,
    pub windows_published: u64,
    /// Windows whose publication already covers the whole source: left as they are.
    pub windows_unchanged: u64,
    pub last_version: Option<u64>,
    /// Microseconds spent in each phase (decode, route, dedupe, encode, ...), by name, summed
    /// over threads, as a run reports them.
    pub busy_us: Vec<(&'static str, u64)>,
    /// Times the range was recomputed again from the re-read table after a resumable failure.
    pub restarts: u64,
}

/// Progress of a backfill, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackfillProgress {
    /// Bytes read of the source's total.
    Read { bytes: u64, total: u64 },
    /// Messages read of those to read (a Kafka backfill).
    Messages { read: u64, total: u64 },
    /// Windows published (or left unchanged) of those in range with rows.
    Published { done: u64, total: u64 },
}

/// Recomputes every window whose start is in `[from, to)` from the whole of `source`, and
/// publishes each by swap (rows deduped by the configured row key), without moving the
/// stream's offsets. Its publications cover the whole source, so a stream that later replays
/// these events recognises them; a window whose publication already covers the whole source is
/// left unchanged (running a backfill twice changes nothing) unless `force` (`--force`:
/// after a source's bytes were replaced in place, which positions cannot tell). Windows in
/// range without events in the source are left as they are.
#[allow(clippy::too_many_arguments)]
pub async fn backfill(
    config: &IngestConfig,
    source: &NdjsonSource,
    decoder: &LineDecoder,
    table: WindowTable,
    from: EventTime,
    to: EventTime,
    force: bool,
    attempt: String,
    clock: &dyn Clock,
    progress: &mut dyn FnMut(BackfillProgress),
) -> Result<(BackfillSummary, WindowTable), IngestError> {
    let mut table = table;
    let source = &in_stream_order(config, source, &mut table).await?;
    let mut input = NdjsonInput {
        source,
        reader: source.reader(&HashMap::new(), config.chunk_bytes)?,
        bytes: 0,
        total: source.files().iter().map(|f| f.size).sum(),
    };
    recompute(
        config, &mut input, decoder, table, from, to, force, attempt, clock, progress,
    )
    .await
}

/// `source` in the order the stream reads it: its files ranked as the table stores them for
/// the pipeline (the order they arrived in; see `sluice_source`'s arrival order), so the
/// backfill's coverage is after every file the stream has read.
async fn in_stream_order(
    config: &IngestConfig,
    source: &NdjsonSource,
    table: &mut WindowTable,
) -> Result<NdjsonSource, IngestError> {
    let mut ledger = Ledger::new(source, None);
    let names = ledger.txn_names(source);
    let txns = table.resume_offsets(&config.pipeline, &names).await?;
    ledger.restore(txns, HashMap::new());
    let mut ordered = source.clone();
    ordered.adopt_ranks(ledger.ranks(), ledger.committed())?;
    Ok(ordered)
}

/// A backfill of an NDJSON source by the one restart rule (`sluice backfill`, `sluice
/// rewrite`): [`backfill`], and after a resumable failure (a lost commit race, a store
/// failure that outlasted its retries) the table re-read and the range recomputed from it,
/// after the policy's pause. A backfill is idempotent: windows published before the failure
/// are found covered and left unchanged. The count of failures in a row is never reset (a
/// backfill reports its progress only when it ends).
pub struct NdjsonBackfill<'a> {
    pub config: &'a IngestConfig,
    pub source: &'a NdjsonSource,
    pub decoder: &'a LineDecoder,
    /// Where the table is re-read from after a failure.
    pub table: &'a TableOptions,
    /// Names the staged files; a restart adds `r<n>`.
    pub attempt: &'a str,
}

impl NdjsonBackfill<'_> {
    /// Recomputes `[from, to)` into `table` (see [`backfill`]), restarting as the type says.
    pub async fn run(
        &self,
        table: WindowTable,
        (from, to): (EventTime, EventTime),
        force: bool,
        clock: &dyn Clock,
        progress: &mut dyn FnMut(BackfillProgress),
    ) -> Result<(BackfillSummary, WindowTable), IngestError> {
        let mut restarts = Restarts::new(self.config.restart);
        let mut first = Some(table);
        loop {
            let attempt = match restarts.total() {
                0 => self.attempt.to_string(),
                n => format!("{}r{n}", self.attempt),
            };
            let recomputed = async {
                let table = match first.take() {
                    Some(table) => table,
                    None => self.reopen().await?,
                };
                backfill(
                    self.config,
                    self.source,
                    self.decoder,
                    table,
                    from,
                    to,
                    force,
                    attempt,
                    clock,
                    &mut *progress,
                )
                .await
            }
            .await;
            match recomputed {
                Ok((mut summary, table)) => {
                    summary.restarts = restarts.total();
                    return Ok((summary, table));
                }
                Err(e) => {
                    let pause = restarts
                        .resume_after(e, "re-reading the table and recomputing the range again")?;
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    async fn reopen(&self) -> Result<WindowTable, IngestError> {
        WindowTable::open_or_create(
            self.table,
            Some(self.decoder.schema()),
            self.config.layout,
            self.config.window,
        )
        .await
        .map_err(|e| IngestError::Reopen(Box::new(e)))
    }
}

/// A bounded input a backfill reads to its end: its chunks in order, the source partition
/// names of their files, and the position after all of it (the coverage of every window the
/// backfill publishes).
pub(crate) trait BackfillInput {
    /// The next chunk; `None` at the end of the input.
    async fn next_chunk(&mut self) -> Result<Option<Chunk>, IngestError>;
    /// The source partition name of `file` (a chunk's file ordinal).
    fn name(&self, file: u32) -> String;
    /// The position after the whole input.
    fn end(&self) -> Coverage;
    /// How much of it was read, for a progress bar.
    fn progress(&self) -> BackfillProgress;
}

/// The files of an NDJSON source, from their beginnings.
struct NdjsonInput<'a> {
    source: &'a NdjsonSource,
    reader: FileReader,
    bytes: u64,
    total: u64,
}

impl BackfillInput for NdjsonInput<'_> {
    async fn next_chunk(&mut self) -> Result<Option<Chunk>, IngestError> {
        let chunk = self.reader.next_chunk()?;
        self.bytes += chunk.as_ref().map_or(0, |c| c.bytes_read());
        Ok(chunk)
    }

    fn name(&self, file: u32) -> String {
        self.source
            .name(file)
            .map_or_else(|| "?".to_string(), |n| n.to_string())
    }

    fn end(&self) -> Coverage {
        let last = self.source.files().last().expect("a source has a file");
        Coverage {
            partition: last.name.to_string(),
            offset: last.len as i64,
        }
    }

    fn progress(&self) -> BackfillProgress {
        BackfillProgress::Read {
            bytes: self.bytes,
            total: self.total,
        }
    }
}

/// [`backfill`] over any bounded input, into `table` (a shard of it, for a Kafka
/// partition's input): every chunk decoded and routed by the stream's [`WindowState`] under
/// the batch rules ([`Rules::batch`]), the rows in range buffered (staged in parts above the
/// budget), then each window in range published at the end of the input.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn recompute(
    config: &IngestConfig,
    input: &mut impl BackfillInput,
    decoder: &LineDecoder,
    table: WindowTable,
    from: EventTime,
    to: EventTime,
    force: bool,
    attempt: String,
    clock: &dyn Clock,
    progress: &mut dyn FnMut(BackfillProgress),
) -> Result<(BackfillSummary, WindowTable), IngestError> {
    let mut summary = BackfillSummary::default();
    let busy = Busy::new();
    let (mut publisher, mut decoder) = swap_publisher(config, decoder, table, attempt, &busy)?;
    let start = sluice_source::Position { file: 0, offset: 0 };
    let mut state = WindowState::resumed(Rules::batch(config), [], start, Default::default());
    while let Some(chunk) = input.next_chunk().await? {
        let (grown, decoded, chunk, took) =
            crate::decoding::decode_blocking(decoder, chunk).await?;
        decoder = grown;
        busy.add(Phase::Decode, took);
        let decoded = decoded?;
        let name = input.name(decoded.file);
        let decoded =
            config
                .expectations
                .apply(decoded, &chunk, &name, &mut summary.expectations)?;
        if !decoded.added.is_empty() {
            // New fields: the table grows by them with the first window published.
            publisher
                .table_mut()
                .grow_schema(&decoded.batch.schema())
                .map_err(|e| IngestError::Schema(Box::new(e)))?;
            decoder.set_schema(publisher.adopt_table_schema())?;
        }
        summary.bytes += chunk.bytes_read();
        // Bad lines are counted only: the stream's dead-letter table holds them.
        summary.rejected += decoded.rejects.len() as u64;
        summary.rejections.count_rejects(&name, &decoded.rejects);
        let schema = publisher.file_schema().clone();
        busy.time(Phase::Route, || {
            // Under the batch rules every row is kept: none is late, ahead or a replay.
            let routed = state.route(decoded.file, &decoded.event_times, &decoded.offsets, 0);
            debug_assert!(
                routed.dropped.is_empty() && routed.replayed == 0 && routed.late == 0,
                "E9 backfill: every row of a recomputed window is kept"
            );
            let (groups, outside): (Vec<_>, Vec<_>) = routed
                .groups
                .into_iter()
                .partition(|(w, _)| w.start() >= from && w.start() < to);
            summary.outside += outside.iter().map(|(_, r)| r.len() as u64).sum::<u64>();
            summary.rows += groups.iter().map(|(_, r)| r.len() as u64).sum::<u64>();
            let rows = (decoded.batch, decoded.offsets.as_slice());
            buffer_groups(&mut state, rows, groups, &schema, &name)
        })?;
        while let Some((window, batches)) = state.take_largest() {
            for part in publisher.stage_parts(window, batches).await? {
                state.add_part(window, part);
            }
        }
        progress(input.progress());
    }
    let coverage = input.end();
    let publish = PublishRange {
        config,
        coverage,
        force,
        clock,
    };
    state.end_of_input();
    let in_range = |w: &Window| w.start() >= from && w.start() < to;
    let windows: Vec<Window> = state
        .due(clock.now_ms())
        .into_iter()
        .filter(in_range)
        .collect();
    publish
        .run(&mut publisher, &mut state, windows, &mut summary, progress)
        .await?;
    summary.busy_us = crate::config::busy_us(&busy);
    Ok((summary, publisher.into_table()))
}

/// A backfill's publisher over `table`: by swap whatever the stream's mode (a merge-mode
/// table is recomputed by running the stream again; the binary says so), with the decoder
/// for the table's schema (grown by the decoder's first).
fn swap_publisher(
    config: &IngestConfig,
    decoder: &LineDecoder,
    mut table: WindowTable,
    attempt: String,
    busy: &Busy,
) -> Result<(Publisher, LineDecoder), IngestError> {
    let mut decoder = decoder.clone();
    if let Some(key) = &config.key {
        decoder.set_row_key(key.columns.clone(), key.sequence.clone())?;
    }
    table
        .grow_schema(decoder.schema())
        .map_err(|e| IngestError::Schema(Box::new(e)))?;
    let stager =
        Stager::new(table.store(), attempt, config.stage_options()).with_busy(busy.clone());
    let mut policy = Policy::of(config);
    policy.mode = PublishMode::Swap;
    let mut publisher = Publisher::new(policy, table, None, stager);
    decoder.set_schema(publisher.adopt_table_schema())?;
    Ok((publisher, decoder))
}

/// The end of a backfill: each buffered window published as a stream's first publication
/// (no txns: a backfill never moves the stream's offsets), its coverage the whole input (so a
/// stream that later replays these events recognises them); a window whose publication
/// already covers it is left unchanged unless `force`.
struct PublishRange<'a> {
    config: &'a IngestConfig,
    coverage: Coverage,
    force: bool,
    clock: &'a dyn Clock,
}

impl PublishRange<'_> {
    async fn run(
        &self,
        publisher: &mut Publisher,
        state: &mut WindowState,
        windows: Vec<Window>,
        summary: &mut BackfillSummary,
        progress: &mut dyn FnMut(BackfillProgress),
    ) -> Result<(), IngestError> {
        let covered: HashMap<Window, Coverage> = publisher
            .table_mut()
            .published_windows(&self.config.pipeline)
            .await?
            .into_iter()
            .map(|p| (p.window, p.coverage))
            .collect();
        let n = windows.len() as u64;
        for (done, window) in windows.into_iter().enumerate() {
            let (buffer, _) = state.take_for_publication(window);
            if !self.force && covered.get(&window).is_some_and(|c| *c >= self.coverage) {
                summary.windows_unchanged += 1;
                publisher.discard(buffer).await;
            } else {
                let meta = CommitMeta {
                    txns: Vec::new(),
                    position_ranges: serde_json::Value::Null,
                    coverage: self.coverage.clone(),
                    now_ms: self.clock.now_ms(),
                };
                let meta = with_ranges(meta, &buffer, true);
                if publisher.must_commit_group_before(window, false, buffer.total_bytes()) {
                    let group = publisher.finish_pending().await?;
                    backfilled(publisher, summary, group);
                }
                let committed = publisher.publish(window, buffer, false, meta).await?;
                backfilled(publisher, summary, committed.into_iter().collect());
            }
            progress(BackfillProgress::Published {
                done: done as u64 + 1,
                total: n,
            });
        }
        let group = publisher.finish_pending().await?;
        backfilled(publisher, summary, group);
        Ok(())
    }
}

/// Counts a backfill's commit of `group` (one or more windows, one version).
fn backfilled(publisher: &Publisher, summary: &mut BackfillSummary, group: Vec<Committed>) {
    for c in &group {
        tracing::info!(window = %publisher.table().address(c.window).label(), version = c.published.version, rows = c.published.rows, group = group.len(), "backfilled");
    }
    if let Some(last) = group.last() {
        summary.windows_published += group.len() as u64;
        summary.last_version = Some(last.published.version);
    }
}
