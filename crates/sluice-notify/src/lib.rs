//! Notifications of window changes, delivered at least once with idempotency keys.
//!
//! A [`Notifier`] runs one task per target beside the writer of a table. Each task follows
//! the table's log ([`sluice_publish::ChangeFeed`]) from the version last recorded as
//! delivered to its target, delivers every change it is subscribed to (`complete`,
//! `rewritten`) in version order, retrying a failed delivery with backoff for as long as it
//! takes, and then raises its target's mark ([`sluice_publish::DeliveredMarks`]). The writer
//! records the marks in the table with each of its commits ([`Recording::WithWriter`]; in a
//! sharded table the notifier records them in commits of its own, [`Recording::OwnCommits`]),
//! and [`Notifier::finish`] records them in a commit of their own once the writer is done. So:
//! - every change is delivered at least once, after any crash: a change is only marked
//!   delivered after its receiver accepted it, and a restart reads the changes after the
//!   recorded mark again;
//! - a change is delivered with the same key every time (`<table id>/<address>/<version>`);
//! - only committed versions are notified (the feed reads the log);
//! - a target that keeps failing holds back its own notifications only: the writer never
//!   waits for a notifier, and each target has its own task and mark.

mod target;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use deltalake::DeltaTable;
use sluice_publish::{
    notified_through, open_table_with, record_notified, ChangeFeed, ChangeReason, DeliveredMarks,
    NotifyLogError, OpenError, TableOptions, WindowChange,
};
use tokio::sync::watch;

pub use target::{CommandTarget, DeliveryError, HttpTarget, Target};

/// Versions a task reads from the log at a time: its backlog in memory is bounded by the
/// changes of this many commits, whatever its receiver's outage.
pub const VERSIONS_PER_READ_MAX: u64 = 1_000;

/// One notify target of a pipeline.
#[derive(Debug)]
pub struct TargetSpec {
    /// Names the target's bookkeeping in the table (`txn` `<pipeline>/.notify/<name>`).
    pub name: String,
    /// The reasons it is told about.
    pub on: BTreeSet<ChangeReason>,
    pub target: Box<dyn Target>,
}

/// How the notifier reaches the table and paces itself.
#[derive(Debug, Clone)]
pub struct NotifierOptions {
    /// The table, read through these options' store seam and retries (the writer's, so a
    /// transient store failure is retried as the writer's are). Only `location`,
    /// `storage_options`, `store` and `retry` are used.
    pub table: TableOptions,
    pub pipeline: String,
    /// Pause between two looks at the log that found nothing new.
    pub poll_ms: u64,
    /// Backoff of a failing delivery: doubles from `retry_initial_ms` up to `retry_max_ms`.
    pub retry_initial_ms: u64,
    pub retry_max_ms: u64,
    /// The marks the writer records with its commits (`TableOptions::notified`).
    pub marks: DeliveredMarks,
    /// Who records the marks while the notifier runs.
    pub recording: Recording,
}

/// Who records in the table how far each target has been told, while the notifier runs.
#[derive(Debug, Clone)]
pub enum Recording {
    /// The writer beside the notifier, with each of its commits (`TableOptions::notified`):
    /// a table of one writer per pipeline, which commits only on the version it read, so a
    /// commit of the notifier's own would make it lose its race and re-read the table.
    WithWriter,
    /// The notifier, in commits of its own, at most once per `every_ms` per target: the
    /// writers of a sharded table retry their commits over each other's (and over these),
    /// and a `txn` they all carried would make their commits conflict with each other.
    OwnCommits { every_ms: u64, clock: NowMs },
}

/// The caller's clock, in milliseconds since the epoch (the records' `lastUpdated`, and when
/// the next record is due).
#[derive(Clone)]
pub struct NowMs(pub Arc<dyn Fn() -> i64 + Send + Sync>);

