//! Backfill: recompute a range of windows from a bounded source, the batch rerun of the same
//! definition the stream uses (windows, row keys, dedupe winners), published by the same swap.

use std::collections::{BTreeMap, HashMap};

use deltalake::arrow::array::UInt32Array;
use deltalake::arrow::compute::take_record_batch;
use serde_json::json;
use sluice_publish::{Coverage, Publication, Replace, WindowTable};
use sluice_source::{LineDecoder, NdjsonSource};
use sluice_stage::Stager;
use sluice_window::{EventTime, Window};

use crate::buffer::{read_rows, Buffers};
use crate::config::{Clock, IngestConfig, IngestError};
use crate::dedupe::with_positions;
use crate::publish::unique_rows;

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
    pub windows_published: u64,
    /// Windows whose publication already covers the whole source: left as they are.
    pub windows_unchanged: u64,
    pub last_version: Option<u64>,
}

/// Progress of a backfill, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackfillProgress {
    /// Bytes read of the source's total.
    Read { bytes: u64, total: u64 },
    /// Windows published (or left unchanged) of those in range with rows.
    Published { done: u64, total: u64 },
}

/// Recomputes every window whose start is in `[from, to)` from the whole of `source`, and
/// publishes each by swap (rows deduped by the configured row key), without moving the
/// stream's offsets. Its publications cover the whole source, so a stream that later replays
/// these events recognises them; a window whose publication already covers the whole source is
/// left unchanged (running a backfill twice changes nothing) unless `force` (the one-window
/// `rewrite` command). Windows in range without events in the source are left as they are.
#[allow(clippy::too_many_arguments)]
pub async fn backfill(
    config: &IngestConfig,
    source: &NdjsonSource,
    decoder: &LineDecoder,
    mut table: WindowTable,
    from: EventTime,
    to: EventTime,
    force: bool,
    attempt: String,
    clock: &dyn Clock,
    progress: &mut dyn FnMut(BackfillProgress),
) -> Result<(BackfillSummary, WindowTable), IngestError> {
    let mut summary = BackfillSummary::default();
    let mut stager = Stager::new(table.store(), attempt, config.stage_options());
    let mut decoder = decoder.clone();
    if let Some(key) = &config.key {
        decoder.set_key(key.columns.clone())?;
    }
    table
        .grow_schema(decoder.schema())
        .map_err(|e| IngestError::Schema(Box::new(e)))?;
    let mut schema = table.staging_schema().clone();
    let mut buffers = Buffers::new(config.flush_bytes_max);
    let total: u64 = source.files().iter().map(|f| f.len).sum();
    let mut reader = source.reader(&HashMap::new(), config.chunk_bytes)?;
    while let Some(chunk) = reader.next_chunk()? {
        let decoded = decoder.decode(&chunk)?;
        if !decoded.added.is_empty() {
            // New fields: the table grows by them with the first window published.
            table
                .grow_schema(&decoded.batch.schema())
                .map_err(|e| IngestError::Schema(Box::new(e)))?;
            schema = table.staging_schema().clone();
            decoder.set_schema(crate::dedupe::record_fields(&schema))?;
        }
        summary.bytes += chunk.data.len() as u64;
        summary.rejected += decoded.rejects.len() as u64;
        let name = source
            .name(decoded.file)
            .cloned()
            .unwrap_or_else(|| "?".into());
        let mut groups: BTreeMap<Window, Vec<u32>> = BTreeMap::new();
        for (i, t) in decoded.event_times.iter().enumerate() {
            let window = Window::containing(config.window, *t);
            if window.start() >= from && window.start() < to {
                groups.entry(window).or_default().push(i as u32);
            } else {
                summary.outside += 1;
            }
        }
        for (window, rows) in groups {
            summary.rows += rows.len() as u64;
            let offsets: Vec<i64> = rows.iter().map(|i| decoded.offsets[*i as usize]).collect();
            let records = take_record_batch(&decoded.batch, &UInt32Array::from(rows))?;
            let records =
                sluice_stage::align_batch(&records, &crate::dedupe::record_fields(&schema))?;
            let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
            let batch = with_positions(&schema, &records, &name, offsets)?;
            buffers.push(window, batch, &name, first, last);
        }
        while buffers.over_budget() {
            let Some(window) = buffers.largest() else {
                break;
            };
            let batches = buffers.take_batches(window);
            let address = table.address(window);
            let part = stager.stage(&address, &schema, batches).await?;
            buffers.add_part(
                window,
                crate::buffer::Part {
                    file: part,
                    bucket: None,
                },
            );
        }
        progress(BackfillProgress::Read {
            bytes: summary.bytes,
            total,
        });
    }

    let last = source.files().last().expect("a source has a file");
    let coverage = Coverage {
        partition: last.name.to_string(),
        offset: last.len as i64,
    };
    let covered: HashMap<Window, Coverage> = table
        .published_windows(&config.pipeline)
        .await?
        .into_iter()
        .map(|p| (p.window, p.coverage))
        .collect();
    let windows = buffers.windows();
    let n = windows.len() as u64;
    for (done, window) in windows.into_iter().enumerate() {
        let buffer = buffers.remove(window);
        if !force && covered.get(&window).is_some_and(|c| *c >= coverage) {
            summary.windows_unchanged += 1;
        } else {
            let address = table.address(window);
            let inputs = read_rows(&stager, &buffer.parts, buffer.batches).await?;
            let rows = unique_rows(&schema, &inputs, config.key.as_ref())?;
            let file = stager.stage(&address, &schema, vec![rows]).await?;
            let mut ranges: Vec<_> = buffer.ranges.iter().collect();
            ranges.sort();
            let published = table
                .publish(Publication {
                    pipeline: config.pipeline.clone(),
                    window,
                    files: vec![file],
                    replace: Replace::Window,
                    coverage: coverage.clone(),
                    txns: Vec::new(),
                    position_ranges: json!(ranges
                        .iter()
                        .map(|(p, (lo, hi))| json!({"partition": p, "first_offset": lo, "last_offset": hi, "backfill": true}))
                        .collect::<Vec<_>>()),
                    published_at_ms: clock.now_ms(),
                })
                .await?;
            summary.windows_published += 1;
            summary.last_version = Some(published.version);
            tracing::info!(window = %address.label(), version = published.version, rows = published.rows, "backfilled");
        }
        for part in buffer.parts.iter().map(|p| &p.file) {
            if let Err(e) = stager.delete(&part.path).await {
                tracing::warn!(path = %part.path, error = %e, "could not delete an intermediate part");
            }
        }
        progress(BackfillProgress::Published {
            done: done as u64 + 1,
            total: n,
        });
    }
    Ok((summary, table))
}
