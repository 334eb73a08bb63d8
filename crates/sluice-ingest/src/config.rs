//! What a run does, how it fails, and what it reports.

use deltalake::arrow::error::ArrowError;
use sluice_publish::{DeadLetterError, MergeScope, PublishError, OFFSET_COLUMN};
use sluice_source::{Reject, SourceError};
use sluice_stage::{StageError, StageOptions};
use sluice_window::{AddressLayout, SkewGuard, WindowSize};

use crate::dedupe::KeySpec;

/// The caller's clock: sluice's library code never reads the wall clock itself (E5).
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// A clock that always says the same time (tests).
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub i64);

impl Clock for FixedClock {
    fn now_ms(&self) -> i64 {
        self.0
    }
}

/// What happens to an event whose window the watermark already passed (a *late* event).
///
/// Lateness is decided per event, from the watermark just before it (the largest event time
/// read before it, minus the allowed lateness), so it depends only on the input (E5) and a
/// restarted run, which restores the watermark from the table, decides as a clean run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LatePolicy {
    /// To the dead-letter table with reason `late`, counted.
    Drop,
    /// Republish the window by swap: its current rows plus the late ones, deduped by row key.
    #[default]
    Rewrite,
    /// Insert the late rows whose row key is absent, by a Delta MERGE on the window's address.
    Merge,
}

impl LatePolicy {
    pub fn parse_name(name: &str) -> Option<LatePolicy> {
        match name {
            "drop" => Some(LatePolicy::Drop),
            "rewrite" => Some(LatePolicy::Rewrite),
            "merge" => Some(LatePolicy::Merge),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LatePolicy::Drop => "drop",
            LatePolicy::Rewrite => "rewrite",
            LatePolicy::Merge => "merge",
        }
    }
}

/// How a sealed window becomes table rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PublishMode {
    /// Replace the window's files with its deduped rows (one swap commit).
    #[default]
    Swap,
    /// Upsert the window's rows on the natural key (one MERGE commit): a key's row is
    /// replaced only by a winning delivery (later event time, then higher source position).
    /// Needs [`IngestConfig::key`]. Late rows take the same path (the `rewrite` and `merge`
    /// late policies mean the same here); `drop` still dead-letters them.
    Merge(MergeScope),
}

/// What one run does.
#[derive(Debug, Clone)]
pub struct IngestConfig {
    /// Names the ingestion; the `txn` appId prefix.
    pub pipeline: String,
    pub window: WindowSize,
    pub layout: AddressLayout,
    pub lateness_ms: i64,
    /// Natural key columns; `None` keys rows by source position.
    pub key: Option<KeySpec>,
    pub late: LatePolicy,
    pub mode: PublishMode,
    /// Late events whose window ended more than this before the watermark go to the
    /// dead-letter table (`too_late`) instead of reopening it; `None`: no limit.
    pub max_rewrite_age_ms: Option<i64>,
    /// The clock-skew guard: an event this far ahead of the stream does not move the
    /// watermark (it lands in its window, published on its own); see [`SkewGuard`].
    pub skew: SkewGuard,
    /// Memory budget of all open windows' buffered rows; above it the largest window's rows
    /// are staged as a part. Dead letters not committed yet are committed once they hold
    /// more than a [`DEAD_LETTER_SHARE`]th of it.
    pub flush_bytes_max: usize,
    /// Bytes read from the source per chunk.
    pub chunk_bytes: usize,
    /// The late batch: a published window that receives late rows is republished once this
    /// long (processing time) has passed since the first of them was read, so a trickle of
    /// late events costs one republication per interval, not one per event. 0: once per
    /// chunk read. Held late rows hold the resume position like any unpublished row; the end
    /// of input (and an idle seal) publishes them at once. Changes only how many commits late
    /// rows cost, never the table's contents.
    pub late_batch_ms: i64,
    /// Decoded chunks waiting between the reader thread and the ingest task.
    pub chunks_in_flight_max: usize,
    /// Threads that decode a file source's chunks (the reader thread and helpers), each
    /// taking one chunk of a deal; the results are those of one decoder, in order (see
    /// [`sluice_source::ParallelDecoder`]). 1: the reader thread alone.
    pub decode_threads: usize,
    /// Windows sealed together (a catch-up, a backfill, late rows of many windows) are
    /// published by one commit of at most this many windows (a group commit); 1: one commit
    /// per window. A window never waits for others to seal: a group holds only windows that
    /// were due at the same moment, so steady-state seal-to-visible is unchanged.
    pub group_windows_max: usize,
    pub stage: StageOptions,
    /// How a run restarts after a failed publish or store operation (a conflict with another
    /// writer, a commit whose outcome is unknown, store faults that outlasted their retries):
    /// it re-reads the table and resumes from it, after a growing pause, up to
    /// [`RestartPolicy::restarts_max`] times in a row, then gives up with the error.
    pub restart: crate::restart::RestartPolicy,
    /// Compaction in the run: after a commit, each window it published that now holds more
    /// than [`sluice_publish::CompactRule::files_min`] files (late-row appends, MERGE
    /// rewrites) is compacted by a commit of its own (same rows, `dataChange = false`).
    /// `None`: never (`sluice compact` does it apart).
    pub compact: Option<sluice_publish::CompactRule>,
    /// Retention: after a commit, this writer's windows that ended more than this long
    /// before the watermark (of the events: the end of input does not move it) are removed,
    /// whole, by commits of their own; a late event for such a window is dead-lettered
    /// `too_late` (as `max_rewrite_age_ms` would), never published again. The pipeline's
    /// dead letters detected more than this long before the run's clock go too (see
    /// [`sluice_publish::DeadLetterTable::expire`]). `None`: keep all.
    pub retain_ms: Option<i64>,
    /// Deletes (`--delete-when`; merge mode across the table, with a sequence): `None`, every
    /// change is an upsert.
    pub deletes: Option<DeleteRule>,
    /// Rules on the rows (`--expect`, `--expect-or-drop`, `--expect-or-fail`), applied to
    /// each decoded batch before its rows are routed ([`crate::expectations`]).
    pub expectations: crate::expectations::Expectations,
    /// History (`--scd 2`; merge mode across the table, with one sequence field): every
    /// change of a key is a version of its row ([`crate::history`]); false: the table holds
    /// each key's latest change.
    pub history: bool,
}

