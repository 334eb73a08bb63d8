//! From settings to open tables, what every command that writes does first: the run's
//! settings resolved against the contract its table records, the raw table opened (or
//! created with the schema it is given or infers) with its decoder, the derived tables
//! checked and opened, and the names a failure to open is reported under (its flags).

use std::sync::Arc;

use anyhow::Context;
use sluice_ingest::{
    open_raw as open_raw_table, Clock, DeletePredicate, DeleteRule, IngestConfig, OpenRawError,
    RawTableSpec,
};
use sluice_ingest::{terms, DeriveError, DeriveSpec, Deriver};
use sluice_publish::{Contract, OpenError, RetryPolicy, TableOptions, WindowTable};
use sluice_source::{
    DecodeOptions, FileStore, LineDecoder, LocalFiles, NdjsonSource, ObjectFiles, RecordSchema,
};
use sluice_sql::DerivedQuery;
use sluice_stage::StageOptions;

use crate::args::{RunArgs, RunSettings};
use crate::exit::usage;

/// The process's wall clock: the one place sluice reads it.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }
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
    check_contracts(settings).await?;
    let source = open_source(settings, settings.follow.is_some())?;
    let (decode, config) = runner(settings);
    let options = table_options(settings, &config, &decode);
    let (table, decoder) = open_raw(
        settings,
        &options,
        decode,
        delete_predicate(&config),
        Some(&source),
    )
    .await?;
    Ok(Wired {
        source,
        table,
        decoder,
        config,
        options,
    })
}

/// The file source of `settings`, bounded or followed: a local file or directory, or an
/// object-store prefix (or object).
pub fn open_source(settings: &RunSettings, following: bool) -> anyhow::Result<NdjsonSource> {
    let store: Arc<dyn FileStore> = match crate::args::source_url(&settings.source) {
        Some(url) if url.scheme() == "file" => {
            let path = url
                .to_file_path()
                .map_err(|_| usage(format!("--source {url}: not a local path")))?;
            Arc::new(LocalFiles::new(&path))
        }
        Some(url) => {
            let store = sluice_source::source_store(
                &url,
                &settings.source_options,
                RetryPolicy {
                    attempts_max: settings.tuning.store_attempts_max,
                    ..Default::default()
                },
            )
            .map_err(|e| usage(format!("--source {url}: {e}")))?;
            let files = ObjectFiles::at(store, url.as_str(), url.path(), settings.listing)
                .map_err(|e| usage(format!("--source: {e}")))?;
            Arc::new(files)
        }
        None => Arc::new(LocalFiles::new(&settings.source)),
    };
    NdjsonSource::open_store(store, following, settings.input.clone())
        .map_err(|e| usage(format!("--source: {e}")))
}

/// Merges the config file, fills the options that decide what the table holds from the
/// contract the table records (where neither a flag nor the file gave them), and validates.
pub async fn resolve(args: RunArgs) -> anyhow::Result<RunSettings> {
    let mut args = args.merge_config()?;
    args.config = None;
    if let Some(location) = &args.table {
        let mut options = TableOptions::new(location.clone());
        options.storage_options =
            crate::args::store_options("--storage-option", location, &args.storage_options)?;
        let pipeline = args
            .pipeline
            .clone()
            .unwrap_or_else(|| sluice_ingest::defaults::PIPELINE.into());
        let recorded = sluice_publish::recorded_contract(&options, &pipeline)
            .await
            .with_context(|| format!("reading the table {location}"))?;
        if let Some(contract) = recorded {
            args.adopt(&contract);
        }
    }
    args.settings()
}

/// The run's `--delete-when` predicate, if any.
fn delete_predicate(config: &IngestConfig) -> Option<&DeletePredicate> {
    config.deletes.as_ref().map(|d| &d.when)
}

