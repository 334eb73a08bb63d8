//! `sluice backfill` and `sluice rewrite`: recompute windows from a bounded source through the
//! stream's own publish path (the batch rerun).

use std::time::Instant;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sluice_ingest::{BackfillProgress, NdjsonBackfill, RawShape, RestartPolicy};
use sluice_window::{parse_instant, EventTime, Window};

use crate::args::{parse_range_of, RunArgs, RunSettings};
use crate::exit::usage;
use crate::open::open_deriver;
use crate::open::{attempt, wire, SystemClock};

#[derive(Debug, Args)]
pub struct BackfillArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// First instant of the range: windows starting at or after it, e.g. 2026-10-03T00:00Z.
    #[arg(long)]
    pub from: String,
    /// End of the range (exclusive): windows starting before it.
    #[arg(long)]
    pub to: String,
    #[command(flatten)]
    pub force: ForceArg,
}

#[derive(Debug, Args)]
pub struct RewriteArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Any instant in the window to recompute, e.g. 2026-10-03T14.
    #[arg(long)]
    pub at: String,
    #[command(flatten)]
    pub force: ForceArg,
}

#[derive(Debug, Args)]
pub struct ForceArg {
    /// Republish windows whose publication already covers the whole source (by default they
    /// are left unchanged, so a second run changes nothing): after the source's bytes were
    /// replaced in place, say, which positions cannot tell.
    #[arg(long)]
    pub force: bool,
}

/// The range `[--from, --to)` of a backfill or derive.
pub fn parse_range(args: &BackfillArgs) -> anyhow::Result<(EventTime, EventTime)> {
    parse_range_of(&args.from, &args.to)
}

pub async fn backfill_command(args: BackfillArgs) -> anyhow::Result<()> {
    let (from, to) = parse_range(&args)?;
    let settings = crate::open::resolve(args.run).await?;
    recompute(settings, from, to, "backfill", args.force.force).await
}

pub async fn rewrite_command(args: RewriteArgs) -> anyhow::Result<()> {
    let at = parse_instant(&args.at).map_err(|e| usage(format!("--at: {e}")))?;
    let settings = crate::open::resolve(args.run).await?;
    let window = Window::containing(settings.window, at);
    let (from, to) = (window.start(), window.end());
    recompute(settings, from, to, "rewrite", args.force.force).await
}

async fn recompute(
    settings: RunSettings,
    from: EventTime,
    to: EventTime,
    what: &str,
    force: bool,
) -> anyhow::Result<()> {
    if settings.mode != sluice_ingest::PublishMode::Swap {
        return Err(usage(format!(
            "--mode merge: {what} publishes by swap; recompute a merge-mode table by running the stream over the input again (merges are idempotent)"
        )));
    }
    if settings.follow.is_some() {
        return Err(usage(format!(
            "--follow: {what} reads a bounded source; use it with run"
        )));
    }
    if let Some(kafka) = &settings.kafka {
        return recompute_kafka(&settings, kafka, (from, to), what, force).await;
    }
    let (decode, config) = crate::open::runner(&settings);
    if crate::open::table_is_sharded(&crate::open::table_options(&settings, &config, &decode)).await
    {
        return Err(usage(format!(
            "--source ndjson: the table at {} is a Kafka table, whose rows are kept per topic partition (a shard each); an NDJSON file does not say which partition each line came from, so its windows cannot be recomputed from it: {what} it from its topic (--source kafka:TOPIC --brokers HOST:PORT)",
            settings.table
        )));
    }
    let started = Instant::now();
    let mut w = wire(&settings).await?;
    let attempt = attempt(&settings);
    // Derived queries are checked before anything is recomputed.
    let deriver = open_deriver(
        &settings,
        &mut w.table,
        &w.options,
        &attempt,
        w.config.stage.clone(),
    )
    .await?;
    let clock = SystemClock;
    let mut bar = Progress::new(what);
    let (summary, mut table) =
        backfill_restarting(w, (from, to), what, force, &attempt, &mut bar).await?;
    bar.finish();
    let derived = match deriver {
        Some(mut d) => {
            let policy = RestartPolicy::new(settings.tuning.restarts_max);
            d.keep_up_restarting(&mut table, RawShape::Whole, policy, &clock)
                .await
                .context("recomputing the derived tables")?;
            format!(
                "; {} derived windows recomputed, {} published",
                d.summary.computed, d.summary.published
            )
        }
        None => String::new(),
    };
    report(
        &settings,
        &summary,
        (from, to),
        what,
        serde_json::json!({}),
        &derived,
        started,
    )
}

