//! The metrics one run reports, through the `metrics` facade: whatever recorder the binary
//! installs (sluice's `--metrics-addr` installs a Prometheus exporter) receives them, and
//! without one every update is a no-op. Names and meanings are documented in
//! `docs/metrics.md`; this module is the one place that names them.
//!
//! Every series carries the labels `pipeline`, `table` (the table's URL) and `source` (the
//! Kafka partition, `topic/partition`, or the file of a one-file run; `*` for a run over
//! several files). None carries a window: the number of series stays bounded by the number
//! of source partitions, whatever the stream's time span.
//!
//! Handles are registered once per run (not per event), so a counter update in the routing
//! loop is an atomic add.

use std::collections::BTreeMap;

use metrics::{Counter, Gauge, Histogram, Label};

/// Labels of every series of one run.
#[derive(Debug, Clone)]
pub struct RunLabels {
    pub pipeline: String,
    pub table: String,
    pub source: String,
}

impl RunLabels {
    fn labels(&self) -> Vec<Label> {
        vec![
            Label::new("pipeline", self.pipeline.clone()),
            Label::new("table", self.table.clone()),
            Label::new("source", self.source.clone()),
        ]
    }
}

/// The registered handles of one run's metrics.
#[derive(Clone)]
pub(crate) struct Instruments {
    labels: RunLabels,
    pub records_read: Counter,
    pub bytes_read: Counter,
    pub records_rejected: Counter,
    pub rows_replayed: Counter,
    pub late_republished: Counter,
    pub late_dead_lettered: Counter,
    pub rows_published: Counter,
    pub rows_unpublished: Counter,
    pub bytes_published: Counter,
    pub windows_first: Counter,
    pub windows_republished: Counter,
    pub commits: Counter,
    pub parts_flushed: Counter,
    pub windows_compacted: Counter,
    pub windows_expired: Counter,
    pub dead_letters_expired: Counter,
    pub restarts_conflict: Counter,
    pub restarts_other: Counter,
    pub commit_seconds: Histogram,
    pub seal_to_visible_seconds: Histogram,
    pub open_windows: Gauge,
    pub buffered_bytes: Gauge,
    pub buffer_budget_bytes: Gauge,
    pub watermark_seconds: Gauge,
    pub watermark_age_seconds: Gauge,
}

impl std::fmt::Debug for Instruments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Instruments({:?})", self.labels)
    }
}

/// What happens to a late row under the run's late policy.
fn late(labels: &[Label], policy: &str, outcome: &'static str) -> Counter {
    let mut l = labels.to_vec();
    l.push(Label::new("policy", policy.to_string()));
    l.push(Label::from_static_parts("outcome", outcome));
    metrics::counter!("sluice_late_rows_total", l)
}

fn with(labels: &[Label], key: &'static str, value: &'static str) -> Vec<Label> {
    let mut l = labels.to_vec();
    l.push(Label::from_static_parts(key, value));
    l
}