/// Which changes are deletes, and where their tombstones are kept.
#[derive(Debug, Clone)]
pub struct DeleteRule {
    pub when: crate::deletes::DeletePredicate,
    /// The tombstone table ([`sluice_publish::TombstoneTable`]).
    pub tombstones: sluice_publish::TableOptions,
}

impl IngestConfig {
    /// How this pipeline's files are encoded: [`IngestConfig::stage`], with the columns that
    /// are unique in every published file written without a dictionary (the source offset,
    /// and a one-column row key, unique per window after dedupe).
    pub fn stage_options(&self) -> StageOptions {
        let mut stage = self.stage.clone();
        let mut plain = vec![OFFSET_COLUMN.to_string()];
        if let Some(key) = self
            .key
            .as_ref()
            .filter(|k| k.columns.len() == 1 && !k.columns[0].contains('.'))
        {
            plain.extend(key.columns.iter().cloned());
        }
        for c in plain {
            if !stage.plain_columns.contains(&c) {
                stage.plain_columns.push(c);
            }
        }
        stage
    }
}

/// Pending dead letters are committed early once they hold more than this fraction
/// (1/`DEAD_LETTER_SHARE`) of [`IngestConfig::flush_bytes_max`].
pub const DEAD_LETTER_SHARE: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("decoding failed: {0}")]
    Decode(#[from] sluice_source::DecodeError),
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error(transparent)]
    Publish(Box<PublishError>),
    #[error(transparent)]
    DeadLetters(Box<DeadLetterError>),
    #[error(transparent)]
    Tombstones(Box<sluice_publish::TombstoneError>),
    #[error(transparent)]
    DeletePredicate(#[from] crate::deletes::DeletePredicateError),
    /// An expectation that does not fit the record fields.
    #[error(transparent)]
    ExpectationRefused(#[from] crate::expectations::ExpectationError),
    /// A record broke an expectation under `fail`: the run stopped before publishing its
    /// window.
    #[error(transparent)]
    ExpectationFailed(Box<crate::expectations::Broken>),
    #[error("{0}")]
    ExpectationEvaluate(String),
    #[error("reading the table state failed: {0}")]
    Table(Box<deltalake::DeltaTableError>),
    #[error("arrow failed while routing rows: {0}")]
    Arrow(#[from] ArrowError),
    #[error("the reader thread or a decode task stopped unexpectedly")]
    ReaderGone,
    #[cfg(feature = "kafka")]
    #[error(transparent)]
    KafkaRead(Box<sluice_source::kafka::BoundedReadError>),
    /// The schema registry refused a request, or answered with what is not a schema (while
    /// it cannot be reached, reading waits for it).
    #[error(transparent)]
    Registry(#[from] Box<sluice_source::registry::RegistryError>),
    #[error("merge mode needs a natural key (--key): rows keyed by position cannot be upserted")]
    MergeNeedsKey,
    #[error("growing the table's columns failed: {0}")]
    Schema(Box<sluice_publish::OpenError>),
    #[error("re-reading the table failed: {0}")]
    Reopen(Box<sluice_publish::OpenError>),
    #[error(transparent)]
    Derive(Box<crate::derive::DeriveError>),
    #[error("{count} dead letters have no dead-letter table to go to")]
    NoDeadLetterTable { count: usize },
    #[error("compacting a window in the run failed: {0}")]
    Compact(Box<sluice_publish::CompactError>),
    #[error("removing windows past the retention failed: {0}")]
    Expire(Box<sluice_publish::ExpireError>),
    /// Resumable failures came more times in a row than the restart policy allows.
    #[error(transparent)]
    Exhausted(Box<crate::restart::RestartsExhausted<IngestError>>),
}

impl From<crate::restart::RestartEnd<IngestError>> for IngestError {
    fn from(end: crate::restart::RestartEnd<IngestError>) -> Self {
        match end {
            crate::restart::RestartEnd::Fatal(e) => e,
            crate::restart::RestartEnd::Exhausted(e) => IngestError::Exhausted(Box::new(e)),
        }
    }
}

impl crate::restart::Resumable for IngestError {
    fn is_resumable(&self) -> bool {
        IngestError::is_resumable(self)
    }
}

impl From<sluice_publish::ExpireError> for IngestError {
    fn from(e: sluice_publish::ExpireError) -> Self {
        IngestError::Expire(Box::new(e))
    }
}

impl From<sluice_publish::CompactError> for IngestError {
    fn from(e: sluice_publish::CompactError) -> Self {
        IngestError::Compact(Box::new(e))
    }
}

impl IngestError {
    /// Whether this is a lost commit race: another writer (or this one's earlier attempt)
    /// moved the table first.
    pub fn is_conflict(&self) -> bool {
        match self {
            IngestError::Publish(e) => e.is_conflict(),
            IngestError::Compact(e) => e.is_conflict(),
            IngestError::Expire(e) => e.is_conflict(),
            _ => false,
        }
    }

    /// Whether re-reading the table and resuming from it may get past this error: conflicts
    /// and moved tables (another writer, or an own commit whose outcome was unknown), and
    /// store failures (which already outlasted their per-operation retries).
    pub fn is_resumable(&self) -> bool {
        match self {
            IngestError::Publish(e) => matches!(
                **e,
                PublishError::Conflict { .. }
                    | PublishError::TableMoved { .. }
                    | PublishError::Delta { .. }
            ),
            IngestError::DeadLetters(e) => !matches!(**e, DeadLetterError::Open(_)),
            IngestError::Tombstones(e) => !matches!(
                **e,
                sluice_publish::TombstoneError::Open(_)
                    | sluice_publish::TombstoneError::Columns { .. }
            ),
            IngestError::Stage(e) => {
                matches!(e, StageError::Store { .. } | StageError::Decode { .. })
            }
            IngestError::Table(_) => true,
            IngestError::Reopen(e) => matches!(**e, sluice_publish::OpenError::Delta { .. }),
            IngestError::Derive(e) => e.is_resumable(),
            IngestError::Compact(e) => e.is_resumable(),
            IngestError::Expire(e) => e.is_resumable(),
            _ => false,
        }
    }
}

impl From<crate::expectations::ApplyError> for IngestError {
    fn from(e: crate::expectations::ApplyError) -> Self {
        match e {
            crate::expectations::ApplyError::Broken(b) => {
                IngestError::ExpectationFailed(Box::new(b))
            }
            e @ crate::expectations::ApplyError::Evaluate(..) => {
                IngestError::ExpectationEvaluate(e.to_string())
            }
        }
    }
}

impl From<PublishError> for IngestError {
    fn from(e: PublishError) -> Self {
        IngestError::Publish(Box::new(e))
    }
}

impl From<crate::derive::DeriveError> for IngestError {
    fn from(e: crate::derive::DeriveError) -> Self {
        IngestError::Derive(Box::new(e))
    }
}

impl From<sluice_publish::TombstoneError> for IngestError {
    fn from(e: sluice_publish::TombstoneError) -> Self {
        IngestError::Tombstones(Box::new(e))
    }
}

impl From<DeadLetterError> for IngestError {
    fn from(e: DeadLetterError) -> Self {
        IngestError::DeadLetters(Box::new(e))
    }
}

impl From<deltalake::DeltaTableError> for IngestError {
    fn from(e: deltalake::DeltaTableError) -> Self {
        IngestError::Table(Box::new(e))
    }
}

/// Counts of one run, for the summary line and tests. After a restart from the table
/// (`restarts`), the records it re-reads are counted again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Input bytes read.
    pub bytes: u64,
    /// Records decoded into rows.
    pub rows: u64,
    /// Rows that broke each expectation, by rule (whatever the rule made of them: a row, a
    /// dead letter `expectation`, the end of the run).
    pub expectations: crate::expectations::Violations,
    /// Rows skipped because a publication already handled them (replay after restart).
    pub replayed: u64,
    /// Rows that arrived after their window sealed (handled by the late policy).
    pub late: u64,
    /// Late rows sent to the dead-letter table (`late` under the drop policy, `too_late`).
    pub late_dead_lettered: u64,
    /// Records rejected (bad input), with position and reason in the dead-letter table.
    pub rejected: u64,
    /// The rejections by reason, and the first one, for the warning a run prints when
    /// many records were rejected.
    pub rejections: Rejections,
    /// Without a natural key: records that were byte-for-byte copies of an earlier record
    /// (duplicate deliveries), each kept as a row of its own. A lower bound when
    /// `duplicates_capped` (see [`crate::duplicates::DUPLICATE_LINES_REMEMBERED_MAX`]).
    pub duplicates_kept: u64,
    pub duplicates_capped: bool,
    pub windows_published: u64,
    pub commits: u64,
    /// Commits to the dead-letter table.
    pub dead_letter_commits: u64,
    /// Parts staged early to stay within the memory budget.
    pub parts_flushed: u64,
    /// Windows compacted in the run ([`IngestConfig::compact`]), one commit each.
    pub windows_compacted: u64,
    /// Windows removed by the run's retention ([`IngestConfig::retain_ms`]).
    pub windows_expired: u64,
    /// Dead letters removed by the run's retention ([`IngestConfig::retain_ms`]).
    pub dead_letters_expired: u64,
    /// Times the run re-read the table and resumed from it (conflicts, store faults).
    pub restarts: u64,
    /// Times a followed run sealed every open window after its idle timeout.
    pub idle_seals: u64,
    /// Window publications by MERGE whose rows the table already held (a replay, or only
    /// losing deliveries): nothing to commit.
    pub merges_unchanged: u64,
    /// Derived tables' windows recomputed and published.
    pub derived: crate::derive::DeriveSummary,
    pub last_version: Option<u64>,
    /// Columns the run added to the table (schema evolution), in order.
    pub fields_added: Vec<String>,
    /// Rows that carried fields the table does not have, left out of the row
    /// (`--schema-evolution ignore`, or values with nothing to store such as `{}`).
    pub rows_with_ignored_fields: u64,
    /// Per such field, the rows that carried it.
    pub ignored_fields: FieldCounts,
    /// Kafka tombstones (messages without a value) that `--envelope` left out: compaction
    /// markers written after each delete event, which carries the delete.
    pub tombstones_skipped: u64,
    /// Events far ahead of the stream (the clock-skew guard): they did not move the
    /// watermark, and their windows were published on their own.
    pub ahead: u64,
    /// Microseconds the run's threads were busy in each phase (`sluice_stage::Phase`, by
    /// name, in the phases' order), summed over threads: where the run's time went.
    pub busy_us: Vec<(&'static str, u64)>,
}

impl RunSummary {
    /// Adds another run's counts (a Kafka run sums its partitions' writers); the last
    /// version is the newest of both.
    pub fn absorb(&mut self, s: &RunSummary) {
        self.bytes += s.bytes;
        self.rows += s.rows;
        self.replayed += s.replayed;
        self.late += s.late;
        self.late_dead_lettered += s.late_dead_lettered;
        self.rejected += s.rejected;
        crate::expectations::add_violations(&mut self.expectations, &s.expectations);
        self.windows_published += s.windows_published;
        self.commits += s.commits;
        self.dead_letter_commits += s.dead_letter_commits;
        self.parts_flushed += s.parts_flushed;
        self.restarts += s.restarts;
        self.idle_seals += s.idle_seals;
        self.merges_unchanged += s.merges_unchanged;
        self.last_version = self.last_version.max(s.last_version);
        for f in &s.fields_added {
            if !self.fields_added.contains(f) {
                self.fields_added.push(f.clone());
            }
        }
        self.rows_with_ignored_fields += s.rows_with_ignored_fields;
        self.tombstones_skipped += s.tombstones_skipped;
        self.ignored_fields.absorb(&s.ignored_fields);
        self.ahead += s.ahead;
        self.rejections.absorb(&s.rejections);
        self.duplicates_kept += s.duplicates_kept;
        self.duplicates_capped |= s.duplicates_capped;
        add_busy(&mut self.busy_us, &s.busy_us);
    }
}

/// Busy microseconds by phase name, in [`Phase::ALL`](sluice_stage::Phase::ALL) order.
pub(crate) fn busy_us(busy: &sluice_stage::Busy) -> Vec<(&'static str, u64)> {
    busy.split()
        .into_iter()
        .map(|(phase, secs)| (phase.name(), (secs * 1e6).round() as u64))
        .collect()
}

/// Adds `more` busy microseconds to `sum`, phase by phase.
pub(crate) fn add_busy(sum: &mut Vec<(&'static str, u64)>, more: &[(&'static str, u64)]) {
    for &(phase, us) in more {
        match sum.iter_mut().find(|(p, _)| *p == phase) {
            Some((_, total)) => *total += us,
            None => sum.push((phase, us)),
        }
    }
}

/// Rows per field path, for at most [`FieldCounts::NAMES_MAX`] paths (the first seen); rows
/// of any other path are counted together in `others`. A stream whose keys are data (user
/// ids as keys, say) under `--schema-evolution ignore` would otherwise grow it by a path per
/// new key, without bound.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldCounts {
    pub named: std::collections::BTreeMap<String, u64>,
    /// Rows counted for paths past the first [`FieldCounts::NAMES_MAX`].
    pub others: u64,
}

impl FieldCounts {
    pub const NAMES_MAX: usize = 100;

    pub fn add(&mut self, path: &str, rows: u64) {
        if let Some(n) = self.named.get_mut(path) {
            *n += rows;
        } else if self.named.len() < Self::NAMES_MAX {
            self.named.insert(path.to_string(), rows);
        } else {
            self.others += rows;
        }
    }

    pub fn absorb(&mut self, other: &FieldCounts) {
        for (path, rows) in &other.named {
            self.add(path, *rows);
        }
        self.others += other.others;
    }
}

/// Rejected records by reason, and the first one seen (its position, reason and line).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rejections {
    pub by_reason: std::collections::BTreeMap<String, u64>,
    pub first: Option<RejectedRecord>,
}

