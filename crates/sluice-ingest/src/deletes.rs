//! Deletes of a mirror (`--delete-when`): which changes are deletes, and which changes a
//! tombstone buries.
//!
//! The predicate is SQL over the record's top-level fields, limited to what cannot fail on
//! any value: comparisons of a field with a literal or another field of the same kind (text,
//! number, boolean), `IN` lists, `IS [NOT] NULL`, `IS [NOT] TRUE|FALSE`, `AND`, `OR` and
//! `NOT`. A cast or a function could fail on one record's value, and a publication that fails
//! on every restart would stop the pipeline (E8); such predicates are refused at start-up.
//! A null result is not a delete.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Schema};
use deltalake::arrow::error::ArrowError;
use deltalake::datafusion::common::DFSchema;
use deltalake::datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use deltalake::datafusion::prelude::SessionContext;
use sluice_window::EventTime;

use crate::dedupe::{columns_named, event_time_reader, sequence_converter, KeySpec};
use crate::keys::KeyRows;

/// Why a `--delete-when` predicate is refused.
#[derive(Debug, thiserror::Error)]
pub enum DeletePredicateError {
    #[error("--delete-when {sql:?}: {source}")]
    Parse {
        sql: String,
        source: deltalake::datafusion::error::DataFusionError,
    },
    #[error("--delete-when {sql:?}: {why}")]
    Refused { sql: String, why: String },
}

/// A validated `--delete-when` predicate.
#[derive(Debug, Clone)]
pub struct DeletePredicate {
    sql: String,
}

impl DeletePredicate {
    /// The predicate `sql`, to be checked against the record fields ([`Self::check`])
    /// before it is evaluated.
    pub fn new(sql: impl Into<String>) -> Self {
        DeletePredicate { sql: sql.into() }
    }

    /// Parses the predicate against the record fields `record` and checks that it cannot
    /// fail on a value (see the module doc).
    pub fn check(&self, record: &Schema) -> Result<(), DeletePredicateError> {
        let sql = &self.sql;
        let expr = parse(sql, record)?;
        let refused = |why: String| DeletePredicateError::Refused {
            sql: sql.to_string(),
            why,
        };
        check(&expr, record).map_err(refused)?;
        match kind(&expr, record) {
            Some(Kind::Boolean) => Ok(()),
            _ => Err(refused("not a condition (true or false)".into())),
        }
    }

    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// Per row of `batch`, whether the predicate holds (null: no). `batch` holds at least
    /// the fields the predicate names (the record grown since, and the position columns).
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<Vec<bool>, ArrowError> {
        let schema = batch.schema();
        let failed = |e: deltalake::datafusion::error::DataFusionError| {
            ArrowError::ComputeError(format!("--delete-when {:?}: {e}", self.sql))
        };
        let ctx = SessionContext::new();
        let df_schema = DFSchema::try_from(schema.as_ref().clone()).map_err(failed)?;
        let expr = ctx.parse_sql_expr(&self.sql, &df_schema).map_err(failed)?;
        let physical = ctx.create_physical_expr(expr, &df_schema).map_err(failed)?;
        let values = physical
            .evaluate(batch)
            .and_then(|v| v.into_array(batch.num_rows()))
            .map_err(failed)?;
        let flags = values.as_boolean_opt().ok_or_else(|| {
            ArrowError::ComputeError(format!("--delete-when {:?}: not a condition", self.sql))
        })?;
        Ok((0..flags.len())
            .map(|i| flags.is_valid(i) && flags.value(i))
            .collect())
    }
}

fn parse(sql: &str, record: &Schema) -> Result<Expr, DeletePredicateError> {
    let error = |source| DeletePredicateError::Parse {
        sql: sql.to_string(),
        source,
    };
    let df_schema = DFSchema::try_from(record.clone()).map_err(error)?;
    SessionContext::new()
        .parse_sql_expr(sql, &df_schema)
        .map_err(error)
}

/// What a predicate's operand holds, as far as comparing it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Number,
    Boolean,
    /// A null literal: compares with anything (and is never true).
    Null,
    Other,
}

fn kind_of_type(t: &DataType) -> Kind {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Kind::Text,
        DataType::Boolean => Kind::Boolean,
        DataType::Null => Kind::Null,
        t if t.is_numeric() => Kind::Number,
        _ => Kind::Other,
    }
}

