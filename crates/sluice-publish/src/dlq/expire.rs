//! Retention of the dead-letter table: dead letters detected before a cutoff are removed, a
//! whole file at a time, in one commit per pass.
//!
//! Why whole files and detection time. A dead letter has no window of its own (a torn line
//! has no event time), so the only instant every one of them carries is `detected_at`; and
//! every file of the table is one dead-letter commit of one pipeline, all its rows detected at
//! the same instant. A file whose newest `detected_at` (from the log's statistics) is before
//! the cutoff is removed; nothing else is rewritten. A file that straddles the cutoff or
//! mixes pipelines (written by another tool, say an OPTIMIZE) is left whole and counted:
//! retention never removes a dead letter it should keep, it may keep one a little longer.
//!
//! The dead-letter offsets (`txn`s) stay: a replay of the source skips an expired dead
//! letter as it skips one still in the table, so expired records do not come back.
//!
//! Conflicts: a concurrent dead-letter append is a blind append and never conflicts with the
//! removal; two removals of the same file conflict, and the loser re-reads the table and
//! plans again.

use std::collections::HashMap;

use deltalake::kernel::transaction::{CommitBuilder, TransactionError};
use deltalake::kernel::{Action, Remove};
use deltalake::protocol::DeltaOperation;
use deltalake::DeltaTableError;
use serde_json::json;

use super::{DeadLetterError, DeadLetterTable};
use crate::table::land::commit_properties;

/// Attempts at a removal when another removal of the same files lands first.
const CONFLICTS_MAX: usize = 3;

/// Which dead letters [`DeadLetterTable::expire`] removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterExpiryRule {
    /// Dead letters detected before this instant (Unix milliseconds, strict) are removed.
    pub detected_before_ms: i64,
    /// Only this pipeline's dead letters; `None`: every pipeline's.
    pub pipeline: Option<String>,
    /// Which table's dead letters (by their `table_id`).
    pub meant_for: MeantFor,
    /// Only report what would be removed.
    pub dry_run: bool,
}

/// Which table's dead letters a rule takes, by the `table_id` each was recorded for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum MeantFor {
    /// Every table's.
    #[default]
    Any,
    /// Only those of a table once at the location: a `table_id` other than this one (the
    /// table there now), or any recorded `table_id` when `None` (no table is there). Those
    /// without one (written before dead letters named their table) are the table's own.
    OtherThan(Option<String>),
}

/// What [`DeadLetterTable::expire`] removed (or, in a dry run, found due).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeadLettersExpired {
    pub files: usize,
    pub rows: i64,
    /// Files left whole although some of their rows are due: they straddle the cutoff, mix
    /// pipelines, or have no statistics to tell.
    pub files_kept_whole: usize,
    /// The commit that removed them (`None` in a dry run or when nothing was due).
    pub version: Option<u64>,
    /// The earliest cutoff (a later rule's `detected_before_ms`) at which a file that stays
    /// would be due; `None` when none could be (no file stays, or those that stay are never
    /// removed whole). A caller expiring by a retention has nothing to do before then.
    pub next_due_ms: Option<i64>,
}

/// One file of the table, as its statistics describe it.
struct FileFacts {
    remove: Remove,
    rows: i64,
    /// `detected_at` bounds in Unix milliseconds (`None`: no statistics).
    detected_ms: Option<(i64, i64)>,
    /// The one pipeline of the file's rows, when the statistics say there is one.
    pipeline: Option<String>,
    /// The table ids of the file's rows, as the statistics tell them.
    table: TableIds,
}

/// The `table_id`s of a file's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TableIds {
    One(String),
    NoneRecorded,
    /// Several, or some null.
    Mixed,
}

