//! Options of `sluice run`: flags, a TOML config file (`--config`, same names in snake_case),
//! and their validation. Flags win over the file; the file wins over defaults.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use clap::Args;
use serde::Deserialize;
use sluice_ingest::{defaults, KeySpec, LatePolicy, PublishMode};
use sluice_publish::{MergeScope, Pipelines};
use sluice_source::envelope::Envelope;
use sluice_source::kafka::StartAt;
use sluice_source::{CsvOptions, FileFormat, Listing, SchemaEvolution};
use sluice_stage::Codec;
use sluice_window::{
    parse_duration_ms, valid_pipeline_name, AddressLayout, SkewGuard, TimeFormat, TimeSpec,
    WindowSize, Zone,
};

use crate::exit::usage;

#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunArgs {
    /// TOML file with any of these options (snake_case keys); flags win.
    #[arg(long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Input: `ndjson:PATH` (or `csv:PATH`, `parquet:PATH`), a file or a directory of files
    /// read in the order they arrive (in name order at first), each plain or compressed
    /// (gzip, zstd: by extension or first bytes), or the
    /// objects under an object-store prefix (`ndjson:s3://bucket/prefix/`, gs://, az://); or
    /// `kafka:TOPIC` (with --brokers), read by a consumer group whose processes share the
    /// topic's partitions, each partition a shard of the table.
    #[arg(long)]
    pub source: Option<String>,
    /// With an object-store source (`ndjson:s3://bucket/prefix/`, gs://, az://): an
    /// object_store setting for reaching it, KEY=VALUE (repeatable; credentials, endpoint,
    /// region), as --storage-option is for the table; the environment (AWS_*, ...) counts too.
    #[arg(long = "source-option", value_name = "KEY=VALUE")]
    pub source_options: Vec<String>,
    /// With an object-store source: how new objects are found: full (the whole prefix at
    /// every look) or incremental (only names after the last one seen, for prefixes whose
    /// names grow; the whole prefix once every 100 looks). [default: full]
    #[arg(long, value_parser = ["full", "incremental"])]
    pub listing: Option<String>,
    /// How records are written: for a file source ndjson (one JSON object per line), csv (a
    /// header row naming the columns) or parquet (a row a record); for a kafka: source json
    /// (a JSON object per message), or avro, protobuf or json-schema (the schema registry's
    /// wire format, with --schema-registry). [default: by --source's prefix; json for kafka:]
    #[arg(long, value_parser = ["ndjson", "json", "csv", "parquet", "avro", "protobuf", "json-schema"])]
    pub input_format: Option<String>,
    /// With a kafka: source of --input-format avro, protobuf or json-schema: the Confluent schema
    /// registry the messages' schema ids are looked up in, http(s)://HOST[:PORT][/PATH]. Credentials: basic
    /// auth from SLUICE_SCHEMA_REGISTRY_USER and SLUICE_SCHEMA_REGISTRY_PASSWORD, or a bearer
    /// token from SLUICE_SCHEMA_REGISTRY_TOKEN (not flags: `ps` shows flags to every user).
    #[arg(long, value_name = "URL")]
    pub schema_registry: Option<String>,
    /// With a kafka: source: the messages' own fields as columns, any of key, timestamp,
    /// headers, partition, offset (comma-separated): kafka_key, kafka_timestamp (which
    /// --time-field may name), kafka_headers (a list of key/value pairs), kafka_partition,
    /// kafka_offset. [default: none]
    #[arg(long, value_name = "PART[,PART]")]
    pub kafka_columns: Option<String>,
    /// With --kafka-columns: keys and header values as string (UTF-8 text; a message whose
    /// key is not is a dead letter wrong_type) or binary. [default: string]
    #[arg(long, value_parser = ["string", "binary"])]
    pub kafka_bytes: Option<String>,
    /// CSV: the field delimiter, one character (`\t` or tab for TSV). [default: ,]
    #[arg(long)]
    pub csv_delimiter: Option<String>,
    /// CSV: the quote character. [default: "]
    #[arg(long)]
    pub csv_quote: Option<String>,
    /// CSV: the escape character inside quoted fields (e.g. `\`). [default: none: a quote
    /// inside quotes is doubled]
    #[arg(long)]
    pub csv_escape: Option<String>,
    /// CSV: whether the first record of each file names the columns (without: _c0, _c1, ...).
    /// [default: true]
    #[arg(long)]
    pub csv_header: Option<bool>,
    /// With a kafka: source: bootstrap servers, HOST:PORT[,HOST:PORT].
    #[arg(long)]
    pub brokers: Option<String>,
    /// With a kafka: source: the consumer group. [default: the pipeline name]
    #[arg(long)]
    pub group: Option<String>,
    /// With a kafka: source: where a partition the table has no position of starts,
    /// earliest or latest. [default: earliest]
    #[arg(long, value_parser = ["earliest", "latest"])]
    pub start: Option<String>,
    /// With a kafka: source: a librdkafka setting, KEY=VALUE (repeatable); overrides sluice's.
    #[arg(long = "kafka-option", value_name = "KEY=VALUE")]
    pub kafka_options: Vec<String>,
    /// With a kafka: source: end the run after this many messages, publishing every window
    /// it holds (a bounded catch-up run). [default: never]
    #[arg(long)]
    pub max_events: Option<u64>,
    /// The Delta table: a local path (or URL).
    #[arg(long)]
    pub table: Option<String>,
    /// Names this ingestion; prefix of the table's `txn` appIds (letters, digits, _, - and
    /// .). A table belongs to the pipeline that created it, unless created with
    /// --pipelines many. [default: sluice]
    #[arg(long)]
    pub pipeline: Option<String>,
    /// For a new table: one (the table belongs to this pipeline; another pipeline is refused)
    /// or many (pipelines write side by side, each at addresses of its own: a `pipeline`
    /// partition column). [default: one]
    #[arg(long, value_parser = ["one", "many"])]
    pub pipelines: Option<String>,
    /// Field holding the event time; a dotted path names a struct member
    /// (payload.created_at). [default: ts]
    #[arg(long)]
    pub time_field: Option<String>,
    /// rfc3339 (ISO 8601, also with a space, no seconds or no offset), epoch_s, epoch_ms,
    /// epoch_us, epoch_ns (numbers or numeric strings), or a strftime pattern such as
    /// "%Y/%m/%d %H:%M". [default: rfc3339]
    #[arg(long)]
    pub time_format: Option<String>,
    /// The zone of event times written without an offset: UTC, an offset (+02:00) or an
    /// IANA name (Europe/Berlin). [default: UTC]
    #[arg(long, allow_hyphen_values = true)]
    pub time_zone: Option<String>,
    /// Store each row's event time, as sluice read it, in a `timestamp` (UTC) column of this
    /// name (added last), so that SQL over time needs no parsing. [default: none]
    #[arg(long)]
    pub time_column: Option<String>,
    /// Clock-skew guard: an event further than this ahead of the largest event time seen
    /// does not move the watermark (it lands in its window, published on its own), e.g. 1d;
    /// never less than two windows; off: no guard. [default: 1d]
    #[arg(long)]
    pub max_time_ahead: Option<String>,
    /// Clock-skew guard: after this many events in a row that are all ahead, the stream has
    /// jumped forward and the watermark follows it. [default: 100]
    #[arg(long)]
    pub time_jump_events: Option<u32>,
    /// What a field the table does not have does: add (a new nullable column, in the commit
    /// of the first window that carries it), reject (the record is a dead letter
    /// unknown_field), ignore (left out, counted in the summary). [default: add]
    #[arg(long, value_parser = ["add", "reject", "ignore"])]
    pub schema_evolution: Option<String>,
    /// The most columns (counting nested members) schema evolution grows a table to; past
    /// it, records with new fields are dead letters unknown_field. [default: 1000]
    #[arg(long)]
    pub columns_max: Option<usize>,
    /// Tumbling window size, 1m to 1d, dividing a day. [default: 1h]
    #[arg(long)]
    pub window: Option<String>,
    /// Align windows to this zone's days and hours instead of UTC's (an IANA name or an
    /// offset): the address is the local date and hour, and a day is 23 or 25 hours long when
    /// the clocks change. Whole-hour windows only in a zone with daylight saving time.
    /// [default: UTC]
    #[arg(long, allow_hyphen_values = true)]
    pub window_zone: Option<String>,
    /// Address layout: dt_hour (1h windows), dt (1d), window_start (any). [default: by window size]
    #[arg(long, value_parser = ["dt_hour", "dt", "window_start"])]
    pub address: Option<String>,
    /// Allowed lateness: the watermark trails the largest event time by this much. [default: 10m]
    #[arg(long)]
    pub lateness: Option<String>,
    /// Natural key field(s), comma-separated (dotted paths name struct members): one row per
    /// key per window (latest event time, then highest source position, wins); a record
    /// without its key is a dead letter missing_key. Default: rows are keyed by source
    /// position.
    #[arg(long)]
    pub key: Option<String>,
    /// Sequence field(s), comma-separated (dotted paths name struct members), with --key: what
    /// orders the changes of one key instead of the event time (a log sequence number; a
    /// binlog file, then position). The highest sequence wins, then the highest source
    /// position; a change at or below the sequence the table holds for its key changes
    /// nothing. An integer, decimal, date, timestamp, string (compared byte by byte) or
    /// boolean field; a record without it is a dead letter missing_sequence.
    #[arg(long)]
    pub sequence_field: Option<String>,
    /// With --mode merge --merge-scope table and --sequence-field: the changes that are
    /// deletes, as SQL over the record's top-level fields (`op = 'd'`); a delete removes its
    /// key's row and keeps a tombstone (key, sequence) in --tombstones, so that a change of the
    /// key with a lower sequence, arriving late, cannot bring the row back. Comparisons, IN
    /// lists, IS [NOT] NULL, AND, OR, NOT: nothing that could fail on a value.
    #[arg(long)]
    pub delete_when: Option<String>,
    /// How each record wraps its row: debezium (a change event: the row is `after`, or
    /// `before` for a delete, with the operation as __op and the `source` block as
    /// __source). With it, --sequence-field defaults to __source.lsn and, in a mirror,
    /// --delete-when to __op = 'd'. Every format with nested records: ndjson and parquet
    /// files, json, json-schema, avro and protobuf Kafka messages (not csv, whose records
    /// are flat).
    #[arg(long, value_parser = ["debezium"])]
    pub envelope: Option<String>,
    /// The tombstone table of --delete-when (readers of the table never see it).
    /// [default: <table>_tombstones]
    #[arg(long)]
    pub tombstones: Option<String>,
    /// An expectation on the rows, NAME=SQL (repeatable): a condition every row should meet,
    /// SQL over the record's top-level fields as --delete-when takes it (comparisons,
    /// BETWEEN, LIKE, IN lists, IS [NOT] NULL, AND, OR, NOT; a null result passes). A row
    /// for which it is false lands all the same, counted per rule (the run's summary,
    /// status, the metrics). The rules are recorded in the table: a run that gives none keeps
    /// them. In a config file: [expect] NAME = "SQL".
    #[arg(long = "expect", value_name = "NAME=SQL")]
    #[serde(skip)]
    pub expect_flags: Vec<String>,
    /// An expectation whose breaking rows are dead letters `expectation` naming the rule,
    /// replayable with `dead-letters --replay` once the rule is loosened (repeatable). In a
    /// config file: [expect_or_drop].
    #[arg(long = "expect-or-drop", value_name = "NAME=SQL")]
    #[serde(skip)]
    pub expect_or_drop_flags: Vec<String>,
    /// An expectation that stops the run at the first row breaking it, before that row's
    /// window is published: exit 3, naming the rule and the record's position (repeatable).
    /// In a config file: [expect_or_fail].
    #[arg(long = "expect-or-fail", value_name = "NAME=SQL")]
    #[serde(skip)]
    pub expect_or_fail_flags: Vec<String>,
    /// Keep a change data feed (Delta's delta.enableChangeDataFeed, read with Spark's
    /// readChangeFeed or delta-rs's load_cdf): each commit that replaces rows says which
    /// rows really changed, by row key (inserts, updates' pre- and post-images, deletes), in
    /// _change_data files. Set on a new table when it is created, on an existing one by a
    /// metadata commit; a table keeps it whatever later runs give.
    #[arg(long)]
    pub change_feed: bool,
    /// Check no expectation, and remove the ones the table records.
    #[arg(long, conflicts_with_all = ["expect_flags", "expect_or_drop_flags", "expect_or_fail_flags"])]
    pub no_expectations: bool,
    /// The config file's [expect] rules, by name.
    #[arg(skip)]
    pub expect: BTreeMap<String, String>,
    /// The config file's [expect_or_drop] rules.
    #[arg(skip)]
    pub expect_or_drop: BTreeMap<String, String>,
    /// The config file's [expect_or_fail] rules.
    #[arg(skip)]
    pub expect_or_fail: BTreeMap<String, String>,
    /// The rules the table records (the contract's), taken where none are given.
    #[arg(skip)]
    #[serde(skip)]
    pub expect_recorded: Option<String>,
    /// With --mode merge --merge-scope table and one --sequence-field: 1 keeps each key's
    /// latest change; 2 keeps every change as a version of its row, current from its
    /// sequence (__start_at) until the key's next change or delete (__end_at; null while
    /// current), whatever order the changes arrive in. [default: 1]
    #[arg(long, value_parser = ["1", "2"])]
    pub scd: Option<String>,
    /// How a sealed window is published: swap (replace the window's files) or merge (upsert
    /// on --key: a key's row is replaced only by a later event time, then a later source
    /// position). [default: swap]
    #[arg(long, value_parser = ["swap", "merge"])]
    pub mode: Option<String>,
    /// With --mode merge: where a key is unique, window (its address; the MERGE reads only
    /// that partition) or table (every file is read). [default: window]
    #[arg(long, value_parser = ["window", "table"])]
    pub merge_scope: Option<String>,
    /// Schema file (JSON or TOML) for the records; default: inferred from the first lines.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// Lines read to infer the schema when there is no schema file. [default: 1000]
    #[arg(long)]
    pub infer_lines: Option<usize>,
    /// The dead-letter Delta table: rejected records and dropped late events, with position
    /// and reason. [default: <table>_dlq]
    #[arg(long)]
    pub dlq: Option<String>,
    /// What a late event does: drop (to the dead-letter table), rewrite (republish its window
    /// by swap), merge (insert if its row key is absent). [default: rewrite]
    #[arg(long, value_parser = ["drop", "rewrite", "merge"])]
    pub late: Option<String>,
    /// Late events whose window ended longer ago than this (behind the watermark) go to the
    /// dead-letter table as too_late, e.g. 7d. [default: no limit]
    #[arg(long)]
    pub max_rewrite_age: Option<String>,
    /// Republish a window receiving late rows at most once per this interval (processing
    /// time), e.g. 30s; 0s: once per chunk read. The end of the input publishes them at once.
    /// [default: 1m]
    #[arg(long)]
    pub late_batch: Option<String>,
    /// Keep reading: after the end of the input, wait for lines appended to the last file
    /// and for new files (read after the others in the order they arrive, whatever their
    /// names); stop with SIGINT/SIGTERM or --until-idle.
    #[arg(long)]
    #[serde(default)]
    pub follow: bool,
    /// With --follow: pause between two reads that found nothing new. [default: 1s]
    #[arg(long)]
    pub poll_interval: Option<String>,
    /// With --follow or a kafka: source: seal every open window (of a Kafka partition) after
    /// no input for this long (processing time), e.g. 5m. [default: windows seal by event time
    /// only]
    #[arg(long)]
    pub idle_timeout: Option<String>,
    /// With --follow or a kafka: source: end the run after no input for this long, e.g. 30s,
    /// publishing every window it holds (as at the end of a bounded input). [default: never]
    #[arg(long)]
    pub until_idle: Option<String>,
    /// Memory budget for the rows of open windows, e.g. 16MiB: above it the largest window's
    /// rows are staged early, and a window larger than half of it is deduped a part at a
    /// time. Peak memory grows with it (bench/RESULTS.md measures the default). [default: 16MiB]
    #[arg(long)]
    pub flush_bytes_max: Option<String>,
    /// Bytes read from the source at a time, e.g. 4MiB. [default: 4MiB]
    #[arg(long)]
    pub chunk_bytes: Option<String>,
    /// Threads that decode an NDJSON source, each taking the next chunk; the rows and the
    /// schema are those of one thread, in order. More than 1 helps with cores to spare, when
    /// decode's busy_seconds (--format json) is close to the run's wall time; on 2 cores it
    /// competes with encoding and is slower. [default: 1]
    #[arg(long, value_name = "N")]
    pub decode_threads: Option<usize>,
    /// Parquet compression: snappy or zstd. [default: snappy]
    #[arg(long, value_parser = ["snappy", "zstd"])]
    pub compression: Option<String>,
    /// delta.checkpointInterval for new tables. [default: 100]
    #[arg(long)]
    pub checkpoint_interval: Option<u64>,
    /// Tries per object-store operation before it counts as failed (1 = no retries);
    /// retries back off exponentially with jitter. [default: 6]
    #[arg(long)]
    pub store_attempts_max: Option<u32>,
    /// Times in a row a run re-reads the table and resumes from it after a conflict or a
    /// failed store operation, before it exits with the error. [default: 5]
    #[arg(long)]
    pub restarts_max: Option<u32>,
    /// Windows sealed together (a catch-up, a backfill) are published by one commit of at
    /// most this many windows, each still swapped whole; 1: a commit per window. [default: 256]
    #[arg(long)]
    pub group_windows_max: Option<usize>,
    /// Compact a window in the run once it holds more than N files (late-row appends and
    /// MERGE rewrites leave several): a commit of its own, same rows, dataChange=false.
    /// `sluice compact` does the same apart from a run. [default: off]
    #[arg(long, value_name = "N")]
    pub compact_files_min: Option<usize>,
    /// Retention, e.g. 90d: after each commit, remove whole windows that ended longer ago than
    /// this before the watermark (event time, never wall-clock time); their late events go to
    /// the dead-letter table as too_late. The pipeline's dead letters detected longer ago than
    /// this (by the clock) go too. [default: keep every window]
    #[arg(long, value_name = "DURATION")]
    pub retain: Option<String>,
    /// Object store option for the table, KEY=VALUE (repeatable).
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    pub storage_options: Vec<String>,
    /// Attempt id in staged file names. [default: from the clock and process id]
    #[arg(long)]
    pub attempt: Option<String>,
    /// A derived table, NAME=LOCATION (repeatable): the query --derive-sql NAME=SQL run over
    /// each window (`FROM window`), recomputed whenever the window is published. In a config
    /// file: [[derive]] tables with name, table, sql and key.
    #[arg(long = "derive", value_name = "NAME=LOCATION")]
    #[serde(skip)]
    pub derive_tables: Vec<String>,
    /// The query of derived table NAME, NAME=SQL (repeatable).
    #[arg(long = "derive-sql", value_name = "NAME=SQL")]
    #[serde(skip)]
    pub derive_sql: Vec<String>,
    /// Output columns identifying a row of derived table NAME within a window, NAME=FIELD[,FIELD]:
    /// publish it by MERGE on them instead of by swap.
    #[arg(long = "derive-key", value_name = "NAME=FIELDS")]
    #[serde(skip)]
    pub derive_key: Vec<String>,
    /// Derived tables from the config file.
    #[arg(skip)]
    pub derive: Vec<DeriveConfig>,
    /// A notify target NAME=URL (repeatable): POST a JSON body for each window that becomes
    /// complete or is rewritten, header Idempotency-Key, at least once (docs/notifications.md).
    /// In a config file: [[notify]] targets with name, url or command, on and timeout.
    #[arg(long = "notify-url", value_name = "NAME=URL")]
    #[serde(skip)]
    pub notify_urls: Vec<String>,
    /// A notify target NAME=COMMAND (repeatable): run `sh -c COMMAND` with the JSON body on
    /// stdin (and the key in SLUICE_IDEMPOTENCY_KEY); exit status 0 is delivered.
    #[arg(long = "notify-command", value_name = "NAME=COMMAND")]
    #[serde(skip)]
    pub notify_commands: Vec<String>,
    /// Notify targets from the config file.
    #[arg(skip)]
    pub notify: Vec<NotifyConfig>,
    /// How long a run that ends goes on delivering notifications of what it published, e.g.
    /// 30s; what is left is delivered by the next run. [default: 30s]
    #[arg(long)]
    pub notify_drain: Option<String>,
    /// Warn (on stderr, with the reasons and the first rejected line) when more than this
    /// share of the records is rejected, e.g. 10% or 0.1; a run whose every record is
    /// rejected exits with status 3 whatever this is. [default: 10%]
    #[arg(long)]
    pub max_reject_ratio: Option<String>,
    /// The summary line's format: text, or json (one JSON object on stdout). [default: text]
    #[arg(long)]
    pub format: Option<String>,
    /// Run the whole pipeline over the input as it is now and write nothing (every store
    /// behind an overlay in memory): print the contract a run would record, the windows it
    /// would publish (address, rows, new or replacing) and its dead letters by reason; exit
    /// as the run would. Not with --follow or a Kafka source.
    #[arg(long)]
    #[serde(skip)]
    pub dry_run: bool,
    /// Serve Prometheus metrics at http://HOST:PORT/metrics while the run lasts, e.g.
    /// 127.0.0.1:9464 (docs/metrics.md lists them). [default: off]
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
}

