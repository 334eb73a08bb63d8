//! Expectations: named rules on the rows themselves (`--expect NAME=SQL`,
//! `--expect-or-drop`, `--expect-or-fail`), each a [`RowCondition`] with what a row that
//! breaks it becomes: a row all the same, counted (`warn`); a dead letter `expectation`
//! naming the rule, replayable like any other (`drop`); or the end of the run before the
//! window is published, naming the rule and the record's position (`fail`).
//!
//! A row breaks a rule when the condition is false; a null result (a null operand) keeps
//! it, as a SQL `CHECK` constraint does: `amount IS NOT NULL AND amount >= 0` asks for the
//! value too. Rules run on each decoded batch, before its rows are routed to their windows,
//! in every writer that decodes records (run, follow, backfill, rewrite, dead-letter replay,
//! each Kafka partition's writer). They are part of the table's contract, the one term a
//! run may change: a run that gives rules records them, and a run that gives none keeps the
//! recorded ones.

use std::collections::BTreeMap;

use deltalake::arrow::array::{Array, BooleanArray};
use deltalake::arrow::compute::filter_record_batch;
use deltalake::arrow::datatypes::Schema;
use sluice_source::{Chunk, Decoded, Reject, RejectReason, RAW_BYTES_MAX};

use crate::condition::{ConditionError, RowCondition};

/// What a row that breaks a rule becomes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum OnViolation {
    /// It lands, counted.
    Warn,
    /// It is a dead letter `expectation`.
    Drop,
    /// The run stops before it publishes the row's window.
    Fail,
}

impl OnViolation {
    pub fn name(self) -> &'static str {
        match self {
            OnViolation::Warn => "warn",
            OnViolation::Drop => "drop",
            OnViolation::Fail => "fail",
        }
    }
}

/// One named rule.
#[derive(Debug, Clone)]
pub struct Expectation {
    pub name: String,
    pub condition: RowCondition,
    pub on_violation: OnViolation,
}

impl Expectation {
    pub fn new(name: impl Into<String>, sql: impl Into<String>, on_violation: OnViolation) -> Self {
        Expectation {
            name: name.into(),
            condition: RowCondition::new(sql),
            on_violation,
        }
    }
}

/// Why a set of rules is refused (before anything is written).
#[derive(Debug, thiserror::Error)]
pub enum ExpectationError {
    #[error("expectation {name} ({sql:?}): {source}")]
    Refused {
        name: String,
        sql: String,
        source: ConditionError,
    },
    #[error("expectation name {0:?}: a name is letters, digits and _, not starting with a digit")]
    BadName(String),
    #[error("expectation {0} is given twice")]
    Twice(String),
    #[error("the table's recorded expectations cannot be read ({0}); give the rules again")]
    Recorded(String),
}

/// A rule broken by a record under `fail`: the run stops before the window is published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expectation {rule} failed ({sql:?} is false) at {source_name} offset {offset}: the run stopped before publishing the record's window; fix the record, or loosen the rule (--expect-or-drop makes it a dead letter)")]
pub struct Broken {
    pub rule: String,
    pub sql: String,
    pub source_name: String,
    pub offset: i64,
}

/// The stored form of one rule, in the contract.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredRule {
    name: String,
    sql: String,
    on_violation: OnViolation,
}

/// A pipeline's rules, by name, each name once.
#[derive(Debug, Clone, Default)]
pub struct Expectations {
    rules: Vec<Expectation>,
}

/// Rows that broke each rule (by name), whatever became of them.
pub type Violations = BTreeMap<String, u64>;

impl Expectations {
    /// No rules.
    pub const fn none() -> Self {
        Expectations { rules: Vec::new() }
    }

