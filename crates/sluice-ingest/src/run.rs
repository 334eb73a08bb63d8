//! The runner of one pipeline over one replayable log into one window table (one shard of
//! it, for a sharded table): it feeds decoded chunks to the [`WindowState`], buffers the rows
//! it keeps, and has the [`Publisher`] publish what the state says is due, with the `txn`s
//! the [`Ledger`] names. Restarts from the table go through [`StepRestarts`], the one
//! restart rule ([`crate::restart`]) applied after each step of a run or a Kafka partition's
//! writer.

use std::sync::Arc;

use deltalake::arrow::array::{RecordBatch, UInt32Array};
use deltalake::arrow::compute::take_record_batch;
use deltalake::arrow::datatypes::SchemaRef;
use serde_json::json;
use sluice_publish::{Coverage, DeadLetter, DeadLetterTable, WindowTable};
use sluice_source::{Chunk, Decoded, LineDecoder, ReplayLog, RAW_BYTES_MAX};
use sluice_stage::{align_batch, Busy, Phase, Stager};
use sluice_window::Window;

use crate::buffer::WindowBuffer;
use crate::config::{Clock, IngestConfig, IngestError, RunSummary, DEAD_LETTER_SHARE};
use crate::dedupe::{record_fields, with_positions};
use crate::derive::Deriver;
use crate::instruments::{Instruments, LagUnit, RunLabels};
use crate::ledger::Ledger;
use crate::publisher::{CommitMeta, Committed, Policy, Publisher};
use crate::restart::{AfterFailure, Restarts};
use crate::state::{LateRow, Routed, Rules, WindowState};

mod upkeep;

/// One run of a pipeline over the replayable log `L` into a window table: an NDJSON source
/// ([`sluice_source::NdjsonSource`]) or one Kafka partition
/// ([`sluice_source::LogPartition`]).
pub struct Ingester<'a, L: ReplayLog> {
    config: IngestConfig,
    log: L,
    /// Decodes the log's records; its schema grows with the records' new fields (schema
    /// evolution), and a reload resets it to the table's (plus `declared`).
    decoder: LineDecoder,
    /// The record schema the run started with (the table's, or what a schema file adds to
    /// it): a reload grows the re-read table's schema by it again.
    declared: SchemaRef,
    clock: &'a dyn Clock,
    state: WindowState,
    ledger: Ledger,
    publisher: Publisher,
    /// The pipeline's derived tables, recomputed after each raw commit.
    deriver: Option<Deriver>,
    summary: RunSummary,
    /// Without a natural key: copies of earlier records, counted for the summary.
    duplicates: Option<crate::duplicates::LineDuplicates>,
    /// Where the run reports its progress after each chunk, if anyone watches.
    progress: Option<tokio::sync::watch::Sender<RunProgress>>,
    /// The run's metrics (no-ops unless the process installed a recorder).
    instruments: Instruments,
    /// Where the run's time goes, by phase (shared with its stager and reader thread).
    busy: Busy,
}

/// How far a run has got: input bytes read, records decoded, windows published.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunProgress {
    pub bytes: u64,
    pub records: u64,
    pub windows_published: u64,
}