/// Validated options of `sluice run`.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The file source (empty with a Kafka source).
    pub source: PathBuf,
    /// How the file source's records are written.
    pub input: FileFormat,
    /// `--source-option`, for an object-store source.
    pub source_options: HashMap<String, String>,
    /// `--listing`, for an object-store source.
    pub listing: Listing,
    /// `Some` with a kafka: source.
    pub kafka: Option<KafkaSettings>,
    pub table: String,
    pub pipeline: String,
    /// Given for a new table (or checked against an existing one).
    pub pipelines: Option<Pipelines>,
    pub time_field: String,
    pub time: TimeSpec,
    /// `--time-column`.
    pub time_column: Option<String>,
    pub skew: SkewGuard,
    pub evolution: SchemaEvolution,
    pub columns_max: usize,
    pub window: WindowSize,
    pub layout: AddressLayout,
    pub lateness_ms: i64,
    pub key: Option<KeySpec>,
    pub mode: PublishMode,
    pub schema: Option<PathBuf>,
    pub infer_lines: usize,
    pub dlq: String,
    /// `--delete-when`, checked against the record schema once the table is open.
    pub delete_when: Option<String>,
    /// `--scd 2`: every change a version of its row.
    pub history: bool,
    /// `--envelope`.
    pub envelope: Option<Envelope>,
    /// `--tombstones`: the tombstone table's location.
    pub tombstones: String,
    /// The rules on the rows: the given ones, or else the table's.
    pub expectations: sluice_ingest::expectations::Expectations,
    /// `--change-feed`.
    pub change_feed: bool,
    pub late: LatePolicy,
    pub max_rewrite_age_ms: Option<i64>,
    pub late_batch_ms: i64,
    /// `Some` with --follow.
    pub follow: Option<FollowSettings>,
    pub flush_bytes_max: usize,
    pub chunk_bytes: usize,
    pub decode_threads: usize,
    pub codec: Codec,
    pub checkpoint_interval: u64,
    pub store_attempts_max: u32,
    pub restarts_max: u32,
    pub group_windows_max: usize,
    /// `--compact-files-min`.
    pub compact_files_min: Option<usize>,
    /// `--retain`, in milliseconds.
    pub retain_ms: Option<i64>,
    pub storage_options: HashMap<String, String>,
    pub attempt: Option<String>,
    pub derive: Vec<DeriveConfig>,
    pub notify: Vec<NotifyConfig>,
    pub notify_drain_ms: u64,
    /// See `--max-reject-ratio`: a share from 0 to 1.
    pub max_reject_ratio: f64,
    /// The summary as one JSON object instead of a line of text.
    pub json: bool,
    /// `--dry-run`: every store behind an overlay in memory, a report of what would land.
    pub dry_run: bool,
    pub metrics_addr: Option<std::net::SocketAddr>,
}

