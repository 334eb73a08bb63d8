//! A table's contract: the options that decide what a pipeline's rows mean (the time field
//! and how it is read, the window size and address layout, the row key, the publish mode, the
//! late policy; for a derived table, its raw table, query and key), recorded in the table so
//! that a later run cannot quietly write the same table another way. Two window sizes in one
//! table would put one instant in two windows; a changed key would keep duplicates that the old
//! key removed. So a run whose options disagree with the recorded ones is refused before it
//! writes anything ([`OpenError::ContractMismatch`](crate::OpenError::ContractMismatch)).
//!
//! Stored as one table property per pipeline, `sluice.contract.<pipeline>`, holding a JSON
//! object of term name to value, readable by any Delta engine (`SHOW TBLPROPERTIES`). A new
//! table gets it at creation; a table written before contracts existed, or a new pipeline of
//! a table of several pipelines, gets it in a metadata-only commit once the run's options are
//! validated ([`WindowTable::record_contract`](crate::WindowTable::record_contract), in `contract_in_table`).

use std::collections::{BTreeMap, HashMap};

/// The prefix of the contract property; the pipeline name follows.
pub const CONTRACT_KEY_PREFIX: &str = "sluice.contract.";

/// The contract property of `pipeline`.
pub fn contract_key(pipeline: &str) -> String {
    format!("{CONTRACT_KEY_PREFIX}{pipeline}")
}

/// The names of a run contract's terms: the options that set them, without `--`.
pub mod terms {
    pub const TIME_FIELD: &str = "time-field";
    pub const TIME_FORMAT: &str = "time-format";
    pub const TIME_ZONE: &str = "time-zone";
    pub const TIME_COLUMN: &str = "time-column";
    pub const WINDOW: &str = "window";
    pub const ADDRESS: &str = "address";
    pub const KEY: &str = "key";
    /// What orders a key's changes (`--sequence-field`); empty: the event time.
    pub const SEQUENCE_FIELD: &str = "sequence-field";
    /// How each record wraps its row (`--envelope`); empty: it is the row.
    pub const ENVELOPE: &str = "envelope";
    /// Which changes are deletes (`--delete-when`, SQL); empty: none.
    pub const DELETE_WHEN: &str = "delete-when";
    /// Whether the table keeps every version of a row (`--scd 2`); empty: the latest only.
    pub const SCD: &str = "scd";
    pub const MODE: &str = "mode";
    pub const MERGE_SCOPE: &str = "merge-scope";
    pub const LATE: &str = "late";
    /// How a Kafka source's messages are written (`--input-format`: json, avro).
    pub const INPUT_FORMAT: &str = "input-format";
    /// A Kafka source's message fields as columns (`--kafka-columns`, `--kafka-bytes`).
    pub const KAFKA_COLUMNS: &str = "kafka-columns";
    /// The rules on the rows (`--expect`, `--expect-or-drop`, `--expect-or-fail`), a JSON
    /// array; empty: none. The one term a run may change ([`CHANGEABLE`](super::CHANGEABLE)).
    pub const EXPECT: &str = "expect";
    /// A derived table's raw table (its URL).
    pub const RAW: &str = "raw";
    /// A derived table's query.
    pub const SQL: &str = "sql";
}

/// Terms a run may change: a given value replaces the recorded one (recorded by
/// [`WindowTable::record_contract`](crate::WindowTable::record_contract)) instead of being refused. Expectations decide which of
/// the rows to come land, not what the rows that landed mean.
pub const CHANGEABLE: [&str; 1] = [terms::EXPECT];

/// Named terms, each the value of the option that sets it, spelled as on the command line
/// (`window` = `90m`, `key` = `event_id` or empty for the source position).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contract {
    terms: BTreeMap<String, String>,
}

/// A term whose recorded value differs from the one a run gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractDifference {
    pub term: String,
    pub recorded: String,
    pub given: String,
}

impl std::fmt::Display for ContractDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |v: &str| {
            if v.is_empty() {
                "(none)".to_string()
            } else {
                v.to_string()
            }
        };
        write!(
            f,
            "{} is {} in the table, {} in this run",
            self.term,
            shown(&self.recorded),
            shown(&self.given)
        )
    }
}

impl Contract {
    pub fn new() -> Self {
        Contract::default()
    }