/// Recomputes `[from, to)` from the NDJSON source into `w`'s table by the one restart rule
/// ([`NdjsonBackfill`]).
async fn backfill_restarting(
    w: crate::open::Wired,
    (from, to): (EventTime, EventTime),
    what: &str,
    force: bool,
    attempt: &str,
    bar: &mut Progress,
) -> anyhow::Result<(sluice_ingest::BackfillSummary, sluice_publish::WindowTable)> {
    let backfill = NdjsonBackfill {
        config: &w.config,
        source: &w.source,
        decoder: &w.decoder,
        table: &w.options,
        attempt,
    };
    backfill
        .run(w.table, (from, to), force, &SystemClock, &mut |p| {
            bar.show(p)
        })
        .await
        .with_context(|| format!("{what} of [{}, {})", from.to_rfc3339(), to.to_rfc3339()))
}

/// Prints a recomputation's summary line (or its JSON object, with `extra`'s fields added;
/// `detail` ends the line), and fails with exit 3 when every line of the source was rejected.
fn report(
    settings: &RunSettings,
    summary: &sluice_ingest::BackfillSummary,
    (from, to): (EventTime, EventTime),
    what: &str,
    extra: serde_json::Value,
    detail: &str,
    started: Instant,
) -> anyhow::Result<()> {
    if settings.output.json {
        let mut json = serde_json::json!({
            "from": from.to_rfc3339(),
            "to": to.to_rfc3339(),
            "windows_republished": summary.windows_published,
            "windows_unchanged": summary.windows_unchanged,
            "rows_in_range": summary.rows,
            "rows_outside": summary.outside,
            "rejected": summary.rejected,
            "rejected_by_reason": summary.rejections.by_reason,
            "expectations": summary.expectations,
            "table_version": summary.last_version,
            "seconds": started.elapsed().as_secs_f64(),
            "busy_seconds": crate::words::busy_seconds(&summary.busy_us),
        });
        if let (Some(json), serde_json::Value::Object(extra)) = (json.as_object_mut(), extra) {
            json.extend(extra);
        }
        println!("{json}");
    } else {
        print_summary(summary, from, to, what, detail, started);
    }
    if summary.rows + summary.outside == 0 && summary.rejected > 0 {
        let first = summary
            .rejections
            .first
            .as_ref()
            .map_or(String::new(), |f| {
                format!("{} at {}:{}: {}", f.reason, f.source, f.offset, f.detail)
            });
        return Err(crate::exit::Exit::error(
            crate::exit::Exit::ALL_REJECTED,
            format!(
                "every line of the source ({}) was rejected (first: {first}); nothing was recomputed",
                summary.rejected
            ),
        ));
    }
    Ok(())
}

/// A backfill or rewrite of a Kafka table from its topic: each partition's retained messages
/// recomputed into its shard ([`sluice_ingest::KafkaBackfill`]).
#[cfg(feature = "kafka")]
async fn recompute_kafka(
    settings: &RunSettings,
    kafka: &crate::args::KafkaSettings,
    (from, to): (EventTime, EventTime),
    what: &str,
    force: bool,
) -> anyhow::Result<()> {
    let stream_only = [
        ("--until-idle", kafka.until_idle_ms.is_some()),
        ("--idle-timeout", kafka.idle_timeout_ms.is_some()),
        ("--max-events", kafka.max_events.is_some()),
    ];
    if let Some((flag, _)) = stream_only.iter().find(|(_, given)| *given) {
        return Err(usage(format!(
            "{flag}: a {what} reads every partition of the topic to where it ended when the {what} began"
        )));
    }
    let started = Instant::now();
    let (decode, config) = crate::open::runner(settings);
    let crate::open::ShardedRaw {
        table: mut raw,
        decoder,
        options,
        derived_options,
    } = crate::open::open_sharded_raw(settings, decode, &config).await?;
    let attempt = attempt(settings);
    // Derived queries are checked before anything is recomputed.
    let deriver = open_deriver(
        settings,
        &mut raw,
        &derived_options,
        &attempt,
        config.stage_options(),
    )
    .await?;
    let backfill = sluice_ingest::KafkaBackfill {
        config,
        kafka: kafka.options(),
        table: options,
        record_schema: Some(decoder.schema().clone()),
        decoder,
        attempt,
    };
    let clock = SystemClock;
    let mut bar = Progress::new(what);
    let summary = backfill
        .run(from, to, force, &clock, &mut |p| bar.show(p))
        .await
        .with_context(|| {
            format!(
                "{what} of [{}, {}) from topic {}",
                from.to_rfc3339(),
                to.to_rfc3339(),
                kafka.topic
            )
        })?;
    bar.finish();
    let derived = match deriver {
        Some(mut d) => {
            let policy = RestartPolicy::new(settings.tuning.restarts_max);
            let shape = RawShape::Sharded {
                pipeline: &settings.pipeline,
            };
            d.keep_up_restarting(&mut raw, shape, policy, &clock)
                .await
                .context("recomputing the derived tables")?;
            format!(
                "; {} derived windows recomputed, {} published",
                d.summary.computed, d.summary.published
            )
        }
        None => String::new(),
    };
    let read = format!(
        "; {} messages of {} partitions of {}{derived}",
        summary.messages, summary.partitions, kafka.topic
    );
    report(
        settings,
        &summary.backfill,
        (from, to),
        what,
        serde_json::json!({"partitions": summary.partitions, "messages": summary.messages}),
        &read,
        started,
    )
}

