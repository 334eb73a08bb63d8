//! The expectation options (`--expect`, `--expect-or-drop`, `--expect-or-fail`, their config
//! file tables, `--no-expectations`) resolved into the pipeline's rules: the given ones (a
//! flag replaces the file's rule of its name), or else the ones the table records.

use sluice_ingest::expectations::{Expectation, Expectations, OnViolation};

use super::run_args::RunArgs;
use crate::exit::usage;

impl RunArgs {
    /// Whether the options give the rules (or give none on purpose): the table's are then
    /// not taken.
    pub(super) fn gives_expectations(&self) -> bool {
        self.no_expectations
            || !self.expect_flags.is_empty()
            || !self.expect_or_drop_flags.is_empty()
            || !self.expect_or_fail_flags.is_empty()
            || !self.expect.is_empty()
            || !self.expect_or_drop.is_empty()
            || !self.expect_or_fail.is_empty()
    }
}

/// The run's rules (see the module doc).
pub(super) fn resolve(a: &RunArgs) -> anyhow::Result<Expectations> {
    if a.no_expectations {
        return Ok(Expectations::default());
    }
    if !a.gives_expectations() {
        let recorded = a.expect_recorded.as_deref().unwrap_or_default();
        return Expectations::from_term(recorded).map_err(|e| usage(e.to_string()));
    }
    let mut given: Vec<Expectation> = Vec::new();
    let flags = [
        (&a.expect_flags, "--expect", OnViolation::Warn),
        (
            &a.expect_or_drop_flags,
            "--expect-or-drop",
            OnViolation::Drop,
        ),
        (
            &a.expect_or_fail_flags,
            "--expect-or-fail",
            OnViolation::Fail,
        ),
    ];
    for (values, flag, on_violation) in flags {
        for value in values {
            let (name, sql) = value
                .split_once('=')
                .filter(|(n, s)| !n.trim().is_empty() && !s.trim().is_empty())
                .ok_or_else(|| {
                    usage(format!(
                        "{flag} {value:?}: expected NAME=SQL, e.g. {flag} positive_amount=\"amount >= 0\""
                    ))
                })?;
            given.push(Expectation::new(name.trim(), sql.trim(), on_violation));
        }
    }
    // The file's rules, but for those a flag names.
    let file = [
        (&a.expect, OnViolation::Warn),
        (&a.expect_or_drop, OnViolation::Drop),
        (&a.expect_or_fail, OnViolation::Fail),
    ];
    let flagged: Vec<String> = given.iter().map(|r| r.name.clone()).collect();
    for (table, on_violation) in file {
        for (name, sql) in table.iter().filter(|(n, _)| !flagged.contains(n)) {
            given.push(Expectation::new(name, sql, on_violation));
        }
    }
    Expectations::new(given).map_err(|e| usage(e.to_string()))
}
