//! Backfill of a Kafka (sharded) table from its topic: the batch rerun of a range of windows,
//! partition by partition, into each partition's own shard.
//!
//! A partition's windows are recomputed from every message the topic still holds of it, up
//! to its high watermark when the backfill began (`[low, high)`), and published by swap at
//! the partition's shard addresses, exactly as the stream's writer of that partition
//! publishes them (same row key, same winners). Every publication covers `(partition, high)`
//! and moves no `txn` of the stream: a stream that later reads these messages again (it
//! resumes from its own positions) recognises them as published and commits nothing for
//! them, and a second backfill finds every window covered and changes nothing. Each commit
//! carries the shard's fence `txn`, as a stream writer's does: a writer of the same partition
//! committing meanwhile conflicts, re-reads the table and finds the backfilled windows.
//!
//! A topic past its retention no longer holds every event of an old window. Before anything
//! is written, every window in range that the table holds is checked against the partition's
//! first retained offset (the files' statistics of `_sluice_offset`): a window with rows the
//! topic no longer has is refused, never replaced by fewer rows.

use std::collections::BTreeMap;

use deltalake::arrow::datatypes::SchemaRef;
use sluice_publish::{Coverage, TableOptions, WindowTable};
use sluice_source::kafka::{
    partition_bounds, partition_name, BoundedReadError, KafkaOptions, PartitionBounds,
    PartitionReader, PayloadOptionsError, Payloads,
};
use sluice_source::{Chunk, LineDecoder};
use sluice_window::{EventTime, Shard, Window};

use crate::backfill::{recompute, BackfillInput, BackfillProgress, BackfillSummary};
use crate::config::{Clock, IngestConfig, IngestError};
use crate::open::shard_writer_options;
use crate::restart::Restarts;

/// Everything a Kafka backfill needs besides the range and the clock.
#[derive(Clone)]
pub struct KafkaBackfill {
    pub config: IngestConfig,
    /// The topic and how to reach it (the group is never joined: partitions are assigned).
    pub kafka: KafkaOptions,
    /// The table, without a shard: each partition is recomputed in its own shard.
    pub table: TableOptions,
    /// The record schema, to create the table if it does not exist.
    pub record_schema: Option<SchemaRef>,
    pub decoder: LineDecoder,
    /// Names the staged files (each partition adds its number).
    pub attempt: String,
}