impl std::fmt::Debug for NowMs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NowMs")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("opening the table for notifications failed: {0}")]
    Open(#[from] OpenError),
    #[error(transparent)]
    Log(#[from] NotifyLogError),
    #[error("notify target {target}: {source}")]
    Target {
        target: String,
        #[source]
        source: Box<NotifyError>,
    },
}

/// What one target got during a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetReport {
    pub name: String,
    /// Deliveries accepted by the receiver.
    pub delivered: u64,
    /// Failed attempts (each retried).
    pub failed_attempts: u64,
    /// Changes passed over: reasons the target is not subscribed to.
    pub skipped: u64,
    /// The last table version delivered (and recorded by [`Notifier::finish`]).
    pub through: u64,
    /// The table's version when the notifier stopped: changes after `through` up to it are
    /// left for the next run (a receiver that was still failing when the drain ended).
    pub table_version: u64,
    /// Why the target's task stopped early, if it did (the log could not be read).
    pub error: Option<String>,
}

/// Delivers the changes of one pipeline's windows to its targets; see the crate docs.
pub struct Notifier {
    options: NotifierOptions,
    stop: watch::Sender<Option<Stop>>,
    tasks: Vec<(String, tokio::task::JoinHandle<TargetReport>)>,
}

/// When to stop: once the table version `through` is delivered, or at `deadline`.
#[derive(Debug, Clone, Copy)]
struct Stop {
    through: u64,
    deadline: tokio::time::Instant,
}

impl Notifier {
    /// Starts one task per target. A target with no record in the table starts at the
    /// table's current version (it is told about changes from now on), and its mark is set
    /// at once, so the writer's next commit records it.
    pub async fn start(
        options: NotifierOptions,
        targets: Vec<TargetSpec>,
    ) -> Result<Notifier, NotifyError> {
        Notifier::begin(options, targets, None).await
    }

    /// Delivers, without a writer beside it, every change the table holds now that its
    /// targets were not told yet, for up to `drain_ms`, then records each target's delivered
    /// version in a commit of its own: [`Notifier::start`] and [`Notifier::finish`] in one,
    /// except that the tasks know where to stop before they read anything (their store
    /// operations do not depend on timing).
    pub async fn drain(
        options: NotifierOptions,
        targets: Vec<TargetSpec>,
        drain_ms: u64,
        at_ms: i64,
    ) -> Result<Vec<TargetReport>, NotifyError> {
        let table = open(&options, None).await?;
        let stop = Stop {
            through: table.version().unwrap_or(0),
            deadline: tokio::time::Instant::now() + Duration::from_millis(drain_ms),
        };
        let notifier = Notifier::begin(options, targets, Some(stop)).await?;
        notifier.conclude(table, stop, at_ms).await
    }

    async fn begin(
        options: NotifierOptions,
        targets: Vec<TargetSpec>,
        stop: Option<Stop>,
    ) -> Result<Notifier, NotifyError> {
        let (stop, stop_rx) = watch::channel(stop);
        let mut notifier = Notifier {
            options: options.clone(),
            stop,
            tasks: Vec::with_capacity(targets.len()),
        };
        for spec in targets {
            let name = spec.name.clone();
            let in_target = |source: NotifyError| NotifyError::Target {
                target: name.clone(),
                source: Box::new(source),
            };
            let table = open(&options, None)
                .await
                .map_err(|e| in_target(e.into()))?;
            let current = table.version().unwrap_or(0);
            let through = starting_version(&table, &options.pipeline, &spec.name)
                .await
                .map_err(|e| in_target(e.into()))?;
            options.marks.deliver(&spec.name, through);
            let start = if through == current {
                table
            } else {
                open(&options, Some(through))
                    .await
                    .map_err(|e| in_target(e.into()))?
            };
            let feed = ChangeFeed::after(&start, &options.pipeline)
                .await
                .map_err(|e| in_target(e.into()))?;
            let task = TargetTask {
                options: options.clone(),
                spec,
                feed,
                recorded: Recorded {
                    through,
                    at_ms: None,
                    behind: false,
                },
                stop: stop_rx.clone(),
                report: TargetReport {
                    name: name.clone(),
                    through,
                    table_version: current,
                    ..TargetReport::default()
                },
            };
            // Pushed at once: an error starting a later target drops (aborts) this one.
            notifier.tasks.push((name, tokio::spawn(task.run())));
        }
        Ok(notifier)
    }