/// Validated Kafka source options (read only by a build with the `kafka` feature).
#[cfg_attr(not(feature = "kafka"), allow(dead_code))]
#[derive(Debug, Clone)]
pub struct KafkaSettings {
    pub topic: String,
    pub brokers: String,
    pub group: String,
    pub start: StartAt,
    pub client_options: Vec<(String, String)>,
    pub until_idle_ms: Option<i64>,
    /// Seal a partition's open windows after this long without a message of it.
    pub idle_timeout_ms: Option<i64>,
    pub max_events: Option<u64>,
    /// How the messages' values are written, and the schema registry.
    pub payload: sluice_source::kafka::PayloadOptions,
    /// The messages' own fields as columns (`--kafka-columns`).
    pub message_columns: sluice_source::MessageColumns,
}

#[cfg(feature = "kafka")]
impl KafkaSettings {
    /// How the source crate reaches and reads the topic.
    pub fn options(&self) -> sluice_source::kafka::KafkaOptions {
        use sluice_source::kafka::KafkaOptions;
        KafkaOptions {
            brokers: self.brokers.clone(),
            topic: self.topic.clone(),
            group: self.group.clone(),
            start: self.start,
            client_options: self.client_options.clone(),
            chunk_messages_max: KafkaOptions::CHUNK_MESSAGES_MAX_DEFAULT,
            chunk_ms_max: KafkaOptions::CHUNK_MS_MAX_DEFAULT,
            payload: self.payload.clone(),
        }
    }
}