/// The kind of an operand or condition (`None`: not one the predicate may use).
fn kind(expr: &Expr, record: &Schema) -> Option<Kind> {
    match expr {
        Expr::Column(c) => record
            .field_with_name(&c.name)
            .ok()
            .map(|f| kind_of_type(f.data_type())),
        Expr::Literal(v, _) => Some(kind_of_type(&v.data_type())),
        Expr::BinaryExpr(_)
        | Expr::Not(_)
        | Expr::IsNull(_)
        | Expr::IsNotNull(_)
        | Expr::IsTrue(_)
        | Expr::IsFalse(_)
        | Expr::IsNotTrue(_)
        | Expr::IsNotFalse(_)
        | Expr::InList(_) => Some(Kind::Boolean),
        _ => None,
    }
}

/// Whether two operands may be compared without a cast that could fail.
fn comparable(a: Kind, b: Kind) -> bool {
    a == Kind::Null || b == Kind::Null || (a == b && a != Kind::Other)
}

/// Checks that `expr` uses only what cannot fail on a value (the module doc).
fn check(expr: &Expr, record: &Schema) -> Result<(), String> {
    let operand = |e: &Expr| -> Result<Kind, String> {
        check(e, record)?;
        kind(e, record).ok_or_else(|| format!("{e} is not a field, a literal or a condition"))
    };
    match expr {
        Expr::Column(c) => record
            .field_with_name(&c.name)
            .map(|_| ())
            .map_err(|_| format!("no top-level field {:?} in the records", c.name)),
        Expr::Literal(..) => Ok(()),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (l, r) = (operand(left)?, operand(right)?);
            match op {
                Operator::And | Operator::Or if l == Kind::Boolean && r == Kind::Boolean => Ok(()),
                Operator::Eq
                | Operator::NotEq
                | Operator::Lt
                | Operator::LtEq
                | Operator::Gt
                | Operator::GtEq
                    if comparable(l, r) =>
                {
                    Ok(())
                }
                Operator::Eq
                | Operator::NotEq
                | Operator::Lt
                | Operator::LtEq
                | Operator::Gt
                | Operator::GtEq => Err(format!(
                    "{expr}: compares {l:?} with {r:?} (a comparison needs two of one kind: text, number or boolean)"
                )),
                Operator::And | Operator::Or => {
                    Err(format!("{expr}: {op} needs conditions on both sides"))
                }
                _ => Err(format!(
                    "{expr}: {op} could fail on a value (no arithmetic, no casts, no functions)"
                )),
            }
        }
        Expr::Not(e) | Expr::IsTrue(e) | Expr::IsFalse(e) | Expr::IsNotTrue(e) | Expr::IsNotFalse(e) => {
            match operand(e)? {
                Kind::Boolean | Kind::Null => Ok(()),
                k => Err(format!("{expr}: {e} is {k:?}, not a condition")),
            }
        }
        Expr::IsNull(e) | Expr::IsNotNull(e) => operand(e).map(|_| ()),
        Expr::InList(list) => {
            let k = operand(&list.expr)?;
            for item in &list.list {
                if !matches!(item, Expr::Literal(..)) {
                    return Err(format!("{expr}: an IN list holds literals only"));
                }
                let i = operand(item)?;
                if !comparable(k, i) {
                    return Err(format!("{expr}: {item} is {i:?}, {} is {k:?}", list.expr));
                }
            }
            Ok(())
        }
        other => Err(format!(
            "{other}: only comparisons of fields and literals, IN lists, IS [NOT] NULL, IS [NOT] TRUE/FALSE, AND, OR and NOT (nothing that could fail on a value: no casts, no functions)"
        )),
    }
}

/// What the tombstones of the offered keys decide: which offered rows stay, and which of
/// them are deletes to record as new tombstones.
#[derive(Debug)]
pub(crate) struct Buried {
    /// Indices of the offered rows that change the table: every delete, and each upsert
    /// whose sequence is above its key's tombstone (or whose key has none).
    pub kept: Vec<u32>,
    /// Indices of the offered deletes whose sequence is above their key's tombstone (or
    /// whose key has none): the tombstones to record.
    pub new_tombstones: Vec<u32>,
}

