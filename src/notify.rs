//! `sluice run`'s notifier: its targets (validated by `args::notify_targets`) started beside
//! the writer and finished after it. The delivery itself is sluice-notify's.

use anyhow::Context;
use sluice_notify::{
    parse_reasons, CommandTarget, HttpTarget, Notifier, NotifierOptions, NowMs, Recording, Target,
    TargetReport, TargetSpec,
};
use sluice_publish::TableOptions;

use crate::args::{timeout_ms, RunSettings};
use crate::exit::usage;

/// Backoff of a failing delivery.
const RETRY_INITIAL_MS: u64 = 500;
const RETRY_MAX_MS: u64 = 30_000;
/// A running notifier's pause between looks at the log that found nothing new.
const POLL_MS: u64 = 200;
/// How often a notifier beside the writers of a sharded table (a Kafka run) records what it
/// delivered, in a commit of its own: a restart sends again at most this much.
const RECORD_EVERY_MS: u64 = 5_000;

/// Starts the run's notifier (none without targets). `writer` are the writer's options: the
/// notifier reads the table through the same store and retries; with `sharded` false its
/// marks (`TableOptions::notified`) are the ones the writer's commits record, with `sharded`
/// (the writers of a Kafka run, one per partition) it records them in commits of its own.
pub async fn start(
    settings: &RunSettings,
    writer: &TableOptions,
    sharded: bool,
) -> anyhow::Result<Option<Notifier>> {
    if settings.notify.is_empty() {
        return Ok(None);
    }
    let mut specs = Vec::with_capacity(settings.notify.len());
    for t in &settings.notify {
        let timeout = timeout_ms(t).map_err(usage)?;
        let target: Box<dyn Target> =
            match (&t.url, &t.command) {
                (Some(url), _) => Box::new(HttpTarget::new(url, timeout).with_context(|| {
                    format!("notify target {}: building its HTTP client", t.name)
                })?),
                (None, Some(argv)) => Box::new(
                    CommandTarget::new(argv.clone(), timeout)
                        .ok_or_else(|| usage(format!("notify target {}: empty command", t.name)))?,
                ),
                (None, None) => unreachable!("checked: a url or a command"),
            };
        specs.push(TargetSpec {
            name: t.name.clone(),
            on: parse_reasons(&t.on).map_err(usage)?,
            target,
        });
    }
    let options = NotifierOptions {
        table: TableOptions {
            storage_options: writer.storage_options.clone(),
            store: writer.store.clone(),
            retry: writer.retry,
            ..TableOptions::new(writer.location.clone())
        },
        pipeline: settings.pipeline.clone(),
        poll_ms: POLL_MS,
        retry_initial_ms: RETRY_INITIAL_MS,
        retry_max_ms: RETRY_MAX_MS,
        // A sharded table's writers must not carry the marks: they would all commit one
        // `txn` appId, and their commits would conflict with each other (the notifier
        // records in commits of its own instead).
        marks: if sharded {
            Default::default()
        } else {
            writer.notified.clone()
        },
        recording: if sharded {
            Recording::OwnCommits {
                every_ms: RECORD_EVERY_MS,
                clock: NowMs(std::sync::Arc::new(|| {
                    chrono::Utc::now().timestamp_millis()
                })),
            }
        } else {
            Recording::WithWriter
        },
    };
    let notifier = Notifier::start(options, specs)
        .await
        .context("starting the notify targets")?;
    Ok(Some(notifier))
}

/// Once the writer is done: delivers what the table holds for up to `--notify-drain`,
/// records each target's delivered version, and warns about what is left for the next run.
pub async fn finish(
    notifier: Option<Notifier>,
    settings: &RunSettings,
    now_ms: i64,
) -> anyhow::Result<Vec<TargetReport>> {
    let Some(notifier) = notifier else {
        return Ok(Vec::new());
    };
    let reports = notifier
        .finish(settings.output.notify_drain_ms, now_ms)
        .await
        .context("recording the delivered notifications")?;
    for r in &reports {
        if let Some(error) = &r.error {
            crate::warnings::warn(&format!(
                "notify target {}: stopped: {error}; delivered through version {}",
                r.name, r.through
            ));
        } else if r.through < r.table_version {
            crate::warnings::warn(&format!(
                "notify target {}: changes after table version {} are not delivered yet ({} failed attempts; --notify-drain {} ms passed); the next run delivers them",
                r.name, r.through, r.failed_attempts, settings.output.notify_drain_ms
            ));
        }
    }
    Ok(reports)
}