impl<'a, L: ReplayLog> Ingester<'a, L> {
    /// Recovers the pipeline's state from the tables: resume offsets, watermark, published
    /// windows and dead-letter offsets. `attempt` names this run's staged files apart from
    /// every other run's.
    pub async fn recover(
        config: IngestConfig,
        log: L,
        decoder: LineDecoder,
        table: WindowTable,
        dlq: DeadLetterTable,
        attempt: String,
        clock: &'a dyn Clock,
    ) -> Result<Ingester<'a, L>, IngestError> {
        if matches!(config.mode, crate::config::PublishMode::Merge(_)) && config.key.is_none() {
            return Err(IngestError::MergeNeedsKey);
        }
        // Records without the row key are dead letters, whatever the decoder was built with.
        let mut decoder = decoder;
        let mut config = config;
        if let Some(key) = &mut config.key {
            decoder.set_row_key(key.columns.clone(), key.sequence.clone())?;
            // The key, sequence and time fields by their columns' names (an option may name
            // a renamed column by its field's own name: `--key "order id"` for `order_id`).
            key.columns = decoder.key_columns();
            key.sequence = decoder.sequence_columns();
            key.time_field = decoder.time_column();
        }
        if let Some(deletes) = &config.deletes {
            deletes.when.check(decoder.schema())?;
        }
        config.expectations.check(decoder.schema())?;
        let busy = Busy::new();
        let stager =
            Stager::new(table.store(), attempt, config.stage_options()).with_busy(busy.clone());
        let ledger = Ledger::new(&log, table.shard());
        let declared = decoder.schema().clone();
        let state = WindowState::resumed(
            Rules::of(&config),
            std::iter::empty(),
            log.resume_at(&Default::default()),
            Default::default(),
        );
        let labels = RunLabels {
            pipeline: config.pipeline.clone(),
            table: table.url().to_string(),
            source: log.metrics_source(),
        };
        let instruments = Instruments::new(labels, config.late.name());
        instruments
            .buffer_budget_bytes
            .set(config.flush_bytes_max as f64);
        let publisher = Publisher::new(Policy::of(&config), table, Some(dlq), stager);
        let mut ingester = Ingester {
            config,
            log,
            decoder,
            declared,
            clock,
            state,
            ledger,
            publisher,
            deriver: None,
            summary: RunSummary::default(),
            duplicates: None,
            progress: None,
            instruments,
            busy,
        };
        if ingester.config.key.is_none() {
            ingester.duplicates = Some(Default::default());
        }
        ingester.read_table_state().await?;
        Ok(ingester)
    }

    /// (Re)builds the resume state from the tables alone: committed offsets, the watermark,
    /// published windows and their coverage, dead-letter offsets; buffered rows and pending
    /// dead letters are dropped (they are re-read from the source).
    async fn read_table_state(&mut self) -> Result<(), IngestError> {
        let pipeline = &self.config.pipeline;
        let partitions: Vec<String> = self
            .log
            .partitions()
            .iter()
            .map(|p| p.to_string())
            .collect();
        let dead = self.publisher.dead_letter_offsets(&partitions).await?;
        let names = self.ledger.txn_names(&self.log);
        let txns = self
            .publisher
            .table_mut()
            .resume_offsets(pipeline, &names)
            .await?;
        self.ledger.restore(txns, dead);
        self.log
            .adopt_ranks(self.ledger.ranks(), self.ledger.committed())?;
        self.log.adopt_ends(self.ledger.ends());
        self.log.check_resume(self.ledger.committed())?;
        let published = self
            .publisher
            .table_mut()
            .published_windows(pipeline)
            .await?;
        let log = &self.log;
        self.state = WindowState::resumed(
            Rules::of(&self.config),
            published.into_iter().map(|p| {
                (
                    p.window,
                    log.position_of(&p.coverage.partition, p.coverage.offset),
                )
            }),
            self.log.resume_at(self.ledger.committed()),
            self.ledger.watermark_state(),
        );
        // The table's columns (another writer may have added some), grown by what this run
        // declared; what the records add is added again as they are re-read.
        self.publisher
            .table_mut()
            .grow_schema(&self.declared)
            .map_err(|e| IngestError::Schema(Box::new(e)))?;
        self.adopt_table_schema()
    }

    /// Decodes and stages with the table's (staging) schema from now on.
    fn adopt_table_schema(&mut self) -> Result<(), IngestError> {
        let record = self.publisher.adopt_table_schema();
        self.decoder.set_schema(record)?;
        Ok(())
    }

    /// The records of `decoded` have fields the table lacks (schema evolution): the table
    /// grows by them with its next commit.
    fn grow(&mut self, decoded: &Decoded) -> Result<(), IngestError> {
        let record = decoded.batch.schema();
        let added = self
            .publisher
            .table_mut()
            .grow_schema(&record)
            .map_err(|e| IngestError::Schema(Box::new(e)))?;
        self.adopt_table_schema()?;
        if !added.is_empty() {
            let at = decoded.offsets.first().copied().unwrap_or_default();
            let name = self.partition_name(decoded.file);
            tracing::info!(fields = %added.join(", "), source = %name, near_offset = at, "new fields: the table grows by these columns with its next commit");
            for f in added {
                if !self.summary.fields_added.contains(&f) {
                    self.summary.fields_added.push(f);
                }
            }
        }
        Ok(())
    }

    /// Reports the run's progress to `progress` after each chunk (a progress bar watches it).
    pub fn with_progress(mut self, progress: tokio::sync::watch::Sender<RunProgress>) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Keeps `deriver`'s derived tables from now on: first brings them up to the raw table
    /// (recomputing what changed since they last settled), then recomputes a window's
    /// derived rows after each raw commit that changes it.
    pub async fn with_deriver(mut self, mut deriver: Deriver) -> Result<Self, IngestError> {
        deriver
            .catch_up(self.publisher.table_mut(), self.clock.now_ms())
            .await?;
        self.deriver = Some(deriver);
        Ok(self)
    }

    /// Brings the derived tables up to the raw table (end of a bounded run).
    pub(crate) async fn settle_derived(&mut self) -> Result<(), IngestError> {
        let now_ms = self.clock.now_ms();
        let outcome = match self.deriver.as_mut() {
            Some(d) => d.settle(now_ms).await.map_err(Into::into),
            None => Ok(()),
        };
        if let Some(d) = &self.deriver {
            self.summary.derived = d.summary.clone();
        }
        outcome
    }

    /// What the run did so far.
    pub fn summary(&self) -> &RunSummary {
        &self.summary
    }

    /// Input bytes read by the caller (a log whose chunks the caller reads).
    pub(crate) fn count_bytes(&mut self, bytes: u64) {
        self.summary.bytes += bytes;
        self.instruments.bytes_read.increment(bytes);
    }

    /// Reports the source's backlog (see [`Instruments::lag`]).
    pub(crate) fn report_lag(&self, unit: LagUnit, lag: u64) {
        self.instruments.lag(unit, lag);
    }

    /// The state gauges: open windows, buffered bytes, the watermark and its age.
    fn report_state(&self) {
        let i = &self.instruments;
        let s = self.state.gauges();
        i.open_windows.set(s.open_windows as f64);
        i.buffered_bytes.set(s.buffered_bytes as f64);
        if let Some(watermark_ms) = s.watermark_ms {
            i.watermark_seconds.set(watermark_ms as f64 / 1000.0);
            let age_ms = self.clock.now_ms().saturating_sub(watermark_ms).max(0);
            i.watermark_age_seconds.set(age_ms as f64 / 1000.0);
        }
    }

    /// Commits made so far (data and dead letters): a restart that follows new commits
    /// starts its count of consecutive failures over.
    pub(crate) fn commits(&self) -> u64 {
        self.summary.commits + self.summary.dead_letter_commits
    }

    pub(crate) fn log(&self) -> &L {
        &self.log
    }

    pub(crate) fn log_mut(&mut self) -> &mut L {
        &mut self.log
    }

    /// The table's resume offset of source partition `name`, as last read or written.
    pub fn resume_offset(&self, name: &str) -> Option<i64> {
        self.ledger.committed().get(name).copied()
    }

    /// Where each source partition's next read starts.
    pub(crate) fn cursors(&self) -> &std::collections::HashMap<String, i64> {
        self.ledger.cursors()
    }

    /// The decoder, for a caller that decodes on a thread of its own.
    pub(crate) fn decoder(&self) -> &LineDecoder {
        &self.decoder
    }

    /// Chunk size and chunks in flight of the run's reads.
    pub(crate) fn config(&self) -> &IngestConfig {
        &self.config
    }

    pub(crate) fn clock(&self) -> &'a dyn Clock {
        self.clock
    }

    /// Ends the run, handing back the table.
    pub(crate) fn finish(self) -> (RunSummary, WindowTable) {
        (self.summary_with_busy(), self.publisher.into_table())
    }

    /// The run's busy time so far, by phase (see [`RunSummary::busy_us`]).
    pub(crate) fn busy_us(&self) -> Vec<(&'static str, u64)> {
        crate::config::busy_us(&self.busy)
    }

    /// The summary so far with its busy time (a Kafka run sums its shards' summaries).
    pub(crate) fn summary_with_busy(&self) -> RunSummary {
        let mut summary = self.summary.clone();
        summary.busy_us = self.busy_us();
        summary
    }

    /// The run's busy-time counters, for a thread of its own (the reader's) to add to.
    pub(crate) fn busy(&self) -> &Busy {
        &self.busy
    }

    /// Re-reads the tables and resumes from them, exactly as a restarted process would: what
    /// was buffered or staging is dropped and read again from the log.
    pub(crate) async fn reload(&mut self) -> Result<(), IngestError> {
        self.publisher.reload().await?;
        self.read_table_state().await?;
        if let Some(d) = self.deriver.as_mut() {
            d.catch_up(self.publisher.table_mut(), self.clock.now_ms())
                .await?;
        }
        Ok(())
    }

    /// Adds `took` to the run's busy time in `phase` (work done for it elsewhere: messages
    /// decoded before their chunk reached the writer).
    #[cfg(feature = "kafka")]
    pub(crate) fn add_busy(&self, phase: Phase, took: std::time::Duration) {
        self.busy.add(phase, took);
    }

    /// Decodes `chunk` with the run's decoder and takes it (a log whose records the caller
    /// receives, such as a Kafka partition). The decode runs on a blocking thread, never on
    /// the runtime's: a large chunk must not hold up the ticks and the consumer's events.
    #[cfg(feature = "kafka")]
    pub(crate) async fn take_chunk(&mut self, chunk: Chunk) -> Result<(), IngestError> {
        let (decoder, decoded, chunk, took) =
            crate::decoding::decode_blocking(self.decoder.clone(), chunk).await?;
        // The decoder may have grown the schema (schema evolution).
        self.decoder = decoder;
        self.busy.add(Phase::Decode, took);
        let decoded = decoded?;
        self.count_bytes(chunk.bytes_read());
        self.take(decoded, &chunk).await
    }

    /// Takes one decoded chunk: routes its rows to their windows, stages parts while the
    /// buffers are over budget, and publishes the windows that sealed.
    pub(crate) async fn take(
        &mut self,
        decoded: Decoded,
        chunk: &Chunk,
    ) -> Result<(), IngestError> {
        let name = self.partition_name(chunk.file);
        self.ledger.read_to(&name, chunk.end());
        // The decoder (this run's, or a reader thread's copy) grew the schema by fields the
        // table lacks: the table grows by them with its next commit.
        if decoded.batch.schema().fields() != record_fields(self.publisher.file_schema()).fields() {
            self.grow(&decoded)?;
        }
        let routing = std::time::Instant::now();
        self.route(decoded, chunk, &name)?;
        self.busy.add(Phase::Route, routing.elapsed());
        // Dead letters wait for the next data commit, but not past their share of the
        // memory budget: a stream of bad records whose windows are not due yet (or a busy
        // topic that never leaves time for a tick) must not pile them up.
        if self.publisher.dead_letter_bytes() > self.config.flush_bytes_max / DEAD_LETTER_SHARE {
            self.commit_dead_letters().await?;
        }
        while let Some((window, batches)) = self.state.take_largest() {
            for part in self.publisher.stage_parts(window, batches).await? {
                self.state.add_part(window, part);
                self.summary.parts_flushed += 1;
                self.instruments.parts_flushed.increment(1);
            }
        }
        let published = self.publish_due_overlapping().await;
        self.report_state();
        if let Some(progress) = &self.progress {
            progress.send_replace(RunProgress {
                bytes: self.summary.bytes,
                records: self.summary.rows,
                windows_published: self.summary.windows_published,
            });
        }
        published
    }

    fn partition_name(&self, file: u32) -> Arc<str> {
        self.log
            .partition_of(sluice_source::Position { file, offset: 0 })
            .cloned()
            .unwrap_or_else(|| "?".into())
    }

    fn route(&mut self, decoded: Decoded, chunk: &Chunk, name: &str) -> Result<(), IngestError> {
        let decoded = self.expect(decoded, chunk, name)?;
        // (An event time per row: WindowState::route checks it, for every writer.)
        debug_assert_eq!(
            decoded.batch.num_rows(),
            decoded.offsets.len(),
            "E6: a decoded row has its offset"
        );
        debug_assert!(
            decoded.offsets.windows(2).all(|w| w[0] < w[1])
                && decoded.offsets.last().is_none_or(|o| *o < chunk.end()),
            "E1: a chunk's rows are at increasing offsets before the chunk's end"
        );
        let dead_below = self.ledger.dead_below(name);
        self.count_read(&decoded);
        self.dead_letter_rejects(&decoded, name, dead_below);
        self.see_duplicates(&decoded, chunk);
        let routed = self.state.route(
            decoded.file,
            &decoded.event_times,
            &decoded.offsets,
            self.clock.now_ms(),
        );
        self.count_routed(&routed);
        for late in &routed.dropped {
            let offset = decoded.offsets[late.index];
            if offset >= dead_below {
                self.dead_letter_late(late, raw_line(chunk, offset), name, offset);
            }
        }
        self.summary.rows += decoded.offsets.len() as u64;
        let file = decoded.file;
        let schema = self.publisher.file_schema().clone();
        let groups = routed.groups.into_iter().collect();
        let rows = (decoded.batch, decoded.offsets.as_slice());
        buffer_groups(&mut self.state, rows, groups, &schema, name)?;
        self.state.read_to(sluice_source::Position {
            file,
            offset: chunk.end(),
        });
        Ok(())
    }

    /// Applies the expectations to a decoded chunk (rows a drop rule breaks become rejects)
    /// and counts the rows that broke each rule.
    fn expect(
        &mut self,
        decoded: Decoded,
        chunk: &Chunk,
        name: &str,
    ) -> Result<Decoded, IngestError> {
        let rules = &self.config.expectations;
        if rules.is_empty() {
            return Ok(decoded);
        }
        let mut broke = crate::expectations::Violations::new();
        let checked = rules.apply(decoded, chunk, name, &mut broke);
        for (rule, n) in broke {
            self.instruments.expectation_violated(&rule, n);
            *self.summary.expectations.entry(rule).or_default() += n;
        }
        Ok(checked?)
    }

    /// Counts a decoded chunk's records, bad lines and fields left out.
    fn count_read(&mut self, decoded: &Decoded) {
        self.summary.tombstones_skipped += decoded.tombstones;
        if decoded.ignored_rows > 0 {
            self.summary.rows_with_ignored_fields += decoded.ignored_rows;
            for (f, n) in &decoded.ignored {
                self.summary.ignored_fields.add(f, *n);
            }
        }
        let read = decoded.offsets.len() + decoded.rejects.len();
        self.instruments.records_read.increment(read as u64);
        self.instruments
            .records_rejected
            .increment(decoded.rejects.len() as u64);
        self.summary.rejected += decoded.rejects.len() as u64;
    }

    /// Each bad line becomes a dead letter, unless the dead-letter table holds it already
    /// (below `dead_below`: a replay).
    fn dead_letter_rejects(&mut self, decoded: &Decoded, name: &str, dead_below: i64) {
        self.summary
            .rejections
            .count_rejects(name, &decoded.rejects);
        for r in &decoded.rejects {
            if r.offset < dead_below {
                continue;
            }
            self.publisher.dead_letter(DeadLetter {
                source: name.to_string(),
                offset: r.offset,
                reason: r.reason.as_str().to_string(),
                detail: r.reason.detail(),
                raw: r.raw.clone(),
                window: None,
            });
        }
    }

    /// Counts copies of lines seen before (a file's rows are at their lines' byte offsets;
    /// not kept for a Kafka partition's messages).
    fn see_duplicates(&mut self, decoded: &Decoded, chunk: &Chunk) {
        let (Some(d), None) = (&mut self.duplicates, &chunk.message_offsets) else {
            return;
        };
        for &offset in &decoded.offsets {
            let Some(from) = usize::try_from(offset - chunk.start)
                .ok()
                .filter(|&i| i <= chunk.data.len())
            else {
                continue;
            };
            let rest = &chunk.data[from..];
            let line = &rest[..rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len())];
            d.see(decoded.file, offset, line);
        }
        self.summary.duplicates_kept = d.copies;
        self.summary.duplicates_capped = d.capped;
    }

    fn count_routed(&mut self, routed: &Routed) {
        self.summary.replayed += routed.replayed;
        self.summary.late += routed.late;
        self.summary.ahead += routed.ahead;
        self.summary.late_dead_lettered += routed.dropped.len() as u64;
        self.instruments.rows_replayed.increment(routed.replayed);
        self.instruments.late_republished.increment(routed.late);
        self.instruments
            .late_dead_lettered
            .increment(routed.dropped.len() as u64);
    }

    /// A late row the policy does not keep becomes a dead letter naming its window.
    fn dead_letter_late(&mut self, late: &LateRow, raw: String, name: &str, offset: i64) {
        let label = self.publisher.table().address(late.window).label();
        self.publisher.dead_letter(DeadLetter {
            source: name.to_string(),
            offset,
            reason: late.reason.as_str().to_string(),
            detail: format!(
                "event time {} is in window {label}, which the watermark {} passed",
                late.event_time.to_rfc3339(),
                late.watermark.to_rfc3339()
            ),
            raw,
            window: Some(label),
        });
    }

    /// Seals and publishes every held window (late batches included), then commits the
    /// pending dead letters.
    pub(crate) async fn drain(&mut self) -> Result<(), IngestError> {
        self.state.end_of_input();
        self.publish_due().await?;
        self.commit_dead_letters().await
    }

    /// Seals every open window (an idle source): the watermark moves to the end of the
    /// newest one, as if an event that much past it had arrived. The moved watermark is
    /// stored with the next commit like any other, so a restart treats later events for
    /// these windows as late, as this run does. Returns whether any window was open.
    pub(crate) async fn seal_idle(&mut self) -> Result<bool, IngestError> {
        if !self.state.begin_idle_seal() {
            return Ok(false);
        }
        let published = self.publish_due().await;
        self.state.end_idle_seal();
        published?;
        self.summary.idle_seals += 1;
        tracing::info!(watermark = %self.state.watermark().to_rfc3339(), "idle: sealed every open window");
        Ok(true)
    }

    /// Publishes every due window; every publication is committed when this returns.
    pub(crate) async fn publish_due(&mut self) -> Result<(), IngestError> {
        self.publish_due_with(false).await?;
        self.finish_pending().await?;
        self.report_state();
        Ok(())
    }

    /// As [`Ingester::publish_due`], but the last group may still be staging (dedupe and
    /// encode on a task of its own) when this returns, so that routing the next rows
    /// overlaps it. A group whose staging is done is committed first.
    async fn publish_due_overlapping(&mut self) -> Result<(), IngestError> {
        if self.publisher.pending_ready() {
            self.finish_pending().await?;
        }
        self.publish_due_with(true).await
    }

    /// Publishes the due windows, those due together in groups of one commit each (see
    /// [`IngestConfig::group_windows_max`]); with `overlap` the last group may be left
    /// uncommitted (the next call, or [`Ingester::finish_pending`], commits it).
    async fn publish_due_with(&mut self, overlap: bool) -> Result<(), IngestError> {
        let due = self.state.due(self.clock.now_ms());
        if due.is_empty() {
            return Ok(());
        }
        // A group left from before holds windows decided against an older read position:
        // it commits before anything due now is decided.
        self.finish_pending().await?;
        for window in due {
            let (republish, bytes) = self.state.publication_of(window);
            if self
                .publisher
                .must_commit_group_before(window, republish, bytes)
            {
                self.finish_pending().await?;
            }
            self.commit_dead_letters().await?;
            let meta = self.meta(window);
            let (buffer, republish) = self.state.take_for_publication(window);
            let meta = with_ranges(meta, &buffer, false);
            let started_ms = self.clock.now_ms();
            if let Some(committed) = self
                .publisher
                .publish(window, buffer, republish, meta)
                .await?
            {
                self.record_commit_time(started_ms);
                self.after_commit(vec![committed]).await?;
            }
        }
        if !overlap {
            self.finish_pending().await?;
        }
        Ok(())
    }

    /// Commits the group left staging, if any.
    pub(crate) async fn finish_pending(&mut self) -> Result<(), IngestError> {
        let started_ms = self.clock.now_ms();
        let committed = self.publisher.finish_pending().await?;
        if committed.is_empty() {
            return Ok(());
        }
        self.record_commit_time(started_ms);
        self.after_commit(committed).await
    }

    /// Records a publication that started at `started_ms` (the run's clock) and is committed.
    fn record_commit_time(&self, started_ms: i64) {
        let took_ms = self.clock.now_ms().saturating_sub(started_ms).max(0);
        self.instruments
            .commit_seconds
            .record(took_ms as f64 / 1000.0);
    }

    /// Commits the pending dead letters with the dead-letter offsets moved to the read
    /// position. Runs before every data commit, so no data commit ever moves the resume
    /// position past a dead letter that is not in the dead-letter table.
    pub(crate) async fn commit_dead_letters(&mut self) -> Result<(), IngestError> {
        if !self.publisher.has_dead_letters() {
            return Ok(());
        }
        let through = self
            .ledger
            .dead_through(&self.log, self.state.read_position());
        let by_reason = self.publisher.dead_letter_reasons();
        if self
            .publisher
            .commit_dead_letters(&through, self.clock.now_ms())
            .await?
        {
            self.instruments.dead_letters_committed(&by_reason);
            self.summary.dead_letter_commits += 1;
            self.ledger.dead_committed(through);
        }
        Ok(())
    }

    /// What a publication of `window` commits along with its files, as of now: the offsets
    /// (and watermark) the stream resumes from once it is published, and its coverage.
    fn meta(&self, window: Window) -> CommitMeta {
        let resume = self.state.resume_excluding(window);
        let state = self.state.watermark_before(resume, window);
        let read = self.state.read_position();
        let txns = self
            .ledger
            .txns(&self.log, (resume, read), state, self.state.lateness_us());
        CommitMeta {
            txns,
            position_ranges: serde_json::Value::Null,
            coverage: Coverage {
                partition: self
                    .log
                    .partition_of(read)
                    .map(|n| n.to_string())
                    .unwrap_or_default(),
                offset: read.offset,
            },
            now_ms: self.clock.now_ms(),
        }
    }

    /// The run's state after a commit of one or more publications (a group commits its
    /// windows together, with one version): the offsets it stored, derived tables, the
    /// summary.
    async fn after_commit(&mut self, group: Vec<Committed>) -> Result<(), IngestError> {
        let Some(last) = group.last() else {
            return Ok(());
        };
        // A MERGE that changes no row commits nothing (deltalake skips empty commits), and its
        // offsets stay unwritten: the ledger must not claim them, or a later commit would
        // leave them out. (A MERGE always commits alone.)
        let (landed, version, now_ms) = (last.landed, last.published.version, last.meta.now_ms);
        for c in &group {
            tracing::info!(
                window = %self.publisher.table().address(c.window).label(),
                version = c.published.version,
                rows = c.published.rows,
                files_added = c.published.files_added,
                files_removed = c.published.files_removed,
                republish = c.republish,
                merge = c.merge,
                group = group.len(),
                "published"
            );
        }
        if !landed {
            self.summary.merges_unchanged += group.len() as u64;
            return Ok(());
        }
        let windows: Vec<Window> = group.iter().map(|c| c.window).collect();
        // A MERGE across the table changes windows besides its own.
        let across = self.publisher.merges_across_table() && group.iter().any(|c| c.merge);
        let i = &self.instruments;
        let visible_ms = self.clock.now_ms();
        for c in &group {
            if c.republish {
                i.windows_republished.increment(1);
            } else {
                i.windows_first.increment(1);
            }
            // Net rows: a republication counts only what it added to the window. (A
            // counter only goes up: a commit that leaves fewer rows counts them apart.)
            match u64::try_from(c.published.rows_net) {
                Ok(added) => i.rows_published.increment(added),
                Err(_) => i
                    .rows_unpublished
                    .increment(c.published.rows_net.unsigned_abs()),
            }
            i.bytes_published
                .increment(c.published.bytes_added.max(0) as u64);
            let sealed_to_visible_ms = visible_ms.saturating_sub(c.meta.now_ms).max(0);
            i.seal_to_visible_seconds
                .record(sealed_to_visible_ms as f64 / 1000.0);
        }
        i.commits.increment(1);
        for c in group {
            self.ledger.committed_txns(c.meta.txns);
        }
        if let Some(d) = self.deriver.as_mut() {
            let raw = self.publisher.table_mut();
            match across {
                true => d.published_across(raw, windows[0], version, now_ms).await?,
                false => d.published(raw, &windows, version, now_ms).await?,
            }
        }
        self.summary.windows_published += windows.len() as u64;
        self.summary.commits += 1;
        self.summary.last_version = Some(version);
        self.upkeep(&windows).await
    }
}

