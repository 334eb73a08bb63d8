//! Derived window queries: the SQL a batch job would run over one hour's partition, run by
//! sluice over one window of the raw table.
//!
//! In the query, `window` is the raw table restricted to exactly one window's address
//! (partition-pruned; typed literals, never SQL text built from values) and projected to the
//! record fields: no address columns (the output gets the window's own) and no position
//! columns. The session runs on one partition so a window's result does not depend on
//! thread scheduling (a float `sum` added in another order can differ in its last bit; a
//! stream recomputing a window must produce what the batch job produced).

use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::row::{RowConverter, SortField};
use deltalake::datafusion::common::Column;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::logical_expr::{lit, Expr};
use deltalake::datafusion::prelude::{DataFrame, SessionConfig, SessionContext};
use deltalake::DeltaTable;
use std::sync::Arc;

/// The name of the one-window view in a derived query.
pub const WINDOW_VIEW: &str = "window";

/// A derived table's query, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedQuery {
    /// Names the derived table (logs, errors, the `txn` appId).
    pub name: String,
    pub sql: String,
    /// Output columns that identify a row within a window (publish by MERGE); empty: swap.
    pub key: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DeriveQueryError {
    #[error("derived table {name}: the query does not plan over the raw table's window: {source}\n  query: {sql}\n  `window` has the columns: {columns}")]
    Plan {
        name: String,
        sql: String,
        columns: String,
        source: Box<DataFusionError>,
    },
    #[error("derived table {name}: output column {column:?} is also an address column; the output gets the window's address itself, so rename it (AS ...)")]
    AddressCollision { name: String, column: String },
    #[error("derived table {name}: output column {column:?} cannot be a Delta column name (no spaces or any of ,;{{}}()=); name it with AS")]
    BadColumnName { name: String, column: String },
    #[error("derived table {name}: output column {column:?} appears twice; name each output column once (AS ...)")]
    DuplicateColumn { name: String, column: String },
    #[error("derived table {name}: key column {column:?} is not an output column of the query ({columns})")]
    KeyNotInOutput {
        name: String,
        column: String,
        columns: String,
    },
    #[error("derived table {name}: the query's output type {found} of column {column:?} cannot be stored ({source})")]
    Type {
        name: String,
        column: String,
        found: String,
        source: ArrowError,
    },
    #[error("derived table {name}: computing window {window}: {source}")]
    Compute {
        name: String,
        window: String,
        source: Box<DataFusionError>,
    },
}

/// One-partition session with plain string types (what Delta stores and reads back).
fn session() -> SessionContext {
    SessionContext::new_with_config(SessionConfig::new().with_target_partitions(1).set_bool(
        "datafusion.execution.parquet.schema_force_view_types",
        false,
    ))
}

fn col_named(name: &str) -> Expr {
    Expr::Column(Column::new_unqualified(name))
}

/// Storage types for view and large types: what a Delta reader gives back.
fn stored_type(t: &DataType) -> DataType {
    match t {
        DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
        DataType::BinaryView | DataType::LargeBinary => DataType::Binary,
        // Delta has signed integers only, and timestamps in microseconds.
        DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 | DataType::UInt64 => DataType::Int64,
        DataType::Timestamp(_, tz) => DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
        other => other.clone(),
    }
}