/// Validated --follow options.
#[derive(Debug, Clone, Copy)]
pub struct FollowSettings {
    pub poll_ms: u64,
    pub idle_timeout_ms: Option<i64>,
    pub until_idle_ms: Option<i64>,
}

impl RunArgs {
    /// `--window` in `--window-zone`. A window read back from a table's contract carries its
    /// zone (`1d in America/New_York`); another zone given with it is refused.
    pub(crate) fn window_size(&self) -> anyhow::Result<WindowSize> {
        let window = WindowSize::parse(self.window.as_deref().unwrap_or(defaults::WINDOW))
            .map_err(|e| usage(format!("--window: {e}")))?;
        let Some(text) = &self.window_zone else {
            return Ok(window);
        };
        let zone = Zone::parse(text).map_err(|e| usage(format!("--window-zone: {e}")))?;
        if window.zone() != Zone::Utc && window.zone() != zone {
            return Err(usage(format!(
                "--window-zone {text}: the window is {}",
                window.label()
            )));
        }
        window
            .in_zone(zone)
            .map_err(|e| usage(format!("--window-zone: {e}")))
    }

    /// `--sequence-field`: the fields that order a key's changes (none: the event time;
    /// with an envelope, its log position).
    pub(crate) fn sequence_fields(&self) -> anyhow::Result<Vec<String>> {
        let Some(given) = self.sequence_field.as_deref().filter(|s| !s.is_empty()) else {
            let history = self.scd.as_deref() == Some("2");
            return Ok(match self.envelope()? {
                Some(e) => e
                    .default_sequence(history)
                    .into_iter()
                    .map(String::from)
                    .collect(),
                None => Vec::new(),
            });
        };
        let fields: Vec<String> = given.split(',').map(|c| c.trim().to_string()).collect();
        if fields.iter().any(String::is_empty) {
            return Err(usage(format!(
                "--sequence-field {given:?}: empty field name"
            )));
        }
        Ok(fields)
    }

