use std::sync::Arc;

use deltalake::arrow::array::{AsArray, RecordBatch};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use sluice_source::{Chunk, DecodeOptions, LineDecoder};
use sluice_window::TimeFormat;

use super::*;

fn record() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("ts", DataType::Utf8, true),
        Field::new("amount", DataType::Int64, true),
        Field::new("country", DataType::Utf8, true),
    ])
}

const LINES: &str = concat!(
    r#"{"id":"a","ts":"2026-10-03T14:00:00Z","amount":5,"country":"DE"}"#,
    "\n",
    r#"{"id":"b","ts":"2026-10-03T14:01:00Z","amount":-1,"country":"DE"}"#,
    "\n",
    r#"{"id":"c","ts":"2026-10-03T14:02:00Z","amount":7,"country":"XX"}"#,
    "\n",
    r#"{"id":"d","ts":"2026-10-03T14:03:00Z","country":"US"}"#,
    "\n",
    r#"{"id":"e","ts":"2026-10-03T14:04:00Z","amount":-9,"country":"XX"}"#,
    "\n",
);

fn decoded() -> (Decoded, Chunk) {
    let mut decoder = LineDecoder::new(
        Arc::new(record()),
        DecodeOptions::new("ts", TimeFormat::Rfc3339),
    )
    .unwrap();
    let chunk = Chunk {
        file: 0,
        start: 100,
        data: LINES.as_bytes().to_vec(),
        ..Chunk::default()
    };
    let decoded = decoder.decode(&chunk).unwrap();
    assert_eq!(decoded.batch.num_rows(), 5);
    (decoded, chunk)
}

fn ids(batch: &RecordBatch) -> Vec<String> {
    let column = batch.column_by_name("id").unwrap().as_string::<i32>();
    column.iter().map(|v| v.unwrap().to_string()).collect()
}

fn rules(given: &[(&str, &str, OnViolation)]) -> Expectations {
    let rules = given
        .iter()
        .map(|(n, s, o)| Expectation::new(*n, *s, *o))
        .collect();
    let rules = Expectations::new(rules).unwrap();
    rules.check(&record()).unwrap();
    rules
}

/// A warn rule counts the rows it breaks and keeps them; a null result (no amount) passes.
#[test]
fn a_warn_rule_counts_and_keeps_every_row() {
    let (decoded, chunk) = decoded();
    let rules = rules(&[("positive", "amount >= 0", OnViolation::Warn)]);
    let mut violations = Violations::new();
    let out = rules
        .apply(decoded, &chunk, "f.ndjson", &mut violations)
        .unwrap();
    assert_eq!(ids(&out.batch), ["a", "b", "c", "d", "e"]);
    assert!(out.rejects.is_empty());
    assert_eq!(violations, Violations::from([("positive".into(), 2)]));
}

/// A drop rule's rows become rejects naming the rule, at their positions with their lines;
/// the kept rows keep their offsets and event times. A row two rules break counts for both.
#[test]
fn a_drop_rule_turns_its_rows_into_dead_letters_at_their_positions() {
    let (decoded, chunk) = decoded();
    let times = decoded.event_times.clone();
    let rules = rules(&[
        (
            "known_country",
            "country IN ('DE', 'US')",
            OnViolation::Drop,
        ),
        ("positive", "amount >= 0", OnViolation::Warn),
    ]);
    let mut violations = Violations::new();
    let out = rules
        .apply(decoded, &chunk, "f.ndjson", &mut violations)
        .unwrap();
    assert_eq!(ids(&out.batch), ["a", "b", "d"]);
    assert_eq!(out.offsets.len(), 3);
    assert_eq!(out.event_times, [times[0], times[1], times[3]]);
    let lines: Vec<&str> = LINES.lines().collect();
    let at = |i: usize| 100 + lines[..i].iter().map(|l| l.len() as i64 + 1).sum::<i64>();
    assert_eq!(out.offsets, [at(0), at(1), at(3)]);
    let rejected: Vec<(i64, &str, &str)> = out
        .rejects
        .iter()
        .map(|r| (r.offset, r.reason.as_str(), r.raw.as_str()))
        .collect();
    assert_eq!(
        rejected,
        [
            (at(2), "expectation", lines[2]),
            (at(4), "expectation", lines[4])
        ]
    );
    assert!(out.rejects[0]
        .reason
        .detail()
        .starts_with("known_country: "));
    assert_eq!(
        violations,
        Violations::from([("known_country".into(), 2), ("positive".into(), 2)])
    );
}

