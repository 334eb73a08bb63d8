//! A bounded read of a topic's partitions, outside any consumer group: what a backfill reads.
//! Each partition is read from one offset to an end fixed before reading starts (the high
//! watermark when the backfill began), so the read ends even while producers go on writing.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::{KafkaOptions, RawMessage};

/// How long a metadata or watermark request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a bounded read waits for its next message before it gives up: the broker
/// reported the messages up to the end as present, so a silence this long is a fault.
pub const STALL_MS_MAX: u64 = 60_000;

#[derive(Debug, thiserror::Error)]
pub enum BoundedReadError {
    #[error("cannot create a Kafka client for {brokers}: {source}")]
    Create {
        brokers: String,
        source: Box<KafkaError>,
    },
    #[error("reading the partitions of topic {topic} failed: {source}")]
    Metadata {
        topic: String,
        source: Box<KafkaError>,
    },
    #[error("topic {topic} does not exist (the broker knows no partition of it)")]
    NoTopic { topic: String },
    #[error("reading the offset range of {topic}/{partition} failed: {source}")]
    Watermarks {
        topic: String,
        partition: i32,
        source: Box<KafkaError>,
    },
    #[error("assigning {topic}/{partition} at offset {offset} failed: {source}")]
    Assign {
        topic: String,
        partition: i32,
        offset: i64,
        source: Box<KafkaError>,
    },
    #[error("reading {topic}/{partition} failed at offset {offset}: {source}")]
    Read {
        topic: String,
        partition: i32,
        offset: i64,
        source: Box<KafkaError>,
    },
    #[error("reading {topic}/{partition} stalled: no message for {stall_ms} ms at offset {offset} of [{from}, {end})")]
    Stalled {
        topic: String,
        partition: i32,
        offset: i64,
        from: i64,
        end: i64,
        stall_ms: u64,
    },
}

/// A partition's offsets when it was asked: `[low, high)` are the messages it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionBounds {
    pub partition: i32,
    /// The first offset the partition still holds (retention deleted those below).
    pub low: i64,
    /// The offset its next message will take (the high watermark).
    pub high: i64,
}

fn client(options: &KafkaOptions) -> Result<BaseConsumer, BoundedReadError> {
    // The group is never joined nor committed to: assign() reads without it. An offset the
    // partition no longer holds (retention deleted it while the backfill read) is an error,
    // never a jump to the partition's end: reading fewer messages than the range holds would
    // recompute windows with rows missing.
    let config =
        super::consumer::client_config(options, &[("auto.offset.reset", "error".to_string())]);
    config.create().map_err(|source| BoundedReadError::Create {
        brokers: options.brokers.clone(),
        source: Box::new(source),
    })
}

/// Every partition of the topic with its offset range now, in partition order (blocking).
pub fn partition_bounds(options: &KafkaOptions) -> Result<Vec<PartitionBounds>, BoundedReadError> {
    let consumer = client(options)?;
    let topic = &options.topic;
    let metadata = consumer
        .fetch_metadata(Some(topic), REQUEST_TIMEOUT)
        .map_err(|source| BoundedReadError::Metadata {
            topic: topic.clone(),
            source: Box::new(source),
        })?;
    let mut partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        return Err(BoundedReadError::NoTopic {
            topic: topic.clone(),
        });
    }
    partitions.sort_unstable();
    partitions
        .into_iter()
        .map(|partition| {
            let (low, high) = consumer
                .fetch_watermarks(topic, partition, REQUEST_TIMEOUT)
                .map_err(|source| BoundedReadError::Watermarks {
                    topic: topic.clone(),
                    partition,
                    source: Box::new(source),
                })?;
            Ok(PartitionBounds {
                partition,
                low,
                high,
            })
        })
        .collect()
}

/// Reads one partition's messages `[from, end)` in order, in deliveries of at most
/// [`KafkaOptions::chunk_messages_max`] messages (blocking calls: run it off the async
/// workers). Offsets may have gaps (compacted topics, transaction markers): the read ends at
/// the first message at or past `end`, or when the consumer's position reaches it.
pub struct PartitionReader {
    consumer: BaseConsumer,
    topic: String,
    partition: i32,
    from: i64,
    end: i64,
    /// The offset after the last message handed over.
    next: i64,
    chunk_messages_max: usize,
    /// Read each message's key, timestamp and headers too.
    meta: bool,
}

impl PartitionReader {
    pub fn open(
        options: &KafkaOptions,
        partition: i32,
        from: i64,
        end: i64,
    ) -> Result<PartitionReader, BoundedReadError> {
        let consumer = client(options)?;
        let mut tpl = TopicPartitionList::new();
        let assigned = tpl
            .add_partition_offset(&options.topic, partition, Offset::Offset(from))
            .and_then(|()| consumer.assign(&tpl));
        assigned.map_err(|source| BoundedReadError::Assign {
            topic: options.topic.clone(),
            partition,
            offset: from,
            source: Box::new(source),
        })?;
        Ok(PartitionReader {
            consumer,
            topic: options.topic.clone(),
            partition,
            from,
            end,
            next: from,
            chunk_messages_max: options.chunk_messages_max.max(1),
            meta: options.payload.meta,
        })
    }

    /// The next messages, or `None` once the read reached its end.
    pub fn next_messages(&mut self) -> Result<Option<Vec<RawMessage>>, BoundedReadError> {
        let mut messages: Vec<RawMessage> = Vec::new();
        let mut last = Instant::now();
        while self.next < self.end && messages.len() < self.chunk_messages_max {
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) if m.topic() == self.topic && m.partition() == self.partition => {
                    last = Instant::now();
                    if m.offset() < self.next {
                        continue;
                    }
                    self.next = m.offset() + 1;
                    if m.offset() < self.end {
                        messages.push(super::consumer::raw_message(&m, self.meta));
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(source)) => {
                    return Err(BoundedReadError::Read {
                        topic: self.topic.clone(),
                        partition: self.partition,
                        offset: self.next,
                        source: Box::new(source),
                    })
                }
                None => {
                    // Past the last message below `end` when only markers follow it.
                    if self.position().is_some_and(|p| p >= self.end) {
                        self.next = self.end;
                    } else if !messages.is_empty() {
                        break;
                    } else if last.elapsed() >= Duration::from_millis(STALL_MS_MAX) {
                        return Err(BoundedReadError::Stalled {
                            topic: self.topic.clone(),
                            partition: self.partition,
                            offset: self.next,
                            from: self.from,
                            end: self.end,
                            stall_ms: STALL_MS_MAX,
                        });
                    }
                }
            }
        }
        if messages.is_empty() {
            return Ok(None);
        }
        Ok(Some(messages))
    }

    /// The consumer's fetch position of the partition, if known.
    fn position(&self) -> Option<i64> {
        let position = self.consumer.position().ok()?;
        match position
            .find_partition(&self.topic, self.partition)?
            .offset()
        {
            Offset::Offset(o) => Some(o),
            _ => None,
        }
    }
}