    /// Delivers what the table holds now (its latest version), for up to `drain_ms`, then
    /// stops every task and records each target's mark in a commit of its own (call it once
    /// the writer is done: nothing else commits then). Returns one report per target.
    /// `at_ms` is the caller's clock, for the record's `lastUpdated`.
    pub async fn finish(self, drain_ms: u64, at_ms: i64) -> Result<Vec<TargetReport>, NotifyError> {
        let table = open(&self.options, None).await?;
        let stop = Stop {
            through: table.version().unwrap_or(0),
            deadline: tokio::time::Instant::now() + Duration::from_millis(drain_ms),
        };
        self.conclude(table, stop, at_ms).await
    }

    async fn conclude(
        mut self,
        mut table: DeltaTable,
        stop: Stop,
        at_ms: i64,
    ) -> Result<Vec<TargetReport>, NotifyError> {
        let _ = self.stop.send(Some(stop));
        let tasks = std::mem::take(&mut self.tasks);
        let mut reports = Vec::with_capacity(tasks.len());
        for (name, task) in tasks {
            let report = task.await.unwrap_or_else(|e| TargetReport {
                name: name.clone(),
                error: Some(format!("the task failed: {e}")),
                ..TargetReport::default()
            });
            reports.push(report);
        }
        // Only a target that got past changes records: a run that found nothing to tell
        // commits nothing (a rerun over a finished table stays a no-op).
        for report in reports.iter().filter(|r| r.delivered + r.skipped > 0) {
            record_notified(
                &mut table,
                &self.options.pipeline,
                &report.name,
                report.through,
                at_ms,
            )
            .await?;
        }
        Ok(reports)
    }
}

/// A notifier dropped without [`Notifier::finish`] (its run failed) stops its tasks: nothing
/// is delivered after the process gave up, and nothing is recorded.
impl Drop for Notifier {
    fn drop(&mut self) {
        for (_, task) in &self.tasks {
            task.abort();
        }
    }
}

/// The version after which `target` is told about changes: the last one recorded as
/// delivered to it, or, for a target never told anything, `table`'s version (it is told
/// about changes from now on, not about the table's history). A writer that notifies must
/// hold this as the target's mark ([`DeliveredMarks::deliver`]) before its first commit, so
/// that the mark is in the log before any change it has not delivered.
pub async fn starting_version(
    table: &DeltaTable,
    pipeline: &str,
    target: &str,
) -> Result<u64, NotifyLogError> {
    let current = table.version().unwrap_or(0);
    Ok(notified_through(table, pipeline, target)
        .await?
        .unwrap_or(current)
        .min(current))
}

async fn open(options: &NotifierOptions, version: Option<u64>) -> Result<DeltaTable, OpenError> {
    open_table_with(&options.table, version).await
}

/// What one look at the log did.
enum Step {
    /// Nothing new was committed.
    Idle,
    /// Changes were read and delivered (there may be more).
    Delivered,
    /// The notifier stopped while a receiver was still failing.
    Stopped,
}

/// Whether a failure to follow the log may pass by itself (the store), or will not (the log
/// was cleaned up past the mark, holds what cannot be read, or the table is sharded).
fn retryable(e: &NotifyError) -> bool {
    match e {
        NotifyError::Open(_) => true,
        NotifyError::Log(e) => matches!(
            e,
            NotifyLogError::Delta(_) | NotifyLogError::Read(_) | NotifyLogError::Record { .. }
        ),
        NotifyError::Target { source, .. } => retryable(source),
    }
}