/// A fail rule stops at the first row that breaks it, naming the rule and the position.
#[test]
fn a_fail_rule_names_the_first_row_that_breaks_it() {
    let (decoded, chunk) = decoded();
    let rules = rules(&[("positive", "amount >= 0", OnViolation::Fail)]);
    let e = rules
        .apply(decoded, &chunk, "f.ndjson", &mut Violations::new())
        .unwrap_err();
    let ApplyError::Broken(broken) = e else {
        panic!("{e}")
    };
    let second = 100 + LINES.lines().next().unwrap().len() as i64 + 1;
    assert_eq!(
        broken,
        Broken {
            rule: "positive".into(),
            sql: "amount >= 0".into(),
            source_name: "f.ndjson".into(),
            offset: second,
        }
    );
}

/// Names fit for a metric label, each once; conditions that could fail on a value, or are
/// no condition, are refused before anything runs.
#[test]
fn bad_rules_are_refused_before_they_run() {
    let named =
        |n: &str| Expectations::new(vec![Expectation::new(n, "amount > 0", OnViolation::Warn)]);
    assert!(matches!(named("1st"), Err(ExpectationError::BadName(_))));
    assert!(matches!(named("a-b"), Err(ExpectationError::BadName(_))));
    assert!(named("_ok_1").is_ok());
    let twice = Expectations::new(vec![
        Expectation::new("x", "amount > 0", OnViolation::Warn),
        Expectation::new("x", "amount > 1", OnViolation::Drop),
    ]);
    assert!(matches!(twice, Err(ExpectationError::Twice(_))));
    for (sql, says) in [
        ("abs(amount) > 0", "no casts, no functions"),
        ("amount", "not a condition"),
        ("country = 1", "compares Text with Number"),
        ("nope > 0", "nope"),
        ("amount + 1 > 0", "no arithmetic"),
    ] {
        let rules = Expectations::new(vec![Expectation::new("r", sql, OnViolation::Drop)]).unwrap();
        let e = rules.check(&record()).unwrap_err().to_string();
        assert!(
            e.contains("expectation r") && e.contains(says),
            "{sql}: {e}"
        );
    }
    for sql in [
        "amount BETWEEN 0 AND 100",
        "country LIKE 'D%'",
        "amount IS NULL OR amount >= 0",
    ] {
        let rules = Expectations::new(vec![Expectation::new("r", sql, OnViolation::Drop)]).unwrap();
        rules
            .check(&record())
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

/// The contract's term holds the rules by name and reads back as them.
#[test]
fn the_contract_term_reads_back_as_the_rules() {
    let given = rules(&[
        ("z_last", "amount >= 0", OnViolation::Fail),
        ("a_first", "country LIKE 'D%'", OnViolation::Drop),
    ]);
    let term = given.to_term();
    let back = Expectations::from_term(&term).unwrap();
    let shown = |e: &Expectations| -> Vec<(String, String, OnViolation)> {
        e.rules()
            .iter()
            .map(|r| {
                (
                    r.name.clone(),
                    r.condition.sql().to_string(),
                    r.on_violation,
                )
            })
            .collect()
    };
    assert_eq!(shown(&back), shown(&given));
    assert_eq!(shown(&back)[0].0, "a_first");
    assert_eq!(back.to_term(), term);
    assert_eq!(Expectations::default().to_term(), "");
    assert!(Expectations::from_term("").unwrap().is_empty());
    assert!(Expectations::from_term("not json").is_err());
}