impl Instruments {
    /// Registers the run's series. `late_policy` labels the late-row counters.
    pub fn new(labels: RunLabels, late_policy: &str) -> Instruments {
        let l = labels.labels();
        Instruments {
            records_read: metrics::counter!("sluice_records_read_total", l.clone()),
            bytes_read: metrics::counter!("sluice_source_bytes_read_total", l.clone()),
            records_rejected: metrics::counter!("sluice_records_rejected_total", l.clone()),
            rows_replayed: metrics::counter!("sluice_rows_replayed_total", l.clone()),
            late_republished: late(&l, late_policy, "republished"),
            late_dead_lettered: late(&l, late_policy, "dead_lettered"),
            rows_published: metrics::counter!("sluice_rows_published_total", l.clone()),
            rows_unpublished: metrics::counter!("sluice_rows_unpublished_total", l.clone()),
            bytes_published: metrics::counter!("sluice_published_bytes_total", l.clone()),
            windows_first: metrics::counter!(
                "sluice_windows_published_total",
                with(&l, "kind", "first")
            ),
            windows_republished: metrics::counter!(
                "sluice_windows_published_total",
                with(&l, "kind", "republish")
            ),
            commits: metrics::counter!("sluice_commits_total", l.clone()),
            parts_flushed: metrics::counter!("sluice_parts_flushed_total", l.clone()),
            windows_compacted: metrics::counter!("sluice_windows_compacted_total", l.clone()),
            windows_expired: metrics::counter!("sluice_windows_expired_total", l.clone()),
            dead_letters_expired: metrics::counter!("sluice_dead_letters_expired_total", l.clone()),
            restarts_conflict: metrics::counter!(
                "sluice_restarts_total",
                with(&l, "cause", "conflict")
            ),
            restarts_other: metrics::counter!("sluice_restarts_total", with(&l, "cause", "error")),
            commit_seconds: metrics::histogram!("sluice_commit_seconds", l.clone()),
            seal_to_visible_seconds: metrics::histogram!(
                "sluice_seal_to_visible_seconds",
                l.clone()
            ),
            open_windows: metrics::gauge!("sluice_open_windows", l.clone()),
            buffered_bytes: metrics::gauge!("sluice_buffered_bytes", l.clone()),
            buffer_budget_bytes: metrics::gauge!("sluice_buffer_budget_bytes", l.clone()),
            watermark_seconds: metrics::gauge!("sluice_watermark_seconds", l.clone()),
            watermark_age_seconds: metrics::gauge!("sluice_watermark_age_seconds", l),
            labels,
        }
    }

    /// Dead letters that one dead-letter commit appended, by reason (reasons are a closed
    /// set of codes, so the series stay bounded).
    pub fn dead_letters_committed(&self, by_reason: &BTreeMap<String, u64>) {
        for (reason, n) in by_reason {
            let mut l = self.labels.labels();
            l.push(Label::new("reason", reason.clone()));
            metrics::counter!("sluice_dead_letters_total", l).increment(*n);
        }
    }

    /// Rows that broke expectation `rule` (rules are the pipeline's few named ones, so the
    /// series stay bounded).
    pub fn expectation_violated(&self, rule: &str, rows: u64) {
        let mut l = self.labels.labels();
        l.push(Label::new("rule", rule.to_string()));
        metrics::counter!("sluice_expectation_violations_total", l).increment(rows);
    }

    /// The source's backlog: records (a Kafka partition: its high watermark minus the
    /// table's resume offset) or bytes (files: what the table's resume positions have not
    /// reached).
    pub fn lag(&self, unit: LagUnit, lag: u64) {
        let l = self.labels.labels();
        match unit {
            LagUnit::Records => metrics::gauge!("sluice_source_lag_records", l).set(lag as f64),
            LagUnit::Bytes => metrics::gauge!("sluice_source_lag_bytes", l).set(lag as f64),
        }
    }
}

/// What a lag is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LagUnit {
    Records,
    Bytes,
}

/// Describes every metric a run reports (the `# HELP` and unit lines of an exporter); call
/// once, after installing a recorder.
pub fn describe_metrics() {
    describe_counters();
    describe_histograms_and_gauges();
}

