//! `sluice run`: the pipeline `open` wired, run over NDJSON files or a Kafka topic, with its
//! progress, notifier and summary.

use std::time::Instant;

use anyhow::Context;
use sluice_ingest::{Clock, Follow, Ingester};
use sluice_publish::{DeadLetterTable, TableOptions};

use crate::args::{RunArgs, RunSettings};
use crate::exit::usage;
use crate::open::{attempt, open_deriver, resolve, wire, SystemClock};
use crate::signals::{Signal, Stop};
use crate::words::{busy_seconds, counted};

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let mut settings = resolve(args).await?;
    let dry_run = match settings.dry_run {
        true => Some(crate::dry_run::DryRun::start(&mut settings).await?),
        false => None,
    };
    if let Some(addr) = settings.output.metrics_addr {
        crate::metrics::serve(addr)?;
    }
    let started = Instant::now();
    let (summary, version, kafka, notified) = match &settings.kafka {
        None => {
            let (s, v, n) = ingest(&settings, started).await?;
            (s, v, None, n)
        }
        #[cfg(feature = "kafka")]
        Some(k) => {
            let (s, version, n) = ingest_kafka(&settings, k, started).await?;
            let kafka = (s.messages, s.partitions_assigned, s.partitions_revoked);
            (s.run, version, Some(kafka), n)
        }
        #[cfg(not(feature = "kafka"))]
        Some(k) => {
            return Err(usage(format!(
                "--source kafka:{}: this sluice was built without Kafka support (the `kafka` cargo feature)",
                k.topic
            )))
        }
    };
    let secs = started.elapsed().as_secs_f64();
    let version = summary.last_version.or(version);
    if let Some(dry_run) = dry_run {
        return dry_run.finish(&settings, &summary).await;
    }
    print_summary(&settings, &summary, version, kafka, &notified, secs);
    crate::warnings::warn_about_input(&summary, &settings)
}

/// Prints the summary, as text or JSON (`--format`); `kafka`: messages, partition
/// assignments and revocations of a Kafka run.
fn print_summary(
    settings: &RunSettings,
    s: &sluice_ingest::RunSummary,
    version: Option<u64>,
    kafka: Option<(u64, u64, u64)>,
    notified: &[sluice_notify::TargetReport],
    secs: f64,
) {
    if settings.output.json {
        let mut json = summary_json(s, version, secs, &settings.dlq);
        if !notified.is_empty() {
            json["notifications"] = notified
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "target": r.name,
                        "delivered": r.delivered,
                        "failed_attempts": r.failed_attempts,
                        "through_version": r.through,
                        "table_version": r.table_version,
                    })
                })
                .collect();
        }
        if let Some((messages, assigned, revoked)) = kafka {
            json["messages"] = messages.into();
            json["partition_assignments"] = assigned.into();
            json["partitions_revoked"] = revoked.into();
        }
        println!("{json}");
    } else {
        let from = kafka.map_or(String::new(), |(m, a, r)| {
            format!(" from {m} messages of {a} partition assignments ({r} revoked)")
        });
        let mut line = summary_line(s, &from, version, secs, &settings.dlq);
        if !notified.is_empty() {
            let delivered: u64 = notified.iter().map(|r| r.delivered).sum();
            line += &format!(
                "; {} delivered to {}",
                counted(delivered, "notification"),
                counted(notified.len() as u64, "target")
            );
        }
        println!("{line}");
    }
}