    /// `--envelope`.
    pub(crate) fn envelope(&self) -> anyhow::Result<Option<Envelope>> {
        match self.envelope.as_deref().filter(|e| !e.is_empty()) {
            None => Ok(None),
            Some(name) => Envelope::parse_name(name)
                .map(Some)
                .ok_or_else(|| usage("--envelope: use debezium")),
        }
    }

    /// `--time-field`, `--time-format`, `--time-zone`, `--max-time-ahead` and
    /// `--time-jump-events`: the time field, how its values are read, and the skew guard.
    pub(crate) fn time_settings(&self) -> anyhow::Result<(String, TimeSpec, SkewGuard)> {
        let time_field = self
            .time_field
            .clone()
            .unwrap_or_else(|| defaults::TIME_FIELD.into());
        if time_field.is_empty() {
            return Err(usage("--time-field: empty field name"));
        }
        let time_format =
            TimeFormat::parse_name(self.time_format.as_deref().unwrap_or(defaults::TIME_FORMAT))
                .map_err(|e| usage(format!("--time-format: {e}")))?;
        let zone = Zone::parse(self.time_zone.as_deref().unwrap_or(defaults::TIME_ZONE))
            .map_err(|e| usage(format!("--time-zone: {e}")))?;
        let time = TimeSpec::new(time_format, zone);
        let skew = match self.max_time_ahead.as_deref() {
            Some("off") => SkewGuard::OFF,
            ahead => {
                let ahead_ms = parse_duration_ms(ahead.unwrap_or(defaults::MAX_TIME_AHEAD))
                    .map_err(|e| usage(format!("--max-time-ahead: {e} (or off)")))?;
                let jump_events = self.time_jump_events.unwrap_or(defaults::TIME_JUMP_EVENTS);
                if !(1..=sluice_window::JUMP_EVENTS_MAX).contains(&jump_events) {
                    return Err(usage(format!(
                        "--time-jump-events: from 1 to {}",
                        sluice_window::JUMP_EVENTS_MAX
                    )));
                }
                SkewGuard {
                    ahead_us: ahead_ms.saturating_mul(1000),
                    jump_events,
                }
            }
        };
        Ok((time_field, time, skew))
    }

    /// `--input-format` and the CSV options (`--source csv:PATH` says csv); a Kafka source
    /// reads JSON.
    fn file_format(&self, prefix: Option<&str>, kafka: bool) -> anyhow::Result<FileFormat> {
        let given = self.input_format.as_deref();
        if let (Some(g), Some(p)) = (given, prefix) {
            if g != p {
                return Err(usage(format!(
                    "--input-format {g}: the source says {p} (--source {p}:...)"
                )));
            }
        }
        let csv_flags = [
            ("--csv-delimiter", self.csv_delimiter.is_some()),
            ("--csv-quote", self.csv_quote.is_some()),
            ("--csv-escape", self.csv_escape.is_some()),
            ("--csv-header", self.csv_header.is_some()),
        ];
        let name = given.or(prefix).unwrap_or("ndjson");
        let kafka_formats = ["ndjson", "json", "avro", "protobuf", "json-schema"];
        if kafka && given.is_some_and(|g| !kafka_formats.contains(&g)) {
            return Err(usage(format!(
                "--input-format {name}: a Kafka source reads json, avro, protobuf or json-schema messages"
            )));
        }
        if !kafka && matches!(name, "avro" | "protobuf" | "json-schema") {
            return Err(usage(format!(
                "--input-format {name}: read from kafka: sources (messages in the schema registry's wire format), not from files"
            )));
        }
        if name != "csv" {
            if let Some((flag, _)) = csv_flags.iter().find(|(_, g)| *g) {
                return Err(usage(format!(
                    "{flag}: only with CSV input (--source csv:PATH)"
                )));
            }
            return Ok(match name {
                "parquet" => FileFormat::Parquet,
                _ => FileFormat::Ndjson,
            });
        }
        let byte = |flag: &str, text: &Option<String>, default: u8| -> anyhow::Result<u8> {
            match text.as_deref() {
                None => Ok(default),
                Some("\\t" | "tab") => Ok(b'\t'),
                Some(t) if t.len() == 1 && t.as_bytes()[0] != b'\n' => Ok(t.as_bytes()[0]),
                Some(t) => Err(usage(format!(
                    "{flag} {t:?}: one ASCII character (\\t or tab for a tab)"
                ))),
            }
        };
        let defaults = CsvOptions::default();
        let options = CsvOptions {
            delimiter: byte("--csv-delimiter", &self.csv_delimiter, defaults.delimiter)?,
            quote: byte("--csv-quote", &self.csv_quote, defaults.quote)?,
            escape: match &self.csv_escape {
                None => None,
                given => Some(byte("--csv-escape", given, 0)?),
            },
            header: self.csv_header.unwrap_or(defaults.header),
        };
        if options.delimiter == options.quote {
            return Err(usage("--csv-delimiter and --csv-quote must differ"));
        }
        Ok(FileFormat::Csv(options))
    }