/// Decides, for `offered` rows (unique by key) flagged by `deletes`, against `tombstones`
/// (batches of the key columns then the sequence columns, as the tombstone table holds
/// them), which rows stay and which deletes are new tombstones. A delete always stays: the
/// table may still hold its key's row after a crash between the tombstone's commit and the
/// data commit.
pub(crate) fn bury(
    offered: &RecordBatch,
    deletes: &[bool],
    tombstones: &[RecordBatch],
    key: &KeySpec,
) -> Result<Buried, ArrowError> {
    let keys = columns_named(offered, &key.columns)?;
    let sequence = columns_named(offered, &key.sequence)?;
    let converter = sequence_converter(&sequence)?;
    let offered_rows = KeyRows::of(&keys)?;
    let offered_sequence = converter.convert_columns(&sequence)?;
    // The highest tombstone sequence per key (as bytes that compare as the values do).
    let width = key.columns.len();
    let mut held: Vec<(KeyRows, deltalake::arrow::row::Rows)> = Vec::new();
    for t in tombstones.iter().filter(|t| t.num_rows() > 0) {
        let cast_like = |columns: &[ArrayRef], like: &[ArrayRef]| {
            columns
                .iter()
                .zip(like)
                .map(|(c, l)| cast(c, l.data_type()))
                .collect::<Result<Vec<_>, _>>()
        };
        let t_keys = cast_like(&t.columns()[..width], &keys)?;
        let t_sequence = cast_like(&t.columns()[width..], &sequence)?;
        held.push((
            KeyRows::of(&t_keys)?,
            converter.convert_columns(&t_sequence)?,
        ));
    }
    let mut highest: HashMap<Option<&[u8]>, &[u8]> = HashMap::new();
    for (rows, sequences) in &held {
        for i in 0..rows.len() {
            let s = sequences.row(i).data();
            highest
                .entry(rows.key(i))
                .and_modify(|h| *h = (*h).max(s))
                .or_insert(s);
        }
    }
    let mut buried = Buried {
        kept: Vec::with_capacity(offered.num_rows()),
        new_tombstones: Vec::new(),
    };
    for (i, &delete) in deletes.iter().enumerate().take(offered.num_rows()) {
        let above = highest
            .get(&offered_rows.key(i))
            .is_none_or(|h| offered_sequence.row(i).data() > *h);
        if delete || above {
            buried.kept.push(i as u32);
        }
        if delete && above {
            buried.new_tombstones.push(i as u32);
        }
    }
    Ok(buried)
}

/// The event times of `rows` of `batch` (each delete's, for its tombstone).
pub(crate) fn event_times_of(
    batch: &RecordBatch,
    rows: &[u32],
    key: &KeySpec,
) -> Result<Vec<EventTime>, ArrowError> {
    let time_of = event_time_reader(batch, key)?;
    Ok(rows.iter().map(|i| time_of(*i as usize)).collect())
}

/// The values of the key fields then the sequence fields of `rows` of `batch`.
pub(crate) fn tombstone_values(
    batch: &RecordBatch,
    rows: &[u32],
    key: &KeySpec,
) -> Result<Vec<ArrayRef>, ArrowError> {
    let indices = deltalake::arrow::array::UInt32Array::from(rows.to_vec());
    let fields: Vec<String> = key.columns.iter().chain(&key.sequence).cloned().collect();
    columns_named(batch, &fields)?
        .iter()
        .map(|c| deltalake::arrow::compute::take(c, &indices, None))
        .collect()
}

/// `flags` as an arrow array.
pub(crate) fn flag_array(flags: impl IntoIterator<Item = bool>) -> BooleanArray {
    BooleanArray::from(flags.into_iter().collect::<Vec<bool>>())
}

/// The types of `fields` (dotted paths) in `schema`.
pub(crate) fn field_types(
    schema: &Arc<Schema>,
    fields: &[String],
) -> Result<Vec<(String, DataType)>, ArrowError> {
    fields
        .iter()
        .map(|f| {
            let path = sluice_source::FieldPath::resolve(schema, f)
                .map_err(|e| ArrowError::SchemaError(e.to_string()))?;
            let field = path
                .field(schema)
                .map_err(|e| ArrowError::SchemaError(e.to_string()))?;
            Ok((f.clone(), field.data_type().clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests;
