//! What each pipeline's expectations found, for `status`: per rule the rows in the table
//! that break it (rows a `warn` rule let land, or rows that landed before a rule was
//! tightened) and the dead letters it dropped. Both are read from the tables, so they are
//! exact whatever runs, restarts and replays came before.

use std::collections::BTreeMap;

use anyhow::Context;
use deltalake::arrow::array::{Array, AsArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Int64Type};
use deltalake::datafusion::functions_aggregate::expr_fn::sum;
use deltalake::datafusion::prelude::{col, lit, Expr};
use sluice_ingest::expectations::Expectations;
use sluice_publish::TableStatus;

/// One rule's findings.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuleCount {
    pub name: String,
    pub on_violation: &'static str,
    pub sql: String,
    /// Rows in the table for which the rule is false.
    pub rows_breaking: i64,
    /// Dead letters `expectation` naming the rule (replayed ones included).
    pub dead_letters: i64,
}

/// Each pipeline's rules with what they found (pipelines without rules left out).
pub type RuleCounts = BTreeMap<String, Vec<RuleCount>>;

/// Counts the rules each pipeline of `status` records, over the table at `location` and the
/// dead letters `dropped` (by pipeline, then rule).
pub async fn count(
    status: &TableStatus,
    location: &str,
    storage: &std::collections::HashMap<String, String>,
    dropped: &BTreeMap<String, BTreeMap<String, i64>>,
) -> anyhow::Result<RuleCounts> {
    let mut out = RuleCounts::new();
    for p in &status.pipelines {
        let term = p.contract.get(sluice_publish::terms::EXPECT);
        let rules = Expectations::from_term(term.map_or("", String::as_str))?;
        if rules.is_empty() {
            continue;
        }
        let many = status.pipelines.len() > 1;
        let breaking = rows_breaking(location, storage, &rules, many.then_some(&p.pipeline))
            .await
            .with_context(|| {
                format!(
                    "counting the rows that break pipeline {}'s expectations",
                    p.pipeline
                )
            })?;
        let dead = dropped.get(&p.pipeline);
        let counts = rules
            .rules()
            .iter()
            .zip(breaking)
            .map(|(r, rows_breaking)| RuleCount {
                name: r.name.clone(),
                on_violation: r.on_violation.name(),
                sql: r.condition.sql().to_string(),
                rows_breaking,
                dead_letters: dead.and_then(|d| d.get(&r.name)).copied().unwrap_or(0),
            })
            .collect();
        out.insert(p.pipeline.clone(), counts);
    }
    Ok(out)
}

/// Per rule, the rows of the table (of `pipeline`, in a table of several) for which it is
/// false: one scan of the columns the rules name.
async fn rows_breaking(
    location: &str,
    storage: &std::collections::HashMap<String, String>,
    rules: &Expectations,
    pipeline: Option<&String>,
) -> anyhow::Result<Vec<i64>> {
    let tables = [sluice_sql::TableRef {
        name: "t".into(),
        location: location.to_string(),
        version: None,
    }];
    let ctx = sluice_sql::session(&tables, storage).await?;
    let mut frame = ctx.table("t").await?;
    if let Some(p) = pipeline {
        frame = frame.filter(col(sluice_window::PIPELINE_COLUMN).eq(lit(p.as_str())))?;
    }
    let mut sums = Vec::new();
    for (i, r) in rules.rules().iter().enumerate() {
        let condition = frame.parse_sql_expr(r.condition.sql())?;
        let broken = Expr::IsFalse(Box::new(condition));
        let one = deltalake::datafusion::prelude::cast(broken, DataType::Int64);
        sums.push(sum(one).alias(format!("r{i}")));
    }
    let batches = frame.aggregate(vec![], sums)?.collect().await?;
    let mut out = vec![0; rules.rules().len()];
    for b in &batches {
        for (i, n) in out.iter_mut().enumerate() {
            let column = cast(b.column(i), &DataType::Int64)?;
            let values = column.as_primitive::<Int64Type>();
            if b.num_rows() > 0 && values.is_valid(0) {
                *n += values.value(0);
            }
        }
    }
    Ok(out)
}

/// The lines `status` prints for one pipeline's rules.
pub fn lines(counts: &[RuleCount]) -> Vec<String> {
    counts
        .iter()
        .map(|c| {
            let dropped = match c.on_violation {
                "drop" => format!(", {} dropped as dead letters", c.dead_letters),
                _ => String::new(),
            };
            format!(
                "  expect    {} ({} when false: {}): {} rows in the table break it{dropped}",
                c.name, c.on_violation, c.sql, c.rows_breaking
            )
        })
        .collect()
}