/// What a task recorded itself ([`Recording::OwnCommits`]).
struct Recorded {
    /// The version the table records as delivered.
    through: u64,
    /// When the task last recorded, by the caller's clock.
    at_ms: Option<i64>,
    /// Whether changes were passed (delivered or skipped) since: only then is a record due.
    /// (A record is a commit the feed reads next; recording every version read would
    /// record its own records for ever.)
    behind: bool,
}

struct TargetTask {
    options: NotifierOptions,
    spec: TargetSpec,
    feed: ChangeFeed,
    recorded: Recorded,
    stop: watch::Receiver<Option<Stop>>,
    report: TargetReport,
}

impl TargetTask {
    async fn run(mut self) -> TargetReport {
        if let Err(e) = self.follow().await {
            tracing::error!(target_name = %self.spec.name, error = %e, "notifications stopped");
            metrics::counter!("sluice_notify_errors_total", "target" => self.spec.name.clone())
                .increment(1);
            self.report.error = Some(e.to_string());
        }
        self.report
    }

    /// Follows the log until told to stop. A failure to read the table while following is
    /// retried with backoff (the store may be down for a while; the target only falls
    /// behind); once the notifier is stopping, or when the log itself cannot be followed
    /// (cleaned up, unreadable, sharded), it ends the task: what is left waits for the next
    /// run, which starts from the recorded mark.
    async fn follow(&mut self) -> Result<(), NotifyError> {
        let mut table = None;
        let mut backoff_ms = self.options.retry_initial_ms.max(1);
        loop {
            let stop = *self.stop.borrow();
            if let Some(stop) = stop {
                if self.feed.through() >= stop.through
                    || tokio::time::Instant::now() >= stop.deadline
                {
                    return Ok(());
                }
            }
            let wait_ms = match self.step(&mut table).await {
                Ok(Step::Delivered) => continue,
                Ok(Step::Stopped) => return Ok(()),
                Ok(Step::Idle) => {
                    backoff_ms = self.options.retry_initial_ms.max(1);
                    self.options.poll_ms
                }
                Err(e) if self.stop.borrow().is_some() || !retryable(&e) => return Err(e),
                Err(e) => {
                    tracing::warn!(target_name = %self.spec.name, error = %e, retry_in_ms = backoff_ms, "reading the table for notifications failed; retrying (ingestion goes on)");
                    metrics::counter!("sluice_notify_errors_total", "target" => self.spec.name.clone())
                        .increment(1);
                    table = None; // opened afresh on the next step
                    let wait = backoff_ms;
                    backoff_ms = (backoff_ms * 2).min(self.options.retry_max_ms.max(1));
                    wait
                }
            };
            let wait = tokio::time::sleep(Duration::from_millis(wait_ms));
            tokio::select! {
                _ = wait => {}
                _ = self.stop.changed() => {}
            }
        }
    }

    /// One look at the log: reads what was committed since the last look (at most
    /// [`VERSIONS_PER_READ_MAX`] versions) and delivers it.
    async fn step(&mut self, table: &mut Option<DeltaTable>) -> Result<Step, NotifyError> {
        let table = match table {
            Some(t) => {
                t.update_incremental(None)
                    .await
                    .map_err(NotifyLogError::from)?;
                t
            }
            None => table.insert(open(&self.options, None).await?),
        };
        let name = self.spec.name.clone();
        let latest = table.version().unwrap_or(0);
        self.report.table_version = latest;
        metrics::gauge!("sluice_notify_behind_versions", "target" => name.clone())
            .set(latest.saturating_sub(self.feed.through()) as f64);
        if latest <= self.feed.through() {
            self.record_if_due(table).await?;
            return Ok(Step::Idle);
        }
        // A bounded step: at most VERSIONS_PER_READ_MAX commits' changes in memory.
        let upto = latest.min(self.feed.through() + VERSIONS_PER_READ_MAX);
        let changes = if upto < latest {
            self.feed
                .read(&open(&self.options, Some(upto)).await?)
                .await?
        } else {
            self.feed.read(table).await?
        };
        for change in &changes {
            if !self.spec.on.contains(&change.reason) {
                self.report.skipped += 1;
                continue;
            }
            if !self.deliver(change).await {
                return Ok(Step::Stopped); // stopped while the receiver was failing
            }
        }
        self.report.through = self.feed.through();
        self.options.marks.deliver(&name, self.feed.through());
        self.recorded.behind |= !changes.is_empty();
        self.record_if_due(table).await?;
        Ok(Step::Delivered)
    }