/// One rejected record, as the run's warning shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedRecord {
    pub source: String,
    pub offset: i64,
    pub reason: String,
    pub detail: String,
    /// The line, cut to [`Rejections::EXAMPLE_BYTES_MAX`] bytes.
    pub raw: String,
}

impl Rejections {
    /// The most of a rejected line kept as the example.
    pub const EXAMPLE_BYTES_MAX: usize = 200;

    /// Counts a chunk's bad lines of source partition `source` by reason; the first one
    /// seen is kept as the example (its detail worded for it alone).
    pub fn count_rejects(&mut self, source: &str, rejects: &[Reject]) {
        for r in rejects {
            let reason = r.reason.as_str();
            match self.by_reason.get_mut(reason) {
                Some(n) => *n += 1,
                None => {
                    self.by_reason.insert(reason.to_string(), 1);
                }
            }
            if self.first.is_none() {
                let raw = &r.raw;
                let mut end = raw.len().min(Self::EXAMPLE_BYTES_MAX);
                while !raw.is_char_boundary(end) {
                    end -= 1;
                }
                self.first = Some(RejectedRecord {
                    source: source.to_string(),
                    offset: r.offset,
                    reason: reason.to_string(),
                    detail: r.reason.detail(),
                    raw: raw[..end].to_string(),
                });
            }
        }
    }

    pub fn absorb(&mut self, other: &Rejections) {
        for (r, n) in &other.by_reason {
            *self.by_reason.entry(r.clone()).or_default() += n;
        }
        if self.first.is_none() {
            self.first = other.first.clone();
        }
    }

    /// The reasons, most frequent first.
    pub fn top(&self) -> Vec<(&str, u64)> {
        let mut reasons: Vec<(&str, u64)> = self
            .by_reason
            .iter()
            .map(|(r, n)| (r.as_str(), *n))
            .collect();
        reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        reasons
    }
}
