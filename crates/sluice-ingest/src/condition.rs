//! Row conditions: SQL over a record's top-level fields that cannot fail on any value, the
//! language of `--delete-when` and of expectations (`--expect`).
//!
//! A condition is limited to comparisons of a field with a literal or another field of the
//! same kind (text, number, boolean), `BETWEEN`, `LIKE` on text, `IN` lists of literals,
//! `IS [NOT] NULL`, `IS [NOT] TRUE|FALSE`, `AND`, `OR` and `NOT`. A cast, arithmetic or a
//! function could fail on one record's value, and a step that fails on every restart would
//! stop the pipeline (E8); such conditions are refused when the pipeline starts, before
//! anything is written. A condition is evaluated on whole Arrow batches; its result per row
//! is true, false or null (a null operand), and each user says what null means.

use std::sync::{Arc, Mutex};

use deltalake::arrow::array::{AsArray, BooleanArray, RecordBatch};
use deltalake::arrow::datatypes::{DataType, Schema, SchemaRef};
use deltalake::datafusion::common::DFSchema;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use deltalake::datafusion::physical_expr::PhysicalExpr;
use deltalake::datafusion::prelude::SessionContext;

/// Why a condition is refused.
#[derive(Debug, thiserror::Error)]
pub enum ConditionError {
    #[error("{0}")]
    Parse(DataFusionError),
    #[error("{0}")]
    Refused(String),
}

/// A condition as compiled for one batch schema.
type Compiled = (SchemaRef, Arc<dyn PhysicalExpr>);

/// A row condition (see the module doc). Clones share the compiled expression.
#[derive(Debug, Clone)]
pub struct RowCondition {
    sql: String,
    /// The expression compiled for the last batch schema seen (a schema grows with schema
    /// evolution: it is compiled again for the new one).
    compiled: Arc<Mutex<Option<Compiled>>>,
}

impl RowCondition {
    /// The condition `sql`, to be checked against the record fields ([`Self::check`])
    /// before it is evaluated.
    pub fn new(sql: impl Into<String>) -> Self {
        RowCondition {
            sql: sql.into(),
            compiled: Arc::default(),
        }
    }

    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// Parses the condition against the record fields `record` and checks that it cannot
    /// fail on a value and is true or false (see the module doc).
    pub fn check(&self, record: &Schema) -> Result<(), ConditionError> {
        let df_schema = DFSchema::try_from(record.clone()).map_err(ConditionError::Parse)?;
        let expr = SessionContext::new()
            .parse_sql_expr(&self.sql, &df_schema)
            .map_err(ConditionError::Parse)?;
        check(&expr, record).map_err(ConditionError::Refused)?;
        match kind(&expr, record) {
            Some(Kind::Boolean) => Ok(()),
            _ => Err(ConditionError::Refused(
                "not a condition (true or false)".into(),
            )),
        }
    }

    /// The condition's value for each row of `batch` (null where an operand is null).
    /// `batch` holds at least the fields the condition names.
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, DataFusionError> {
        let expr = self.compiled_for(&batch.schema())?;
        let values = expr.evaluate(batch)?.into_array(batch.num_rows())?;
        let values = values.as_boolean_opt().ok_or_else(|| {
            DataFusionError::Execution(format!("{:?} is not a condition", self.sql))
        })?;
        debug_assert_eq!(
            values.len(),
            batch.num_rows(),
            "E6: a condition has one value per row"
        );
        Ok(values.clone())
    }

    fn compiled_for(&self, schema: &SchemaRef) -> Result<Arc<dyn PhysicalExpr>, DataFusionError> {
        let mut compiled = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((seen, expr)) = compiled.as_ref() {
            if Arc::ptr_eq(seen, schema) || seen == schema {
                return Ok(expr.clone());
            }
        }
        let ctx = SessionContext::new();
        let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
        let logical = ctx.parse_sql_expr(&self.sql, &df_schema)?;
        let expr = ctx.create_physical_expr(logical, &df_schema)?;
        *compiled = Some((schema.clone(), expr.clone()));
        Ok(expr)
    }
}

/// What a condition's operand holds, as far as comparing it goes.
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

/// The kind of an operand or condition (`None`: not one a condition may use).
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
        | Expr::InList(_)
        | Expr::Between(_)
        | Expr::Like(_) => Some(Kind::Boolean),
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
            check_binary(expr, operand(left)?, *op, operand(right)?)
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
        Expr::Between(b) => {
            let k = operand(&b.expr)?;
            for bound in [&b.low, &b.high] {
                let i = operand(bound)?;
                if !comparable(k, i) {
                    return Err(format!("{expr}: {bound} is {i:?}, {} is {k:?}", b.expr));
                }
            }
            Ok(())
        }
        Expr::Like(like) if !like.case_insensitive => {
            let (k, p) = (operand(&like.expr)?, operand(&like.pattern)?);
            match (k, p, like.pattern.as_ref()) {
                (Kind::Text | Kind::Null, Kind::Text, Expr::Literal(..)) => Ok(()),
                _ => Err(format!("{expr}: LIKE takes a text field and a text literal")),
            }
        }
        other => Err(format!(
            "{other}: only comparisons of fields and literals, BETWEEN, LIKE, IN lists, IS [NOT] NULL, IS [NOT] TRUE/FALSE, AND, OR and NOT (nothing that could fail on a value: no casts, no functions)"
        )),
    }
}

/// Checks a binary expression whose operands are of kinds `l` and `r`.
fn check_binary(expr: &Expr, l: Kind, op: Operator, r: Kind) -> Result<(), String> {
    let comparison = matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
    );
    match op {
        Operator::And | Operator::Or if l == Kind::Boolean && r == Kind::Boolean => Ok(()),
        Operator::And | Operator::Or => Err(format!("{expr}: {op} needs conditions on both sides")),
        _ if comparison && comparable(l, r) => Ok(()),
        _ if comparison => Err(format!(
            "{expr}: compares {l:?} with {r:?} (a comparison needs two of one kind: text, number or boolean)"
        )),
        _ => Err(format!(
            "{expr}: {op} could fail on a value (no arithmetic, no casts, no functions)"
        )),
    }
}
