//! A run over a Kafka topic: one [`Ingester`] per assigned partition, each a writer shard.
//!
//! Each topic partition is read as a source of its own: its own windows, watermark, resume
//! offset (`txn <pipeline>/<topic>/<partition>`) and files, at addresses carrying the
//! partition as their `shard`. So processes of one consumer group never remove each other's
//! files, their commits race only on the log's version (retried by deltalake's conflict
//! checker), and a zombie — a process still publishing a partition the group gave to another
//! — conflicts on the partition's `txn`, re-reads the table, and publishes nothing stale (E3).
//!
//! On assignment, a partition's state is rebuilt from the table alone, exactly as a restarted
//! process would; on revocation it is dropped (the new owner replays from the table).

use std::collections::HashMap;
use std::time::Duration;

use deltalake::arrow::datatypes::SchemaRef;
use sluice_publish::{DeadLetterTable, TableOptions, WindowTable};
use sluice_source::kafka::{
    partition_name, KafkaConsumer, KafkaEvent, KafkaOptions, KafkaSourceError, PayloadOptionsError,
    Payloads, RawMessage, ResumeLookup,
};
use sluice_source::registry::RegistryError;
use sluice_source::{LineDecoder, LogPartition};
use sluice_window::Shard;
use tokio::sync::watch;

use crate::config::{Clock, IngestConfig, IngestError, RunSummary};
use crate::derive::{DeriveError, Deriver};
use crate::instruments::LagUnit;
use crate::keep_up::RawShape;
use crate::open::shard_writer_options;
use crate::restart::{
    AfterFailure, RestartEnd, RestartPolicy, Restarts, RestartsExhausted, Resumable,
};
use crate::run::{Ingester, StepRestarts};

/// How long `--until-idle` waits at least for the group's first assignment of the process:
/// several session timeouts and a rebalance of a group whose members come and go.
pub const JOIN_WAIT_MS: i64 = 60_000;

/// The default [`KafkaRun::tick_ms`].
pub const TICK_MS_DEFAULT: u64 = 200;