    /// The contract with `term` set to `value`.
    pub fn with(mut self, term: &str, value: impl Into<String>) -> Self {
        self.terms.insert(term.to_string(), value.into());
        self
    }

    pub fn get(&self, term: &str) -> Option<&str> {
        self.terms.get(term).map(String::as_str)
    }

    pub fn terms(&self) -> impl Iterator<Item = (&str, &str)> {
        self.terms.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The terms of `given` whose value differs from this (recorded) contract's. A term this
    /// contract lacks is no difference: it is recorded by [`WindowTable::record_contract`](crate::WindowTable::record_contract).
    pub fn differences(&self, given: &Contract) -> Vec<ContractDifference> {
        given
            .terms
            .iter()
            .filter(|(term, _)| !CHANGEABLE.contains(&term.as_str()))
            .filter_map(|(term, value)| {
                let recorded = self.terms.get(term)?;
                (recorded != value).then(|| ContractDifference {
                    term: term.clone(),
                    recorded: recorded.clone(),
                    given: value.clone(),
                })
            })
            .collect()
    }

    /// Whether every term of `given` is recorded here (a changeable term, with its value).
    pub fn covers(&self, given: &Contract) -> bool {
        given.terms.iter().all(|(t, v)| match self.terms.get(t) {
            Some(recorded) => recorded == v || !CHANGEABLE.contains(&t.as_str()),
            None => false,
        })
    }

    /// This contract with `given`'s terms added where absent, and its changeable terms
    /// replacing the recorded ones.
    pub(crate) fn extended_by(&self, given: &Contract) -> Contract {
        let mut terms = self.terms.clone();
        for (t, v) in &given.terms {
            if CHANGEABLE.contains(&t.as_str()) {
                terms.insert(t.clone(), v.clone());
            } else {
                terms.entry(t.clone()).or_insert_with(|| v.clone());
            }
        }
        Contract { terms }
    }

    /// The property value: a JSON object.
    pub fn to_property(&self) -> String {
        serde_json::to_string(&self.terms).unwrap_or_else(|_| "{}".into())
    }

    /// Reads a property value; `None` if it is not a JSON object of strings.
    pub fn from_property(text: &str) -> Option<Contract> {
        serde_json::from_str(text)
            .ok()
            .map(|terms| Contract { terms })
    }

    /// The contract of `pipeline` recorded in a table's configuration. A property that is
    /// not a contract (written by hand) counts as none.
    pub fn recorded_in(configuration: &HashMap<String, String>, pipeline: &str) -> Option<Self> {
        configuration
            .get(&contract_key(pipeline))
            .and_then(|text| Contract::from_property(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_term_is_a_difference_and_a_new_term_is_not() {
        let recorded = Contract::new().with("window", "90m").with("key", "");
        let given = Contract::new()
            .with("window", "30m")
            .with("key", "")
            .with("late", "rewrite");
        assert_eq!(
            recorded.differences(&given),
            [ContractDifference {
                term: "window".into(),
                recorded: "90m".into(),
                given: "30m".into()
            }]
        );
        assert!(!recorded.covers(&given));
        let extended = recorded.extended_by(&given);
        assert_eq!(extended.get("window"), Some("90m"), "recorded terms stay");
        assert_eq!(extended.get("late"), Some("rewrite"));
        let back = Contract::from_property(&extended.to_property()).unwrap();
        assert_eq!(back, extended);
        assert_eq!(Contract::from_property("not json"), None);
    }

    /// Expectations change without a difference: a given value is not refused, and the
    /// contract is not covered until it records the given value, which then replaces the old.
    #[test]
    fn a_changeable_term_replaces_the_recorded_value() {
        let recorded = Contract::new()
            .with(terms::WINDOW, "1h")
            .with(terms::EXPECT, "[old]");
        let given = Contract::new()
            .with(terms::WINDOW, "1h")
            .with(terms::EXPECT, "[new]");
        assert!(recorded.differences(&given).is_empty());
        assert!(!recorded.covers(&given));
        let extended = recorded.extended_by(&given);
        assert_eq!(extended.get(terms::EXPECT), Some("[new]"));
        assert!(extended.covers(&given));
        assert!(recorded.covers(&recorded.clone()));
    }
}