#[derive(Debug, thiserror::Error)]
pub enum KafkaBackfillError {
    #[error(transparent)]
    Read(#[from] BoundedReadError),
    #[error(transparent)]
    Payload(#[from] PayloadOptionsError),
    #[error("opening the table failed: {0}")]
    Open(#[from] sluice_publish::OpenError),
    #[error("reading the table's windows of partition {partition} failed: {source}")]
    Table {
        partition: i32,
        source: Box<deltalake::DeltaTableError>,
    },
    #[error("partition {partition}: {source}")]
    Partition { partition: i32, source: IngestError },
    #[error("window {window} of partition {partition} holds rows from offset {first_offset}, but the topic holds that partition's messages only from offset {low} (retention deleted the others): recomputing the window from the topic would drop rows; nothing was written. Backfill a range that starts after that window")]
    Retention {
        partition: i32,
        window: String,
        first_offset: i64,
        low: i64,
    },
    #[error("window {window} of partition {partition}: its files have no statistics of _sluice_offset, so whether the topic (from offset {low}) still holds all its rows is unknown; nothing was written")]
    NoStatistics {
        partition: i32,
        window: String,
        low: i64,
    },
}

/// What a Kafka backfill did: the sum over the partitions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KafkaBackfillSummary {
    pub backfill: BackfillSummary,
    /// Partitions read (those holding messages).
    pub partitions: u64,
    /// Messages read.
    pub messages: u64,
    /// Times a partition was recomputed again after its commit lost a race.
    pub restarts: u64,
}

impl KafkaBackfill {
    /// Recomputes every window whose start is in `[from, to)` from the topic, each partition
    /// into its shard (see the module's documentation); `force`: republish windows already
    /// covered (`--force`).
    pub async fn run(
        &self,
        from: EventTime,
        to: EventTime,
        force: bool,
        clock: &dyn Clock,
        progress: &mut dyn FnMut(BackfillProgress),
    ) -> Result<KafkaBackfillSummary, KafkaBackfillError> {
        let kafka = self.kafka.clone();
        let bounds = tokio::task::spawn_blocking(move || partition_bounds(&kafka))
            .await
            .expect("the metadata request does not panic")?;
        let bounds: Vec<PartitionBounds> = bounds.into_iter().filter(|b| b.high > b.low).collect();
        // Every partition is checked before any is written.
        for b in &bounds {
            if b.low > 0 {
                let mut table = self.open(b.partition).await?;
                self.check_retained(&mut table, b, from, to).await?;
            }
        }
        let total: u64 = bounds.iter().map(|b| (b.high - b.low) as u64).sum();
        let mut summary = KafkaBackfillSummary::default();
        for b in &bounds {
            let mut restarts = Restarts::new(self.config.restart);
            loop {
                let table = self.open(b.partition).await?;
                let payloads = Payloads::new(&self.kafka.payload)?;
                let mut input =
                    PartitionInput::open(&self.kafka, *b, payloads, (summary.messages, total))?;
                let outcome = recompute(
                    &self.config,
                    &mut input,
                    &self.decoder,
                    table,
                    from,
                    to,
                    force,
                    format!("{}-s{}w{}", self.attempt, b.partition, restarts.total()),
                    clock,
                    progress,
                )
                .await;
                match outcome {
                    Ok((s, _)) => {
                        summary.messages += input.read;
                        add(&mut summary.backfill, s);
                        summary.partitions += 1;
                        break;
                    }
                    Err(e) => {
                        let partition = b.partition;
                        let pause = restarts
                            .resume_after(e, "the partition's backfill failed resumably: recomputing it from the re-read table")
                            .map_err(|end| KafkaBackfillError::Partition {
                                partition,
                                source: end.into(),
                            })?;
                        summary.restarts += 1;
                        tokio::time::sleep(pause).await;
                    }
                }
            }
        }
        Ok(summary)
    }

    /// The table as the writer of `partition`'s shard sees it.
    async fn open(&self, partition: i32) -> Result<WindowTable, KafkaBackfillError> {
        let options = shard_writer_options(&self.table, Shard(partition.max(0) as u32));
        Ok(WindowTable::open_or_create(
            &options,
            self.record_schema.as_ref(),
            self.config.layout,
            self.config.window,
        )
        .await?)
    }

    /// Refuses a window in `[from, to)` of the partition's shard with rows below the first
    /// offset the topic still holds.
    async fn check_retained(
        &self,
        table: &mut WindowTable,
        b: &PartitionBounds,
        from: EventTime,
        to: EventTime,
    ) -> Result<(), KafkaBackfillError> {
        let first: BTreeMap<Window, Option<i64>> = table
            .first_offsets(&self.config.pipeline)
            .await
            .map_err(|e| KafkaBackfillError::Table {
                partition: b.partition,
                source: Box::new(e),
            })?;
        let Some((window, offset)) = not_retained(&first, b.low, from, to) else {
            return Ok(());
        };
        let window = table.address(window).label();
        Err(match offset {
            None => KafkaBackfillError::NoStatistics {
                partition: b.partition,
                window,
                low: b.low,
            },
            Some(first_offset) => KafkaBackfillError::Retention {
                partition: b.partition,
                window,
                first_offset,
                low: b.low,
            },
        })
    }
}

/// The first window starting in `[from, to)` whose rows may reach below `low` (the first
/// offset the topic holds), with its lowest offset (`None`: unknown, no statistics).
fn not_retained(
    first: &BTreeMap<Window, Option<i64>>,
    low: i64,
    from: EventTime,
    to: EventTime,
) -> Option<(Window, Option<i64>)> {
    first
        .iter()
        .filter(|(w, _)| w.start() >= from && w.start() < to)
        .find(|(_, offset)| offset.is_none_or(|o| o < low))
        .map(|(w, o)| (*w, *o))
}

/// Adds one partition's backfill to the sum.
fn add(sum: &mut BackfillSummary, s: BackfillSummary) {
    sum.bytes += s.bytes;
    sum.rows += s.rows;
    sum.outside += s.outside;
    sum.rejected += s.rejected;
    crate::expectations::add_violations(&mut sum.expectations, &s.expectations);
    sum.windows_published += s.windows_published;
    sum.windows_unchanged += s.windows_unchanged;
    sum.last_version = s.last_version.or(sum.last_version);
    sum.rejections.absorb(&s.rejections);
    crate::config::add_busy(&mut sum.busy_us, &s.busy_us);
}

/// One partition's messages `[low, high)`, read on a blocking thread.
struct PartitionInput {
    reader: Option<PartitionReader>,
    payloads: Payloads,
    name: String,
    high: i64,
    /// Messages read of this partition, and of those before it.
    read: u64,
    before: u64,
    total: u64,
}

impl PartitionInput {
    /// `before`: messages read of the partitions before it; `total`: of all.
    fn open(
        kafka: &KafkaOptions,
        b: PartitionBounds,
        payloads: Payloads,
        (before, total): (u64, u64),
    ) -> Result<PartitionInput, BoundedReadError> {
        Ok(PartitionInput {
            reader: Some(PartitionReader::open(kafka, b.partition, b.low, b.high)?),
            payloads,
            name: partition_name(&kafka.topic, b.partition),
            high: b.high,
            read: 0,
            before,
            total,
        })
    }
}

impl BackfillInput for PartitionInput {
    async fn next_chunk(&mut self) -> Result<Option<Chunk>, IngestError> {
        let Some(mut reader) = self.reader.take() else {
            return Ok(None);
        };
        let (reader, messages) = tokio::task::spawn_blocking(move || {
            let messages = reader.next_messages();
            (reader, messages)
        })
        .await
        .map_err(|_| IngestError::ReaderGone)?;
        let Some(messages) = messages.map_err(|e| IngestError::KafkaRead(Box::new(e)))? else {
            return Ok(None);
        };
        self.read += messages.len() as u64;
        self.reader = Some(reader);
        // (How long this took is left out of the backfill's busy time, which times decoding
        // the chunk's JSON lines only.)
        let (chunk, _) = self.payloads.chunk(messages).await.map_err(Box::new)?;
        Ok(Some(chunk))
    }

    fn name(&self, _file: u32) -> String {
        self.name.clone()
    }

    fn end(&self) -> Coverage {
        Coverage {
            partition: self.name.clone(),
            offset: self.high,
        }
    }

    fn progress(&self) -> BackfillProgress {
        BackfillProgress::Messages {
            read: self.before + self.read,
            total: self.total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_window::{TimeFormat, WindowSize};

    fn hour(h: u32) -> Window {
        let t = TimeFormat::Rfc3339
            .parse_str(&format!("2026-10-03T{h:02}:00:00Z"))
            .unwrap();
        Window::containing(WindowSize::parse("1h").unwrap(), t)
    }

    /// A window in range with rows below the topic's first offset (or unknown) is found;
    /// windows outside the range, or wholly retained, are not.
    #[test]
    fn a_window_with_rows_the_topic_no_longer_holds_is_found() {
        let first: BTreeMap<Window, Option<i64>> = [
            (hour(1), Some(0)),
            (hour(2), Some(100)),
            (hour(3), Some(99)),
            (hour(4), None),
        ]
        .into_iter()
        .collect();
        let (from, to) = (hour(2).start(), hour(4).start());
        assert_eq!(
            not_retained(&first, 100, from, to),
            Some((hour(3), Some(99)))
        );
        assert_eq!(not_retained(&first, 99, from, to), None);
        assert_eq!(
            not_retained(&first, 0, from, hour(5).start()),
            Some((hour(4), None))
        );
        assert_eq!(
            not_retained(&first, 100, hour(2).start(), hour(3).start()),
            None
        );
    }
}