/// Everything a Kafka run needs besides the clock.
#[derive(Clone)]
pub struct KafkaRun {
    pub config: IngestConfig,
    pub kafka: KafkaOptions,
    /// The table, without a shard: each partition's writer opens it in its own shard.
    pub table: TableOptions,
    pub dlq: TableOptions,
    /// The record schema, to create the table if it does not exist.
    pub record_schema: Option<SchemaRef>,
    pub decoder: LineDecoder,
    /// Names this run's staged files (each partition's writer adds its shard and how many
    /// writers this run opened before it).
    pub attempt: String,
    /// End the run, publishing every window held, after this long without a message or a
    /// new assignment, counted from the group's first assignment of this process (a member
    /// still joining is not idle; see [`JOIN_WAIT_MS`]).
    pub until_idle_ms: Option<i64>,
    /// End the run, publishing every window held, after this many messages.
    pub max_events: Option<u64>,
    /// How often held late batches and dead letters are checked while no message arrives.
    pub tick_ms: u64,
    /// Seal every open window of a partition after this long without a message of it
    /// (processing time), as `--follow --idle-timeout` does for files: a quiet partition's
    /// last windows are published without waiting for newer events. `None`: windows seal by
    /// event time only.
    pub idle_timeout_ms: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
pub enum KafkaRunError {
    #[error(transparent)]
    Source(#[from] KafkaSourceError),
    #[error("partition {partition}: {source}")]
    Partition { partition: i32, source: IngestError },
    #[error("opening the table failed: {0}")]
    Open(#[from] sluice_publish::OpenError),
    #[error("opening the dead-letter table failed: {0}")]
    DeadLetters(#[from] sluice_publish::DeadLetterError),
    #[error("the Kafka consumer thread stopped unexpectedly")]
    ConsumerGone,
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Payload(#[from] PayloadOptionsError),
    #[error("keeping the derived tables failed: {0}")]
    Derive(DeriveError),
    #[error("the run's last publication of partitions {partitions:?} kept failing (commits of other writers conflicted with it, or the run had read its count of messages); their rows after the table's positions are still only in the topic: run again to land them")]
    EndConflict { partitions: Vec<i32> },
    /// The end of the run's publication failed more times in a row than `--restarts-max`.
    #[error(transparent)]
    Exhausted(Box<RestartsExhausted<KafkaRunError>>),
    #[error("keeping the derived tables failed: {0}")]
    DeriveExhausted(Box<RestartsExhausted<DeriveError>>),
}

impl Resumable for KafkaRunError {
    /// Only a last publication that conflicted is resumed, by re-reading its partitions.
    fn is_resumable(&self) -> bool {
        matches!(self, KafkaRunError::EndConflict { .. })
    }
}

/// One assigned partition: its writer and where its messages stand.
struct Owned<'a> {
    ingester: Ingester<'a, LogPartition>,
    name: String,
    /// Messages of an older generation were fetched before the last seek: dropped.
    generation: u64,
    /// Messages below this offset are already in the table or in the writer: dropped.
    next: Option<i64>,
    /// The first offset read, for a partition the table had no position of (where a seek
    /// after a rebuild must go back to).
    origin: Option<i64>,
    /// Its consecutive failures and restarts from the table.
    restarts: StepRestarts,
    /// When its last message arrived (or it was assigned), processing time.
    last_input_ms: i64,
}

/// What a finished run reports: the sum over every partition this process owned.
#[derive(Debug, Clone, Default)]
pub struct KafkaSummary {
    pub run: RunSummary,
    /// Messages received (including replays skipped).
    pub messages: u64,
    pub partitions_assigned: u64,
    pub partitions_revoked: u64,
}

impl KafkaRun {
    /// Runs until `stop`, idle for [`KafkaRun::until_idle_ms`], or
    /// [`KafkaRun::max_events`] messages. Ending by idle or count publishes every window held
    /// (as a bounded run's end of input); ending by `stop` only commits pending dead letters
    /// (the next run replays the rest from the table's positions).
    pub async fn run(
        &self,
        clock: &dyn Clock,
        stop: watch::Receiver<bool>,
    ) -> Result<KafkaSummary, KafkaRunError> {
        self.run_deriving(clock, stop, None).await
    }

    /// [`KafkaRun::run`], keeping `deriver`'s derived tables: after the partitions' commits
    /// (at most once per tick) and at the end, every window of the table that is complete
    /// (every shard holding files sealed past it) is derived as it became complete or was
    /// rewritten ([`Deriver::follow_sharded`]). Every process of the group may keep them:
    /// a derived window is published once, by whichever gets there first.
    pub async fn run_deriving(
        &self,
        clock: &dyn Clock,
        mut stop: watch::Receiver<bool>,
        deriver: Option<Deriver>,
    ) -> Result<KafkaSummary, KafkaRunError> {
        let payloads = Payloads::new(&self.kafka.payload)?;
        let (lookup, derive_from) = self.open_tables(deriver.is_some()).await?;
        let mut consumer = KafkaConsumer::start(self.kafka.clone(), Box::new(lookup))?;
        let deriving = deriver.zip(derive_from).map(|(deriver, raw)| Deriving {
            deriver,
            raw,
            due: true,
        });
        let mut run = RunLoop::new(clock, deriving, self.config.restart, payloads);
        let mut tick = tokio::time::interval(Duration::from_millis(self.tick_ms.max(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A dropped stop sender means nobody can stop the run any more (not a stop).
        let mut stoppable = true;
        let ended = loop {
            let event = tokio::select! {
                // What the consumer handed over goes first: a tick must not find the run idle
                // while events wait.
                biased;
                e = consumer.events.recv() => match e {
                    Some(e) => Some(e),
                    // The consumer thread ended without saying why (it only ends on a stop,
                    // which this run has not asked for, or after a `Failed` event).
                    None => return Err(KafkaRunError::ConsumerGone),
                },
                _ = tick.tick() => None,
                changed = stop.changed(), if stoppable => {
                    stoppable = changed.is_ok();
                    None
                }
            };
            if *stop.borrow() {
                break false;
            }
            let end = match event {
                Some(KafkaEvent::Assigned(partitions)) => {
                    run.assigned(self, partitions, clock).await?;
                    false
                }
                Some(KafkaEvent::Revoked(partitions)) => {
                    run.revoked(partitions);
                    false
                }
                Some(KafkaEvent::Failed(e)) => return Err(e.into()),
                Some(KafkaEvent::Messages {
                    partition,
                    generation,
                    messages,
                }) => {
                    let at = (partition, generation);
                    run.messages(self, at, messages, &consumer, clock).await?
                }
                None => run.quiet(self, &consumer, clock).await?,
            };
            if end {
                break true;
            }
        };
        run.finish(self, ended, consumer, clock).await
    }

    /// Creates the table (any shard's writer would) and the dead-letter table; returns the
    /// lookup the consumer reads the partitions' positions from, and, for `deriving`, the raw
    /// table as the derived tables read it (any shard's view: it is only read).
    async fn open_tables(
        &self,
        deriving: bool,
    ) -> Result<(TableLookup, Option<WindowTable>), KafkaRunError> {
        let options = self.sharded(Shard(0));
        let open = || {
            WindowTable::open_or_create(
                &options,
                self.record_schema.as_ref(),
                self.config.layout,
                self.config.window,
            )
        };
        let lookup_table = open().await?;
        DeadLetterTable::open_or_create(&self.dlq).await?;
        let derive_from = match deriving {
            true => Some(open().await?),
            false => None,
        };
        let lookup = TableLookup {
            runtime: tokio::runtime::Handle::current(),
            table: lookup_table,
            pipeline: self.config.pipeline.clone(),
            topic: self.kafka.topic.clone(),
        };
        Ok((lookup, derive_from))
    }

    /// Brings the derived tables up to the raw table (see [`Deriver::follow_sharded`]);
    /// returns whether it did. Every process of the group derives, and a derived commit that
    /// finds the derived table moved (another process published a window or settled first)
    /// is a lost race, not a fault: during the run it is left for the next tick (the tables
    /// are re-read then; ingestion never waits on it); at the run's `end` it is retried over
    /// re-read tables by the one restart rule ([`RestartPolicy`]: the processes of a group
    /// often end together, and its growing pauses spread them out).
    async fn follow(
        &self,
        deriving: &mut Deriving,
        clock: &dyn Clock,
        end: bool,
    ) -> Result<bool, KafkaRunError> {
        let Deriving { deriver, raw, .. } = deriving;
        // During the run a lost race waits for the next tick: no restart here.
        let policy = if end {
            self.config.restart
        } else {
            RestartPolicy {
                restarts_max: 0,
                ..self.config.restart
            }
        };
        let shape = RawShape::Sharded {
            pipeline: &self.config.pipeline,
        };
        match deriver.keep_up_restarting(raw, shape, policy, clock).await {
            Ok(()) => Ok(true),
            Err(RestartEnd::Exhausted(e)) if !end => {
                tracing::info!(error = %e.last, "deriving again at the next tick, from the re-read tables");
                Ok(false)
            }
            Err(RestartEnd::Exhausted(e)) => Err(KafkaRunError::DeriveExhausted(Box::new(e))),
            Err(RestartEnd::Fatal(e)) => Err(KafkaRunError::Derive(e)),
        }
    }

    fn sharded(&self, shard: Shard) -> TableOptions {
        shard_writer_options(&self.table, shard)
    }

    /// A partition's writer, rebuilt from the table alone; `incarnation` numbers the writers
    /// this run opened. Its staged files are named `<attempt>-s<partition>w<incarnation>-…`:
    /// a file name is never taken twice, not even by a writer of a partition that was revoked
    /// and assigned back (its earlier writer's files may be published under the same window
    /// address, and a second file of that name would replace a published file's rows).
    async fn open_partition<'c>(
        &self,
        partition: i32,
        incarnation: u64,
        clock: &'c dyn Clock,
    ) -> Result<Owned<'c>, KafkaRunError> {
        let name = partition_name(&self.kafka.topic, partition);
        let shard = Shard(partition.max(0) as u32);
        let table = WindowTable::open_or_create(
            &self.sharded(shard),
            self.record_schema.as_ref(),
            self.config.layout,
            self.config.window,
        )
        .await?;
        let dlq = DeadLetterTable::open_or_create(&self.dlq).await?;
        let ingester = Ingester::recover(
            self.config.clone(),
            LogPartition::new(&name),
            self.decoder.clone(),
            table,
            dlq,
            format!("{}-s{partition}w{incarnation}", self.attempt),
            clock,
        )
        .await
        .map_err(|source| KafkaRunError::Partition { partition, source })?;
        let mut owned = Owned {
            ingester,
            name,
            generation: 0,
            next: None,
            origin: None,
            restarts: StepRestarts::new(&self.config),
            last_input_ms: clock.now_ms(),
        };
        owned.next = owned.committed();
        Ok(owned)
    }

    /// After a partition's step: on a resumable failure, rebuilds its writer from the table
    /// and re-reads the partition from the table's position (as a restarted process would);
    /// anything else ends the run.
    /// Returns whether the partition was rebuilt.
    async fn after_step(
        &self,
        partition: i32,
        shard: &mut Owned<'_>,
        result: Result<(), IngestError>,
        commits_before: u64,
        consumer: &KafkaConsumer,
    ) -> Result<bool, KafkaRunError> {
        let restarted = shard
            .restarts
            .after_step(&mut shard.ingester, result, commits_before)
            .await
            .map_err(|source| KafkaRunError::Partition { partition, source })?;
        if !restarted {
            return Ok(false);
        }
        let from = shard.committed().or(shard.origin);
        shard.next = from;
        shard.generation += 1;
        if let Some(offset) = from {
            consumer.seek(partition, offset);
        } else {
            // Nothing was read yet; the consumer's position is still the start.
            shard.generation -= 1;
        }
        Ok(true)
    }

    /// The run ends (idle, or its count of messages): publishes every window the owned
    /// partitions hold. Returns the partitions whose publication failed resumably and were
    /// rebuilt from the table, to be re-read before the run may end.
    ///
    /// A conflict here does not mean the partition has a new owner: another shard's commit
    /// that grew the schema conflicts too, and so does any commit carrying a `txn` of this
    /// partition's commit. The group still assigns the partition to this process (a
    /// revocation would have parked it), so it is rebuilt and re-read as a conflict in the
    /// middle of the run is: leaving it would end a bounded run "idle" with its rows only in
    /// the topic. If the group did move it, the revocation arrives while the run goes on.
    async fn drain_owned(
        &self,
        owned: &mut HashMap<i32, Owned<'_>>,
        consumer: &KafkaConsumer,
    ) -> Result<Vec<i32>, KafkaRunError> {
        let mut again = Vec::new();
        for (p, shard) in owned.iter_mut() {
            let before = shard.ingester.commits();
            let drained = shard.ingester.drain().await;
            if let Err(e) = &drained {
                tracing::info!(partition = *p, error = %e, "the run's last publication of the partition failed: re-reading it from the table's position");
            }
            if self
                .after_step(*p, shard, drained, before, consumer)
                .await?
            {
                again.push(*p);
            }
            shard.report_lag(consumer);
        }
        again.sort_unstable();
        Ok(again)
    }
}

/// The derived tables a run keeps, and the raw table as they read it (any shard's view: it
/// is only read).
struct Deriving {
    deriver: Deriver,
    raw: WindowTable,
    /// A partition committed since the derived tables last followed the raw table.
    due: bool,
}

/// The state of a run's event loop: the partitions it writes, those a rebalance took away,
/// what it did so far, and when input last came.
struct RunLoop<'a> {
    owned: HashMap<i32, Owned<'a>>,
    /// Revoked partitions' writers, kept until the next assignment: a rebalance that gives a
    /// partition straight back (the eager protocol revokes everything first) then keeps its
    /// unpublished state instead of replaying it from the table.
    parked: HashMap<i32, Owned<'a>>,
    summary: KafkaSummary,
    /// Writers opened so far: each one names its files apart from all earlier ones (a
    /// partition assigned again gets a new writer, whose file numbers start over).
    opened: u64,
    last_input_ms: i64,
    /// Idle time counts only once the group has given this process an assignment (empty or
    /// not): a member still joining has not been handed the partitions it may own. A group
    /// that assigns nothing for JOIN_WAIT_MS (or the idle time, if longer) ends the run all
    /// the same, with a warning: a scheduled job must not hang on a broken group.
    joined: bool,
    started_ms: i64,
    deriving: Option<Deriving>,
    /// Rounds of re-reading partitions whose last publication failed at the end.
    end_restarts: Restarts,
    /// What makes records of the messages' values (and the schemas it fetched).
    payloads: Payloads,
}

impl<'a> RunLoop<'a> {
    fn new(
        clock: &dyn Clock,
        deriving: Option<Deriving>,
        restart: RestartPolicy,
        payloads: Payloads,
    ) -> Self {
        let now_ms = clock.now_ms();
        RunLoop {
            owned: HashMap::new(),
            parked: HashMap::new(),
            summary: KafkaSummary::default(),
            opened: 0,
            last_input_ms: now_ms,
            joined: false,
            started_ms: now_ms,
            deriving,
            end_restarts: Restarts::new(restart),
            payloads,
        }
    }

    /// The group assigned `partitions` (with the table's offset of each): a parked writer
    /// whose state is still current is kept, every other one opened from the table.
    async fn assigned(
        &mut self,
        run: &KafkaRun,
        partitions: Vec<(i32, Option<i64>)>,
        clock: &'a dyn Clock,
    ) -> Result<(), KafkaRunError> {
        // Newly assigned partitions may hold messages: idle counts from here.
        if !partitions.is_empty() || !self.joined {
            self.last_input_ms = clock.now_ms();
        }
        self.joined = true;
        for (p, table_offset) in partitions {
            self.summary.partitions_assigned += 1;
            let shard = match self.parked.remove(&p) {
                // Nobody published this partition since: its state is current. (Were it
                // not, its next commit would conflict on the partition's txn and rebuild it
                // from the table.)
                Some(kept) if kept.committed() == table_offset => {
                    tracing::info!(partition = p, "assigned back: keeping its state");
                    kept
                }
                stale => {
                    if let Some(old) = stale {
                        self.summary.run.absorb(&old.ingester.summary_with_busy());
                    }
                    self.opened += 1;
                    run.open_partition(p, self.opened, clock).await?
                }
            };
            if let Some(old) = self.owned.insert(p, shard) {
                self.summary.run.absorb(&old.ingester.summary_with_busy());
            }
        }
        for (p, old) in self.parked.drain() {
            tracing::info!(partition = p, "revoked: dropped its unpublished state");
            self.summary.run.absorb(&old.ingester.summary_with_busy());
        }
        Ok(())
    }

    fn revoked(&mut self, partitions: Vec<i32>) {
        for p in partitions {
            if let Some(old) = self.owned.remove(&p) {
                self.summary.partitions_revoked += 1;
                self.parked.insert(p, old);
            }
        }
    }

    /// Messages of `partition` (fetched in `generation`) go to its writer; returns whether
    /// the run ended here (its count of messages reached).
    async fn messages(
        &mut self,
        run: &KafkaRun,
        (partition, generation): (i32, u64),
        messages: Vec<RawMessage>,
        consumer: &KafkaConsumer,
        clock: &dyn Clock,
    ) -> Result<bool, KafkaRunError> {
        self.last_input_ms = clock.now_ms();
        let Some(shard) = self.owned.get_mut(&partition) else {
            return Ok(false); // not ours (any more)
        };
        shard.last_input_ms = self.last_input_ms;
        if generation < shard.generation {
            return Ok(false);
        }
        shard.generation = generation;
        let budget = run
            .max_events
            .map(|m| m.saturating_sub(self.summary.messages));
        let messages = shard.admit(messages, budget);
        self.summary.messages += messages.len() as u64;
        if !messages.is_empty() {
            // While the schema registry cannot be reached this waits (the consumer thread
            // goes on polling, and pauses fetching once its backlog is full).
            let (chunk, took) = self.payloads.chunk(messages).await?;
            shard.ingester.add_busy(sluice_stage::Phase::Decode, took);
            let commits = shard.ingester.summary().commits;
            let before = shard.ingester.commits();
            shard.next = Some(chunk.end());
            let taken = shard.ingester.take_chunk(chunk).await;
            run.after_step(partition, shard, taken, before, consumer)
                .await?;
            shard.report_lag(consumer);
            if shard.ingester.summary().commits > commits {
                if let Some(d) = &mut self.deriving {
                    d.due = true;
                }
                consumer.commit_for_monitoring(vec![(partition, shard.committed().unwrap_or(0))]);
            }
        }
        if run.max_events.is_some_and(|m| self.summary.messages >= m) {
            let again = run.drain_owned(&mut self.owned, consumer).await?;
            if !again.is_empty() {
                // Re-reading them would take messages past the budget.
                return Err(KafkaRunError::EndConflict { partitions: again });
            }
            return Ok(true);
        }
        Ok(false)
    }

    /// Quiet: late batches that are due, pending dead letters, partitions idle for the idle
    /// timeout, derived tables behind the raw table; returns whether the run ended here (idle
    /// for `until_idle_ms`).
    async fn quiet(
        &mut self,
        run: &KafkaRun,
        consumer: &KafkaConsumer,
        clock: &dyn Clock,
    ) -> Result<bool, KafkaRunError> {
        let now_ms = clock.now_ms();
        if let Some(d) = self.deriving.as_mut().filter(|d| d.due) {
            d.due = !run.follow(d, clock, false).await?;
        }
        let mut committed = false;
        for (p, shard) in self.owned.iter_mut() {
            let before = shard.ingester.commits();
            let idle = run
                .idle_timeout_ms
                .is_some_and(|t| now_ms.saturating_sub(shard.last_input_ms) >= t);
            let done = async {
                shard.ingester.publish_due().await?;
                if idle {
                    shard.ingester.seal_idle().await?;
                }
                shard.ingester.commit_dead_letters().await
            }
            .await;
            committed |= shard.ingester.commits() > before;
            run.after_step(*p, shard, done, before, consumer).await?;
            shard.report_lag(consumer);
        }
        if let Some(d) = self.deriving.as_mut().filter(|_| committed) {
            d.due = true;
        }
        match run.until_idle_ms {
            Some(t) => self.idle_end(run, t, consumer, clock).await,
            None => Ok(false),
        }
    }

    /// Whether the run ends: idle for `until_idle_ms` once joined (every owned partition
    /// published, those whose publication failed re-read by the one restart rule first), or
    /// never assigned anything for that long.
    async fn idle_end(
        &mut self,
        run: &KafkaRun,
        until_idle_ms: i64,
        consumer: &KafkaConsumer,
        clock: &dyn Clock,
    ) -> Result<bool, KafkaRunError> {
        let now_ms = clock.now_ms();
        if self.joined && now_ms.saturating_sub(self.last_input_ms) >= until_idle_ms {
            let again = run.drain_owned(&mut self.owned, consumer).await?;
            if again.is_empty() {
                return Ok(true);
            }
            // Partitions to re-read from the table's positions: idle counts again from here;
            // restarted by the one rule.
            let failed = KafkaRunError::EndConflict { partitions: again };
            match self.end_restarts.after_failure(failed) {
                AfterFailure::Resume { pause, .. } => tokio::time::sleep(pause).await,
                AfterFailure::Fatal(e) => return Err(e),
                AfterFailure::Exhausted(e) => return Err(KafkaRunError::Exhausted(Box::new(e))),
            }
            self.last_input_ms = clock.now_ms();
            return Ok(false);
        }
        let wait_ms = until_idle_ms.max(JOIN_WAIT_MS);
        if !self.joined && now_ms.saturating_sub(self.started_ms) >= wait_ms {
            tracing::warn!(
                group = %run.kafka.group,
                waited_ms = wait_ms,
                "the consumer group assigned this process nothing (not even an empty assignment); ending as idle"
            );
            return Ok(true);
        }
        Ok(false)
    }

    /// The run ends (`ended`: by idle time or count; else stopped): every partition whose
    /// state this process holds is published, the ones it owns and the ones a rebalance in
    /// progress took away (no other process has them yet, or its commits fence ours: a
    /// conflict here means the partition has a new owner, who replays what this process
    /// held). The consumer stays in the group meanwhile, so the partitions move only once
    /// this is done. (The partitions this process owns were drained already if the run ended
    /// by idle time or count: see `drain_owned`.) Then the derived tables of what the run
    /// published.
    async fn finish(
        mut self,
        run: &KafkaRun,
        ended: bool,
        consumer: KafkaConsumer,
        clock: &dyn Clock,
    ) -> Result<KafkaSummary, KafkaRunError> {
        let held: Vec<(i32, Owned<'_>)> = if ended {
            for (_, shard) in self.owned {
                self.summary.run.absorb(&shard.ingester.summary_with_busy());
            }
            self.parked.into_iter().collect()
        } else {
            self.owned.into_iter().chain(self.parked).collect()
        };
        for (p, mut shard) in held {
            let result = if ended {
                shard.ingester.drain().await
            } else {
                // A sealed window already staging is committed; open ones stay unpublished.
                async {
                    shard.ingester.finish_pending().await?;
                    shard.ingester.commit_dead_letters().await
                }
                .await
            };
            match result {
                Ok(()) => shard.report_lag(&consumer),
                // A revoked partition (or a stopped run): its new owner, or the next run,
                // replays what this process held from the table's position.
                Err(e) if e.is_conflict() => {
                    tracing::info!(partition = p, error = %e, "the partition's last publication conflicted with another writer's commit: leaving its rows after the table's position to its next owner");
                }
                Err(source) => {
                    return Err(KafkaRunError::Partition {
                        partition: p,
                        source,
                    })
                }
            }
            self.summary.run.absorb(&shard.ingester.summary_with_busy());
        }
        consumer.stop().await;
        if let Some(d) = &mut self.deriving {
            if ended {
                run.follow(d, clock, true).await?;
            }
            self.summary.run.derived = d.deriver.summary.clone();
        }
        Ok(self.summary)
    }
}

impl Owned<'_> {
    /// The table's resume offset of this partition, as the writer last read or wrote it.
    fn committed(&self) -> Option<i64> {
        self.ingester.resume_offset(&self.name)
    }

    /// Reports the partition's lag: its high watermark (as librdkafka last reported it)
    /// minus the table's resume offset (the partition's first offset if the table has
    /// none). Nothing before the broker's first report.
    fn report_lag(&self, consumer: &KafkaConsumer) {
        let Some(partition) = self.name.rsplit('/').next().and_then(|p| p.parse().ok()) else {
            return;
        };
        let range = consumer
            .ranges
            .lock()
            .ok()
            .and_then(|r| r.get(&partition).copied());
        if let Some(range) = range {
            // The statistics may be older than the messages already read.
            let high = range.high.max(self.next.unwrap_or(0));
            let from = self.committed().unwrap_or(range.low);
            let lag = high.saturating_sub(from).max(0);
            self.ingester.report_lag(LagUnit::Records, lag as u64);
        }
    }

    /// The messages this writer has not seen (replays of what the table or the writer
    /// already holds are dropped), cut to `budget` messages.
    fn admit(&mut self, mut messages: Vec<RawMessage>, budget: Option<u64>) -> Vec<RawMessage> {
        let next = self.next.unwrap_or(i64::MIN);
        messages.retain(|m| m.offset >= next);
        messages.truncate(budget.map_or(usize::MAX, |b| b as usize));
        if let Some(first) = messages.first() {
            if self.origin.is_none() && self.committed().is_none() {
                self.origin = Some(first.offset);
            }
        }
        messages
    }
}

/// Reads the table's resume offsets for newly assigned partitions. It runs inside the
/// consumer's rebalance callback, on the consumer's own thread (never a runtime thread), and
/// drives the table read there with [`tokio::runtime::Handle::block_on`], tokio's bridge from
/// a thread of one's own into async code: the assignment cannot complete before the offsets
/// are known, so the consumer thread waits for them whatever the mechanism; the runtime's
/// threads go on meanwhile.
struct TableLookup {
    runtime: tokio::runtime::Handle,
    table: WindowTable,
    pipeline: String,
    topic: String,
}

impl ResumeLookup for TableLookup {
    fn resume_offsets(
        &mut self,
        partitions: &[i32],
    ) -> Result<HashMap<i32, i64>, Box<dyn std::error::Error + Send + Sync>> {
        let names: Vec<String> = partitions
            .iter()
            .map(|p| partition_name(&self.topic, *p))
            .collect();
        let table = &mut self.table;
        let pipeline = &self.pipeline;
        let found = self.runtime.block_on(async {
            table.reload().await?;
            table.resume_offsets(pipeline, &names).await
        })?;
        Ok(partitions
            .iter()
            .zip(&names)
            .filter_map(|(p, n)| found.get(n).map(|o| (*p, *o)))
            .collect())
    }
}
