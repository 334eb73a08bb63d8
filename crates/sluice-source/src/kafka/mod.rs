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
mod wire;
pub use payload::{MessageFormat, PayloadOptions, PayloadOptionsError, Payloads, RawMessage};

use std::collections::HashMap;

/// The columns a new table of a topic in `format` takes from `latest`, its value subject's
/// latest schema, with the schemas that one references (fetched, waiting for the registry as
/// every fetch does); or why there are none: a schema of another kind, one that cannot be
/// read, a format whose schemas give no columns ([`MessageFormat::gives_columns`]).
pub async fn registry_columns(
    registry: &mut crate::registry::SchemaRegistry,
    format: MessageFormat,
    latest: &crate::registry::RegisteredSchema,
) -> Result<Result<deltalake::arrow::datatypes::SchemaRef, String>, crate::registry::RegistryError>
{
    match format.schema_kind() {
        Some(kind) if kind == latest.kind => {}
        expected => {
            return Ok(Err(format!(
                "it is a {} schema, not {} (--input-format {})",
                latest.kind.name(),
                expected.map_or("one", |k| k.label()),
                format.name()
            )))
        }
    }
    match format {
        MessageFormat::Avro => Ok(match avro::writer_schema(registry, latest).await? {
            Ok(text) => avro::table_schema(&text),
            Err(why) => Err(why),
        }),
        MessageFormat::Protobuf => protobuf::table_schema(registry, latest).await,
        _ => Ok(Err(format!(
            "--input-format {}: its schemas give no columns",
            format.name()
        ))),
    }
}

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

/// The partition a [`partition_name`] names (`3` of `events/3`); `None` for a name that is
/// not one (a file source's).
pub fn partition_of_name(name: &str) -> Option<i32> {
    name.rsplit_once('/').and_then(|(_, p)| p.parse().ok())
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

/// `future` run to its end on a runtime of its own (the registry formats' unit tests).
#[cfg(test)]
pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a test runtime")
        .block_on(future)
}