/// Opens the raw table (sluice_ingest::open_raw: created with the schema file's schema, or
/// else one inferred from `infer_from`, once the decode options and the run's delete
/// predicate are known to fit it), with the decoder for its record schema; its errors named
/// after the flags that cause them.
pub(crate) async fn open_raw(
    settings: &RunSettings,
    options: &TableOptions,
    decode: DecodeOptions,
    deletes: Option<&DeletePredicate>,
    infer_from: Option<&NdjsonSource>,
) -> anyhow::Result<(WindowTable, LineDecoder)> {
    let declared = match &settings.schema {
        Some(path) => Some(RecordSchema::load(path).map_err(|e| usage(format!("--schema: {e}")))?),
        None => registry_schema(settings, options).await?,
    };
    let spec = RawTableSpec {
        options,
        declared: declared.as_ref(),
        layout: settings.layout,
        window: settings.window,
        evolution: settings.evolution,
        infer_from: infer_from.map(|source| (source, settings.infer_lines)),
        decode,
        deletes,
        expectations: &settings.expectations,
        history: settings.history,
    };
    open_raw_table(spec).await.map_err(|e| match e {
        OpenRawError::Open(e) => open_error(e, &settings.table),
        OpenRawError::Infer(e) => usage(format!("--schema: {e}; give a schema file with --schema")),
        e @ OpenRawError::Read(_) => {
            anyhow::Error::new(e).context("reading the source to infer its schema")
        }
        e @ (OpenRawError::Conflict(_) | OpenRawError::WouldGrow { .. }) => {
            usage(format!("--schema: {e}"))
        }
        OpenRawError::Deletes(e) => usage(format!("{e}; nothing was written")),
        OpenRawError::Expectations(e) => usage(format!("{e}; nothing was written")),
        e @ OpenRawError::VersionColumns(_) => usage(format!("{e}; nothing was written")),
        OpenRawError::Decode { source, fields } => usage(decode_refusal(&source, &fields)),
    })
}

/// Why the time, key or sequence options do not fit the records, naming the option and the
/// records' fields (with their types) once.
fn decode_refusal(source: &sluice_source::DecodeError, fields: &str) -> String {
    use sluice_source::{DecodeError as E, PathError};
    let (flag, missing) = match source {
        E::NoKeyField(p) => ("--key", Some(p)),
        E::KeyFieldType { .. } => ("--key", None),
        E::NoSequenceField(p) => ("--sequence-field", Some(p)),
        E::SequenceFieldType { .. } => ("--sequence-field", None),
        E::NoTimeField(p) => ("--time-field", Some(p)),
        _ => ("--time-field/--time-format", None),
    };
    let why = match missing {
        Some(PathError::NotFound { path, .. }) => {
            let default = flag == "--time-field" && path == sluice_ingest::defaults::TIME_FIELD;
            let hint = if default {
                " (the default time field: name the records' event-time field with --time-field)"
            } else {
                ""
            };
            format!("the records have no field {path:?}{hint}")
        }
        _ => source.to_string(),
    };
    format!("{flag}: {why}; their fields: {fields}; nothing was written")
}

/// For a new table of an Avro or Protobuf topic without `--schema`: the columns of the
/// latest schema registered for its values (subject `<topic>-value`, the serializers'
/// default; for Protobuf its file's first message, with the files it imports). `None`
/// otherwise (an existing table's columns are its contract; schema evolution grows them).
async fn registry_schema(
    settings: &RunSettings,
    options: &TableOptions,
) -> anyhow::Result<Option<deltalake::arrow::datatypes::SchemaRef>> {
    let Some(kafka) = &settings.kafka else {
        return Ok(None);
    };
    let payload = &kafka.payload;
    let Some(registry) = &payload.registry else {
        return Ok(None);
    };
    if !payload.format.gives_columns() {
        return Ok(None);
    }
    let exists = sluice_publish::open_table(&options.location, &options.storage_options, None)
        .await
        .is_ok();
    if exists {
        return Ok(None);
    }
    let subject = format!("{}-value", kafka.topic);
    let mut client = sluice_source::registry::SchemaRegistry::new(registry.clone());
    let latest = client
        .latest(&subject)
        .await
        .context("reading the topic's schema from the schema registry")?;
    let Some(latest) = latest else {
        return Err(usage(format!(
            "the table does not exist and the schema registry has no subject {subject}: give --schema FILE"
        )));
    };
    let schema = sluice_source::kafka::registry_columns(&mut client, payload.format, &latest)
        .await
        .context("reading the schemas the topic's schema references from the schema registry")?;
    let schema = schema.and_then(|columns| match settings.envelope {
        Some(envelope) => envelope.row_schema(&columns).map(std::sync::Arc::new),
        None => Ok(columns),
    });
    let schema = schema.map_err(|e| {
        usage(format!(
            "subject {subject}'s latest schema (id {}) cannot be read: {e}; give --schema FILE",
            latest.id
        ))
    })?;
    tracing::info!(
        subject,
        id = latest.id,
        "the new table takes the columns of the topic's latest schema"
    );
    Ok(Some(schema))
}