    /// `--source-option` and `--listing`, which only an object-store source takes.
    fn object_source(
        &self,
        source: &std::path::Path,
    ) -> anyhow::Result<(HashMap<String, String>, Listing)> {
        let object = source_url(source).is_some_and(|u| u.scheme() != "file");
        let given = [
            ("--source-option", !self.source_options.is_empty()),
            ("--listing", self.listing.is_some()),
        ];
        if !object {
            if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
                return Err(usage(format!(
                    "{flag}: only with an object-store source (--source ndjson:s3://bucket/prefix/)"
                )));
            }
        }
        let options = store_options(
            "--source-option",
            &source.to_string_lossy(),
            &self.source_options,
        )?;
        let listing = match self.listing.as_deref() {
            None => Listing::Full,
            Some(name) => Listing::parse_name(name)
                .ok_or_else(|| usage("--listing: use full or incremental"))?,
        };
        Ok((options, listing))
    }

    /// Kafka-only options given with an NDJSON source are refused.
    fn refuse_kafka_options(&self) -> anyhow::Result<()> {
        let kafka_only = [
            ("--brokers", self.brokers.is_some()),
            ("--group", self.group.is_some()),
            ("--start", self.start.is_some()),
            ("--kafka-option", !self.kafka_options.is_empty()),
            ("--max-events", self.max_events.is_some()),
            ("--schema-registry", self.schema_registry.is_some()),
            ("--kafka-columns", self.kafka_columns.is_some()),
            ("--kafka-bytes", self.kafka_bytes.is_some()),
        ];
        if let Some((flag, _)) = kafka_only.iter().find(|(_, given)| *given) {
            return Err(usage(format!("{flag}: only with a kafka:TOPIC source")));
        }
        Ok(())
    }

    /// The Kafka source's settings (`--brokers`, `--group`, `--start`, `--kafka-option`,
    /// `--max-events`), and what a Kafka source refuses.
    fn kafka_settings(
        &self,
        topic: String,
        pipeline: &str,
        until_idle_ms: Option<i64>,
        idle_timeout_ms: Option<i64>,
    ) -> anyhow::Result<KafkaSettings> {
        let brokers = self
            .brokers
            .clone()
            .ok_or_else(|| usage("--brokers HOST:PORT is required with a kafka: source"))?;
        if self.follow {
            return Err(usage(
                "--follow: a Kafka source is always followed (end a run with --until-idle or --max-events)",
            ));
        }
        let start = StartAt::parse(self.start.as_deref().unwrap_or(defaults::START))
            .ok_or_else(|| usage("--start: use earliest or latest"))?;
        let mut client_options = Vec::new();
        for kv in &self.kafka_options {
            client_options.push(key_value("--kafka-option", kv)?);
        }
        if self.max_events == Some(0) {
            return Err(usage("--max-events: must be at least 1"));
        }
        let message_columns = self.message_columns()?;
        let mut payload = self.payload_options()?;
        payload.meta = !message_columns.is_empty();
        Ok(KafkaSettings {
            topic,
            brokers,
            group: self.group.clone().unwrap_or_else(|| pipeline.to_string()),
            start,
            client_options,
            until_idle_ms,
            idle_timeout_ms,
            max_events: self.max_events,
            payload,
            message_columns,
        })
    }

    /// `--kafka-columns` and `--kafka-bytes`.
    fn message_columns(&self) -> anyhow::Result<sluice_source::MessageColumns> {
        use sluice_source::{BytesAs, MessageColumns, MessagePart};
        let mut parts = Vec::new();
        for name in self.kafka_columns.iter().flat_map(|c| c.split(',')) {
            let name = name.trim();
            let part = MessagePart::parse(name).ok_or_else(|| {
                usage(format!(
                    "--kafka-columns {name:?}: use key, timestamp, headers, partition or offset"
                ))
            })?;
            if !parts.contains(&part) {
                parts.push(part);
            }
        }
        if parts.is_empty() && self.kafka_bytes.is_some() {
            return Err(usage("--kafka-bytes: only with --kafka-columns"));
        }
        let timestamp = MessagePart::Timestamp;
        if self.time_field.as_deref() == Some(timestamp.column().as_str())
            && !parts.contains(&timestamp)
        {
            return Err(usage(format!(
                "--time-field {}: add timestamp to --kafka-columns",
                timestamp.column()
            )));
        }
        let bytes = match self.kafka_bytes.as_deref() {
            None => BytesAs::String,
            Some(name) => {
                BytesAs::parse(name).ok_or_else(|| usage("--kafka-bytes: use string or binary"))?
            }
        };
        Ok(MessageColumns { parts, bytes })
    }

    /// `--input-format` of a Kafka source and `--schema-registry` with its credentials
    /// (from the environment).
    fn payload_options(&self) -> anyhow::Result<sluice_source::kafka::PayloadOptions> {
        use sluice_source::kafka::{MessageFormat, PayloadOptions};
        use sluice_source::registry::{RegistryAuth, RegistryOptions};
        let format = match self.input_format.as_deref() {
            None => MessageFormat::Json,
            Some(name) => MessageFormat::parse(name).ok_or_else(|| {
                usage(format!(
                    "--input-format {name}: use json, avro, protobuf or json-schema"
                ))
            })?,
        };
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let auth = match (
            env("SLUICE_SCHEMA_REGISTRY_USER"),
            env("SLUICE_SCHEMA_REGISTRY_PASSWORD"),
            env("SLUICE_SCHEMA_REGISTRY_TOKEN"),
        ) {
            (None, None, None) => RegistryAuth::None,
            (Some(user), password, None) => RegistryAuth::Basic {
                user,
                password: password.unwrap_or_default(),
            },
            (None, None, Some(token)) => RegistryAuth::Bearer(token),
            (None, Some(_), None) => {
                return Err(usage(
                    "SLUICE_SCHEMA_REGISTRY_PASSWORD is set without SLUICE_SCHEMA_REGISTRY_USER",
                ))
            }
            _ => {
                return Err(usage(
                    "set SLUICE_SCHEMA_REGISTRY_TOKEN or SLUICE_SCHEMA_REGISTRY_USER/_PASSWORD, not both",
                ))
            }
        };
        let registry = match &self.schema_registry {
            None => None,
            Some(url) => Some(
                RegistryOptions::new(url, auth)
                    .map_err(|e| usage(format!("--schema-registry: {e}")))?,
            ),
        };
        let payload = PayloadOptions {
            format,
            registry,
            meta: false,
        };
        payload.check().map_err(|e| usage(e.to_string()))?;
        Ok(payload)
    }

    /// `--follow` and its options (`--poll-interval`, `--idle-timeout`, `--until-idle`),
    /// refused without it (a Kafka run is always followed: it takes `--until-idle`).
    fn follow_settings(
        &self,
        kafka: bool,
        idle_timeout_ms: Option<i64>,
        until_idle_ms: Option<i64>,
    ) -> anyhow::Result<Option<FollowSettings>> {
        let poll_ms = duration_option("--poll-interval", self.poll_interval.as_deref())?;
        if self.follow {
            let poll_ms = duration_or_default(
                "--poll-interval",
                &self.poll_interval,
                defaults::POLL_INTERVAL,
            )?;
            if poll_ms < 1 {
                return Err(usage("--poll-interval: must be at least 1ms"));
            }
            Ok(Some(FollowSettings {
                poll_ms: poll_ms as u64,
                idle_timeout_ms,
                until_idle_ms,
            }))
        } else {
            let given = [
                ("--poll-interval", poll_ms),
                ("--idle-timeout", idle_timeout_ms),
                ("--until-idle", until_idle_ms),
            ];
            // A Kafka run is always followed: it takes --idle-timeout and --until-idle.
            let given = if kafka { &given[..1] } else { &given[..] };
            if let Some((flag, _)) = given.iter().find(|(_, v)| v.is_some()) {
                return Err(usage(format!(
                    "{flag}: only with --follow (a bounded run seals every window at the end of its input)"
                )));
            }
            Ok(None)
        }
    }
}