/// The run's summary as one line of text.
fn summary_line(
    s: &sluice_ingest::RunSummary,
    from: &str,
    version: Option<u64>,
    secs: f64,
    dlq: &str,
) -> String {
    let mut extra = String::new();
    if s.rejected + s.late_dead_lettered > 0 {
        extra += &format!(
            " ({} late dead-lettered; see the dead-letter table {dlq})",
            s.late_dead_lettered
        );
    }
    if s.restarts > 0 {
        extra += &format!("; resumed from the table {}", counted(s.restarts, "time"));
    }
    if s.merges_unchanged > 0 {
        extra += &format!("; {} changed nothing", counted(s.merges_unchanged, "merge"));
    }
    if s.idle_seals > 0 {
        extra += &format!("; {} idle seals", s.idle_seals);
    }
    if s.windows_compacted > 0 {
        extra += &format!("; {} windows compacted", s.windows_compacted);
    }
    if s.windows_expired > 0 {
        extra += &format!("; {} windows expired", s.windows_expired);
    }
    if s.dead_letters_expired > 0 {
        extra += &format!("; {} dead letters expired", s.dead_letters_expired);
    }
    if s.derived.computed > 0 {
        extra += &format!(
            "; {} derived windows recomputed, {} published",
            s.derived.computed, s.derived.published
        );
    }
    if !s.fields_added.is_empty() {
        extra += &format!("; new columns: {}", s.fields_added.join(", "));
    }
    if !s.expectations.is_empty() {
        extra += &format!(
            "; expectations broken: {}",
            crate::words::violations(&s.expectations)
        );
    }
    if s.ahead > 0 {
        extra += &format!(
            "; {} events far ahead of the stream (their windows published on their own)",
            s.ahead
        );
    }
    format!(
        "sluice run: {}{from}; {} in {} (table version {}); {} replayed and skipped, {} late, {} rejected{extra}; {:.1} MB in {:.2} s{}",
        counted(s.rows - s.replayed, "record"),
        counted(s.windows_published, "window publication"),
        counted(s.commits, "commit"),
        version.map_or("-".into(), |v| v.to_string()),
        s.replayed,
        s.late,
        s.rejected,
        s.bytes as f64 / 1e6,
        secs,
        rate(s.rows, secs),
    )
}

/// " (N records/s)", or nothing when the run was too short to say.
fn rate(records: u64, secs: f64) -> String {
    if secs < 0.01 {
        String::new()
    } else {
        format!(" ({:.0} records/s)", records as f64 / secs)
    }
}

/// The run's summary as one JSON object (`--format json`; fields documented in docs/cli.md).
fn summary_json(
    s: &sluice_ingest::RunSummary,
    version: Option<u64>,
    secs: f64,
    dlq: &str,
) -> serde_json::Value {
    serde_json::json!({
        "records": s.rows - s.replayed,
        "replayed": s.replayed,
        "window_publications": s.windows_published,
        "commits": s.commits,
        "table_version": version,
        "late": s.late,
        "late_dead_lettered": s.late_dead_lettered,
        "rejected": s.rejected,
        "rejected_by_reason": s.rejections.by_reason,
        "expectations": s.expectations,
        "dead_letter_table": dlq,
        "duplicates_kept": s.duplicates_kept,
        "restarts": s.restarts,
        "merges_unchanged": s.merges_unchanged,
        "idle_seals": s.idle_seals,
        "windows_compacted": s.windows_compacted,
        "windows_expired": s.windows_expired,
        "dead_letters_expired": s.dead_letters_expired,
        "derived_windows_recomputed": s.derived.computed,
        "derived_windows_published": s.derived.published,
        "columns_added": s.fields_added,
        "events_far_ahead": s.ahead,
        "rows_with_ignored_fields": s.rows_with_ignored_fields,
        "tombstones_skipped": s.tombstones_skipped,
        "ignored_fields": s.ignored_fields.named,
        "ignored_fields_others": s.ignored_fields.others,
        "bytes": s.bytes,
        "seconds": secs,
        "busy_seconds": busy_seconds(&s.busy_us),
    })
}