impl DerivedQuery {
    /// Plans the query over the raw table's window view and returns its output schema as it
    /// will be stored (every column nullable, plain string types). Checks the output against
    /// the address columns and the key. Nothing is read.
    pub async fn plan(
        &self,
        raw: &DeltaTable,
        record: &SchemaRef,
        address_columns: &[&str],
    ) -> Result<SchemaRef, DeriveQueryError> {
        let ctx = session();
        let view = register_window(&ctx, raw, record, &[]).await;
        let planned = match view {
            Ok(()) => ctx.sql(&self.sql).await,
            Err(e) => Err(e),
        };
        let df = planned.map_err(|source| DeriveQueryError::Plan {
            name: self.name.clone(),
            sql: self.sql.clone(),
            columns: record
                .fields()
                .iter()
                .map(|f| format!("{} {}", f.name(), f.data_type()))
                .collect::<Vec<_>>()
                .join(", "),
            source: Box::new(source),
        })?;
        let mut fields: Vec<Field> = Vec::new();
        for f in df.schema().fields() {
            let column = f.name().clone();
            if address_columns.contains(&column.as_str()) {
                return Err(DeriveQueryError::AddressCollision {
                    name: self.name.clone(),
                    column,
                });
            }
            if column.is_empty() || column.chars().any(|c| " ,;{}()\n\t=".contains(c)) {
                return Err(DeriveQueryError::BadColumnName {
                    name: self.name.clone(),
                    column,
                });
            }
            if fields.iter().any(|g| g.name() == &column) {
                return Err(DeriveQueryError::DuplicateColumn {
                    name: self.name.clone(),
                    column,
                });
            }
            fields.push(Field::new(column, stored_type(f.data_type()), true));
        }
        for k in &self.key {
            if !fields.iter().any(|f| f.name() == k) {
                return Err(DeriveQueryError::KeyNotInOutput {
                    name: self.name.clone(),
                    column: k.clone(),
                    columns: fields
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        Ok(Arc::new(Schema::new(fields)))
    }

    /// Runs the query over the raw table's rows at `address` (the table's loaded version) and
    /// returns the result in `output` (the schema [`DerivedQuery::plan`] gave).
    pub async fn compute(
        &self,
        raw: &DeltaTable,
        record: &SchemaRef,
        address: &[(&str, &str)],
        output: &SchemaRef,
    ) -> Result<Vec<RecordBatch>, DeriveQueryError> {
        let label = address
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("/");
        let compute = |source| DeriveQueryError::Compute {
            name: self.name.clone(),
            window: label.clone(),
            source: Box::new(source),
        };
        let ctx = session();
        register_window(&ctx, raw, record, address)
            .await
            .map_err(compute)?;
        let batches = ctx
            .sql(&self.sql)
            .await
            .map_err(compute)?
            .collect()
            .await
            .map_err(compute)?;
        let mut out = Vec::with_capacity(batches.len());
        for b in batches {
            if b.num_rows() == 0 {
                continue;
            }
            let mut columns = Vec::with_capacity(output.fields().len());
            for (f, c) in output.fields().iter().zip(b.columns()) {
                let c = cast(c, f.data_type()).map_err(|source| DeriveQueryError::Type {
                    name: self.name.clone(),
                    column: f.name().clone(),
                    found: c.data_type().to_string(),
                    source,
                })?;
                columns.push(c);
            }
            let b = RecordBatch::try_new(output.clone(), columns)
                .map_err(|e| compute(DataFusionError::ArrowError(Box::new(e), None)))?;
            out.push(b);
        }
        Ok(out)
    }
}

/// `table` (its loaded version) restricted to `address` (typed literals; none: the whole
/// table) and projected to `columns`.
async fn window_frame(
    ctx: &SessionContext,
    table: &DeltaTable,
    address: &[(&str, &str)],
    columns: &SchemaRef,
) -> Result<DataFrame, DataFusionError> {
    sluice_publish::read_through_table_store(ctx, table);
    let mut df = ctx.read_table(table.table_provider().await?)?;
    for (k, v) in address {
        df = df.filter(col_named(k).eq(lit(v.to_string())))?;
    }
    df.select(
        columns
            .fields()
            .iter()
            .map(|f| col_named(f.name()))
            .collect::<Vec<Expr>>(),
    )
}

/// Registers `window`: the raw table at `address`, projected to the record fields.
async fn register_window(
    ctx: &SessionContext,
    raw: &DeltaTable,
    record: &SchemaRef,
    address: &[(&str, &str)],
) -> Result<(), DataFusionError> {
    let view = window_frame(ctx, raw, address, record).await?.into_view();
    ctx.register_table(WINDOW_VIEW, view)?;
    Ok(())
}

/// Reads the rows of `table` at `address` (its loaded version), projected to `columns`, in
/// the stored types (to compare a recomputed window with what is published).
pub async fn read_window(
    table: &DeltaTable,
    address: &[(&str, &str)],
    columns: &SchemaRef,
) -> Result<Vec<RecordBatch>, DataFusionError> {
    if table.version().is_none() {
        return Ok(Vec::new());
    }
    let ctx = session();
    window_frame(&ctx, table, address, columns)
        .await?
        .collect()
        .await
}

/// Whether `a` and `b` hold the same rows, as multisets (order does not matter), compared in
/// the types of `schema` (both sides cast to it).
pub fn same_rows(
    schema: &SchemaRef,
    a: &[RecordBatch],
    b: &[RecordBatch],
) -> Result<bool, ArrowError> {
    let rows_a: usize = a.iter().map(RecordBatch::num_rows).sum();
    let rows_b: usize = b.iter().map(RecordBatch::num_rows).sum();
    if rows_a != rows_b {
        return Ok(false);
    }
    let converter = RowConverter::new(
        schema
            .fields()
            .iter()
            .map(|f| SortField::new(f.data_type().clone()))
            .collect(),
    )?;
    let encode = |batches: &[RecordBatch]| -> Result<Vec<Vec<u8>>, ArrowError> {
        let mut all = Vec::new();
        for batch in batches {
            if batch.num_columns() != schema.fields().len() {
                return Err(ArrowError::SchemaError(format!(
                    "{} columns where {} were expected",
                    batch.num_columns(),
                    schema.fields().len()
                )));
            }
            let columns = schema
                .fields()
                .iter()
                .zip(batch.columns())
                .map(|(f, c)| cast(c, f.data_type()))
                .collect::<Result<Vec<_>, _>>()?;
            let rows = converter.convert_columns(&columns)?;
            all.extend(rows.iter().map(|r| r.as_ref().to_vec()));
        }
        all.sort_unstable();
        Ok(all)
    };
    Ok(encode(a)? == encode(b)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{Float64Array, Int64Array, StringArray};
    use deltalake::datafusion::datasource::MemTable;

    fn batch(countries: &[&str], amounts: &[f64]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("country", DataType::Utf8, true),
            Field::new("amount", DataType::Float64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(countries.to_vec())),
                Arc::new(Float64Array::from(amounts.to_vec())),
            ],
        )
        .unwrap()
    }

    #[tokio::test]
    async fn window_is_a_usable_table_name() {
        let b = batch(&["DE", "FR", "DE"], &[1.0, 2.0, 3.5]);
        let ctx = session();
        let table = MemTable::try_new(b.schema(), vec![vec![b]]).unwrap();
        ctx.register_table(WINDOW_VIEW, Arc::new(table)).unwrap();
        let out = ctx
            .sql("SELECT country, count(*) AS n, sum(amount) AS s FROM window GROUP BY country ORDER BY country")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let text = deltalake::arrow::util::pretty::pretty_format_batches(&out)
            .unwrap()
            .to_string();
        assert!(text.contains("| DE      | 2 | 4.5 |"), "{text}");
        assert!(text.contains("| FR      | 1 | 2.0 |"), "{text}");
    }

    #[test]
    fn same_rows_ignores_order_and_batching_but_not_values_or_counts() {
        let schema = batch(&[], &[]).schema();
        let a = vec![batch(&["DE", "FR"], &[1.0, 2.0])];
        let b = vec![batch(&["FR"], &[2.0]), batch(&["DE"], &[1.0])];
        assert!(same_rows(&schema, &a, &b).unwrap());
        let c = vec![batch(&["FR", "DE"], &[2.0, 1.5])];
        assert!(!same_rows(&schema, &a, &c).unwrap());
        let d = vec![batch(&["DE", "FR", "FR"], &[1.0, 2.0, 2.0])];
        assert!(!same_rows(&schema, &a, &d).unwrap());
        let e = vec![batch(&["DE", "DE"], &[1.0, 1.0])];
        let f = vec![batch(&["DE", "FR"], &[1.0, 2.0])];
        assert!(!same_rows(&schema, &e, &f).unwrap());
        assert!(same_rows(&schema, &[], &[]).unwrap());
        // Integer columns compare too.
        let wide = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true)]));
        let n =
            RecordBatch::try_new(wide.clone(), vec![Arc::new(Int64Array::from(vec![7]))]).unwrap();
        let one = std::slice::from_ref(&n);
        assert!(same_rows(&wide, one, one).unwrap());
    }
}