impl RunArgs {
    pub fn settings(self) -> anyhow::Result<RunSettings> {
        let a = self.merge_config()?;
        let (source, topic, prefix_format) = parse_source(a.source.as_deref())?;
        let input = a.file_format(prefix_format, topic.is_some())?;
        let (source_options, listing) = a.object_source(&source)?;
        let table = a
            .table
            .clone()
            .ok_or_else(|| usage("--table is required"))?;
        let pipeline = a
            .pipeline
            .clone()
            .unwrap_or_else(|| defaults::PIPELINE.into());
        if !valid_pipeline_name(&pipeline) {
            return Err(usage(format!(
                "--pipeline {pipeline:?}: use 1 to 128 letters, digits, '_', '-' or '.', not starting with '.'"
            )));
        }
        let pipelines = a
            .pipelines
            .as_deref()
            .map(|p| Pipelines::parse_name(p).ok_or_else(|| usage("--pipelines: use one or many")))
            .transpose()?;
        let (time_field, time, skew) = a.time_settings()?;
        let evolution = a
            .schema_evolution
            .as_deref()
            .map(|name| {
                SchemaEvolution::parse_name(name)
                    .ok_or_else(|| usage("--schema-evolution: use add, reject or ignore"))
            })
            .transpose()?;
        let columns_max = a.columns_max.unwrap_or(defaults::COLUMNS_MAX);
        if columns_max == 0 {
            return Err(usage("--columns-max: must be at least 1"));
        }
        let window = a.window_size()?;
        let layout = match a.address.as_deref() {
            None => AddressLayout::default_for(window),
            Some(name) => {
                AddressLayout::parse_name(name).map_err(|e| usage(format!("--address: {e}")))?
            }
        };
        layout
            .validate(window)
            .map_err(|e| usage(format!("--address: {e}")))?;
        let time_column = a.time_column.clone().filter(|c| !c.is_empty());
        if let Some(c) = time_column
            .as_deref()
            .filter(|c| !sluice_source::schema::acceptable(c))
        {
            return Err(usage(format!(
                "--time-column {c:?}: not a column name Delta readers take (empty, or one of ` ,;{{}}()=`, a tab, a newline or a control character)"
            )));
        }
        let lateness_ms = parse_duration_ms(a.lateness.as_deref().unwrap_or(defaults::LATENESS))
            .map_err(|e| usage(format!("--lateness: {e}")))?;
        let key = match &a.key {
            None => None,
            Some(k) => {
                let columns: Vec<String> = k.split(',').map(|c| c.trim().to_string()).collect();
                if columns.iter().any(String::is_empty) {
                    return Err(usage(format!("--key {k:?}: empty field name")));
                }
                Some(KeySpec {
                    columns,
                    time_field: time_field.clone(),
                    time: time.clone(),
                    sequence: a.sequence_fields()?,
                })
            }
        };
        if key.is_none() && a.sequence_field.is_some() {
            return Err(usage(
                "--sequence-field: needs --key FIELD[,FIELD] (a sequence orders the changes of one key)",
            ));
        }
        let scope = match a.merge_scope.as_deref() {
            None => None,
            Some(name) => Some(
                MergeScope::parse_name(name)
                    .ok_or_else(|| usage("--merge-scope: use window or table"))?,
            ),
        };
        let mode = match a.mode.as_deref().unwrap_or(defaults::MODE) {
            "swap" if scope.is_some() => {
                return Err(usage("--merge-scope: only with --mode merge"));
            }
            "swap" => PublishMode::Swap,
            "merge" if key.is_none() => {
                return Err(usage(
                    "--mode merge: needs --key FIELD[,FIELD] (the natural key rows are upserted on)",
                ));
            }
            "merge" => PublishMode::Merge(scope.unwrap_or_default()),
            _ => return Err(usage("--mode: use swap or merge")),
        };
        let evolution = evolution.unwrap_or_default();
        let flush_bytes_max = parse_bytes(
            a.flush_bytes_max
                .as_deref()
                .unwrap_or(defaults::FLUSH_BYTES_MAX),
        )
        .ok_or_else(|| usage("--flush-bytes-max: expected a size like 256MiB, 64MB or 1048576"))?;
        let chunk_bytes = parse_bytes(a.chunk_bytes.as_deref().unwrap_or(defaults::CHUNK_BYTES))
            .filter(|n| *n >= 4096)
            .ok_or_else(|| usage("--chunk-bytes: expected a size of at least 4KiB, like 4MiB"))?;
        let decode_threads = a.decode_threads.unwrap_or(defaults::DECODE_THREADS);
        if !(1..=64).contains(&decode_threads) {
            return Err(usage("--decode-threads: from 1 to 64"));
        }
        let codec = Codec::parse_name(a.compression.as_deref().unwrap_or(defaults::COMPRESSION))
            .ok_or_else(|| usage("--compression: use snappy or zstd"))?;
        let checkpoint_interval = a
            .checkpoint_interval
            .unwrap_or(defaults::CHECKPOINT_INTERVAL);
        if checkpoint_interval == 0 {
            return Err(usage("--checkpoint-interval: must be at least 1"));
        }
        let store_attempts_max = a.store_attempts_max.unwrap_or(defaults::STORE_ATTEMPTS_MAX);
        if store_attempts_max == 0 {
            return Err(usage("--store-attempts-max: must be at least 1"));
        }
        let restarts_max = a.restarts_max.unwrap_or(defaults::RESTARTS_MAX);
        let group_windows_max = a.group_windows_max.unwrap_or(defaults::GROUP_WINDOWS_MAX);
        if group_windows_max == 0 {
            return Err(usage("--group-windows-max: must be at least 1"));
        }
        let storage_options = store_options("--storage-option", &table, &a.storage_options)?;
        let dlq = a
            .dlq
            .clone()
            .unwrap_or_else(|| default_dlq_location(&table));
        let tombstones = a
            .tombstones
            .clone()
            .unwrap_or_else(|| default_tombstones_location(&table));
        let envelope = a.envelope()?;
        let format = a
            .input_format
            .as_deref()
            .or(prefix_format)
            .unwrap_or("ndjson");
        if envelope.is_some() && format == "csv" {
            return Err(usage(
                "--envelope: a CSV record is flat, it cannot hold a change's before and after rows (ndjson, parquet, json, json-schema, avro or protobuf records can)",
            ));
        }
        let mirror = mode == PublishMode::Merge(MergeScope::Table);
        let delete_when = a.delete_when.clone().filter(|w| !w.is_empty()).or_else(|| {
            envelope
                .filter(|_| mirror && key.is_some())
                .map(|e| e.default_delete_when().to_string())
        });
        if delete_when.is_some() {
            let sequenced = key.as_ref().is_some_and(|k| !k.sequence.is_empty());
            if !mirror || !sequenced {
                return Err(usage(
                    "--delete-when: needs --mode merge --merge-scope table and --sequence-field (a mirror of a source's rows: a delete removes its key's row across the table, ordered by the source's sequence)",
                ));
            }
        }
        let history = a.scd.as_deref() == Some("2");
        if history {
            let sequences = key.as_ref().map_or(0, |k| k.sequence.len());
            if !mirror || sequences != 1 {
                return Err(usage(
                    "--scd 2: needs --mode merge --merge-scope table and one --sequence-field (a version starts and ends at a sequence value of its key's changes)",
                ));
            }
        }
        let late = LatePolicy::parse_name(a.late.as_deref().unwrap_or(defaults::LATE))
            .ok_or_else(|| usage("--late: use drop, rewrite or merge"))?;
        let max_rewrite_age_ms =
            duration_option("--max-rewrite-age", a.max_rewrite_age.as_deref())?;
        let late_batch_ms =
            duration_or_default("--late-batch", &a.late_batch, defaults::LATE_BATCH)?;
        let idle_timeout_ms = duration_option("--idle-timeout", a.idle_timeout.as_deref())?;
        let retain_ms = duration_option("--retain", a.retain.as_deref())?;
        if retain_ms.is_some() && (!a.derive_tables.is_empty() || !a.derive.is_empty()) {
            // A derived window recomputed over an expired (empty) raw window would publish
            // what its query gives over no rows (one row of zero counts, say).
            return Err(usage(
                "--retain: not with --derive yet; expire the raw and derived tables with sluice expire",
            ));
        }
        let until_idle_ms = duration_option("--until-idle", a.until_idle.as_deref())?;
        let kafka = match topic {
            None => {
                a.refuse_kafka_options()?;
                None
            }
            Some(topic) => {
                Some(a.kafka_settings(topic, &pipeline, until_idle_ms, idle_timeout_ms)?)
            }
        };
        let follow = a.follow_settings(kafka.is_some(), idle_timeout_ms, until_idle_ms)?;
        if a.dry_run && kafka.is_some() {
            return Err(usage(
                "--dry-run: reads files, not a Kafka topic (a run commits its group's offsets to the broker); to try a topic, backfill a scratch table",
            ));
        }
        if a.dry_run && follow.is_some() {
            return Err(usage(
                "--dry-run: reads the input as it is now; leave out --follow",
            ));
        }
        if let Some(attempt) = &a.attempt {
            if attempt.is_empty()
                || !attempt
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(usage("--attempt: use letters, digits and _ only"));
            }
        }
        derive_tables::check(&a.derive, &[&table, &dlq])?;
        notify_targets::check(&a.notify)?;
        let notify_drain_ms =
            duration_or_default("--notify-drain", &a.notify_drain, defaults::NOTIFY_DRAIN)?.max(0)
                as u64;
        let max_reject_ratio = parse_ratio(
            a.max_reject_ratio
                .as_deref()
                .unwrap_or(defaults::MAX_REJECT_RATIO),
        )
        .ok_or_else(|| usage("--max-reject-ratio: expected a share like 10% or 0.1"))?;
        let json = match a.format.as_deref().unwrap_or("text") {
            "text" => false,
            "json" => true,
            _ => return Err(usage("--format: use text or json")),
        };
        let metrics_addr = match a.metrics_addr.as_deref() {
            None => None,
            Some(addr) => Some(addr.parse().map_err(|_| {
                usage(format!(
                    "--metrics-addr {addr:?}: expected HOST:PORT with an IP address, e.g. 127.0.0.1:9464 or 0.0.0.0:9464"
                ))
            })?),
        };
        let expectations = expect_rules::resolve(&a)?;
        Ok(RunSettings {
            source,
            input,
            source_options,
            listing,
            kafka,
            table,
            pipeline,
            pipelines,
            time_field,
            time,
            time_column,
            skew,
            evolution,
            columns_max,
            window,
            layout,
            lateness_ms,
            key,
            mode,
            schema: a.schema,
            infer_lines: a.infer_lines.unwrap_or(defaults::INFER_LINES).max(1),
            dlq,
            delete_when,
            history,
            envelope,
            tombstones,
            late,
            max_rewrite_age_ms,
            late_batch_ms,
            follow,
            flush_bytes_max,
            chunk_bytes,
            decode_threads,
            codec,
            checkpoint_interval,
            store_attempts_max,
            restarts_max,
            compact_files_min: a.compact_files_min,
            retain_ms,
            group_windows_max,
            storage_options,
            attempt: a.attempt,
            derive: a.derive,
            notify: a.notify,
            notify_drain_ms,
            expectations,
            change_feed: a.change_feed,
            max_reject_ratio,
            json,
            dry_run: a.dry_run,
            metrics_addr,
        })
    }
}