/// A Kafka run: the processes of one consumer group share the topic's partitions, each
/// partition a shard of the table.
#[cfg(feature = "kafka")]
async fn ingest_kafka(
    settings: &RunSettings,
    kafka: &crate::args::KafkaSettings,
    started: Instant,
) -> anyhow::Result<(
    sluice_ingest::KafkaSummary,
    Option<u64>,
    Vec<sluice_notify::TargetReport>,
)> {
    let (decode, config) = crate::open::runner(settings);
    let crate::open::ShardedRaw {
        mut table,
        decoder,
        options,
        derived_options,
    } = crate::open::open_sharded_raw(settings, decode, &config).await?;
    let deriver = open_deriver(
        settings,
        &mut table,
        &derived_options,
        &attempt(settings),
        config.stage_options(),
    )
    .await?;
    // The partitions' writers never carry the marks (their commits would conflict on them):
    // the notifier records what it delivered in commits of its own.
    let notifier = crate::notify::start(settings, &options, true).await?;
    let run = sluice_ingest::KafkaRun {
        config,
        kafka: kafka.options(),
        dlq: TableOptions {
            location: settings.dlq.clone(),
            contract: None,
            ..options.clone()
        },
        table: options,
        record_schema: Some(decoder.schema().clone()),
        decoder,
        attempt: attempt(settings),
        until_idle_ms: kafka.until_idle_ms,
        idle_timeout_ms: kafka.idle_timeout_ms,
        max_events: kafka.max_events,
        tick_ms: sluice_ingest::TICK_MS_DEFAULT,
    };
    drop(table);
    let stop = Stop::on_signal();
    let summary = run
        .run_deriving(&SystemClock, stop.rx.clone(), deriver)
        .await
        .context("ingesting from Kafka")?;
    let version = sluice_publish::open_table(&settings.table, &settings.storage_options, None)
        .await
        .ok()
        .and_then(|t| t.version());
    if stop.signal() == Some(Signal::Interrupt) {
        let secs = started.elapsed().as_secs_f64();
        print_summary(settings, &summary.run, version, None, &[], secs);
        return Err(stop
            .interrupted(settings, "the Kafka run stopped after its current chunk")
            .await);
    }
    if stop.signal() == Some(Signal::Terminate) {
        crate::warnings::warn(crate::signals::STOPPED_NOTE);
    }
    let notified = crate::notify::finish(notifier, settings, SystemClock.now_ms()).await?;
    Ok((summary, version, notified))
}

/// Runs one ingestion; returns the summary and the table version at the end.
pub async fn ingest(
    settings: &RunSettings,
    started: Instant,
) -> anyhow::Result<(
    sluice_ingest::RunSummary,
    Option<u64>,
    Vec<sluice_notify::TargetReport>,
)> {
    let stop = Stop::on_signal();
    if !wait_for_first_records(settings, stop.rx.clone()).await? {
        if stop.signal() == Some(Signal::Interrupt) {
            return Err(stop
                .interrupted(
                    settings,
                    "the run stopped waiting for the source's first records",
                )
                .await);
        }
        crate::warnings::warn(crate::signals::STOPPED_NOTE);
        return Ok((sluice_ingest::RunSummary::default(), None, Vec::new()));
    }
    let w = wire(settings).await?;
    // Beside the writer: it records what the targets got with its own commits.
    let notifier = crate::notify::start(settings, &w.options, false).await?;
    let clock = SystemClock;
    let total_bytes: u64 = w.source.files().iter().map(|f| f.size).sum();
    let ingester = recover(settings, w, &clock).await?;
    let mut stopped = stop.rx.clone();
    let (summary, table) = match settings.follow {
        // A bounded run stops at once: everything it published is in the table, and the
        // next run resumes from the positions the table records (as after any crash).
        None => tokio::select! {
            ran = with_progress_bar(ingester, total_bytes).run() => ran,
            _ = stopped.wait_for(|stop| *stop) => {
                return Err(stop.interrupted(settings, "the run stopped").await);
            }
        },
        Some(f) => {
            ingester
                .follow(Follow {
                    poll_ms: f.poll_ms,
                    idle_timeout_ms: f.idle_timeout_ms,
                    until_idle_ms: f.until_idle_ms,
                    stop: stop.rx.clone(),
                })
                .await
        }
    }
    .context("ingesting")?;
    if stop.signal() == Some(Signal::Interrupt) {
        // The summary first, then what the stop left unpublished.
        let version = summary.last_version.or(table.version());
        let secs = started.elapsed().as_secs_f64();
        print_summary(settings, &summary, version, None, &[], secs);
        return Err(stop
            .interrupted(settings, "the followed run stopped after its current chunk")
            .await);
    }
    if stop.signal() == Some(Signal::Terminate) {
        crate::warnings::warn(crate::signals::STOPPED_NOTE);
    }
    let notified = crate::notify::finish(notifier, settings, clock.now_ms()).await?;
    // A table this run created and landed nothing in is not kept: its contract would bind
    // the corrected run to the options that rejected every record.
    if summary.rows == 0
        && table
            .remove_if_unwritten()
            .await
            .with_context(|| format!("removing the empty table {}", settings.table))?
    {
        crate::warnings::warn(&format!(
            "sluice run: nothing landed, so the table {} this run created is not kept (a run with other options creates it anew); its dead letters stay in {}",
            settings.table, settings.dlq
        ));
        return Ok((summary, None, notified));
    }
    Ok((summary, table.version(), notified))
}

