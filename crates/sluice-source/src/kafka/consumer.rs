//! The Kafka consumer (librdkafka): a thread that polls, runs rebalance callbacks and hands
//! the caller [`KafkaEvent`]s in order. Built with the `kafka` cargo feature.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::ClientContext;
use tokio::sync::mpsc;

use super::{KafkaOptions, RawMessage, ResumeLookup, StartAt};

/// What the consumer thread hands over, in the order it happened.
#[derive(Debug)]
pub enum KafkaEvent {
    /// These partitions are now this process's, each read from the table position given
    /// (`None`: the table has none; read from [`StartAt`]).
    Assigned(Vec<(i32, Option<i64>)>),
    /// These partitions are no longer this process's: drop their unpublished state.
    Revoked(Vec<i32>),
    /// Messages of one partition, in offset order. `generation` counts the seeks of the
    /// partition ([`KafkaConsumer::seek`]): messages of an older generation were fetched
    /// before the last seek and must be dropped.
    Messages {
        partition: i32,
        generation: u64,
        messages: Vec<RawMessage>,
    },
    /// The consumer failed and stopped.
    Failed(KafkaSourceError),
}

#[derive(Debug, thiserror::Error)]
pub enum KafkaSourceError {
    #[error("cannot create the Kafka consumer for {brokers}: {source}")]
    Create {
        brokers: String,
        source: Box<KafkaError>,
    },
    #[error("cannot subscribe to topic {topic}: {source}")]
    Subscribe {
        topic: String,
        source: Box<KafkaError>,
    },
    #[error(
        "reading the table's positions of assigned partitions {partitions:?} failed: {source}"
    )]
    Resume {
        partitions: Vec<i32>,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("assigning partitions {partitions:?} of {topic} failed: {source}")]
    Assign {
        topic: String,
        partitions: Vec<i32>,
        source: Box<KafkaError>,
    },
    #[error("the Kafka consumer thread could not start")]
    Thread,
}

/// The client settings every sluice consumer shares (the table keeps the offsets: nothing is
/// committed or stored by librdkafka; fetched but not yet handed over is bounded per
/// partition), then `own`, then the user's `--kafka-option`s, which override both.
pub(super) fn client_config(options: &KafkaOptions, own: &[(&str, String)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &options.brokers)
        .set("group.id", &options.group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set("queued.max.messages.kbytes", "16384");
    for (k, v) in own {
        config.set(*k, v);
    }
    for (k, v) in &options.client_options {
        config.set(k, v);
    }
    config
}

/// A message as it is handed over: its value, and (with `meta`) its key, timestamp and
/// headers.
pub(super) fn raw_message(m: &impl Message, meta: bool) -> RawMessage {
    use rdkafka::message::Headers;
    let meta = meta.then(|| crate::message_columns::MessageMeta {
        offset: m.offset(),
        partition: m.partition(),
        key: m.key().map(<[u8]>::to_vec),
        timestamp_ms: m.timestamp().to_millis(),
        headers: m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default(),
    });
    RawMessage {
        offset: m.offset(),
        value: m.payload().map(<[u8]>::to_vec),
        meta,
    }
}

/// Requests from the caller to the consumer thread.
enum Command {
    Seek { partition: i32, offset: i64 },
    Commit(Vec<(i32, i64)>),
}

/// How often librdkafka reports its statistics, from which the partitions' offset ranges
/// are read (for the lag metric); `--kafka-option statistics.interval.ms=…` overrides it.
pub const STATISTICS_INTERVAL_MS: u64 = 1_000;

/// A partition's offsets as the broker last reported them (librdkafka's statistics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionRange {
    /// The first offset the partition still holds.
    pub low: i64,
    /// The offset its next message will take (the high watermark).
    pub high: i64,
}

/// The partitions' offset ranges, shared between the consumer thread and the caller.
pub type PartitionRanges = Arc<Mutex<HashMap<i32, PartitionRange>>>;