/// Each window's rows of a decoded chunk into its buffer in `state`: `groups` are row
/// indexes into the chunk's `(batch, offsets)`, in input order; each row gets its position
/// in source partition `name`, as a row of the table's file `schema` (a batch decoded before
/// the schema grew is aligned to it first). A run's routing and a backfill's share it.
pub(crate) fn buffer_groups(
    state: &mut WindowState,
    (batch, offsets): (RecordBatch, &[i64]),
    groups: Vec<(Window, Vec<u32>)>,
    schema: &SchemaRef,
    name: &str,
) -> Result<(), IngestError> {
    let record_schema = record_fields(schema);
    let batch = if batch.schema().fields() == record_schema.fields() {
        batch
    } else {
        align_batch(&batch, &record_schema)?
    };
    let everything = groups.len() == 1 && groups[0].1.len() == offsets.len();
    for (window, rows) in groups {
        let positions: Vec<i64> = rows.iter().map(|i| offsets[*i as usize]).collect();
        let records = if everything {
            batch.clone()
        } else {
            take_record_batch(&batch, &UInt32Array::from(rows))?
        };
        let (first, last) = (positions[0], positions[positions.len() - 1]);
        let batch = with_positions(schema, &records, name, positions)?;
        state.buffer(window, batch, name, first, last);
    }
    Ok(())
}

