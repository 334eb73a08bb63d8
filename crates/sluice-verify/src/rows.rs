//! The rows against their promise ([`crate::promise`]), as queries over the table (one scan
//! each, on Arrow batches): keys that appear twice where one row per key is promised,
//! history versions that overlap, rows whose tombstone is above them. Each finding shows at
//! most a bounded number of examples and counts the rest.

use std::sync::Arc;

use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Schema};
use deltalake::arrow::util::display::{ArrayFormatter, FormatOptions};
use deltalake::datafusion::common::Column;
use deltalake::datafusion::dataframe::DataFrame;
use deltalake::datafusion::functions_aggregate::expr_fn::{count, max, min};
use deltalake::datafusion::functions_window::expr_fn::lead;
use deltalake::datafusion::logical_expr::{lit, Expr, ExprFunctionExt, JoinType};
use deltalake::datafusion::prelude::SessionContext;
use deltalake::DeltaTable;
use object_store::path::Path;
use sluice_publish::{HISTORY_END_AT, HISTORY_START_AT, TOMBSTONE_PIPELINE_COLUMN};

use crate::log::LogHistory;
use crate::promise::{has_field, Promise, Shape};
use crate::{Check, Finding, VerifyError};

/// The column each row's file path is read into.
const FILE_COLUMN: &str = "__sluice_verify_file";

/// A scan of the table with each row's file, and what findings need to name things.
pub(crate) struct RowScan<'a> {
    pub ctx: SessionContext,
    pub table: &'a DeltaTable,
    pub schema: Arc<Schema>,
    /// The partition columns a promise is scoped by (see [`scope`]).
    pub partition_columns: Vec<String>,
    pub log: &'a LogHistory,
    /// The files to read, when some of the table's cannot be; `None`: every file.
    pub readable: Option<Vec<String>>,
    /// Examples shown per finding kind; the rest are counted.
    pub examples_max: usize,
}

