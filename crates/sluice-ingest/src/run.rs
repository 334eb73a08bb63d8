use std::collections::{BTreeMap, HashMap};

use deltalake::arrow::array::{RecordBatch, UInt32Array};
use deltalake::arrow::compute::take_record_batch;
use deltalake::arrow::error::ArrowError;
use serde_json::json;
use sluice_publish::{Coverage, Publication, PublishError, Replace, WindowTable};
use sluice_source::{Decoded, LineDecoder, NdjsonSource, Position, SourceError};
use sluice_stage::{StageError, StageOptions, StagedFile, Stager};
use sluice_window::{AddressLayout, Route, Watermark, Window, WindowBook, WindowSize};
use tokio::sync::mpsc;

use crate::buffer::Buffers;
use crate::dedupe::{dedupe, with_positions, KeySpec};
use crate::rejects::{RejectRecord, RejectSink};

/// The caller's clock: sluice's library code never reads the wall clock itself (E5).
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// A clock that always says the same time (tests).
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub i64);

impl Clock for FixedClock {
    fn now_ms(&self) -> i64 {
        self.0
    }
}

/// What one run does.
#[derive(Debug, Clone)]
pub struct IngestConfig {
    /// Names the ingestion; the `txn` appId prefix.
    pub pipeline: String,
    pub window: WindowSize,
    pub layout: AddressLayout,
    pub lateness_ms: i64,
    /// Natural key columns; `None` keys rows by source position.
    pub key: Option<KeySpec>,
    /// Memory budget of all open windows' buffered rows; above it the largest window's rows
    /// are staged as a part.
    pub flush_bytes_max: usize,
    /// Bytes read from the source per chunk.
    pub chunk_bytes: usize,
    /// Decoded chunks waiting between the reader thread and the ingest task.
    pub chunks_in_flight_max: usize,
    pub stage: StageOptions,
    /// Consecutive times a run re-reads the table and resumes from it after a failed publish
    /// or store operation (a conflict with another writer, a commit whose outcome is unknown,
    /// store faults that outlasted their retries) before it gives up with the error.
    pub restarts_max: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("decoding failed: {0}")]
    Decode(#[from] sluice_source::DecodeError),
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error(transparent)]
    Publish(Box<PublishError>),
    #[error("reading the table state failed: {0}")]
    Table(Box<deltalake::DeltaTableError>),
    #[error("arrow failed while routing rows: {0}")]
    Arrow(#[from] ArrowError),
    #[error("writing rejects failed: {0}")]
    Rejects(std::io::Error),
    #[error("the reader thread stopped unexpectedly")]
    ReaderGone,
}

impl IngestError {
    /// Whether re-reading the table and resuming from it may get past this error: conflicts
    /// and moved tables (another writer, or an own commit whose outcome was unknown), and
    /// store failures (which already outlasted their per-operation retries).
    pub fn is_resumable(&self) -> bool {
        match self {
            IngestError::Publish(e) => matches!(
                **e,
                PublishError::Conflict { .. }
                    | PublishError::TableMoved { .. }
                    | PublishError::Delta { .. }
            ),
            IngestError::Stage(e) => {
                matches!(e, StageError::Store { .. } | StageError::Decode { .. })
            }
            IngestError::Table(_) => true,
            _ => false,
        }
    }
}

impl From<PublishError> for IngestError {
    fn from(e: PublishError) -> Self {
        IngestError::Publish(Box::new(e))
    }
}

impl From<deltalake::DeltaTableError> for IngestError {
    fn from(e: deltalake::DeltaTableError) -> Self {
        IngestError::Table(Box::new(e))
    }
}

/// Counts of one run, for the summary line and tests. After a restart from the table
/// (`restarts`), the records it re-reads are counted again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Input bytes read.
    pub bytes: u64,
    /// Records decoded into rows.
    pub rows: u64,
    /// Rows skipped because a publication already handled them (replay after restart).
    pub replayed: u64,
    /// Rows that arrived after their window sealed (republished by the late path).
    pub late: u64,
    /// Records rejected (bad input), with position and reason in the rejects output.
    pub rejected: u64,
    pub windows_published: u64,
    pub commits: u64,
    /// Parts staged early to stay within the memory budget.
    pub parts_flushed: u64,
    /// Times the run re-read the table and resumed from it (conflicts, store faults).
    pub restarts: u64,
    pub last_version: Option<u64>,
}

/// One run of a pipeline over an NDJSON source into a window table.
pub struct Ingester<'a> {
    config: IngestConfig,
    source: NdjsonSource,
    decoder: LineDecoder,
    table: WindowTable,
    stager: Stager,
    clock: &'a dyn Clock,
    rejects: &'a mut dyn RejectSink,
    book: WindowBook<Position>,
    watermark: Watermark,
    buffers: Buffers,
    /// Resume offsets in the table, per file name.
    committed: HashMap<String, i64>,
    /// The next unread position.
    read_position: Position,
    summary: RunSummary,
}

