//! The validated settings of `sluice run`: each group of flags resolved (`*_flags`), then
//! the checks that span groups.

use std::collections::HashMap;
use std::path::PathBuf;

use sluice_ingest::expectations::Expectations;
use sluice_ingest::{defaults, KeySpec, LatePolicy, PublishMode};
use sluice_publish::Pipelines;
use sluice_source::envelope::Envelope;
use sluice_source::{FileFormat, Listing, SchemaEvolution};
use sluice_window::{AddressLayout, SkewGuard, TimeSpec, WindowSize};

use super::derive_tables::{self, DeriveConfig};
use super::expect_rules;
use super::flow_flags::FollowSettings;
use super::notify_targets::{self, NotifyConfig};
use super::output_flags::Output;
use super::run_args::RunArgs;
use super::source_flags::KafkaSettings;
use super::tuning_flags::Tuning;

/// Validated options of `sluice run`.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The file source (empty with a Kafka source, and for `derive`, which reads none).
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
    pub expectations: Expectations,
    /// `--change-feed`.
    pub change_feed: bool,
    pub late: LatePolicy,
    pub max_rewrite_age_ms: Option<i64>,
    pub late_batch_ms: i64,
    /// `Some` with --follow.
    pub follow: Option<FollowSettings>,
    /// `--compact-files-min`.
    pub compact_files_min: Option<usize>,
    /// `--retain`, in milliseconds.
    pub retain_ms: Option<i64>,
    pub storage_options: HashMap<String, String>,
    pub derive: Vec<DeriveConfig>,
    pub notify: Vec<NotifyConfig>,
    /// `--dry-run`: every store behind an overlay in memory, a report of what would land.
    pub dry_run: bool,
    /// Memory, threads and the store.
    pub tuning: Tuning,
    /// What the run reports and where.
    pub output: Output,
}

impl RunArgs {
    /// The flags (and the config file under them) checked and resolved, group by group.
    pub fn settings(self) -> anyhow::Result<RunSettings> {
        let a = self.merge_config()?;
        let source = a.source_group()?;
        let target = a.target_group()?;
        let time = a.time_group()?;
        let rows = a.row_group(&time, &source.format)?;
        let flow = a.flow_group()?;
        let (until_idle_ms, idle_timeout_ms) = (flow.until_idle_ms, flow.idle_timeout_ms);
        let kafka = a.kafka_group(
            source.topic,
            &target.pipeline,
            until_idle_ms,
            idle_timeout_ms,
        )?;
        let follow = a.follow_settings(kafka.is_some(), idle_timeout_ms, until_idle_ms)?;
        a.check_dry_run(kafka.is_some(), follow.is_some())?;
        derive_tables::check(&a.derive, &[&target.table, &target.dlq])?;
        notify_targets::check(&a.notify)?;
        let tuning = a.tuning_group()?;
        let output = a.output_group()?;
        let expectations = expect_rules::resolve(&a)?;
        Ok(RunSettings {
            source: source.source,
            input: source.input,
            source_options: source.source_options,
            listing: source.listing,
            kafka,
            table: target.table,
            pipeline: target.pipeline,
            pipelines: target.pipelines,
            dlq: target.dlq,
            tombstones: target.tombstones,
            storage_options: target.storage_options,
            time_field: time.time_field,
            time: time.time,
            time_column: time.time_column,
            skew: time.skew,
            window: time.window,
            layout: time.layout,
            lateness_ms: time.lateness_ms,
            key: rows.key,
            mode: rows.mode,
            evolution: rows.evolution,
            columns_max: rows.columns_max,
            envelope: rows.envelope,
            delete_when: rows.delete_when,
            history: rows.history,
            schema: a.schema,
            infer_lines: a.infer_lines.unwrap_or(defaults::INFER_LINES).max(1),
            late: flow.late,
            max_rewrite_age_ms: flow.max_rewrite_age_ms,
            late_batch_ms: flow.late_batch_ms,
            retain_ms: flow.retain_ms,
            follow,
            compact_files_min: a.compact_files_min,
            derive: a.derive,
            notify: a.notify,
            expectations,
            change_feed: a.change_feed,
            dry_run: a.dry_run,
            tuning,
            output,
        })
    }
}