/// A running consumer: its thread, its events, and the requests it takes.
pub struct KafkaConsumer {
    pub events: mpsc::Receiver<KafkaEvent>,
    /// Each partition's offset range, as of librdkafka's last statistics
    /// ([`STATISTICS_INTERVAL_MS`]): stale by up to that long.
    pub ranges: PartitionRanges,
    commands: std::sync::mpsc::Sender<Command>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl KafkaConsumer {
    /// Joins the group and starts the consumer thread.
    pub fn start(
        options: KafkaOptions,
        lookup: Box<dyn ResumeLookup>,
    ) -> Result<KafkaConsumer, KafkaSourceError> {
        let (events_tx, events) = mpsc::channel(16);
        let ranges = PartitionRanges::default();
        let context = Rebalancer {
            ranges: ranges.clone(),
            topic: options.topic.clone(),
            start: options.start,
            lookup: Mutex::new(lookup),
            pending: Mutex::new(Vec::new()),
        };
        let start = match options.start {
            StartAt::Earliest => "earliest",
            StartAt::Latest => "latest",
        };
        let config = client_config(
            &options,
            &[
                ("auto.offset.reset", start.to_string()),
                ("session.timeout.ms", "6000".to_string()),
                // Incremental rebalances: members keep their partitions (and this process its
                // unpublished state) when others join or leave; eager ones revoke everything.
                (
                    "partition.assignment.strategy",
                    "cooperative-sticky".to_string(),
                ),
                ("statistics.interval.ms", STATISTICS_INTERVAL_MS.to_string()),
            ],
        );
        let consumer: BaseConsumer<Rebalancer> =
            config
                .create_with_context(context)
                .map_err(|source| KafkaSourceError::Create {
                    brokers: options.brokers.clone(),
                    source: Box::new(source),
                })?;
        consumer
            .subscribe(&[&options.topic])
            .map_err(|source| KafkaSourceError::Subscribe {
                topic: options.topic.clone(),
                source: Box::new(source),
            })?;
        let (commands_tx, commands) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("sluice-kafka".into())
            .spawn(move || poll_loop(consumer, options, events_tx, commands, thread_stop))
            .map_err(|_| KafkaSourceError::Thread)?;
        Ok(KafkaConsumer {
            events,
            ranges,
            commands: commands_tx,
            stop,
            thread: Some(thread),
        })
    }

    /// Re-reads `partition` from `offset` (after its state was rebuilt from the table).
    /// Messages fetched before arrive with an older generation.
    pub fn seek(&self, partition: i32, offset: i64) {
        // A stopped thread takes no requests and hands over no more messages: nothing to do.
        let _ = self.commands.send(Command::Seek { partition, offset });
    }

    /// Commits offsets to the group for monitoring only (lag dashboards); recovery never
    /// reads them.
    pub fn commit_for_monitoring(&self, offsets: Vec<(i32, i64)>) {
        let _ = self.commands.send(Command::Commit(offsets));
    }

    /// Leaves the group and stops the thread; waits for it off the runtime's threads (leaving
    /// the group can take a rebalance's time).
    pub async fn stop(mut self) {
        if let Some(thread) = self.signal_stop() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }

    /// Tells the thread to stop (it leaves the group and ends after its current poll).
    fn signal_stop(&mut self) -> Option<std::thread::JoinHandle<()>> {
        self.stop.store(true, Ordering::SeqCst);
        self.events.close();
        while self.events.try_recv().is_ok() {}
        self.thread.take()
    }
}

impl Drop for KafkaConsumer {
    /// A consumer dropped without [`KafkaConsumer::stop`] (a run that failed) stops its thread
    /// and waits for it to leave the group (so the group rebalances at once), but never
    /// blocks a runtime's thread: on a multi-threaded runtime the wait moves the thread's
    /// tasks elsewhere first; on a single-threaded one the thread leaves on its own.
    fn drop(&mut self) {
        let Some(thread) = self.signal_stop() else {
            return;
        };
        use tokio::runtime::{Handle, RuntimeFlavor};
        match Handle::try_current().map(|h| h.runtime_flavor()) {
            Err(_) => {
                let _ = thread.join();
            }
            Ok(RuntimeFlavor::MultiThread) => {
                tokio::task::block_in_place(|| {
                    let _ = thread.join();
                });
            }
            Ok(_) => {}
        }
    }
}

/// The consumer's context: assigns partitions at the table's positions.
struct Rebalancer {
    topic: String,
    start: StartAt,
    lookup: Mutex<Box<dyn ResumeLookup>>,
    /// Events of rebalances that ran inside the last `poll`, handed over after it returns
    /// (after the messages polled before them).
    pending: Mutex<Vec<KafkaEvent>>,
    /// Where the statistics callback leaves the partitions' offset ranges.
    ranges: PartitionRanges,
}

impl ClientContext for Rebalancer {
    /// The topic's partitions' offset ranges, for the lag metric. Partitions the broker has
    /// not reported on yet (`-1001`, librdkafka's "invalid") are left out.
    fn stats(&self, statistics: rdkafka::Statistics) {
        let Some(topic) = statistics.topics.get(&self.topic) else {
            return;
        };
        let Ok(mut ranges) = self.ranges.lock() else {
            return;
        };
        for (p, s) in &topic.partitions {
            if *p >= 0 && s.hi_offset >= 0 {
                ranges.insert(
                    *p,
                    PartitionRange {
                        low: s.lo_offset.max(0),
                        high: s.hi_offset,
                    },
                );
            }
        }
    }

