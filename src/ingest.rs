//! `sluice run`: wires the options to the library and prints the run summary.

use std::time::Instant;

use deltalake::arrow::datatypes::SchemaRef;

use anyhow::Context;
use sluice_ingest::{
    field_names, open_raw as open_raw_table, Clock, Follow, IngestConfig, Ingester, OpenRawError,
    RawTableSpec,
};
use sluice_publish::{DeadLetterTable, OpenError, RetryPolicy, TableOptions, WindowTable};
use sluice_source::{DecodeOptions, LineDecoder, NdjsonSource, RecordSchema, SchemaEvolution};
use sluice_stage::StageOptions;

use crate::args::{RunArgs, RunSettings};
use crate::derive::open_deriver;
use crate::usage;

/// The process's wall clock: the one place sluice reads it.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let settings = args.settings()?;
    let started = Instant::now();
    let (summary, from) = match &settings.kafka {
        None => (ingest(&settings).await?, String::new()),
        #[cfg(feature = "kafka")]
        Some(k) => {
            let (s, version) = ingest_kafka(&settings, k).await?;
            let from = format!(
                " from {} messages of {} partition assignments ({} revoked)",
                s.messages, s.partitions_assigned, s.partitions_revoked
            );
            ((s.run, version), from)
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
    let s = &summary.0;
    println!(
        "sluice run: {} records{from}; {} window publications in {} commits (table version {}); {} replayed and skipped, {} late, {} rejected{}{}; {:.1} MB in {:.2} s ({:.0} records/s)",
        s.rows - s.replayed,
        s.windows_published,
        s.commits,
        s.last_version.map_or_else(|| summary.1.map_or("-".into(), |v| v.to_string()), |v| v.to_string()),
        s.replayed,
        s.late,
        s.rejected,
        if s.rejected + s.late_dead_lettered > 0 { format!(" ({} late dead-lettered; see the dead-letter table {})", s.late_dead_lettered, settings.dlq) } else { String::new() },
        if s.restarts > 0 { format!("; resumed from the table {} times", s.restarts) } else { String::new() }
            + &if s.merges_unchanged > 0 { format!("; {} merges changed nothing", s.merges_unchanged) } else { String::new() }
            + &if s.idle_seals > 0 { format!("; {} idle seals", s.idle_seals) } else { String::new() }
            + &if s.derived.computed > 0 { format!("; {} derived windows recomputed, {} published", s.derived.computed, s.derived.published) } else { String::new() }
            + &if s.fields_added.is_empty() { String::new() } else { format!("; new columns: {}", s.fields_added.join(", ")) }
            + &if s.ahead > 0 { format!("; {} events far ahead of the stream (their windows published on their own)", s.ahead) } else { String::new() },
        s.bytes as f64 / 1e6,
        secs,
        s.rows as f64 / secs.max(1e-9),
    );
    if s.rows_with_ignored_fields > 0 {
        // Never silent: what was left out, and how to keep it.
        let fields = s
            .ignored_fields
            .iter()
            .map(|(f, n)| format!("{f} ({n})"))
            .collect::<Vec<_>>()
            .join(", ");
        let how = if settings.evolution == SchemaEvolution::Ignore {
            "--schema-evolution ignore"
        } else {
            "values with nothing to store, such as {}"
        };
        tracing::warn!(rows = s.rows_with_ignored_fields, %fields, "rows carried fields the table does not have; left out ({how})");
        eprintln!(
            "sluice run: {} rows carried fields the table does not have, left out ({how}): {fields}",
            s.rows_with_ignored_fields
        );
    }
    Ok(())
}

/// A pipeline's parts, opened from a run settings: the source, the table (created with the
/// record schema if new), the decoder and the runner's configuration.
pub struct Wired {
    pub source: NdjsonSource,
    pub table: WindowTable,
    pub decoder: LineDecoder,
    pub config: IngestConfig,
    pub options: TableOptions,
}

pub async fn wire(settings: &RunSettings) -> anyhow::Result<Wired> {
    let source = if settings.follow.is_some() {
        NdjsonSource::open_following(&settings.source)
    } else {
        NdjsonSource::open(&settings.source)
    }
    .map_err(|e| usage(format!("--source: {e}")))?;
    let options = table_options(settings);
    let (table, record) = open_raw(settings, &options, Some(&source)).await?;
    let (decoder, config) = runner(settings, record)?;
    Ok(Wired {
        source,
        table,
        decoder,
        config,
        options,
    })
}

/// Opens the raw table (sluice_ingest::open_raw: created with the schema file's schema, or
/// else one inferred from `infer_from`), with the record schema to decode with; its errors
/// named after the flags that cause them.
async fn open_raw(
    settings: &RunSettings,
    options: &TableOptions,
    infer_from: Option<&NdjsonSource>,
) -> anyhow::Result<(WindowTable, SchemaRef)> {
    let declared = match &settings.schema {
        Some(path) => Some(RecordSchema::load(path).map_err(|e| usage(format!("--schema: {e}")))?),
        None => None,
    };
    let spec = RawTableSpec {
        options,
        declared: declared.as_ref(),
        layout: settings.layout,
        window: settings.window,
        evolution: settings.evolution,
        infer_from: infer_from.map(|source| (source, settings.infer_lines)),
    };
    open_raw_table(spec).await.map_err(|e| match e {
        OpenRawError::Open(e) => match e {
            OpenError::PartitionMismatch { .. } => {
                usage(format!("--window/--address/--pipelines: {e}"))
            }
            OpenError::SchemaMismatch { .. } | OpenError::ReservedColumn(_) => {
                usage(format!("--schema: {e}"))
            }
            OpenError::ForeignPipeline { .. } | OpenError::PipelineName(_) => {
                usage(format!("--pipeline: {e}"))
            }
            OpenError::PipelinesMismatch { .. } => usage(format!("--pipelines: {e}")),
            OpenError::NeedSchema(_) => usage(format!(
                "--schema: {e}: a Kafka source has no file to infer the schema from; give a schema file"
            )),
            other => anyhow::Error::new(other).context(format!("opening table {}", settings.table)),
        },
        OpenRawError::Infer(e) => usage(format!("--schema: {e}; give a schema file with --schema")),
        e @ OpenRawError::Read(_) => anyhow::Error::new(e).context("reading the source to infer its schema"),
        e @ (OpenRawError::Conflict(_) | OpenRawError::WouldGrow { .. }) => {
            usage(format!("--schema: {e}"))
        }
    })
}

/// The decoder and the runner's configuration for `record` (the table's record schema, as
/// grown by a schema file).
fn runner(
    settings: &RunSettings,
    record: SchemaRef,
) -> anyhow::Result<(LineDecoder, IngestConfig)> {
    let options = DecodeOptions {
        time_field: settings.time_field.clone(),
        time: settings.time.clone(),
        key: settings
            .key
            .as_ref()
            .map(|k| k.columns.clone())
            .unwrap_or_default(),
        evolution: settings.evolution,
        columns_max: settings.columns_max,
    };
    let decoder = LineDecoder::new(record.clone(), options).map_err(|e| match e {
        sluice_source::DecodeError::NoKeyField(_)
        | sluice_source::DecodeError::KeyFieldType { .. } => {
            usage(format!("--key: {e} (fields: {})", field_names(&record)))
        }
        e => usage(format!(
            "--time-field/--time-format: {e} (fields: {})",
            field_names(&record)
        )),
    })?;
    let config = IngestConfig {
        pipeline: settings.pipeline.clone(),
        window: settings.window,
        layout: settings.layout,
        lateness_ms: settings.lateness_ms,
        key: settings.key.clone(),
        flush_bytes_max: settings.flush_bytes_max,
        chunk_bytes: settings.chunk_bytes,
        chunks_in_flight_max: 4,
        restarts_max: settings.restarts_max,
        late_batch_ms: settings.late_batch_ms,
        late: settings.late,
        mode: settings.mode,
        max_rewrite_age_ms: settings.max_rewrite_age_ms,
        skew: settings.skew,
        stage: StageOptions {
            codec: settings.codec,
            ..StageOptions::default()
        },
    };
    Ok((decoder, config))
}

/// A Kafka run: the processes of one consumer group share the topic's partitions, each
/// partition a shard of the table.
#[cfg(feature = "kafka")]
async fn ingest_kafka(
    settings: &RunSettings,
    kafka: &crate::args::KafkaSettings,
) -> anyhow::Result<(sluice_ingest::KafkaSummary, Option<u64>)> {
    use sluice_source::kafka::KafkaOptions;
    let mut options = table_options(settings);
    options.shard = Some(sluice_window::Shard(0));
    options.commit_retries = sluice_ingest::SHARD_COMMIT_RETRIES;
    let (table, record) = open_raw(settings, &options, None).await?;
    let (decoder, config) = runner(settings, record)?;
    options.shard = None;
    let run = sluice_ingest::KafkaRun {
        config,
        kafka: KafkaOptions {
            brokers: kafka.brokers.clone(),
            topic: kafka.topic.clone(),
            group: kafka.group.clone(),
            start: kafka.start,
            client_options: kafka.client_options.clone(),
            chunk_messages_max: KafkaOptions::CHUNK_MESSAGES_MAX_DEFAULT,
            chunk_ms_max: KafkaOptions::CHUNK_MS_MAX_DEFAULT,
        },
        dlq: TableOptions {
            location: settings.dlq.clone(),
            ..options.clone()
        },
        table: options,
        record_schema: Some(decoder.schema().clone()),
        decoder,
        attempt: attempt(settings),
        until_idle_ms: kafka.until_idle_ms,
        max_events: kafka.max_events,
        tick_ms: sluice_ingest::TICK_MS_DEFAULT,
    };
    drop(table);
    let summary = run
        .run(&SystemClock, stop_on_signal())
        .await
        .context("ingesting from Kafka")?;
    let version = sluice_publish::open_table(&settings.table, &settings.storage_options, None)
        .await
        .ok()
        .and_then(|t| t.version());
    Ok((summary, version))
}

/// How the settings's table is reached (the dead-letter and derived tables use the same options
/// at their own locations).
pub fn table_options(settings: &RunSettings) -> TableOptions {
    TableOptions {
        location: settings.table.clone(),
        storage_options: settings.storage_options.clone(),
        checkpoint_interval: settings.checkpoint_interval,
        retry: RetryPolicy {
            attempts_max: settings.store_attempts_max,
            // Jitter only spreads retries out; any seed will do, and the binary owns the clock.
            jitter_seed: chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default() as u64,
            ..RetryPolicy::default()
        },
        pipeline: Some(settings.pipeline.clone()),
        pipelines: settings.pipelines,
        ..TableOptions::new("")
    }
}

/// The attempt id in staged file names: given, or from the clock and process id.
pub fn attempt(settings: &RunSettings) -> String {
    settings.attempt.clone().unwrap_or_else(|| {
        format!(
            "{}{:05}",
            chrono::Utc::now().format("%Y%m%dT%H%M%S%3f"),
            std::process::id() % 100_000
        )
    })
}

/// Runs one ingestion; returns the summary and the table version at the end.
pub async fn ingest(
    settings: &RunSettings,
) -> anyhow::Result<(sluice_ingest::RunSummary, Option<u64>)> {
    let w = wire(settings).await?;
    let attempt = attempt(settings);
    let deriver = open_deriver(
        settings,
        &w.table,
        &w.options,
        &attempt,
        w.config.stage.clone(),
    )
    .await?;
    let dlq = DeadLetterTable::open_or_create(&TableOptions {
        location: settings.dlq.clone(),
        ..w.options.clone()
    })
    .await
    .with_context(|| format!("opening the dead-letter table {}", settings.dlq))?;
    let clock = SystemClock;
    let ingester = Ingester::recover(w.config, w.source, w.decoder, w.table, dlq, attempt, &clock)
        .await
        .context("recovering the pipeline state from the table")?;
    let ingester = match deriver {
        Some(d) => ingester
            .with_deriver(d)
            .await
            .context("bringing the derived tables up to the raw table")?,
        None => ingester,
    };
    let (summary, table) = match settings.follow {
        None => ingester.run().await,
        Some(f) => {
            ingester
                .follow(Follow {
                    poll_ms: f.poll_ms,
                    idle_timeout_ms: f.idle_timeout_ms,
                    until_idle_ms: f.until_idle_ms,
                    stop: stop_on_signal(),
                })
                .await
        }
    }
    .context("ingesting")?;
    Ok((summary, table.version()))
}

/// A stop flag raised by SIGINT or SIGTERM (a followed run then ends gracefully).
fn stop_on_signal() -> tokio::sync::watch::Receiver<bool> {
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let interrupt = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            match signal(SignalKind::terminate()) {
                Ok(mut term) => {
                    tokio::select! {
                        _ = interrupt => {}
                        _ = term.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = interrupt.await;
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = interrupt.await;
        }
        tracing::info!("stop requested: finishing the current chunk");
        let _ = tx.send(true);
        // Keep the sender alive so the run does not mistake its drop for a stop.
        std::future::pending::<()>().await;
    });
    rx
}