impl RowScan<'_> {
    async fn frame(&self) -> Result<DataFrame, VerifyError> {
        sluice_publish::read_through_table_store(&self.ctx, self.table);
        let mut provider = self.table.table_provider().with_file_column(FILE_COLUMN);
        if let Some(readable) = &self.readable {
            provider = provider.with_file_paths(readable.iter().cloned());
        }
        let provider = provider.await?;
        Ok(self.ctx.read_table(provider)?)
    }

    /// The columns that scope a promise: every address column for one row per window; the
    /// pipeline and shard columns (when the table has them) for a mirror or a history, whose
    /// writers each keep their own keys.
    fn scope(&self, shape: Shape) -> Vec<String> {
        let table_wide = [sluice_window::PIPELINE_COLUMN, sluice_window::SHARD_COLUMN];
        self.partition_columns
            .iter()
            .filter(|c| shape == Shape::PerWindow || table_wide.contains(&c.as_str()))
            .cloned()
            .collect()
    }

    /// Every finding about the rows of `promise`'s pipeline.
    pub async fn check(
        &self,
        promise: &Promise,
        tombstones: Option<&DeltaTable>,
    ) -> Result<Vec<Finding>, VerifyError> {
        let mut findings = self.duplicate_keys(promise).await?;
        if promise.shape == Shape::History {
            findings.extend(self.overlapping_versions(promise).await?);
        }
        if let (true, Some(tombstones)) =
            (promise.deletes && !promise.sequence.is_empty(), tombstones)
        {
            findings.extend(self.rows_under_tombstones(promise, tombstones).await?);
        }
        Ok(findings)
    }

    /// Row keys held more than once where the promise allows one.
    async fn duplicate_keys(&self, promise: &Promise) -> Result<Vec<Finding>, VerifyError> {
        let scope = self.scope(promise.shape);
        let mut group: Vec<Expr> = scope.iter().map(|c| col_named(c)).collect();
        let mut shown: Vec<String> = scope.clone();
        for (i, k) in promise.key.iter().enumerate() {
            group.push(self.field(k).alias(format!("__k{i}")));
            shown.push(k.clone());
        }
        if promise.shape == Shape::History {
            group.push(col_named(HISTORY_START_AT));
            shown.push(HISTORY_START_AT.to_string());
        }
        let present = promise
            .key
            .iter()
            .map(|k| self.field(k).is_not_null())
            .reduce(Expr::and)
            .unwrap_or(lit(true));
        let twice = self
            .frame()
            .await?
            .filter(present)?
            .aggregate(
                group,
                vec![
                    count(lit(1)).alias("__n"),
                    // Two of the rows' files, not all: a list per key costs memory by the row.
                    min(col_named(FILE_COLUMN)).alias("__first_file"),
                    max(col_named(FILE_COLUMN)).alias("__last_file"),
                ],
            )?
            .filter(col_named("__n").gt(lit(1)))?;
        let what = match promise.shape {
            Shape::PerWindow => "in one window",
            Shape::Mirror => "in a mirror",
            Shape::History => "as two versions starting at the same sequence",
        };
        self.findings(twice, Check::DuplicateKey, |batch, row| {
            let n = value(batch, "__n", row);
            let fields = shown.len();
            let named = describe(batch, &shown, 0..fields, row);
            (
                format!(
                    "{named} is held by {n} rows {what} (files {}{})",
                    self.files_in(batch, row).join(", "),
                    if n.parse::<u64>().unwrap_or(0) > 2 {
                        ", …"
                    } else {
                        ""
                    }
                ),
                self.files_in(batch, row)
                    .iter()
                    .filter_map(|f| self.file_version(f))
                    .max(),
            )
        })
        .await
    }

    /// History versions of a key that overlap the next one, or end at or before their start.
    async fn overlapping_versions(&self, promise: &Promise) -> Result<Vec<Finding>, VerifyError> {
        let scope = self.scope(Shape::History);
        let mut partition: Vec<Expr> = scope.iter().map(|c| col_named(c)).collect();
        let mut shown: Vec<String> = scope.clone();
        let mut columns: Vec<Expr> = partition.clone();
        for (i, k) in promise.key.iter().enumerate() {
            partition.push(self.field(k));
            columns.push(self.field(k).alias(format!("__k{i}")));
            shown.push(k.clone());
        }
        let (start, end) = (col_named(HISTORY_START_AT), col_named(HISTORY_END_AT));
        let following = |e: Expr, name: &str| {
            lead(e, Some(1), None)
                .partition_by(partition.clone())
                .order_by(vec![start.clone().sort(true, false)])
                .build()
                .map(|e| e.alias(name))
        };
        let next = following(start.clone(), "__next")?;
        let next_file = following(col_named(FILE_COLUMN), "__next_file")?;
        columns.extend([
            start.clone(),
            end.clone(),
            col_named(FILE_COLUMN),
            next,
            next_file,
        ]);
        let next = col_named("__next");
        let broken = end
            .clone()
            .is_not_null()
            .and(end.clone().lt_eq(start.clone()))
            .or(next
                .clone()
                .is_not_null()
                .and(end.clone().is_null().or(end.gt(next))));
        let overlapping = self.frame().await?.select(columns)?.filter(broken)?;
        shown.extend([
            HISTORY_START_AT.into(),
            HISTORY_END_AT.into(),
            "__next".into(),
        ]);
        let fields = shown.len() - 3;
        self.findings(overlapping, Check::HistoryOverlap, |batch, row| {
            let named = describe(batch, &shown, 0..fields, row);
            (
                format!(
                    "{named}: the version [{}, {}) overlaps the next one, starting at {} (file {})",
                    value(batch, HISTORY_START_AT, row),
                    value(batch, HISTORY_END_AT, row),
                    value(batch, "__next", row),
                    self.relative(&value(batch, FILE_COLUMN, row)),
                ),
                // The newer of the two versions' files made the overlap.
                [FILE_COLUMN, "__next_file"]
                    .iter()
                    .filter_map(|c| self.file_version(&value(batch, c, row)))
                    .max(),
            )
        })
        .await
    }

    /// Rows (a history's current versions) of keys whose tombstone's sequence is above the
    /// row's: deleted, still in the table.
    async fn rows_under_tombstones(
        &self,
        promise: &Promise,
        tombstones: &DeltaTable,
    ) -> Result<Vec<Finding>, VerifyError> {
        sluice_publish::read_through_table_store(&self.ctx, tombstones);
        let marks = self.ctx.read_table(tombstones.table_provider().await?)?;
        let marks_schema = marks.schema().as_arrow().clone();
        let names: Vec<&String> = promise.key.iter().chain(&promise.sequence).collect();
        if let Some(missing) = names
            .iter()
            .find(|n| marks_schema.field_with_name(n).is_err())
        {
            return Err(VerifyError::Tombstones(format!(
                "its column {missing:?} is missing (its columns: {})",
                field_list(&marks_schema)
            )));
        }
        let mut marked: Vec<Expr> = Vec::new();
        let mut rows: Vec<Expr> = Vec::new();
        let mut on: Vec<Expr> = Vec::new();
        for (i, k) in promise.key.iter().enumerate() {
            marked.push(col_named(k).alias(format!("__tk{i}")));
            rows.push(self.field(k).alias(format!("__k{i}")));
            on.push(col_named(&format!("__k{i}")).eq(col_named(&format!("__tk{i}"))));
        }
        let history = promise.shape == Shape::History;
        for (i, s) in promise.sequence.iter().enumerate() {
            marked.push(col_named(s).alias(format!("__ts{i}")));
            let own = if history {
                col_named(HISTORY_START_AT)
            } else {
                self.field(s)
            };
            rows.push(own.alias(format!("__s{i}")));
        }
        rows.push(col_named(FILE_COLUMN));
        let marks = marks
            .filter(col_named(TOMBSTONE_PIPELINE_COLUMN).eq(lit(promise.pipeline.as_str())))?
            .select(marked)?;
        let mut current = self.frame().await?;
        if history {
            current = current.filter(col_named(HISTORY_END_AT).is_null())?;
        }
        let above = (0..promise.sequence.len())
            .rev()
            .fold(None, |after: Option<Expr>, i| {
                let (t, r) = (
                    col_named(&format!("__ts{i}")),
                    col_named(&format!("__s{i}")),
                );
                let here = t.clone().gt(r.clone());
                Some(match after {
                    None => here,
                    Some(after) => here.or(t.eq(r).and(after)),
                })
            });
        let mut group: Vec<Expr> = (0..promise.key.len())
            .map(|i| col_named(&format!("__k{i}")))
            .collect();
        group.extend((0..promise.sequence.len()).map(|i| col_named(&format!("__s{i}"))));
        group.push(col_named(FILE_COLUMN));
        let buried = current
            .select(rows)?
            .join_on(marks, JoinType::Inner, on)?
            .filter(above.unwrap_or(lit(false)))?
            .aggregate(group, vec![max(col_named("__ts0")).alias("__deleted")])?;
        let keys: Vec<String> = (0..promise.key.len()).map(|i| format!("__k{i}")).collect();
        self.findings(buried, Check::TombstoneAboveRow, |batch, row| {
            let named: Vec<String> = promise
                .key
                .iter()
                .zip(&keys)
                .map(|(k, c)| format!("{k}={}", value(batch, c, row)))
                .collect();
            (
                format!(
                    "{} is in the table at sequence {} while its tombstone is at {} (file {}); a crash between a delete's tombstone and its data commit leaves this until the pipeline's next run",
                    named.join(", "),
                    value(batch, "__s0", row),
                    value(batch, "__deleted", row),
                    self.relative(&value(batch, FILE_COLUMN, row)),
                ),
                self.file_version(&value(batch, FILE_COLUMN, row)),
            )
        })
        .await
    }

    /// Up to [`RowScan::examples_max`] findings of `check`, one per row of `frame`, and one
    /// more counting the rest.
    async fn findings(
        &self,
        frame: DataFrame,
        check: Check,
        describe: impl Fn(&RecordBatch, usize) -> (String, Option<u64>),
    ) -> Result<Vec<Finding>, VerifyError> {
        let total = frame.clone().count().await?;
        let batches = frame.limit(0, Some(self.examples_max))?.collect().await?;
        let mut findings = Vec::new();
        for batch in &batches {
            for row in 0..batch.num_rows() {
                let (message, version) = describe(batch, row);
                findings.push(Finding {
                    check,
                    version,
                    message,
                });
            }
        }
        if total > findings.len() {
            findings.push(Finding {
                check,
                version: None,
                message: format!("{} more like these", total - findings.len()),
            });
        }
        Ok(findings)
    }

    /// A field of the table by name: a column of exactly that name, else a dotted path into
    /// structs (resolved by the promise). A name is never parsed as SQL.
    fn field(&self, name: &str) -> Expr {
        debug_assert!(
            has_field(&self.schema, name),
            "E9 verify: {name} was resolved by the promise"
        );
        sluice_publish::field_expr(&self.schema, name, col_named)
    }

    /// A file's path relative to the table (the scan names files by URL).
    fn relative<'f>(&self, file: &'f str) -> &'f str {
        let root = self.table.table_url().as_str().trim_end_matches('/');
        file.strip_prefix(root)
            .map(|r| r.trim_start_matches('/'))
            .unwrap_or(file)
    }

    /// The version that added the file a row was read from.
    fn file_version(&self, file: &str) -> Option<u64> {
        let path = Path::from_url_path(self.relative(file)).ok()?;
        self.log.added(&path)
    }

    /// The first and last file (by name) of a duplicated key's rows, relative to the table;
    /// one when they are the same.
    fn files_in(&self, batch: &RecordBatch, row: usize) -> Vec<String> {
        let mut files: Vec<String> = ["__first_file", "__last_file"]
            .iter()
            .filter_map(|c| {
                let column = batch.column_by_name(c)?;
                let text = cast(column, &DataType::Utf8).ok()?;
                let text = text.as_string::<i32>();
                text.is_valid(row)
                    .then(|| self.relative(text.value(row)).to_string())
            })
            .collect();
        files.dedup();
        files
    }
}

/// A column by its exact name (no SQL parsing, so any field name is safe).
fn col_named(name: &str) -> Expr {
    Expr::Column(Column::new_unqualified(name))
}

/// `name=value, ...` for the batch columns `range` of a row, named by `shown`.
fn describe(
    batch: &RecordBatch,
    shown: &[String],
    range: std::ops::Range<usize>,
    row: usize,
) -> String {
    range
        .filter_map(|i| {
            let column = batch.column(i);
            Some(format!(
                "{}={}",
                shown.get(i)?,
                display(column.as_ref(), row)
            ))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The value of the column `name` at `row`, as text.
fn value(batch: &RecordBatch, name: &str, row: usize) -> String {
    batch
        .column_by_name(name)
        .map(|c| display(c.as_ref(), row))
        .unwrap_or_default()
}

fn display(array: &dyn Array, row: usize) -> String {
    if array.is_null(row) {
        return "null".into();
    }
    ArrayFormatter::try_new(array, &FormatOptions::default())
        .map(|f| f.value(row).to_string())
        .unwrap_or_else(|e| format!("({e})"))
}

fn field_list(schema: &Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