    /// librdkafka's own log, in sluice's (target `librdkafka`).
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", facility, "{message}")
            }
            RDKafkaLogLevel::Warning => tracing::warn!(target: "librdkafka", facility, "{message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", facility, "{message}")
            }
            RDKafkaLogLevel::Debug => tracing::debug!(target: "librdkafka", facility, "{message}"),
        }
    }
}

impl ConsumerContext for Rebalancer {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let partitions: Vec<i32> = tpl
            .elements_for_topic(&self.topic)
            .iter()
            .map(|e| e.partition())
            .collect();
        let event = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                self.assign(consumer, partitions)
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                let unassigned = if matches!(
                    consumer.rebalance_protocol(),
                    rdkafka::consumer::RebalanceProtocol::Cooperative
                ) {
                    consumer.incremental_unassign(tpl)
                } else {
                    consumer.unassign()
                };
                if let Err(e) = unassigned {
                    tracing::warn!(error = %e, "unassigning revoked partitions failed");
                }
                KafkaEvent::Revoked(partitions)
            }
            other => {
                tracing::warn!(error = ?other, "Kafka rebalance error");
                // librdkafka leaves the assignment as it was; the group retries.
                let _ = consumer.unassign();
                KafkaEvent::Revoked(partitions)
            }
        };
        if let Ok(mut pending) = self.pending.lock() {
            pending.push(event);
        }
    }
}

impl Rebalancer {
    fn assign(&self, consumer: &BaseConsumer<Self>, partitions: Vec<i32>) -> KafkaEvent {
        let found = match self.lookup.lock() {
            Ok(mut lookup) => lookup.resume_offsets(&partitions),
            Err(_) => Err("the resume lookup panicked earlier".into()),
        };
        let offsets = match found {
            Ok(offsets) => offsets,
            Err(source) => {
                // Nothing is assigned: this process reads nothing rather than guessing.
                return KafkaEvent::Failed(KafkaSourceError::Resume { partitions, source });
            }
        };
        let mut tpl = TopicPartitionList::new();
        for p in &partitions {
            let offset = match offsets.get(p) {
                Some(o) => Offset::Offset(*o),
                None => match self.start {
                    StartAt::Earliest => Offset::Beginning,
                    StartAt::Latest => Offset::End,
                },
            };
            if let Err(source) = tpl.add_partition_offset(&self.topic, *p, offset) {
                return self.assign_failed(partitions, source);
            }
        }
        if !partitions.is_empty() {
            tracing::info!(
                ?partitions,
                ?offsets,
                "assigned partitions at the table's positions"
            );
        }
        let assigned = if matches!(
            consumer.rebalance_protocol(),
            rdkafka::consumer::RebalanceProtocol::Cooperative
        ) {
            consumer.incremental_assign(&tpl)
        } else {
            consumer.assign(&tpl)
        };
        match assigned {
            Ok(()) => KafkaEvent::Assigned(
                partitions
                    .iter()
                    .map(|p| (*p, offsets.get(p).copied()))
                    .collect(),
            ),
            Err(source) => self.assign_failed(partitions, source),
        }
    }

    fn assign_failed(&self, partitions: Vec<i32>, source: KafkaError) -> KafkaEvent {
        KafkaEvent::Failed(KafkaSourceError::Assign {
            topic: self.topic.clone(),
            partitions,
            source: Box::new(source),
        })
    }
}

