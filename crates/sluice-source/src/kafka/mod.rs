//! A Kafka topic as a source: librdkafka's consumer group assigns partitions, the table keeps
//! the offsets.
//!
//! The consumer group is used for one thing only: deciding which process reads which
//! partitions. Where a partition's reading starts is never the group's committed offset: on
//! every assignment, the [`ResumeLookup`] reads the partition's resume position from the table
//! (its `txn`), and the partition is assigned at exactly that offset; a partition the table
//! has never seen starts at [`StartAt`]. Offsets are committed to Kafka only for monitoring
//! (lag dashboards), after the table holds them ([`KafkaConsumer::commit_for_monitoring`]).
//!
//! The consumer runs on its own thread, which polls and hands the caller [`KafkaEvent`]s in
//! order: assignments and revocations as they happen, and messages grouped per partition as
//! [`crate::Chunk::messages`]. Rebalance callbacks run on that thread (inside `poll`), so the
//! blocking table lookup never runs on an async worker.

//!
//! The options and the table lookup are plain types, built without librdkafka; the consumer
//! (`consumer.rs`) is built with the `kafka` cargo feature (on by default).

mod avro;
pub use avro::{table_schema as avro_table_schema, writer_schema as avro_writer_schema};
#[cfg(feature = "kafka")]
mod bounded;
#[cfg(feature = "kafka")]
mod consumer;
#[cfg(feature = "kafka")]
pub use bounded::{partition_bounds, BoundedReadError, PartitionBounds, PartitionReader};
#[cfg(feature = "kafka")]
pub use consumer::*;
mod json_schema;
mod payload;
mod protobuf;
pub use protobuf::table_schema as protobuf_table_schema;
mod wire;
pub use payload::{MessageFormat, PayloadOptions, PayloadOptionsError, Payloads, RawMessage};

use std::collections::HashMap;

/// Where a partition that the table has no position for starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    Earliest,
    Latest,
}

impl StartAt {
    pub fn parse(text: &str) -> Option<StartAt> {
        match text {
            "earliest" => Some(StartAt::Earliest),
            "latest" => Some(StartAt::Latest),
            _ => None,
        }
    }
}

/// How to reach the topic and how to read it.
#[derive(Debug, Clone)]
pub struct KafkaOptions {
    /// `bootstrap.servers`.
    pub brokers: String,
    pub topic: String,
    /// `group.id`: the processes of one group share the topic's partitions.
    pub group: String,
    pub start: StartAt,
    /// librdkafka settings (`--kafka-option k=v`), applied last: they override sluice's.
    pub client_options: Vec<(String, String)>,
    /// At most this many messages per [`KafkaEvent::Messages`].
    pub chunk_messages_max: usize,
    /// At most this long between two deliveries of what was polled.
    pub chunk_ms_max: u64,
    /// How the messages' values are written.
    pub payload: PayloadOptions,
}

impl KafkaOptions {
    /// What [`KafkaOptions::chunk_messages_max`] is unless a caller has reason to change it:
    /// large enough to decode in batches, small enough to route while the next poll runs.
    pub const CHUNK_MESSAGES_MAX_DEFAULT: usize = 10_000;
    /// What [`KafkaOptions::chunk_ms_max`] is by default: a quiet topic's messages wait at
    /// most this long before they are routed.
    pub const CHUNK_MS_MAX_DEFAULT: u64 = 200;

    /// The source partition name of a topic partition: the suffix of its `txn` appId
    /// (`<pipeline>/<topic>/<partition>`).
    pub fn partition_name(&self, partition: i32) -> String {
        partition_name(&self.topic, partition)
    }
}

/// See [`KafkaOptions::partition_name`].
pub fn partition_name(topic: &str, partition: i32) -> String {
    format!("{topic}/{partition}")
}

/// Reads the resume offsets of `partitions` from the table (blocking; called on the
/// consumer thread whenever partitions are assigned). A partition absent from the answer has
/// no position in the table.
pub trait ResumeLookup: Send + 'static {
    fn resume_offsets(
        &mut self,
        partitions: &[i32],
    ) -> Result<HashMap<i32, i64>, Box<dyn std::error::Error + Send + Sync>>;
}
