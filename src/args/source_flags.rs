//! Where records come from and how they are written: `--source`, `--input-format` and the
//! CSV options, an object-store source's `--source-option` and `--listing`, and a Kafka
//! source's flags (refused with a file source).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sluice_ingest::defaults;
use sluice_source::kafka::StartAt;
use sluice_source::{CsvOptions, FileFormat, Listing};

use super::run_args::RunArgs;
use super::store_flags::store_options;
use super::values::{key_value, parse_source, source_url};
use crate::exit::usage;

/// The source group, resolved.
#[derive(Debug)]
pub(crate) struct SourceGroup {
    /// The file source (empty with a Kafka source).
    pub source: PathBuf,
    /// How the file source's records are written.
    pub input: FileFormat,
    /// `--source-option`, for an object-store source.
    pub source_options: HashMap<String, String>,
    /// `--listing`, for an object-store source.
    pub listing: Listing,
    /// `Some` with a kafka: source.
    pub topic: Option<String>,
    /// The records' format: `--input-format`, else the source's prefix, else ndjson.
    pub format: String,
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

impl RunArgs {
    /// `--source`, `--input-format`, the CSV options, `--source-option` and `--listing`.
    pub(crate) fn source_group(&self) -> anyhow::Result<SourceGroup> {
        if self.reads_no_source {
            return Ok(SourceGroup {
                source: PathBuf::new(),
                input: FileFormat::Ndjson,
                source_options: HashMap::new(),
                listing: Listing::Full,
                topic: None,
                format: self.input_format.as_deref().unwrap_or("ndjson").to_string(),
            });
        }
        let (source, topic, prefix_format) = parse_source(self.source.as_deref())?;
        let input = self.file_format(prefix_format, topic.is_some())?;
        let (source_options, listing) = self.object_source(&source)?;
        let format = self.input_format.as_deref().or(prefix_format);
        Ok(SourceGroup {
            source,
            input,
            source_options,
            listing,
            topic,
            format: format.unwrap_or("ndjson").to_string(),
        })
    }

    /// The Kafka source's settings with a kafka: source; without one, its flags refused.
    pub(crate) fn kafka_group(
        &self,
        topic: Option<String>,
        pipeline: &str,
        until_idle_ms: Option<i64>,
        idle_timeout_ms: Option<i64>,
    ) -> anyhow::Result<Option<KafkaSettings>> {
        match topic {
            None if self.reads_no_source => Ok(None),
            None => self.refuse_kafka_options().map(|()| None),
            Some(topic) => self
                .kafka_settings(topic, pipeline, until_idle_ms, idle_timeout_ms)
                .map(Some),
        }
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
    fn object_source(&self, source: &Path) -> anyhow::Result<(HashMap<String, String>, Listing)> {
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
}