impl<'a> Ingester<'a> {
    /// Recovers the pipeline's state from the table: resume offsets and published windows.
    pub async fn recover(
        config: IngestConfig,
        source: NdjsonSource,
        decoder: LineDecoder,
        table: WindowTable,
        attempt: String,
        clock: &'a dyn Clock,
        rejects: &'a mut dyn RejectSink,
    ) -> Result<Ingester<'a>, IngestError> {
        let stager = Stager::new(table.store(), attempt, config.stage.clone());
        let mut ingester = Ingester {
            watermark: Watermark::new(config.lateness_ms.saturating_mul(1000)),
            buffers: Buffers::new(config.flush_bytes_max),
            book: WindowBook::from_published(std::iter::empty()),
            committed: HashMap::new(),
            read_position: first_unread(&source, &HashMap::new()),
            config,
            source,
            decoder,
            table,
            stager,
            clock,
            rejects,
            summary: RunSummary::default(),
        };
        ingester.read_table_state().await?;
        Ok(ingester)
    }

    /// (Re)builds the resume state from the table alone: committed offsets, published windows
    /// and their coverage; buffered rows are dropped (they are re-read from the source).
    async fn read_table_state(&mut self) -> Result<(), IngestError> {
        let names: Vec<String> = self
            .source
            .files()
            .iter()
            .map(|f| f.name.to_string())
            .collect();
        self.committed = self
            .table
            .resume_offsets(&self.config.pipeline, &names)
            .await?;
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
        self.watermark = Watermark::new(self.config.lateness_ms.saturating_mul(1000));
        Ok(())
    }

    /// Reads the source to its end, publishing every window it seals.
    ///
    /// A resumable failure ([`IngestError::is_resumable`]) makes the run re-read the table and
    /// resume from it, exactly as a restarted process would, up to
    /// [`IngestConfig::restarts_max`] times in a row without a successful commit.
    pub async fn run(mut self) -> Result<(RunSummary, WindowTable), IngestError> {
        let mut failures = 0u32;
        loop {
            let commits_before = self.summary.commits;
            let error = match self.read_to_end().await {
                Ok(()) => return Ok((self.summary, self.table)),
                Err(e) => e,
            };
            if self.summary.commits > commits_before {
                failures = 0;
            }
            let mut error = error;
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

    async fn reload(&mut self) -> Result<(), IngestError> {
        self.table.reload().await?;
        self.read_table_state().await
    }

    async fn read_to_end(&mut self) -> Result<(), IngestError> {
        let (tx, mut rx) = mpsc::channel::<Result<(Decoded, i64, i64), IngestError>>(
            self.config.chunks_in_flight_max.max(1),
        );
        let mut reader = self
            .source
            .reader(&self.committed, self.config.chunk_bytes)?;
        let decoder = self.decoder.clone();
        let thread = std::thread::Builder::new()
            .name("sluice-reader".into())
            .spawn(move || loop {
                let item = match reader.next_chunk() {
                    Ok(Some(chunk)) => decoder
                        .decode(&chunk)
                        .map(|d| (d, chunk.start, chunk.end()))
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
        while let Some(item) = rx.recv().await {
            let (decoded, start, end) = item?;
            self.summary.bytes += (end - start) as u64;
            self.route(decoded, end)?;
            while self.buffers.over_budget() {
                self.flush_largest().await?;
            }
            self.publish_sealed().await?;
        }
        thread.join().map_err(|_| IngestError::ReaderGone)?;
        self.watermark.end_of_input();
        self.publish_sealed().await?;
        Ok(())
    }

    fn route(&mut self, decoded: Decoded, end: i64) -> Result<(), IngestError> {
        let name = self
            .source
            .name(decoded.file)
            .cloned()
            .unwrap_or_else(|| "?".into());
        if !decoded.rejects.is_empty() {
            let records: Vec<RejectRecord> = decoded
                .rejects
                .iter()
                .map(|r| RejectRecord {
                    pipeline: self.config.pipeline.clone(),
                    partition: name.to_string(),
                    offset: r.offset,
                    reason: r.reason.as_str().to_string(),
                    detail: r.reason.detail(),
                    raw: r.raw.clone(),
                })
                .collect();
            self.summary.rejected += records.len() as u64;
            self.rejects.write(&records).map_err(IngestError::Rejects)?;
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
            match self.book.route(window, &position, self.watermark.current()) {
                Route::Replayed => self.summary.replayed += 1,
                route => {
                    if route == Route::Late {
                        self.summary.late += 1;
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
            }
            self.watermark.observe(*t);
        }
        if let Some((w, rows)) = last {
            groups.entry(w).or_default().extend(rows);
        }
        self.summary.rows += decoded.offsets.len() as u64;
        let schema = self.table.file_schema().clone();
        let everything =
            groups.len() == 1 && groups.values().all(|r| r.len() == decoded.offsets.len());
        for (window, mut rows) in groups {
            rows.sort_unstable();
            let offsets: Vec<i64> = rows.iter().map(|i| decoded.offsets[*i as usize]).collect();
            let records = if everything {
                decoded.batch.clone()
            } else {
                take_record_batch(&decoded.batch, &UInt32Array::from(rows))?
            };
            let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
            let batch = with_positions(&schema, &records, &name, offsets)?;
            self.buffers.push(window, batch, &name, first, last);
        }
        self.read_position = Position {
            file: decoded.file,
            offset: end,
        };
        Ok(())
    }

    async fn flush_largest(&mut self) -> Result<(), IngestError> {
        let Some(window) = self.buffers.largest() else {
            return Ok(());
        };
        let batches = self.buffers.take_batches(window);
        let address = self.config.layout.address(window);
        let part = self
            .stager
            .stage(&address, self.table.file_schema(), batches)
            .await?;
        self.buffers.add_part(window, part);
        self.summary.parts_flushed += 1;
        Ok(())
    }

    async fn publish_sealed(&mut self) -> Result<(), IngestError> {
        for window in self.book.sealed(self.watermark.current()) {
            self.publish_window(window).await?;
        }
        Ok(())
    }

    async fn publish_window(&mut self, window: Window) -> Result<(), IngestError> {
        let buffer = self.buffers.remove(window);
        let republish = self.book.is_published(window);
        let address = self.config.layout.address(window);
        let schema = self.table.file_schema().clone();
        let mut intermediates: Vec<StagedFile> = Vec::new();
        let (files, replace) = match &self.config.key {
            None => {
                let mut files = buffer.parts;
                if !buffer.batches.is_empty() {
                    files.push(self.stager.stage(&address, &schema, buffer.batches).await?);
                }
                (
                    files,
                    if republish {
                        Replace::Nothing
                    } else {
                        Replace::Window
                    },
                )
            }
            Some(key) => {
                let mut inputs: Vec<RecordBatch> = Vec::new();
                if republish {
                    for f in self.table.files_at(&address).await? {
                        inputs.extend(self.stager.read(&f.path).await?);
                    }
                }
                for part in &buffer.parts {
                    inputs.extend(self.stager.read(&part.path).await?);
                }
                inputs.extend(buffer.batches);
                let unique = dedupe(&schema, &inputs, key)?;
                intermediates = buffer.parts;
                (
                    vec![self.stager.stage(&address, &schema, vec![unique]).await?],
                    Replace::Window,
                )
            }
        };
        // Rejects below the new resume position must be durable before the commit moves it.
        self.rejects.sync().map_err(IngestError::Rejects)?;
        let resume = self.resume_excluding(window);
        let txns = self.txns_for(resume);
        let coverage_name = self
            .source
            .name(self.read_position.file)
            .map(|n| n.to_string())
            .unwrap_or_default();
        let mut ranges: Vec<_> = buffer.ranges.into_iter().collect();
        ranges.sort();
        let position_ranges = json!(ranges
            .iter()
            .map(|(p, (lo, hi))| json!({"partition": p, "first_offset": lo, "last_offset": hi}))
            .collect::<Vec<_>>());
        let published = self
            .table
            .publish(Publication {
                pipeline: self.config.pipeline.clone(),
                window,
                files,
                replace,
                coverage: Coverage {
                    partition: coverage_name,
                    offset: self.read_position.offset,
                },
                txns: txns.clone(),
                position_ranges,
                published_at_ms: self.clock.now_ms(),
            })
            .await?;
        self.book.mark_published(window, self.read_position);
        for (name, offset) in txns {
            self.committed.insert(name, offset);
        }
        for part in intermediates {
            // Best effort: an intermediate left behind is an orphan that gc removes.
            if let Err(e) = self.stager.delete(&part.path).await {
                tracing::warn!(path = %part.path, error = %e, "could not delete an intermediate part");
            }
        }
        self.summary.windows_published += 1;
        self.summary.commits += 1;
        self.summary.last_version = Some(published.version);
        tracing::info!(
            window = %address.label(),
            version = published.version,
            rows = published.rows,
            files_added = published.files_added,
            files_removed = published.files_removed,
            republish,
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

    /// `(file, offset)` txns that move the committed resume positions up to `resume`.
    fn txns_for(&self, resume: Position) -> Vec<(String, i64)> {
        let mut txns = Vec::new();
        for (i, file) in self.source.files().iter().enumerate() {
            let ordinal = 2 * i as u32 + 1;
            let target = match ordinal.cmp(&resume.file) {
                std::cmp::Ordering::Less => file.len as i64,
                std::cmp::Ordering::Equal => resume.offset,
                std::cmp::Ordering::Greater => break,
            };
            if target > self.committed.get(file.name.as_ref()).copied().unwrap_or(0) {
                txns.push((file.name.to_string(), target));
            }
        }
        txns
    }
}

/// The first position a run reads: the first file not fully consumed, at its resume offset;
/// or the end of the last file when all are.
fn first_unread(source: &NdjsonSource, committed: &HashMap<String, i64>) -> Position {
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