#[cfg(not(feature = "kafka"))]
async fn recompute_kafka(
    _settings: &RunSettings,
    kafka: &crate::args::KafkaSettings,
    _range: (EventTime, EventTime),
    _what: &str,
    _force: bool,
) -> anyhow::Result<()> {
    Err(usage(format!(
        "--source kafka:{}: this sluice was built without Kafka support (the `kafka` cargo feature)",
        kafka.topic
    )))
}

fn print_summary(
    summary: &sluice_ingest::BackfillSummary,
    from: EventTime,
    to: EventTime,
    what: &str,
    derived: &str,
    started: Instant,
) {
    println!(
        "sluice {what}: windows in [{}, {}): {} republished, {} already complete and left unchanged; \
         {} rows in range, {} outside ignored, {} bad lines ignored{}; table version {}{derived}; {:.2} s",
        from.to_rfc3339(),
        to.to_rfc3339(),
        summary.windows_published,
        summary.windows_unchanged,
        summary.rows,
        summary.outside,
        summary.rejected,
        match summary.expectations.is_empty() {
            true => String::new(),
            false => format!(
                " (expectations broken: {})",
                crate::words::violations(&summary.expectations)
            ),
        },
        summary
            .last_version
            .map_or_else(|| "unchanged".to_string(), |v| v.to_string()),
        started.elapsed().as_secs_f64()
    );
}

/// The progress bar of a backfill: bytes read, then windows published. indicatif draws it on
/// stderr only when stderr is a terminal, so logs and pipes get the summary line alone.
struct Progress {
    what: &'static str,
    bar: ProgressBar,
    phase: Option<&'static str>,
    /// Where no bar is drawn: a line every 10 s.
    lines: crate::progress::ProgressLines,
}

impl Progress {
    fn new(what: &str) -> Self {
        Progress {
            what: if what == "rewrite" {
                "rewrite"
            } else {
                "backfill"
            },
            bar: ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
            phase: None,
            lines: crate::progress::ProgressLines::new(if what == "rewrite" {
                "rewrite"
            } else {
                "backfill"
            }),
        }
    }

    fn show(&mut self, p: BackfillProgress) {
        let (phase, done, total) = match p {
            BackfillProgress::Read { bytes, total } => ("reading", bytes, total),
            BackfillProgress::Messages { read, total } => ("reading", read, total),
            BackfillProgress::Published { done, total } => ("publishing", done, total),
        };
        let messages = matches!(p, BackfillProgress::Messages { .. });
        self.lines.tick(|| match p {
            BackfillProgress::Read { bytes, total } => {
                format!("{} read", crate::progress::share_of_bytes(bytes, total))
            }
            BackfillProgress::Messages { read, total } => {
                format!("{read} of {total} messages read")
            }
            BackfillProgress::Published { done, total } => {
                format!("{done} of {total} windows published")
            }
        });
        if self.phase != Some(phase) {
            let template = if messages {
                "{prefix} {msg:<10} [{bar:30}] {pos}/{len} messages {per_sec} eta {eta}"
            } else if phase == "reading" {
                "{prefix} {msg:<10} [{bar:30}] {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec} eta {eta}"
            } else {
                "{prefix} {msg:<10} [{bar:30}] {pos}/{len} windows, {elapsed} elapsed"
            };
            let style = ProgressStyle::with_template(template)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
            self.bar.set_style(style);
            self.bar.set_prefix(self.what);
            self.bar.set_message(phase);
            self.bar.reset();
            self.phase = Some(phase);
        }
        self.bar.set_length(total);
        self.bar.set_position(done);
    }

    fn finish(&mut self) {
        self.bar.finish_and_clear();
    }
}