/// The counters' descriptions.
fn describe_counters() {
    use metrics::{describe_counter, Unit};
    describe_counter!("sluice_records_read_total", "Records decoded from the source, rejected ones included (replays of a restart count again)");
    describe_counter!(
        "sluice_source_bytes_read_total",
        Unit::Bytes,
        "Bytes read from the source"
    );
    describe_counter!(
        "sluice_records_rejected_total",
        "Records that could not be decoded (dead letters once committed)"
    );
    describe_counter!(
        "sluice_rows_replayed_total",
        "Rows skipped because the table already holds them (a replay after a restart)"
    );
    describe_counter!(
        "sluice_late_rows_total",
        "Rows whose window was already published, by the late policy and what it did with them"
    );
    describe_counter!("sluice_rows_published_total", "Rows the run's commits added to the table, less the rows they replaced: summed over the pipeline's processes, the rows it holds");
    describe_counter!(
        "sluice_rows_unpublished_total",
        "Rows removed by commits that left a window with fewer rows than before"
    );
    describe_counter!(
        "sluice_published_bytes_total",
        Unit::Bytes,
        "Bytes of the Parquet files the run's commits added"
    );
    describe_counter!("sluice_windows_published_total", "Window publications: kind=first for a window's first, kind=republish for late rows, merges and backfills");
    describe_counter!(
        "sluice_commits_total",
        "Data commits to the table (one may publish several windows)"
    );
    describe_counter!(
        "sluice_windows_compacted_total",
        "Windows compacted in the run (--compact-files-min): one commit each, same rows"
    );
    describe_counter!(
        "sluice_windows_expired_total",
        "Windows removed by the run's retention (--retain), whole"
    );
    describe_counter!(
        "sluice_dead_letters_expired_total",
        "Dead letters removed by the run's retention (--retain), by the time they were detected"
    );
    describe_counter!(
        "sluice_parts_flushed_total",
        "Parts of open windows staged early to stay within the memory budget"
    );
    describe_counter!("sluice_restarts_total", "Restarts from the table after a failure: cause=conflict for a lost commit race, cause=error for store and other resumable failures");
    describe_counter!(
        "sluice_dead_letters_total",
        "Rows committed to the dead-letter table, by reason"
    );
    describe_counter!(
        "sluice_expectation_violations_total",
        "Rows that broke an expectation, by rule (--expect: landed; --expect-or-drop: dead letters; --expect-or-fail: the run stopped)"
    );
    describe_counter!(
        "sluice_commit_retries_total",
        "Versions other writers took first, over which a commit was retried without conflict"
    );
    describe_counter!(
        "sluice_checkpoints_total",
        "Checkpoints the run's commits wrote"
    );
    describe_counter!(
        "sluice_store_retries_total",
        "Retries of object-store operations after a transient failure, by operation"
    );
    describe_counter!(
        "sluice_store_landed_puts_total",
        "Create-only puts that reported a failure but had landed: a retry read back exactly the bytes put"
    );
    // Unlabelled, so served from the start (at 0): a rate over it needs the series before
    // the first increment, which a healthy run may never have.
    metrics::counter!("sluice_store_landed_puts_total").increment(0);
}

/// The histograms' and gauges' descriptions.
fn describe_histograms_and_gauges() {
    use metrics::{describe_gauge, describe_histogram, Unit};
    describe_histogram!(
        "sluice_commit_seconds",
        Unit::Seconds,
        "Time to publish a group of sealed windows: staging still running, then the Delta commit"
    );
    describe_histogram!(
        "sluice_seal_to_visible_seconds",
        Unit::Seconds,
        "Time from a window's seal to the commit that makes it visible to readers"
    );
    describe_gauge!(
        "sluice_open_windows",
        "Windows holding rows that are not published yet"
    );
    describe_gauge!(
        "sluice_buffered_bytes",
        Unit::Bytes,
        "Bytes of unpublished rows held in memory"
    );
    describe_gauge!(
        "sluice_buffer_budget_bytes",
        Unit::Bytes,
        "The memory budget for unpublished rows (--flush-bytes-max)"
    );
    describe_gauge!(
        "sluice_watermark_seconds",
        Unit::Seconds,
        "The event-time watermark, in seconds since the epoch"
    );
    describe_gauge!(
        "sluice_watermark_age_seconds",
        Unit::Seconds,
        "How far the watermark is behind the clock"
    );
    describe_gauge!(
        "sluice_source_lag_records",
        "A Kafka partition's high watermark minus the table's resume offset"
    );
    describe_gauge!(
        "sluice_source_lag_bytes",
        Unit::Bytes,
        "Bytes of the source files past the table's resume positions"
    );
}