/// `meta` with the window's source position ranges (for the commit metadata); `backfill`
/// marks them as a backfill's.
pub(crate) fn with_ranges(
    mut meta: CommitMeta,
    buffer: &WindowBuffer,
    backfill: bool,
) -> CommitMeta {
    let mut ranges: Vec<_> = buffer.ranges.iter().collect();
    ranges.sort();
    meta.position_ranges = json!(ranges
        .iter()
        .map(|(p, (lo, hi))| {
            let mut range = json!({"partition": p, "first_offset": lo, "last_offset": hi});
            if backfill {
                range["backfill"] = json!(true);
            }
            range
        })
        .collect::<Vec<_>>());
    meta
}

/// The line at `offset` of `chunk`, as text (lossy), cut at the dead-letter raw limit.
fn raw_line(chunk: &Chunk, offset: i64) -> String {
    let line = chunk.line_at(offset);
    String::from_utf8_lossy(&line[..line.len().min(RAW_BYTES_MAX)]).into_owned()
}

/// The restarts of one run (or one Kafka partition's writer) under the run's
/// [`RestartPolicy`](crate::RestartPolicy) (`IngestConfig::restart`): after a step, a
/// resumable failure re-reads the tables and resumes from them (as a restarted process
/// would), after the policy's pause; a step that succeeds, or that committed something before
/// it failed, is progress.
#[derive(Debug)]
pub(crate) struct StepRestarts(Restarts);

