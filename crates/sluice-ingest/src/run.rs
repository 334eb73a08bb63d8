use std::collections::{BTreeMap, BTreeSet, HashMap};

use deltalake::arrow::array::UInt32Array;
use deltalake::arrow::compute::take_record_batch;
use deltalake::arrow::datatypes::SchemaRef;
use sluice_publish::{shard_sealed_txn, DeadLetter, DeadLetterTable, WindowTable};
use sluice_source::{Chunk, Decoded, LineDecoder, NdjsonSource, Position, RAW_BYTES_MAX};
use sluice_stage::{align_batch, Stager};
use sluice_window::{EventTime, Observed, Route, Watermark, WatermarkState, Window, WindowBook};
use tokio::sync::mpsc;

use crate::buffer::Buffers;
use crate::config::{Clock, IngestConfig, IngestError, LatePolicy, RunSummary};
use crate::dedupe::{record_fields, with_positions};
use crate::derive::Deriver;
use crate::follow::Follow;

/// The `txn` partition name under which the watermark's input is stored: the largest event
/// time read before the resume position. A leading dot: NDJSON sources skip hidden files, so
/// no source partition can have this name.
pub(crate) const MAX_EVENT_TIME_TXN: &str = ".max_event_time_us";

/// The `txn` partition name of the clock-skew guard's state at the resume position (see
/// [`sluice_window::SkewGuard`]; [`WatermarkState::ahead_code`]): ahead events in a row, and
/// the earliest of them. It goes down as well as up (`sluice_publish::STATE_TXN_PREFIX`).
pub(crate) const AHEAD_TXN: &str = ".state.ahead";

/// One run of a pipeline over an NDJSON source into a window table.
pub struct Ingester<'a> {
    pub(crate) config: IngestConfig,
    pub(crate) source: NdjsonSource,
    /// Decodes the source's records; its schema grows with the records' new fields (schema
    /// evolution), and a reload resets it to the table's (plus `declared`).
    pub(crate) decoder: LineDecoder,
    /// The record schema the run started with (the table's, or what a schema file adds to
    /// it): a reload grows the re-read table's schema by it again.
    declared: SchemaRef,
    /// The schema of the rows this run buffers and stages: the record fields (the table's,
    /// grown by the records read) and the position columns.
    pub(crate) file_schema: SchemaRef,
    pub(crate) table: WindowTable,
    pub(crate) dlq: DeadLetterTable,
    pub(crate) stager: Stager,
    pub(crate) clock: &'a dyn Clock,
    pub(crate) book: WindowBook<Position>,
    pub(crate) watermark: Watermark,
    /// Per open window: the watermark's input before its first held event (what the
    /// watermark must be restored to if the stream resumes at that event).
    pub(crate) max_before_hold: HashMap<Window, WatermarkState>,
    pub(crate) buffers: Buffers,
    /// Resume offsets in the table, per file name.
    pub(crate) committed: HashMap<String, i64>,
    /// The largest event time before the committed resume position, as stored in the table.
    pub(crate) committed_max_event_us: Option<i64>,
    /// The skew guard's state at the committed resume position
    /// ([`WatermarkState::ahead_code`]).
    pub(crate) committed_ahead: Option<i64>,
    /// Open windows holding events far ahead of the stream: published on their own after the
    /// late batch interval (the watermark may never reach them).
    pub(crate) ahead_windows: BTreeSet<Window>,
    /// In a sharded table, the shard's sealed-through `txn` ([`shard_sealed_txn`]) and its
    /// committed value: how far this shard has sealed, for readers of the table.
    pub(crate) sealed_txn: Option<String>,
    pub(crate) committed_sealed_us: Option<i64>,
    /// Per file name: every dead letter below this offset is in the dead-letter table.
    pub(crate) dead_committed: HashMap<String, i64>,
    /// Dead letters read but not yet committed.
    pub(crate) dead_pending: Vec<DeadLetter>,
    /// The next unread position.
    pub(crate) read_position: Position,
    /// Per file name, where the next read of it starts (the end of the last chunk read).
    pub(crate) cursors: HashMap<String, i64>,
    /// Published windows holding late rows, with the (processing) time the first of them was
    /// read: they are republished once [`IngestConfig::late_batch_ms`] has passed.
    pub(crate) late_since_ms: HashMap<Window, i64>,
    /// Set when every held window must publish now (end of input, idle seal), late batches
    /// included.
    pub(crate) draining: bool,
    /// The pipeline's derived tables, recomputed after each raw commit.
    pub(crate) deriver: Option<Deriver>,
    /// The `txn` partition name of the watermark's input ([`MAX_EVENT_TIME_TXN`]); in a
    /// sharded table, each shard has its own (`<source partition>/.max_event_time_us`), as
    /// each has its own watermark.
    pub(crate) watermark_txn: String,
    /// The `txn` partition name of the skew guard's state ([`AHEAD_TXN`]; per shard in a
    /// sharded table).
    pub(crate) ahead_txn: String,
    pub(crate) summary: RunSummary,
    /// A publication whose file is still being staged on a task of its own (at most one);
    /// it commits before any other commit of the run.
    pub(crate) pending: Option<crate::publish::Pending>,
}

