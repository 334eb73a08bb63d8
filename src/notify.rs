//! `sluice run`'s notify targets (`[[notify]]` in the config file, `--notify-url`,
//! `--notify-command`): validated here, started beside the writer, finished after it. The
//! delivery itself is sluice-notify's.

use std::collections::BTreeSet;

use anyhow::Context;
use serde::Deserialize;
use sluice_notify::{
    parse_reasons, CommandTarget, HttpTarget, Notifier, NotifierOptions, NowMs, Recording, Target,
    TargetReport, TargetSpec,
};
use sluice_publish::{valid_target_name, TableOptions};
use sluice_window::parse_duration_ms;

use crate::args::RunSettings;
use crate::usage;

/// One delivery attempt's bound unless a target gives its own.
const TIMEOUT_DEFAULT: &str = "10s";
/// Backoff of a failing delivery.
const RETRY_INITIAL_MS: u64 = 500;
const RETRY_MAX_MS: u64 = 30_000;
/// A running notifier's pause between looks at the log that found nothing new.
const POLL_MS: u64 = 200;
/// How often a notifier beside the writers of a sharded table (a Kafka run) records what it
/// delivered, in a commit of its own: a restart sends again at most this much.
const RECORD_EVERY_MS: u64 = 5_000;

/// A `[[notify]]` target of the config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// Names the target's bookkeeping in the table: keep it when the URL or command changes.
    pub name: String,
    /// POST to this http:// or https:// URL.
    #[serde(default)]
    pub url: Option<String>,
    /// Or run this command (no shell: `["sh", "-c", "..."]` for one), JSON on stdin.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// `complete`, `rewritten`; both when left out.
    #[serde(default)]
    pub on: Vec<String>,
    /// One attempt's bound, e.g. 10s. [default: 10s]
    #[serde(default)]
    pub timeout: Option<String>,
}

/// The targets given as flags: `--notify-url NAME=URL`, `--notify-command NAME=COMMAND` (run
/// by `sh -c`).
pub fn targets_from_flags(
    urls: &[String],
    commands: &[String],
) -> anyhow::Result<Vec<NotifyConfig>> {
    let mut out: Vec<NotifyConfig> = Vec::new();
    let given = urls
        .iter()
        .map(|u| ("--notify-url", u))
        .chain(commands.iter().map(|c| ("--notify-command", c)));
    for (flag, text) in given {
        let (name, value) = crate::args::key_value(flag, text)?;
        if out.iter().any(|t| t.name == name) {
            return Err(usage(format!("{flag}: target {name} is given twice")));
        }
        let mut target = NotifyConfig {
            name,
            ..NotifyConfig::default()
        };
        if flag == "--notify-url" {
            target.url = Some(value);
        } else {
            target.command = Some(vec!["sh".into(), "-c".into(), value]);
        }
        out.push(target);
    }
    Ok(out)
}

/// Checks every target: a valid, unique name; a URL or a command, not both; known reasons;
/// a valid timeout.
pub fn check(targets: &[NotifyConfig]) -> anyhow::Result<()> {
    let mut names = BTreeSet::new();
    for t in targets {
        let at = format!("notify target {:?}", t.name);
        if !valid_target_name(&t.name) {
            return Err(usage(format!(
                "{at}: use 1 to 64 letters, digits, '_', '-' or '.' in a name"
            )));
        }
        if !names.insert(&t.name) {
            return Err(usage(format!("{at} is given twice")));
        }
        match (&t.url, &t.command) {
            (Some(url), None) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(usage(format!(
                        "{at}: url {url:?} is not an http:// or https:// URL"
                    )));
                }
            }
            (None, Some(argv)) if !argv.is_empty() && !argv[0].is_empty() => {}
            (None, Some(_)) => return Err(usage(format!("{at}: the command is empty"))),
            (Some(_), Some(_)) => {
                return Err(usage(format!("{at}: give a url or a command, not both")))
            }
            (None, None) => return Err(usage(format!("{at}: give a url or a command"))),
        }
        parse_reasons(&t.on).map_err(|e| usage(format!("{at}: on: {e}")))?;
        timeout_ms(t).map_err(|e| usage(format!("{at}: timeout: {e}")))?;
    }
    Ok(())
}

fn timeout_ms(t: &NotifyConfig) -> Result<u64, String> {
    let ms = parse_duration_ms(t.timeout.as_deref().unwrap_or(TIMEOUT_DEFAULT))
        .map_err(|e| e.to_string())?;
    if ms <= 0 {
        return Err("must be more than 0".into());
    }
    Ok(ms as u64)
}

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
        .finish(settings.notify_drain_ms, now_ms)
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
                r.name, r.through, r.failed_attempts, settings.notify_drain_ms
            ));
        }
    }
    Ok(reports)
}