/// The consumer thread: polls, groups messages per partition, hands them over with the
/// rebalance events in order, and serves seeks and monitoring commits.
///
/// It never blocks on the caller: rebalances and heartbeats are served only while it polls,
/// and a member that stops polling during a rebalance stalls the whole group (or is thrown
/// out of it, and rejoins, and stalls it again). When the caller is behind, events wait in a
/// backlog and the assignment is paused (librdkafka stops fetching) until it drains.
fn poll_loop(
    consumer: BaseConsumer<Rebalancer>,
    options: KafkaOptions,
    events: mpsc::Sender<KafkaEvent>,
    commands: std::sync::mpsc::Receiver<Command>,
    stop: Arc<AtomicBool>,
) {
    let mut generations: HashMap<i32, u64> = HashMap::new();
    // Seeks not done yet: librdkafka refuses one while the partition's fetcher is not
    // running (`Local: Erroneous state`) and may time out. Until the seek is done, what is
    // polled of the partition comes from where it was, not from the offset asked for: it is
    // dropped, or the caller would take it as the re-read and skip the offsets in between.
    let mut seeks: HashMap<i32, (i64, u32)> = HashMap::new();
    let mut polled: BTreeMap<i32, Vec<RawMessage>> = BTreeMap::new();
    let mut polled_count = 0usize;
    let mut since = Instant::now();
    let mut backlog: VecDeque<KafkaEvent> = VecDeque::new();
    // Whether the whole assignment is paused; `None` after a rebalance: an incremental
    // assignment leaves the partitions it kept paused or not as they were and adds new ones
    // unpaused, so the state is applied to the whole assignment again.
    let mut paused: Option<bool> = None;
    while !stop.load(Ordering::SeqCst) {
        while let Ok(command) = commands.try_recv() {
            match command {
                Command::Seek { partition, offset } => {
                    // Whatever was polled of it is older than the seek.
                    polled.remove(&partition);
                    *generations.entry(partition).or_default() += 1;
                    seeks.insert(partition, (offset, 0));
                }
                Command::Commit(offsets) => {
                    let mut tpl = TopicPartitionList::new();
                    for (p, o) in offsets {
                        let _ = tpl.add_partition_offset(&options.topic, p, Offset::Offset(o));
                    }
                    if let Err(e) = consumer.commit(&tpl, CommitMode::Async) {
                        tracing::debug!(error = %e, "monitoring commit failed");
                    }
                }
            }
        }
        seeks.retain(|&partition, (offset, failures)| {
            let sought = consumer.seek(
                &options.topic,
                partition,
                Offset::Offset(*offset),
                Duration::from_secs(10),
            );
            match sought {
                Ok(()) => false,
                Err(e) => {
                    *failures += 1;
                    if *failures == 1 {
                        tracing::warn!(partition, offset = *offset, error = %e, "seek failed: retrying it; the partition's messages wait until it is done");
                    } else {
                        tracing::debug!(partition, offset = *offset, error = %e, attempt = *failures, "seek failed again");
                    }
                    true
                }
            }
        });
        let message = consumer.poll(Duration::from_millis(options.chunk_ms_max.clamp(1, 100)));
        let rebalanced = consumer
            .context()
            .pending
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default();
        if !rebalanced.is_empty() {
            // Messages polled before the rebalance go first, under the old assignment.
            flush(&mut polled, &generations, &mut backlog);
            polled_count = 0;
            for event in rebalanced {
                match &event {
                    KafkaEvent::Assigned(ps) => {
                        for (p, _) in ps {
                            *generations.entry(*p).or_default() += 1;
                            // The assignment starts it at the table's position.
                            seeks.remove(p);
                        }
                    }
                    KafkaEvent::Revoked(ps) => {
                        for p in ps {
                            seeks.remove(p);
                        }
                    }
                    _ => {}
                }
                backlog.push_back(event);
            }
            paused = None;
        }
        match message {
            // Fetched before a seek that is not done yet (see `seeks`).
            Some(Ok(m)) if seeks.contains_key(&m.partition()) => {}
            Some(Ok(m)) if m.topic() == options.topic => {
                polled
                    .entry(m.partition())
                    .or_default()
                    .push(raw_message(&m, options.payload.meta));
                polled_count += 1;
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => tracing::warn!(error = %e, "Kafka consumer error"),
            None => {}
        }
        let due = since.elapsed() >= Duration::from_millis(options.chunk_ms_max);
        if polled_count >= options.chunk_messages_max.max(1) || (due && polled_count > 0) {
            flush(&mut polled, &generations, &mut backlog);
            polled_count = 0;
            since = Instant::now();
        } else if due {
            since = Instant::now();
        }
        // Hand over what the caller has room for.
        while let Some(event) = backlog.pop_front() {
            let failed = matches!(event, KafkaEvent::Failed(_));
            match events.try_send(event) {
                Ok(()) if failed => return,
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(event)) => {
                    backlog.push_front(event);
                    break;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return,
            }
        }
        let behind = !backlog.is_empty();
        if paused != Some(behind) {
            if let Ok(assignment) = consumer.assignment() {
                let toggled = if behind {
                    consumer.pause(&assignment)
                } else {
                    consumer.resume(&assignment)
                };
                match toggled {
                    Ok(()) => paused = Some(behind),
                    Err(e) => tracing::debug!(error = %e, "pausing or resuming fetches failed"),
                }
            }
        }
    }
    consumer.unsubscribe();
}

/// Moves the polled messages into the backlog, an event per partition.
fn flush(
    polled: &mut BTreeMap<i32, Vec<RawMessage>>,
    generations: &HashMap<i32, u64>,
    backlog: &mut VecDeque<KafkaEvent>,
) {
    for (partition, messages) in std::mem::take(polled) {
        backlog.push_back(KafkaEvent::Messages {
            partition,
            generation: generations.get(&partition).copied().unwrap_or(0),
            messages,
        });
    }
}