/// The run's ingester over the wired pipeline: its dead-letter table opened, its state
/// recovered from the table, its derived tables brought up to the raw table.
async fn recover<'c>(
    settings: &RunSettings,
    mut w: crate::open::Wired,
    clock: &'c SystemClock,
) -> anyhow::Result<Ingester<'c, sluice_source::NdjsonSource>> {
    let attempt = attempt(settings);
    let deriver = open_deriver(
        settings,
        &mut w.table,
        &w.options,
        &attempt,
        w.config.stage.clone(),
    )
    .await?;
    let dlq = DeadLetterTable::open_or_create(&TableOptions {
        location: settings.dlq.clone(),
        contract: None,
        notified: Default::default(),
        ..w.options.clone()
    })
    .await
    .with_context(|| format!("opening the dead-letter table {}", settings.dlq))?;
    let ingester = Ingester::recover(w.config, w.source, w.decoder, w.table, dlq, attempt, clock)
        .await
        .context("recovering the pipeline state from the table")?;
    Ok(match deriver {
        Some(d) => ingester
            .with_deriver(d)
            .await
            .context("bringing the derived tables up to the raw table")?,
        None => ingester,
    })
}

/// A followed run into a table that does not exist yet, without a schema file, waits for
/// the source's first record to infer the schema from: a new, empty file is a stream that
/// has not started. `false`: a signal stopped the wait.
async fn wait_for_first_records(
    settings: &RunSettings,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<bool> {
    let Some(follow) = &settings.follow else {
        return Ok(true);
    };
    if settings.schema.is_some() || settings.kafka.is_some() {
        return Ok(true);
    }
    let exists = sluice_publish::open_table(&settings.table, &settings.storage_options, None)
        .await
        .is_ok();
    if exists {
        return Ok(true);
    }
    let mut source = crate::open::open_source(settings, true)?;
    let mut waiting = false;
    loop {
        let head = source
            .head_lines(settings.infer_lines)
            .context("reading the source to infer its schema")?;
        let rows = head.iter().map(Vec::as_slice);
        if sluice_source::schema::infer(rows, settings.infer_lines, &[]).is_ok() {
            return Ok(true);
        }
        if !waiting {
            waiting = true;
            tracing::info!(source = %settings.source.display(), "waiting for the source's first record to infer the new table's schema from");
        }
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(follow.poll_ms)) => {}
            _ = stop.wait_for(|s| *s) => return Ok(false),
        }
        source
            .refresh()
            .map_err(|e| usage(format!("--source: {e}")))?;
    }
}

/// A bounded run with its progress on stderr (bytes read of the source, records, windows
/// published): a bar when stderr is a terminal, a line every 10 s otherwise
/// ([`crate::progress`]).
fn with_progress_bar<'a, L: sluice_source::ReplayLog>(
    ingester: Ingester<'a, L>,
    total_bytes: u64,
) -> Ingester<'a, L> {
    let mut lines = crate::progress::ProgressLines::new("run");
    let (tx, mut rx) = tokio::sync::watch::channel(sluice_ingest::RunProgress::default());
    if lines.enabled() {
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(lines.interval());
            loop {
                tokio::select! {
                    _ = ticks.tick() => {}
                    changed = rx.changed() => if changed.is_err() { return },
                }
                let p = *rx.borrow();
                lines.tick(|| {
                    format!(
                        "{} read, {} records, {} published",
                        crate::progress::share_of_bytes(p.bytes, total_bytes),
                        p.records,
                        counted(p.windows_published, "window")
                    )
                });
            }
        });
        return ingester.with_progress(tx);
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total_bytes),
        indicatif::ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "run [{bar:30}] {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec} eta {eta} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let p = *rx.borrow();
            bar.set_position(p.bytes);
            bar.set_message(format!(
                "{} records, {} published",
                p.records,
                counted(p.windows_published, "window")
            ));
        }
        bar.finish_and_clear();
    });
    ingester.with_progress(tx)
}