impl DeadLetterTable {
    /// Removes the dead letters `rule` names, at `at_ms` (the commit's timestamp), in one
    /// commit; see the module doc for which files go.
    pub async fn expire(
        &mut self,
        rule: &DeadLetterExpiryRule,
        at_ms: i64,
    ) -> Result<DeadLettersExpired, DeadLetterError> {
        let mut conflicts = 0;
        loop {
            let table_ids = match rule.meant_for {
                MeantFor::Any => HashMap::new(),
                MeantFor::OtherThan(_) => self.table_ids().await?,
            };
            let (due, mut report) =
                self.plan_expiry(rule, &table_ids)
                    .map_err(|source| DeadLetterError::Read {
                        url: self.url.clone(),
                        source,
                    })?;
            if rule.dry_run || due.is_empty() {
                return Ok(report);
            }
            match self.commit_expiry(rule, due, at_ms).await {
                Ok(version) => {
                    report.version = Some(version);
                    return Ok(report);
                }
                Err(ExpiryCommit::Conflict) if conflicts < CONFLICTS_MAX => {
                    conflicts += 1;
                    self.reload().await?;
                }
                Err(ExpiryCommit::Conflict) => {
                    return Err(DeadLetterError::TableMoved {
                        url: self.url.clone(),
                    })
                }
                Err(ExpiryCommit::Failed(source)) => {
                    return Err(DeadLetterError::Expire {
                        url: self.url.clone(),
                        source,
                    })
                }
            }
        }
    }

    /// The files due under `rule` and the report of them, from the table's current state.
    fn plan_expiry(
        &self,
        rule: &DeadLetterExpiryRule,
        table_ids: &HashMap<String, TableIds>,
    ) -> Result<(Vec<Remove>, DeadLettersExpired), DeltaTableError> {
        let snapshot = self.table.snapshot()?;
        let mut report = DeadLettersExpired::default();
        let mut due = Vec::new();
        for view in snapshot.log_data().iter() {
            let file = facts_of(&view, table_ids);
            let mine = match (&rule.pipeline, &file.pipeline) {
                (Some(wanted), Some(p)) => wanted == p,
                // Every pipeline's, or a file of several pipelines' rows (or no statistics
                // to tell): maybe some of them are the rule's.
                _ => true,
            };
            if !mine {
                continue;
            }
            if let MeantFor::OtherThan(current) = &rule.meant_for {
                match &file.table {
                    TableIds::One(id) if current.as_ref() != Some(id) => {}
                    // The table's own (none recorded: written before dead letters named it).
                    TableIds::One(_) | TableIds::NoneRecorded => continue,
                    TableIds::Mixed => {
                        report.files_kept_whole += 1;
                        continue;
                    }
                }
            }
            // Whether removing the whole file removes only the rule's rows.
            let single = rule.pipeline.is_none() || file.pipeline.is_some();
            match file.detected_ms {
                // Statistics keep milliseconds (truncated): the newest row is before
                // `max + 1 ms`, so the file is wholly due when that is at or before the cutoff.
                Some((_, max)) if single && max.saturating_add(1) <= rule.detected_before_ms => {
                    report.files += 1;
                    report.rows += file.rows;
                    due.push(file.remove);
                }
                Some((min, max)) => {
                    if min < rule.detected_before_ms {
                        report.files_kept_whole += 1;
                    }
                    if single {
                        let due = max.saturating_add(1);
                        report.next_due_ms =
                            Some(report.next_due_ms.map_or(due, |d: i64| d.min(due)));
                    }
                }
                None => report.files_kept_whole += 1,
            }
        }
        Ok((due, report))
    }

    /// The table ids of each file's rows, read from the files (their `table_id` column).
    async fn table_ids(&self) -> Result<HashMap<String, TableIds>, DeadLetterError> {
        let snapshot = self
            .table
            .snapshot()
            .map_err(|source| DeadLetterError::Read {
                url: self.url.clone(),
                source,
            })?;
        let paths: Vec<String> = snapshot
            .log_data()
            .iter()
            .map(|v| v.path().to_string())
            .collect();
        let store = self.table.object_store();
        let column = [crate::TABLE_ID_COLUMN.to_string()];
        let mut ids = HashMap::with_capacity(paths.len());
        for path in paths {
            let batches = sluice_stage::read_parquet_columns(store.as_ref(), &path, &column)
                .await
                .map_err(|source| DeadLetterError::ReadBack {
                    url: self.url.clone(),
                    source,
                })?;
            ids.insert(path, table_ids_of(&batches));
        }
        Ok(ids)
    }