impl StepRestarts {
    pub fn new(config: &IngestConfig) -> Self {
        StepRestarts(Restarts::new(config.restart))
    }

    /// After a step of `ingester` that ended in `result`, with `commits_before` commits made
    /// before it: `true` if it failed and the ingester resumed from the re-read tables;
    /// `false` if it succeeded. A failure that is not resumable, or one past the limit
    /// ([`IngestError::Exhausted`]), is returned.
    pub async fn after_step<L: ReplayLog>(
        &mut self,
        ingester: &mut Ingester<'_, L>,
        result: Result<(), IngestError>,
        commits_before: u64,
    ) -> Result<bool, IngestError> {
        let mut error = match result {
            Ok(()) => {
                self.0.progressed();
                return Ok(false);
            }
            Err(e) => e,
        };
        if ingester.commits() > commits_before {
            self.0.progressed();
        }
        loop {
            let (attempt, pause, failed) = match self.0.after_failure(error) {
                AfterFailure::Resume {
                    attempt,
                    pause,
                    error,
                } => (attempt, pause, error),
                AfterFailure::Fatal(e) => return Err(e),
                AfterFailure::Exhausted(e) => return Err(IngestError::Exhausted(Box::new(e))),
            };
            ingester.summary.restarts += 1;
            if failed.is_conflict() {
                ingester.instruments.restarts_conflict.increment(1);
            } else {
                ingester.instruments.restarts_other.increment(1);
            }
            tracing::warn!(error = %failed, restart = attempt, pause_ms = pause.as_millis() as u64, "re-reading the table and resuming from it");
            tokio::time::sleep(pause).await;
            match ingester.reload().await {
                Ok(()) => return Ok(true),
                Err(e) => error = e,
            }
        }
    }
}