/// An error opening the raw table, named after the flags that cause it.
pub fn open_error(e: OpenError, table: &str) -> anyhow::Error {
    match e {
        OpenError::PartitionMismatch { .. } => {
            usage(format!("--window/--address/--pipelines: {e}"))
        }
        OpenError::SchemaMismatch { .. } => usage(format!("--schema: {e}")),
        OpenError::ReservedColumn { kind, .. } => {
            let address = if kind == sluice_publish::ReservedKind::Address {
                "give --address window_start (the window's start as one timestamp column), or "
            } else {
                ""
            };
            usage(format!(
                "--schema: {e}: {address}store the field as another column: `column = \"NAME\"` beside its `name` in the schema file"
            ))
        }
        OpenError::ForeignPipeline { .. } | OpenError::PipelineName(_) => {
            usage(format!("--pipeline: {e}"))
        }
        OpenError::PipelinesMismatch { .. } => usage(format!("--pipelines: {e}")),
        OpenError::ContractMismatch { .. } => usage(format!(
            "{e}. Nothing was written. Leave these options out to use the table's, or write to another table"
        )),
        OpenError::NeedSchema(_) => usage(format!(
            "--schema: {e}: a Kafka source has no file to infer the schema from; give a schema file"
        )),
        other => anyhow::Error::new(other).context(format!("opening table {table}")),
    }
}

/// The decode options and the runner's configuration of a run.
pub(crate) fn runner(settings: &RunSettings) -> (DecodeOptions, IngestConfig) {
    let decode = DecodeOptions {
        time_field: settings.time_field.clone(),
        time: settings.time.clone(),
        key: settings
            .key
            .as_ref()
            .map(|k| k.columns.clone())
            .unwrap_or_default(),
        sequence: settings
            .key
            .as_ref()
            .map(|k| k.sequence.clone())
            .unwrap_or_default(),
        envelope: settings.envelope,
        evolution: settings.evolution,
        columns_max: settings.columns_max,
        // Set by open_raw from the table's layout.
        reserved: Vec::new(),
        time_column: settings.time_column.clone(),
        message_columns: settings
            .kafka
            .as_ref()
            .map(|k| k.message_columns.clone())
            .unwrap_or_default(),
    };
    let config = IngestConfig {
        pipeline: settings.pipeline.clone(),
        window: settings.window,
        layout: settings.layout,
        lateness_ms: settings.lateness_ms,
        key: settings.key.clone(),
        flush_bytes_max: settings.tuning.flush_bytes_max,
        chunk_bytes: settings.tuning.chunk_bytes,
        chunks_in_flight_max: 4,
        decode_threads: settings.tuning.decode_threads,
        group_windows_max: settings.tuning.group_windows_max,
        restart: sluice_ingest::RestartPolicy::new(settings.tuning.restarts_max),
        compact: settings
            .compact_files_min
            .map(|files_min| sluice_publish::CompactRule {
                files_min,
                ..Default::default()
            }),
        retain_ms: settings.retain_ms,
        deletes: settings.delete_when.as_ref().map(|sql| DeleteRule {
            when: DeletePredicate::new(sql),
            tombstones: TableOptions {
                storage_options: settings.storage_options.clone(),
                ..TableOptions::new(settings.tombstones.clone())
            },
        }),
        history: settings.history,
        expectations: settings.expectations.clone(),
        late_batch_ms: settings.late_batch_ms,
        late: settings.late,
        mode: settings.mode,
        max_rewrite_age_ms: settings.max_rewrite_age_ms,
        skew: settings.skew,
        stage: StageOptions {
            codec: settings.tuning.codec,
            ..StageOptions::default()
        },
    };
    (decode, config)
}