impl<'a> Ingester<'a> {
    /// Recovers the pipeline's state from the tables: resume offsets, watermark, published
    /// windows and dead-letter offsets.
    pub async fn recover(
        config: IngestConfig,
        source: NdjsonSource,
        decoder: LineDecoder,
        table: WindowTable,
        dlq: DeadLetterTable,
        attempt: String,
        clock: &'a dyn Clock,
    ) -> Result<Ingester<'a>, IngestError> {
        if matches!(config.mode, crate::config::PublishMode::Merge(_)) && config.key.is_none() {
            return Err(IngestError::MergeNeedsKey);
        }
        // Records without the row key are dead letters, whatever the decoder was built with.
        let mut decoder = decoder;
        if let Some(key) = &config.key {
            decoder.set_key(key.columns.clone())?;
        }
        let stager = Stager::new(table.store(), attempt, config.stage_options());
        let per_shard = |name: &str| match (table.shard(), source.files().first()) {
            (Some(_), Some(f)) => format!("{}/{name}", f.name),
            _ => name.to_string(),
        };
        let watermark_txn = per_shard(MAX_EVENT_TIME_TXN);
        let ahead_txn = per_shard(AHEAD_TXN);
        let declared = decoder.schema().clone();
        let file_schema = table.file_schema().clone();
        let mut ingester = Ingester {
            watermark: Watermark::new(config.lateness_ms.saturating_mul(1000))
                .with_guard(config.skew),
            buffers: Buffers::new(config.flush_bytes_max),
            book: WindowBook::from_published(std::iter::empty()),
            max_before_hold: HashMap::new(),
            committed: HashMap::new(),
            committed_max_event_us: None,
            committed_ahead: None,
            ahead_windows: BTreeSet::new(),
            sealed_txn: table.shard().map(shard_sealed_txn),
            committed_sealed_us: None,
            dead_committed: HashMap::new(),
            dead_pending: Vec::new(),
            read_position: first_unread(&source, &HashMap::new()),
            cursors: HashMap::new(),
            late_since_ms: HashMap::new(),
            draining: false,
            deriver: None,
            watermark_txn,
            ahead_txn,
            config,
            source,
            decoder,
            declared,
            file_schema,
            table,
            dlq,
            stager,
            clock,
            summary: RunSummary::default(),
            pending: None,
        };
        ingester.read_table_state().await?;
        Ok(ingester)
    }

    /// (Re)builds the resume state from the tables alone: committed offsets, the watermark,
    /// published windows and their coverage, dead-letter offsets; buffered rows and pending
    /// dead letters are dropped (they are re-read from the source).
    async fn read_table_state(&mut self) -> Result<(), IngestError> {
        let mut names: Vec<String> = self
            .source
            .files()
            .iter()
            .map(|f| f.name.to_string())
            .collect();
        self.dead_committed = self
            .dlq
            .committed_offsets(&self.config.pipeline, &names)
            .await?;
        names.push(self.watermark_txn.clone());
        names.push(self.ahead_txn.clone());
        names.extend(self.sealed_txn.clone());
        let mut committed = self
            .table
            .resume_offsets(&self.config.pipeline, &names)
            .await?;
        self.committed_max_event_us = committed.remove(&self.watermark_txn);
        self.committed_ahead = committed.remove(&self.ahead_txn);
        self.committed_sealed_us = match &self.sealed_txn {
            Some(name) => committed.remove(name),
            None => None,
        };
        self.source.check_append_only(&committed)?;
        self.cursors = committed.clone();
        self.committed = committed;
        let published = self.table.published_windows(&self.config.pipeline).await?;
        let source = &self.source;
        self.book = WindowBook::from_published(published.into_iter().map(|p| {
            (
                p.window,
                source.position_of(&p.coverage.partition, p.coverage.offset),
            )
        }));
        self.read_position = first_unread(&self.source, &self.committed);
        self.buffers = Buffers::new(self.config.flush_bytes_max);
        self.max_before_hold.clear();
        self.late_since_ms.clear();
        self.ahead_windows.clear();
        self.draining = false;
        self.dead_pending.clear();
        self.watermark = Watermark::new(self.config.lateness_ms.saturating_mul(1000))
            .with_guard(self.config.skew)
            .resumed(
                WatermarkState {
                    max_seen: self.committed_max_event_us.map(EventTime::from_micros),
                    ..WatermarkState::default()
                }
                .with_ahead_code(self.committed_ahead.unwrap_or(0)),
            );
        // The table's columns (another writer may have added some), grown by what this run
        // declared; what the records add is added again as they are re-read.
        self.table
            .grow_schema(&self.declared)
            .map_err(|e| IngestError::Schema(Box::new(e)))?;
        self.adopt_table_schema()?;
        Ok(())
    }

    /// Decodes and stages with the table's (staging) schema from now on.
    fn adopt_table_schema(&mut self) -> Result<(), IngestError> {
        self.file_schema = self.table.staging_schema().clone();
        let record = record_fields(&self.file_schema);
        self.decoder.set_schema(record)?;
        Ok(())
    }

    /// The records of `decoded` have fields the table lacks (schema evolution): the table
    /// grows by them with its next commit.
    fn grow(&mut self, decoded: &Decoded) -> Result<(), IngestError> {
        let record = decoded.batch.schema();
        let added = self
            .table
            .grow_schema(&record)
            .map_err(|e| IngestError::Schema(Box::new(e)))?;
        self.adopt_table_schema()?;
        if !added.is_empty() {
            let at = decoded.offsets.first().copied().unwrap_or_default();
            let name = self
                .source
                .name(decoded.file)
                .map(|n| n.to_string())
                .unwrap_or_default();
            tracing::info!(fields = %added.join(", "), source = %name, near_offset = at, "new fields: the table grows by these columns with its next commit");
            for f in added {
                if !self.summary.fields_added.contains(&f) {
                    self.summary.fields_added.push(f);
                }
            }
        }
        Ok(())
    }

    /// Keeps `deriver`'s derived tables from now on: first brings them up to the raw table
    /// (recomputing what changed since they last settled), then recomputes a window's
    /// derived rows after each raw commit that changes it.
    pub async fn with_deriver(mut self, mut deriver: Deriver) -> Result<Self, IngestError> {
        deriver
            .catch_up(&mut self.table, self.clock.now_ms())
            .await?;
        self.deriver = Some(deriver);
        Ok(self)
    }

    /// Reads the source to its end, publishing every window it seals.
    ///
    /// A resumable failure ([`IngestError::is_resumable`]) makes the run re-read the tables and
    /// resume from them, exactly as a restarted process would, up to
    /// [`IngestConfig::restarts_max`] times in a row without a successful commit.
    pub async fn run(self) -> Result<(RunSummary, WindowTable), IngestError> {
        self.drive(None).await
    }

    /// Follows the source (opened with [`NdjsonSource::open_following`]) until
    /// [`Follow::stop`] says so or it stayed idle for [`Follow::until_idle_ms`]; see
    /// [`Follow`]. Resumable failures are handled as in [`Ingester::run`].
    pub async fn follow(self, follow: Follow) -> Result<(RunSummary, WindowTable), IngestError> {
        self.drive(Some(follow)).await
    }

    async fn drive(
        mut self,
        mut follow: Option<Follow>,
    ) -> Result<(RunSummary, WindowTable), IngestError> {
        let mut failures = 0u32;
        loop {
            let commits_before = self.summary.commits + self.summary.dead_letter_commits;
            let outcome = match follow.as_mut() {
                None => self.read_to_end().await,
                Some(f) => self.follow_until_stopped(f).await,
            };
            let outcome = match (outcome, self.deriver.as_mut()) {
                (Ok(()), Some(d)) => d.settle(self.clock.now_ms()).await.map_err(Into::into),
                (outcome, _) => outcome,
            };
            if let Some(d) = &self.deriver {
                self.summary.derived = d.summary.clone();
            }
            let mut error = match outcome {
                Ok(()) => return Ok((self.summary, self.table)),
                Err(e) => e,
            };
            if self.summary.commits + self.summary.dead_letter_commits > commits_before {
                failures = 0;
            }
            loop {
                if !error.is_resumable() || failures >= self.config.restarts_max {
                    return Err(error);
                }
                failures += 1;
                self.summary.restarts += 1;
                tracing::warn!(error = %error, restart = failures, "re-reading the table and resuming from it");
                match self.reload().await {
                    Ok(()) => break,
                    Err(e) => error = e,
                }
            }
        }
    }

    pub(crate) async fn reload(&mut self) -> Result<(), IngestError> {
        // A publication still staging is dropped (its task stopped): the table decides.
        self.pending = None;
        self.table.reload().await?;
        self.dlq.reload().await?;
        self.read_table_state().await?;
        if let Some(d) = self.deriver.as_mut() {
            d.catch_up(&mut self.table, self.clock.now_ms()).await?;
        }
        Ok(())
    }

    async fn read_to_end(&mut self) -> Result<(), IngestError> {
        self.read_pass(None).await?;
        self.drain().await
    }

    /// Seals and publishes every held window (late batches included), then commits the
    /// pending dead letters.
    pub(crate) async fn drain(&mut self) -> Result<(), IngestError> {
        self.watermark.end_of_input();
        self.draining = true;
        self.publish_sealed().await?;
        self.commit_dead_letters().await
    }

    /// Reads what the source holds now, from the cursors, routing and publishing as it goes;
    /// returns the bytes read. Stops early, between chunks, once `stop` says so.
    pub(crate) async fn read_pass(
        &mut self,
        stop: Option<&tokio::sync::watch::Receiver<bool>>,
    ) -> Result<u64, IngestError> {
        type Item = Result<(Decoded, Chunk), IngestError>;
        let (tx, mut rx) = mpsc::channel::<Item>(self.config.chunks_in_flight_max.max(1));
        let mut reader = self.source.reader(&self.cursors, self.config.chunk_bytes)?;
        let mut decoder = self.decoder.clone();
        let thread = std::thread::Builder::new()
            .name("sluice-reader".into())
            .spawn(move || loop {
                let item = match reader.next_chunk() {
                    Ok(Some(chunk)) => decoder
                        .decode(&chunk)
                        .map(|d| (d, chunk))
                        .map_err(IngestError::from),
                    Ok(None) => return,
                    Err(e) => Err(e.into()),
                };
                let stop = item.is_err();
                if tx.blocking_send(item).is_err() || stop {
                    return;
                }
            })
            .map_err(|_| IngestError::ReaderGone)?;
        let mut bytes = 0u64;
        while let Some(item) = rx.recv().await {
            let (decoded, chunk) = item?;
            bytes += chunk.data.len() as u64;
            self.take(decoded, &chunk).await?;
            if stop.is_some_and(|s| *s.borrow()) {
                break;
            }
        }
        // Dropping the receiver ends the reader thread at its next chunk.
        drop(rx);
        thread.join().map_err(|_| IngestError::ReaderGone)?;
        self.summary.bytes += bytes;
        Ok(bytes)
    }

    /// Takes one decoded chunk: routes its rows to their windows, stages parts while the
    /// buffers are over budget, and publishes the windows that sealed.
    pub(crate) async fn take(
        &mut self,
        decoded: Decoded,
        chunk: &Chunk,
    ) -> Result<(), IngestError> {
        if let Some(name) = self.source.name(chunk.file) {
            self.cursors.insert(name.to_string(), chunk.end());
        }
        // The decoder (this run's, or the reader thread's copy) grew the schema by fields the
        // table lacks: the table grows by them with its next commit.
        if decoded.batch.schema().fields() != record_fields(&self.file_schema).fields() {
            self.grow(&decoded)?;
        }
        self.route(decoded, chunk)?;
        while self.buffers.over_budget() {
            self.flush_largest().await?;
        }
        self.publish_sealed_overlapping().await
    }

    fn route(&mut self, decoded: Decoded, chunk: &Chunk) -> Result<(), IngestError> {
        let name = self
            .source
            .name(decoded.file)
            .cloned()
            .unwrap_or_else(|| "?".into());
        let dead_below = self.dead_committed.get(name.as_ref()).copied().unwrap_or(0);
        if decoded.ignored_rows > 0 {
            self.summary.rows_with_ignored_fields += decoded.ignored_rows;
            for (f, n) in &decoded.ignored {
                *self.summary.ignored_fields.entry(f.clone()).or_default() += n;
            }
        }
        for r in &decoded.rejects {
            self.summary.rejected += 1;
            if r.offset < dead_below {
                continue; // in the dead-letter table already (a replay)
            }
            self.dead_pending.push(DeadLetter {
                source: name.to_string(),
                offset: r.offset,
                reason: r.reason.as_str().to_string(),
                detail: r.reason.detail(),
                raw: r.raw.clone(),
                window: None,
            });
        }
        let size = self.config.window;
        let mut groups: BTreeMap<Window, Vec<u32>> = BTreeMap::new();
        let mut last: Option<(Window, Vec<u32>)> = None;
        for (i, (t, offset)) in decoded.event_times.iter().zip(&decoded.offsets).enumerate() {
            let window = Window::containing(size, *t);
            let position = Position {
                file: decoded.file,
                offset: *offset,
            };
            let wm = self.watermark.current();
            let route = self.book.route(window, &position, wm);
            let keep = match route {
                Route::Replayed => {
                    self.summary.replayed += 1;
                    false
                }
                Route::Buffer => true,
                Route::Late => {
                    self.summary.late += 1;
                    let too_late = self.config.max_rewrite_age_ms.is_some_and(|age| {
                        window
                            .end()
                            .as_micros()
                            .saturating_add(age.saturating_mul(1000))
                            < wm.as_micros()
                    });
                    let reason = if too_late {
                        Some("too_late")
                    } else if self.config.late == LatePolicy::Drop {
                        Some("late")
                    } else {
                        None
                    };
                    match reason {
                        None => true,
                        Some(reason) => {
                            self.summary.late_dead_lettered += 1;
                            if *offset >= dead_below {
                                let label = self.table.address(window).label();
                                self.dead_pending.push(DeadLetter {
                                    source: name.to_string(),
                                    offset: *offset,
                                    reason: reason.to_string(),
                                    detail: format!(
                                        "event time {} is in window {label}, which the watermark {} passed",
                                        t.to_rfc3339(),
                                        wm.to_rfc3339()
                                    ),
                                    raw: raw_line(chunk, *offset),
                                    window: Some(label),
                                });
                            }
                            false
                        }
                    }
                }
            };
            if keep {
                if !self.book.is_open(window) {
                    self.max_before_hold.insert(window, self.watermark.state());
                    if route == Route::Late {
                        self.late_since_ms.insert(window, self.clock.now_ms());
                    }
                }
                self.book.hold(window, &position);
                // Events mostly arrive in time order: keep the current window's rows
                // aside instead of a map lookup per row.
                match &mut last {
                    Some((w, rows)) if *w == window => rows.push(i as u32),
                    _ => {
                        if let Some((w, rows)) = last.take() {
                            groups.entry(w).or_default().extend(rows);
                        }
                        last = Some((window, vec![i as u32]));
                    }
                }
            }
            if self.watermark.observe(*t) == Observed::Ahead && keep && route == Route::Buffer {
                // Far ahead of the stream: its window is published on its own (after the
                // late batch), not when the watermark reaches it, which it may never do.
                self.summary.ahead += 1;
                self.ahead_windows.insert(window);
                self.late_since_ms
                    .entry(window)
                    .or_insert_with(|| self.clock.now_ms());
            }
        }
        if let Some((w, rows)) = last {
            groups.entry(w).or_default().extend(rows);
        }
        self.summary.rows += decoded.offsets.len() as u64;
        let schema = self.file_schema.clone();
        let record_schema = record_fields(&schema);
        // Rows decoded before this run grew the schema (the reader decodes ahead).
        let batch = if decoded.batch.schema().fields() == record_schema.fields() {
            decoded.batch
        } else {
            align_batch(&decoded.batch, &record_schema)?
        };
        let everything =
            groups.len() == 1 && groups.values().all(|r| r.len() == decoded.offsets.len());
        for (window, mut rows) in groups {
            rows.sort_unstable();
            let offsets: Vec<i64> = rows.iter().map(|i| decoded.offsets[*i as usize]).collect();
            let records = if everything {
                batch.clone()
            } else {
                take_record_batch(&batch, &UInt32Array::from(rows))?
            };
            let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
            let batch = with_positions(&schema, &records, &name, offsets)?;
            self.buffers.push(window, batch, &name, first, last);
        }
        self.read_position = Position {
            file: decoded.file,
            offset: chunk.end(),
        };
        Ok(())
    }
}

/// The line at `offset` of `chunk`, as text (lossy), cut at the dead-letter raw limit.
fn raw_line(chunk: &Chunk, offset: i64) -> String {
    let line = chunk.line_at(offset);
    String::from_utf8_lossy(&line[..line.len().min(RAW_BYTES_MAX)]).into_owned()
}

/// The first position a run reads: the first file not fully consumed, at its resume offset;
/// or the end of the last file when all are.
pub(crate) fn first_unread(source: &NdjsonSource, committed: &HashMap<String, i64>) -> Position {
    for (i, f) in source.files().iter().enumerate() {
        let offset = committed.get(f.name.as_ref()).copied().unwrap_or(0);
        if (offset as u64) < f.len {
            return Position {
                file: 2 * i as u32 + 1,
                offset,
            };
        }
    }
    let last = source.files().len() - 1;
    Position {
        file: 2 * last as u32 + 1,
        offset: source.files()[last].len as i64,
    }
}