/// The tombstone table beside `table` (`--tombstones`' default).
/// `KEY=VALUE` pairs of `flag` for the object store at `location`, checked against what the
/// store takes (a misspelt key, a plain-HTTP S3 endpoint without allow_http: exit 2) before
/// anything is opened. A local path takes any (it has no store options).
pub(crate) fn store_options(
    flag: &str,
    location: &str,
    kvs: &[String],
) -> anyhow::Result<HashMap<String, String>> {
    let mut options = HashMap::new();
    for kv in kvs {
        let (k, v) = key_value(flag, kv)?;
        options.insert(k, v);
    }
    check_store_options_at(flag, location, &options)?;
    Ok(options)
}

/// Checks `options` (given by `flag`) against the store at `location`; see [`store_options`].
pub(crate) fn check_store_options_at(
    flag: &str,
    location: &str,
    options: &HashMap<String, String>,
) -> anyhow::Result<()> {
    if let Ok(url) = url::Url::parse(location) {
        sluice_publish::check_store_options(&url, options, &|k| std::env::var(k).ok())
            .map_err(|e| usage(format!("{flag}: {e}")))?;
    }
    Ok(())
}

pub(crate) fn default_tombstones_location(table: &str) -> String {
    format!("{}_tombstones", table.trim_end_matches('/'))
}

pub(crate) fn default_dlq_location(table: &str) -> String {
    format!("{}_dlq", table.trim_end_matches('/'))
}

mod config;
mod derive_tables;
mod expect_rules;
mod notify_targets;
pub mod table_flags;
mod values;

pub use derive_tables::DeriveConfig;
pub(crate) use notify_targets::timeout_ms;
pub use notify_targets::NotifyConfig;

pub(crate) use values::duration_or_default;
pub use values::source_url;
use values::{duration_option, parse_source};
pub use values::{key_value, parse_bytes, parse_range_of, parse_ratio};

#[cfg(test)]
mod tests;