    /// With [`Recording::OwnCommits`]: records the target's mark in a commit of its own when
    /// changes were passed since the last record and `every_ms` has gone by.
    async fn record_if_due(&mut self, table: &mut DeltaTable) -> Result<(), NotifyError> {
        let Recording::OwnCommits { every_ms, clock } = &self.options.recording else {
            return Ok(());
        };
        let now_ms = (clock.0)();
        let due = self
            .recorded
            .at_ms
            .is_none_or(|at| now_ms.saturating_sub(at) >= *every_ms as i64);
        let through = self.feed.through();
        if due && self.recorded.behind && through > self.recorded.through {
            record_notified(
                table,
                &self.options.pipeline,
                &self.spec.name,
                through,
                now_ms,
            )
            .await?;
            self.recorded = Recorded {
                through,
                at_ms: Some(now_ms),
                behind: false,
            };
        }
        Ok(())
    }

    /// Delivers `change`, retrying with backoff until the receiver accepts it (`true`) or the
    /// drain deadline passes (`false`: the change and everything after it stay undelivered).
    async fn deliver(&mut self, change: &WindowChange) -> bool {
        let name = self.spec.name.clone();
        let body = serde_json::to_vec(change).expect("a WindowChange serializes");
        let mut backoff_ms = self.options.retry_initial_ms.max(1);
        let mut attempt: u64 = 0;
        loop {
            attempt += 1;
            match self
                .spec
                .target
                .deliver(&body, &change.idempotency_key)
                .await
            {
                Ok(()) => {
                    self.report.delivered += 1;
                    metrics::counter!("sluice_notifications_total", "target" => name.clone(), "result" => "delivered", "reason" => change.reason.as_str())
                        .increment(1);
                    if attempt > 1 {
                        tracing::info!(target_name = %name, key = %change.idempotency_key, attempt, "notification delivered after retries");
                    }
                    return true;
                }
                Err(e) => {
                    self.report.failed_attempts += 1;
                    metrics::counter!("sluice_notifications_total", "target" => name.clone(), "result" => "failed", "reason" => change.reason.as_str())
                        .increment(1);
                    tracing::warn!(target_name = %name, key = %change.idempotency_key, attempt, retry_in_ms = backoff_ms, error = %e, "notification not delivered; retrying (ingestion goes on)");
                }
            }
            let deadline = self.stop.borrow().map(|s| s.deadline);
            let wake = tokio::time::Instant::now() + Duration::from_millis(backoff_ms);
            match deadline {
                Some(d) if d <= wake => {
                    tokio::time::sleep_until(d).await;
                    // One last attempt at the deadline.
                    return self
                        .spec
                        .target
                        .deliver(&body, &change.idempotency_key)
                        .await
                        .map(|()| self.report.delivered += 1)
                        .is_ok();
                }
                _ => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(wake) => {}
                        _ = self.stop.changed() => {}
                    }
                }
            }
            backoff_ms = (backoff_ms * 2).min(self.options.retry_max_ms.max(1));
        }
    }
}

/// Parses `complete`, `rewritten` (the `on` list of a target).
pub fn parse_reasons(names: &[String]) -> Result<BTreeSet<ChangeReason>, String> {
    if names.is_empty() {
        return Ok([ChangeReason::Complete, ChangeReason::Rewritten].into());
    }
    names
        .iter()
        .map(|n| {
            ChangeReason::parse(n)
                .ok_or_else(|| format!("{n:?} is not a reason: use complete or rewritten"))
        })
        .collect()
}
