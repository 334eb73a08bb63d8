//! Notifications of window changes, delivered at least once with idempotency keys.
//!
//! A [`Notifier`] runs one task per target beside the writer of a table. Each task follows
//! the table's log ([`sluice_publish::ChangeFeed`]) from the version last recorded as
//! delivered to its target, delivers every change it is subscribed to (`complete`,
//! `rewritten`) in version order, retrying a failed delivery with backoff for as long as it
//! takes, and then raises its target's mark ([`sluice_publish::DeliveredMarks`]). The writer
//! records the marks in the table with each of its commits, and [`Notifier::finish`] records
//! them in a commit of their own once the writer is done. So:
//! - every change is delivered at least once, after any crash: a change is only marked
//!   delivered after its receiver accepted it, and a restart reads the changes after the
//!   recorded mark again;
//! - a change is delivered with the same key every time (`<table id>/<address>/<version>`);
//! - only committed versions are notified (the feed reads the log);
//! - a target that keeps failing holds back its own notifications only: the writer never
//!   waits for a notifier, and each target has its own task and mark.

mod target;

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use deltalake::DeltaTable;
use sluice_publish::{
    notified_through, record_notified, ChangeFeed, ChangeReason, DeliveredMarks, NotifyLogError,
    OpenError, WindowChange,
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
    pub location: String,
    pub storage_options: HashMap<String, String>,
    pub pipeline: String,
    /// Pause between two looks at the log that found nothing new.
    pub poll_ms: u64,
    /// Backoff of a failing delivery: doubles from `retry_initial_ms` up to `retry_max_ms`.
    pub retry_initial_ms: u64,
    pub retry_max_ms: u64,
    /// The marks the writer records with its commits (`TableOptions::notified`).
    pub marks: DeliveredMarks,
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
        let (stop, stop_rx) = watch::channel(None);
        let mut tasks = Vec::with_capacity(targets.len());
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
            let through = notified_through(&table, &options.pipeline, &spec.name)
                .await
                .map_err(|e| in_target(e.into()))?
                .unwrap_or(current)
                .min(current);
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
                stop: stop_rx.clone(),
                report: TargetReport {
                    name: name.clone(),
                    through,
                    table_version: current,
                    ..TargetReport::default()
                },
            };
            tasks.push((name, tokio::spawn(task.run())));
        }
        Ok(Notifier {
            options,
            stop,
            tasks,
        })
    }

    /// Delivers what the table holds now (its latest version), for up to `drain_ms`, then
    /// stops every task and records each target's mark in a commit of its own (call it once
    /// the writer is done: nothing else commits then). Returns one report per target.
    /// `at_ms` is the caller's clock, for the record's `lastUpdated`.
    pub async fn finish(self, drain_ms: u64, at_ms: i64) -> Result<Vec<TargetReport>, NotifyError> {
        let mut table = open(&self.options, None).await?;
        let through = table.version().unwrap_or(0);
        let deadline = tokio::time::Instant::now() + Duration::from_millis(drain_ms);
        let _ = self.stop.send(Some(Stop { through, deadline }));
        let mut reports = Vec::with_capacity(self.tasks.len());
        for (name, task) in self.tasks {
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

async fn open(options: &NotifierOptions, version: Option<u64>) -> Result<DeltaTable, OpenError> {
    sluice_publish::open_table(&options.location, &options.storage_options, version).await
}

struct TargetTask {
    options: NotifierOptions,
    spec: TargetSpec,
    feed: ChangeFeed,
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

    async fn follow(&mut self) -> Result<(), NotifyError> {
        let name = self.spec.name.clone();
        let mut table = open(&self.options, None).await?;
        loop {
            let stop = *self.stop.borrow();
            if let Some(stop) = stop {
                if self.feed.through() >= stop.through
                    || tokio::time::Instant::now() >= stop.deadline
                {
                    return Ok(());
                }
            }
            table
                .update_incremental(None)
                .await
                .map_err(NotifyLogError::from)?;
            let latest = table.version().unwrap_or(0);
            self.report.table_version = latest;
            metrics::gauge!("sluice_notify_behind_versions", "target" => name.clone())
                .set(latest.saturating_sub(self.feed.through()) as f64);
            if latest <= self.feed.through() {
                let wait = tokio::time::sleep(Duration::from_millis(self.options.poll_ms));
                tokio::select! {
                    _ = wait => {}
                    _ = self.stop.changed() => {}
                }
                continue;
            }
            // A bounded step: at most VERSIONS_PER_READ_MAX commits' changes in memory.
            let upto = latest.min(self.feed.through() + VERSIONS_PER_READ_MAX);
            let step = if upto < latest {
                open(&self.options, Some(upto)).await?
            } else {
                table.clone()
            };
            let changes = self.feed.read(&step).await?;
            for change in &changes {
                if !self.spec.on.contains(&change.reason) {
                    self.report.skipped += 1;
                    continue;
                }
                if !self.deliver(change).await {
                    return Ok(()); // stopped while the receiver was failing
                }
            }
            self.report.through = self.feed.through();
            self.options.marks.deliver(&name, self.feed.through());
        }
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
