//! What a table's contract promises about its rows (docs/guarantees.md, E9): swap and
//! per-window merge one row per row key per window; a mirror one row per key; a history
//! versions per key that do not overlap; with deletes, no row of a key whose tombstone is
//! above it. Read from the contract each pipeline recorded (`sluice.contract.<pipeline>`).

use std::collections::HashMap;

use deltalake::arrow::datatypes::Schema;
use sluice_publish::{terms, Contract, CONTRACT_KEY_PREFIX, OFFSET_COLUMN, SOURCE_COLUMN};
use sluice_publish::{HISTORY_END_AT, HISTORY_START_AT};

/// Which rows may share a row key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// One row per key in each window (swap, a merge per window, a derived table's key).
    PerWindow,
    /// One row per key in the table (a mirror: `--merge-scope table`).
    Mirror,
    /// Versions of a key (`--scd 2`): one per `__start_at`, none overlapping another.
    History,
}

/// The row promise of one pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Promise {
    pub pipeline: String,
    pub shape: Shape,
    /// The row key's fields (dotted paths reach into structs): the contract's key, or the
    /// source position columns of a raw table without one.
    pub key: Vec<String>,
    /// The sequence fields that order a key's changes (`--sequence-field`).
    pub sequence: Vec<String>,
    /// Whether deletes leave tombstones (`--delete-when`).
    pub deletes: bool,
}

/// The promises of the table's pipelines, and what cannot be checked and why.
pub(crate) fn promises(
    configuration: &HashMap<String, String>,
    schema: &Schema,
) -> (Vec<Promise>, Vec<String>) {
    let mut promises = Vec::new();
    let mut skipped = Vec::new();
    let mut pipelines: Vec<&str> = configuration
        .keys()
        .filter_map(|k| k.strip_prefix(CONTRACT_KEY_PREFIX))
        .collect();
    pipelines.sort_unstable();
    if pipelines.is_empty() {
        skipped.push("the table records no sluice contract: its rows' keys are not checked".into());
    }
    for pipeline in pipelines {
        let Some(contract) = Contract::recorded_in(configuration, pipeline) else {
            skipped.push(format!(
                "pipeline {pipeline}: its contract is not a JSON object of strings"
            ));
            continue;
        };
        match promise_of(pipeline, &contract, schema) {
            Ok(p) => promises.push(p),
            Err(why) => skipped.push(format!("pipeline {pipeline}: {why}")),
        }
    }
    (promises, skipped)
}

fn promise_of(pipeline: &str, contract: &Contract, schema: &Schema) -> Result<Promise, String> {
    let list = |term: &str| -> Vec<String> {
        contract
            .get(term)
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let shape = match (contract.get(terms::MERGE_SCOPE), contract.get(terms::SCD)) {
        (Some("table"), Some("2")) => Shape::History,
        (Some("table"), _) => Shape::Mirror,
        _ => Shape::PerWindow,
    };
    let mut key = list(terms::KEY);
    if key.is_empty() {
        let positions = [SOURCE_COLUMN, OFFSET_COLUMN];
        if contract.get(terms::RAW).is_some()
            || positions.iter().any(|c| schema.field_with_name(c).is_err())
        {
            return Err(
                "no row key (a derived table without --key): its rows are not checked".into(),
            );
        }
        key = positions.iter().map(|c| c.to_string()).collect();
    }
    let sequence = list(terms::SEQUENCE_FIELD);
    let mut needed: Vec<&String> = key.iter().chain(&sequence).collect();
    let history = [HISTORY_START_AT.to_string(), HISTORY_END_AT.to_string()];
    if shape == Shape::History {
        needed.extend(&history);
    }
    if let Some(missing) = needed.iter().find(|f| !has_field(schema, f)) {
        return Err(format!(
            "its field {missing:?} is not a column of the table (renamed?): its rows are not checked"
        ));
    }
    Ok(Promise {
        pipeline: pipeline.to_string(),
        shape,
        key,
        deletes: !contract
            .get(terms::DELETE_WHEN)
            .unwrap_or_default()
            .is_empty(),
        sequence,
    })
}

/// Whether `schema` has the field `name`: a column of that name, else a dotted path through
/// struct columns.
pub(crate) fn has_field(schema: &Schema, name: &str) -> bool {
    use deltalake::arrow::datatypes::DataType;
    if schema.field_with_name(name).is_ok() {
        return true;
    }
    let mut parts = name.split('.');
    let Some(mut field) = parts
        .next()
        .and_then(|root| schema.field_with_name(root).ok())
    else {
        return false;
    };
    for member in parts {
        let DataType::Struct(members) = field.data_type() else {
            return false;
        };
        let Some(next) = members.iter().find(|m| m.name() == member) else {
            return false;
        };
        field = next;
    }
    true
}