/// How the settings's table is reached (the dead-letter and derived tables use the same options
/// at their own locations), and the run's contract with it.
pub fn table_options(
    settings: &RunSettings,
    config: &IngestConfig,
    decode: &DecodeOptions,
) -> TableOptions {
    TableOptions {
        location: settings.table.clone(),
        storage_options: settings.storage_options.clone(),
        checkpoint_interval: settings.tuning.checkpoint_interval,
        retry: RetryPolicy {
            attempts_max: settings.tuning.store_attempts_max,
            // Jitter only spreads retries out; any seed will do, and the binary owns the clock.
            jitter_seed: chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default() as u64,
            ..RetryPolicy::default()
        },
        pipeline: Some(settings.pipeline.clone()),
        pipelines: settings.pipelines,
        contract: Some(contract(settings, config, decode)),
        change_feed: settings.change_feed,
        ..TableOptions::new("")
    }
}

/// The run's contract: its decode and publish terms, and for a Kafka source the format of
/// its messages (a topic's table is not fed another format unnoticed).
#[cfg_attr(not(feature = "kafka"), allow(unused_variables))]
fn contract(
    settings: &RunSettings,
    config: &IngestConfig,
    decode: &DecodeOptions,
) -> sluice_publish::Contract {
    let contract = sluice_ingest::run_contract(config, decode);
    #[cfg(feature = "kafka")]
    if let Some(kafka) = &settings.kafka {
        let columns = &kafka.message_columns;
        let names: Vec<&str> = columns.parts.iter().map(|p| p.name()).collect();
        let columns = match columns.bytes {
            _ if names.is_empty() => String::new(),
            sluice_source::BytesAs::String => names.join(","),
            sluice_source::BytesAs::Binary => format!("{} (binary)", names.join(",")),
        };
        return contract
            .with(
                sluice_ingest::terms::INPUT_FORMAT,
                kafka.payload.format.name(),
            )
            .with(sluice_ingest::terms::KAFKA_COLUMNS, columns);
    }
    contract
}

/// How the settings's table is reached, with the contract of a run with these settings.
pub fn raw_options(settings: &RunSettings) -> TableOptions {
    let (decode, config) = runner(settings);
    table_options(settings, &config, &decode)
}

/// The attempt id in staged file names: given, or from the clock and process id.
pub fn attempt(settings: &RunSettings) -> String {
    settings.tuning.attempt.clone().unwrap_or_else(|| {
        format!(
            "{}{:05}",
            chrono::Utc::now().format("%Y%m%dT%H%M%S%3f"),
            std::process::id() % 100_000
        )
    })
}

/// Whether the table at `options` is a Kafka run's (a `shard` partition column: a shard per
/// topic partition); `false` if there is no table there yet.
pub async fn table_is_sharded(options: &TableOptions) -> bool {
    match sluice_publish::open_table_with(options, None).await {
        Ok(table) => table.snapshot().is_ok_and(|s| {
            s.metadata()
                .partition_columns()
                .iter()
                .any(|c| c == sluice_window::SHARD_COLUMN)
        }),
        Err(_) => false,
    }
}

/// Refuses, before anything is written, derived tables that record another raw table, query
/// or key than this run gives them (their contract; see docs/cli.md).
pub async fn check_contracts(settings: &RunSettings) -> anyhow::Result<()> {
    if settings.derive.is_empty() {
        return Ok(());
    }
    let raw_url = sluice_publish::location_url(&settings.table)
        .map_err(|e| usage(format!("--table: {e}")))?;
    for d in &settings.derive {
        let options = TableOptions {
            storage_options: settings.storage_options.clone(),
            ..TableOptions::new(d.table.clone())
        };
        let recorded = sluice_publish::recorded_contract(&options, &settings.pipeline)
            .await
            .with_context(|| format!("reading derived table {} at {}", d.name, d.table))?;
        let Some(recorded) = recorded else {
            continue;
        };
        let given = Contract::new()
            .with(terms::RAW, raw_url.as_str())
            .with(terms::SQL, d.sql.trim())
            .with(terms::KEY, d.key.join(","));
        let differences = recorded.differences(&given);
        if !differences.is_empty() {
            let what = differences
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("; ");
            return Err(usage(format!(
                "derived table {} at {}: {what}. Nothing was written. A changed query or raw table needs a derived table location of its own",
                d.name, d.table
            )));
        }
    }
    Ok(())
}

