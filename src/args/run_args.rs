//! The flags of `sluice run` as given (clap) or read from a config file (serde, the same
//! names in snake_case): text, unchecked. Each group of them resolves itself into validated
//! settings (`source_flags`, `time_flags`, `row_flags`, `flow_flags`, `tuning_flags`,
//! `output_flags`); `run_settings` puts the groups together.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use serde::Deserialize;

use super::derive_tables::DeriveConfig;
use super::notify_targets::NotifyConfig;

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
    /// Set by the commands that read tables only (`derive`): no source is read, so none is
    /// resolved, whatever the flags or the config file name.
    #[arg(skip)]
    #[serde(skip)]
    pub reads_no_source: bool,
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