    async fn commit_expiry(
        &mut self,
        rule: &DeadLetterExpiryRule,
        due: Vec<Remove>,
        at_ms: i64,
    ) -> Result<u64, ExpiryCommit> {
        let snapshot = self.table.snapshot().map_err(ExpiryCommit::Failed)?;
        let detected_before = chrono::DateTime::from_timestamp_millis(rule.detected_before_ms)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_else(|| rule.detected_before_ms.to_string());
        let info = json!({
            "expired_dead_letters": {
                "detected_before": detected_before,
                "pipeline": rule.pipeline,
                "meant_for_other_tables": matches!(rule.meant_for, MeantFor::OtherThan(_)),
                "files_removed": due.len(),
            }
        });
        let actions: Vec<Action> = due
            .into_iter()
            .map(|mut r| {
                r.deletion_timestamp = Some(at_ms);
                r.data_change = true;
                Action::Remove(r)
            })
            .collect();
        let properties = commit_properties(snapshot, Vec::new(), Some(info), self.commit_retries);
        let finalized = CommitBuilder::from(properties)
            .with_actions(actions)
            // The removed files are named by the actions; the operation records what went
            // without a read predicate, so a concurrent append (which cannot add a file
            // being removed) never conflicts with it.
            .build(
                Some(snapshot),
                self.table.log_store(),
                DeltaOperation::Delete { predicate: None },
            )
            .await
            .map_err(|e| match e {
                DeltaTableError::Transaction {
                    source:
                        TransactionError::CommitConflict(_) | TransactionError::MaxCommitAttempts(_),
                }
                | DeltaTableError::VersionAlreadyExists(_) => ExpiryCommit::Conflict,
                other => ExpiryCommit::Failed(other),
            })?;
        let version = finalized.version();
        self.table.state = Some(finalized.snapshot());
        tracing::info!(table = %self.url, version, "expired dead letters");
        Ok(version)
    }
}

enum ExpiryCommit {
    Conflict,
    Failed(DeltaTableError),
}

/// The table ids of a file's rows (`table_id`, a string column; another type or none is
/// [`TableIds::Mixed`], which keeps the file).
fn table_ids_of(batches: &[deltalake::arrow::array::RecordBatch]) -> TableIds {
    use deltalake::arrow::array::{Array, AsArray};
    let mut seen: Option<TableIds> = None;
    for batch in batches {
        let Some(ids) = batch.column(0).as_string_opt::<i32>() else {
            return TableIds::Mixed;
        };
        for i in 0..ids.len() {
            let this = if ids.is_null(i) {
                TableIds::NoneRecorded
            } else {
                TableIds::One(ids.value(i).to_string())
            };
            match &seen {
                None => seen = Some(this),
                Some(s) if *s == this => {}
                Some(_) => return TableIds::Mixed,
            }
        }
    }
    seen.unwrap_or(TableIds::NoneRecorded)
}

/// The facts [`DeadLetterTable::expire`] plans with, from the file's `add` statistics.
fn facts_of(
    view: &deltalake::kernel::LogicalFileView,
    table_ids: &HashMap<String, TableIds>,
) -> FileFacts {
    let stats: Option<serde_json::Value> = view
        .stats()
        .and_then(|text| serde_json::from_str(&text).ok());
    let bound = |side: &str, column: &str| -> Option<&serde_json::Value> {
        stats.as_ref()?.get(side)?.get(column)
    };
    let millis = |side: &str| -> Option<i64> {
        let text = bound(side, "detected_at")?.as_str()?;
        chrono::DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|t| t.timestamp_millis())
    };
    let detected_ms = millis("minValues").zip(millis("maxValues"));
    let pipeline = match (
        bound("minValues", "pipeline").and_then(|v| v.as_str()),
        bound("maxValues", "pipeline").and_then(|v| v.as_str()),
    ) {
        (Some(min), Some(max)) if min == max => Some(min.to_string()),
        _ => None,
    };
    let rows = view.num_records().map_or(0, |n| n as i64);
    // Statistics cut strings at 32 characters, shorter than a table id: read from the file.
    let table = table_ids
        .get(view.path().as_ref())
        .cloned()
        .unwrap_or(TableIds::Mixed);
    FileFacts {
        remove: view.remove_action(true),
        rows,
        detected_ms,
        pipeline,
        table,
    }
}

#[cfg(test)]
mod tests;