/// Plans every derived query against `raw` and opens the derived tables. A query that does
/// not settings, or a derived table whose columns differ from the query's output, is a usage
/// error (exit 2) before anything is ingested.
pub async fn open_deriver(
    settings: &RunSettings,
    raw: &mut WindowTable,
    options: &TableOptions,
    attempt: &str,
    stage: sluice_stage::StageOptions,
) -> anyhow::Result<Option<Deriver>> {
    if settings.derive.is_empty() {
        return Ok(None);
    }
    let specs = settings
        .derive
        .iter()
        .map(|d| DeriveSpec {
            query: DerivedQuery {
                name: d.name.clone(),
                sql: d.sql.clone(),
                key: d.key.clone(),
            },
            options: TableOptions {
                location: d.table.clone(),
                // Deliveries are the raw table's to record.
                notified: Default::default(),
                ..options.clone()
            },
        })
        .collect();
    match Deriver::open(specs, raw, &settings.pipeline, attempt, stage).await {
        Ok(d) => Ok(Some(d)),
        Err(e @ DeriveError::Query(_)) => Err(usage(e.to_string())),
        Err(DeriveError::Open { name, source }) => match *source {
            OpenError::SchemaMismatch { url, found, expected } => Err(usage(format!(
                "derived table {name}: the table at {url} has columns {found}, but the query's output is {expected}; give a changed query a new table location"
            ))),
            e @ OpenError::ContractMismatch { .. } => Err(usage(format!(
                "derived table {name}: {e}. Nothing was written. A changed query or raw table needs a derived table location of its own"
            ))),
            e @ (OpenError::PartitionMismatch { .. }
            | OpenError::Schema(_)) => Err(usage(format!(
                "derived table {name}: {e}"
            ))),
            e @ OpenError::ReservedColumn { .. } => Err(usage(format!(
                "derived table {name}: {e}; name the query's column another way (`AS`)"
            ))),
            other => Err(anyhow::Error::new(other)
                .context(format!("opening derived table {name}"))),
        },
        Err(other) => Err(anyhow::Error::new(other).context("opening the derived tables")),
    }
}

/// A Kafka run's table, opened for its writers: created (or checked) as shard 0's writer
/// would open it, with the decoder of its record schema; `options` are the table's without a
/// shard (each partition's writer takes its own, [`sluice_ingest::shard_writer_options`])
/// and with a shard writer's commit retries,
/// `derived_options` those of its derived tables (one writer at a time: a process that loses
/// a race re-reads, so no commit retries).
#[cfg(feature = "kafka")]
pub struct ShardedRaw {
    pub table: WindowTable,
    pub decoder: LineDecoder,
    pub options: TableOptions,
    pub derived_options: TableOptions,
}

/// Opens a Kafka run's table for its writers ([`ShardedRaw`]).
#[cfg(feature = "kafka")]
pub async fn open_sharded_raw(
    settings: &RunSettings,
    decode: DecodeOptions,
    config: &IngestConfig,
) -> anyhow::Result<ShardedRaw> {
    let unsharded = table_options(settings, config, &decode);
    let first = sluice_ingest::shard_writer_options(&unsharded, sluice_window::Shard(0));
    let (table, decoder) =
        open_raw(settings, &first, decode, delete_predicate(config), None).await?;
    // The writers' retries stay: the dead-letter table and the notifier's marks are written
    // by every process of the group too, racing on disjoint `txn`s.
    let options = TableOptions {
        shard: None,
        ..first
    };
    Ok(ShardedRaw {
        table,
        decoder,
        derived_options: TableOptions {
            commit_retries: 0,
            ..options.clone()
        },
        options,
    })
}