    /// `rules`, each named once with a name fit for a metric label.
    pub fn new(mut rules: Vec<Expectation>) -> Result<Self, ExpectationError> {
        rules.sort_by(|a, b| a.name.cmp(&b.name));
        for r in &rules {
            let mut chars = r.name.chars();
            let first_ok = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
            if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(ExpectationError::BadName(r.name.clone()));
            }
        }
        if let Some(w) = rules.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(ExpectationError::Twice(w[0].name.clone()));
        }
        Ok(Expectations { rules })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn rules(&self) -> &[Expectation] {
        &self.rules
    }

    /// Checks each rule against the record fields (see [`crate::condition`]).
    pub fn check(&self, record: &Schema) -> Result<(), ExpectationError> {
        for r in &self.rules {
            r.condition
                .check(record)
                .map_err(|source| ExpectationError::Refused {
                    name: r.name.clone(),
                    sql: r.condition.sql().to_string(),
                    source,
                })?;
        }
        Ok(())
    }

    /// The contract's term: a JSON array of the rules by name (empty text for none).
    pub fn to_term(&self) -> String {
        if self.rules.is_empty() {
            return String::new();
        }
        let stored: Vec<StoredRule> = self
            .rules
            .iter()
            .map(|r| StoredRule {
                name: r.name.clone(),
                sql: r.condition.sql().to_string(),
                on_violation: r.on_violation,
            })
            .collect();
        serde_json::to_string(&stored).unwrap_or_default()
    }

    /// The rules a contract's term records.
    pub fn from_term(term: &str) -> Result<Self, ExpectationError> {
        if term.is_empty() {
            return Ok(Expectations::default());
        }
        let stored: Vec<StoredRule> =
            serde_json::from_str(term).map_err(|e| ExpectationError::Recorded(e.to_string()))?;
        Expectations::new(
            stored
                .into_iter()
                .map(|s| Expectation::new(s.name, s.sql, s.on_violation))
                .collect(),
        )
    }

    /// Applies the rules to a decoded chunk: counts each rule's broken rows into
    /// `violations`, turns the rows a `drop` rule breaks into dead letters (`rejects`, with
    /// their lines from `chunk`), and stops at the first row a `fail` rule breaks.
    /// `source_name` names the chunk's partition in a [`Broken`].
    pub fn apply(
        &self,
        decoded: Decoded,
        chunk: &Chunk,
        source_name: &str,
        violations: &mut Violations,
    ) -> Result<Decoded, ApplyError> {
        if self.rules.is_empty() || decoded.batch.num_rows() == 0 {
            return Ok(decoded);
        }
        let rows = decoded.batch.num_rows();
        // Per row, the first drop rule it breaks.
        let mut dropped_by: Vec<Option<usize>> = vec![None; rows];
        for (i, rule) in self.rules.iter().enumerate() {
            let values = rule
                .condition
                .evaluate(&decoded.batch)
                .map_err(|e| ApplyError::Evaluate(rule.name.clone(), e.to_string()))?;
            let broken: Vec<usize> = (0..rows)
                .filter(|&r| values.is_valid(r) && !values.value(r))
                .collect();
            if broken.is_empty() {
                continue;
            }
            *violations.entry(rule.name.clone()).or_default() += broken.len() as u64;
            match rule.on_violation {
                OnViolation::Warn => {}
                OnViolation::Drop => {
                    for r in broken {
                        dropped_by[r].get_or_insert(i);
                    }
                }
                OnViolation::Fail => {
                    return Err(ApplyError::Broken(Broken {
                        rule: rule.name.clone(),
                        sql: rule.condition.sql().to_string(),
                        source_name: source_name.to_string(),
                        offset: decoded.offsets[broken[0]],
                    }))
                }
            }
        }
        self.drop_rows(decoded, chunk, &dropped_by)
    }

    /// `decoded` without the rows a drop rule broke, each a reject naming its rule.
    fn drop_rows(
        &self,
        mut decoded: Decoded,
        chunk: &Chunk,
        dropped_by: &[Option<usize>],
    ) -> Result<Decoded, ApplyError> {
        if dropped_by.iter().all(Option::is_none) {
            return Ok(decoded);
        }
        for (r, rule) in dropped_by.iter().enumerate() {
            let Some(rule) = rule.map(|i| &self.rules[i]) else {
                continue;
            };
            let offset = decoded.offsets[r];
            let line = chunk.line_at(offset);
            decoded.rejects.push(Reject {
                file: decoded.file,
                offset,
                reason: RejectReason::Expectation {
                    rule: rule.name.clone(),
                    sql: rule.condition.sql().to_string(),
                },
                raw: String::from_utf8_lossy(&line[..line.len().min(RAW_BYTES_MAX)]).into_owned(),
            });
        }
        decoded.rejects.sort_by_key(|r| r.offset);
        let keep: BooleanArray = dropped_by.iter().map(|d| Some(d.is_none())).collect();
        let kept_before = keep.true_count();
        decoded.batch = filter_record_batch(&decoded.batch, &keep)
            .map_err(|e| ApplyError::Evaluate("(drop)".into(), e.to_string()))?;
        let mut k = dropped_by.iter().map(Option::is_none);
        decoded.offsets.retain(|_| k.next().unwrap_or(true));
        let mut k = dropped_by.iter().map(Option::is_none);
        decoded.event_times.retain(|_| k.next().unwrap_or(true));
        // Every kept row keeps its position and its event time.
        debug_assert_eq!(
            decoded.batch.num_rows(),
            kept_before,
            "E6: a row an expectation keeps is in the batch"
        );
        debug_assert_eq!(
            decoded.offsets.len(),
            kept_before,
            "E6: a row an expectation keeps keeps its position"
        );
        debug_assert_eq!(
            decoded.event_times.len(),
            kept_before,
            "E6: a row an expectation keeps keeps its event time"
        );
        Ok(decoded)
    }
}

/// Adds `more` violations to `sum`, rule by rule.
pub fn add_violations(sum: &mut Violations, more: &Violations) {
    for (rule, n) in more {
        *sum.entry(rule.clone()).or_default() += n;
    }
}

/// Why applying the rules to a chunk stopped.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Broken(Broken),
    /// A rule could not be evaluated (a bug: rules are checked when the pipeline starts).
    #[error("evaluating expectation {0}: {1}")]
    Evaluate(String, String),
}

#[cfg(test)]
mod tests;
