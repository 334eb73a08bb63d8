//! Delta MERGE publications on a row key, with the pipeline's `txn` offsets in the same
//! commit: insert-if-absent (the late policy `merge`) and upsert (`--mode merge`), restricted
//! to one window's address or across the whole table.
//!
//! The winner of an upsert is decided by the caller, in Rust, with the same rule as every
//! dedupe (the later order: the sequence fields where the pipeline declares them, else the
//! event time; then the higher source position; `sluice_window::key_winner`): it reads the
//! current rows of the offered keys with [`WindowTable::incumbents`], drops the offered rows
//! that lose, and the MERGE then replaces matched rows unconditionally. Both read the same
//! table version. The MERGE retries its commit only as often as the writer's
//! `commit_retries` says: none for a table of one writer per pipeline, so a concurrent writer
//! makes the commit fail ([`PublishError::TableMoved`]) instead of slipping in between; a
//! shard writer retries over commits deltalake's conflict checker finds disjoint from its own
//! (other shards' addresses, other `txn` app ids).
//! Across the whole table, both reads skip the files whose key statistics admit no offered
//! key ([`KeyRanges`]).

use std::sync::Arc;

use deltalake::arrow::array::{ArrayRef, BooleanArray, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::datafusion::common::Column;
use deltalake::datafusion::logical_expr::{lit, Expr};
use deltalake::datafusion::prelude::{JoinType, SessionConfig, SessionContext};
use deltalake::kernel::transaction::CommitProperties;
use deltalake::operations::merge::MergeBuilder;
use deltalake::{DeltaTable, DeltaTableError};
use serde_json::json;
use sluice_window::Window;

use crate::table::commit::Published;
use crate::table::error::{commit_error, PublishError};
use crate::table::key_ranges::{file_stats, KeyRanges};
use crate::table::land::commit_properties;
use crate::table::options::app_id;
use crate::table::window_table::WindowTable;

/// What a MERGE does with an offered row whose key is present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeAction {
    /// Leave the present row; insert only absent keys.
    InsertAbsent,
    /// Replace the present row (every column, address included); insert absent keys.
    Upsert,
    /// Versions of a history (`--scd 2`), keyed by the row key and [`HISTORY_START_AT`]: a
    /// present version takes the offered [`HISTORY_END_AT`] (a version's values never
    /// change); an absent one is inserted.
    Versions,
}

/// The column of a history version's first sequence.
pub const HISTORY_START_AT: &str = "__start_at";
/// The column of the sequence that ended a history version (null: current).
pub const HISTORY_END_AT: &str = "__end_at";

/// Where a row key must be unique.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MergeScope {
    /// Within the window's address: the MERGE reads and rewrites only that partition.
    #[default]
    Window,
    /// Across the table: the MERGE cannot prune by address, and prunes by the offered keys'
    /// ranges instead ([`KeyRanges`]: only files whose key statistics admit an offered key
    /// are read); a row whose key arrives in another window moves there.
    Table,
}

impl MergeScope {
    pub fn parse_name(name: &str) -> Option<MergeScope> {
        match name {
            "window" => Some(MergeScope::Window),
            "table" => Some(MergeScope::Table),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MergeScope::Window => "window",
            MergeScope::Table => "table",
        }
    }
}

/// Rows to merge into the table on a row key, as one publication of `window`.
#[derive(Debug, Clone)]
pub struct MergePublication {
    pub pipeline: String,
    pub window: Window,
    pub action: MergeAction,
    pub scope: MergeScope,
    /// Rows in the table's file schema (records, then position columns), one per key.
    pub rows: RecordBatch,
    /// The row key: natural key columns, or the position columns.
    pub key_columns: Vec<String>,
    /// Per row of `rows` (upserts only): true where the row is a delete, whose key's row the
    /// MERGE removes instead of replacing (a delete of an absent key inserts nothing).
    pub deletes: Option<BooleanArray>,
    /// `(partition, resume offset)` for each partition whose resume position advanced.
    pub txns: Vec<(String, i64)>,
    pub position_ranges: serde_json::Value,
    pub published_at_ms: i64,
    /// Other windows whose rows the MERGE may change (table scope: the windows the offered
    /// keys' current rows are in, which a key's new row leaves, a delete empties, a version's
    /// end moves in). The commitInfo names them (`windows_changed`), so whatever follows the
    /// table's changes by window (derived tables, notifications) finds them.
    pub windows_changed: Vec<Window>,
}

/// The source column of a MERGE with deletes that marks the deletes (not a table column).
const DELETE_FLAG: &str = "__sluice_delete";

/// `rows` plus the [`DELETE_FLAG`] column.
fn with_delete_flags(
    rows: &RecordBatch,
    flags: &BooleanArray,
) -> Result<RecordBatch, deltalake::arrow::error::ArrowError> {
    let flag = Field::new(DELETE_FLAG, DataType::Boolean, false);
    with_columns(rows, [(flag, Arc::new(flags.clone()) as ArrayRef)])
}

/// `rows` plus the address columns, each holding the address's value.
pub(crate) fn with_address_columns(
    rows: &RecordBatch,
    address: &sluice_window::Address,
) -> Result<RecordBatch, deltalake::arrow::error::ArrowError> {
    let n = rows.num_rows();
    let columns = address.pairs().map(|(k, v)| {
        let values: ArrayRef = Arc::new(StringArray::from_iter_values(std::iter::repeat_n(v, n)));
        (Field::new(k, DataType::Utf8, false), values)
    });
    with_columns(rows, columns)
}

/// `rows` with `extra` columns after its own.
fn with_columns(
    rows: &RecordBatch,
    extra: impl IntoIterator<Item = (Field, ArrayRef)>,
) -> Result<RecordBatch, deltalake::arrow::error::ArrowError> {
    let mut fields: Vec<Field> = rows
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut columns: Vec<ArrayRef> = rows.columns().to_vec();
    for (field, column) in extra {
        fields.push(field);
        columns.push(column);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

/// The source side of a MERGE into `address`: a session, `rows` plus the address columns as
/// a DataFrame, and its column names.
pub(crate) fn merge_source(
    rows: &RecordBatch,
    address: &sluice_window::Address,
) -> Result<
    (
        SessionContext,
        deltalake::datafusion::prelude::DataFrame,
        Vec<String>,
    ),
    DeltaTableError,
> {
    let batch = with_address_columns(rows, address).map_err(DeltaTableError::from)?;
    let names: Vec<String> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let ctx = plain_types_session();
    let df = ctx.read_batch(batch).map_err(DeltaTableError::from)?;
    Ok((ctx, df, names))
}

/// A column by its exact name (no SQL parsing, so any field name is safe).
fn col_named(name: &str) -> Expr {
    Expr::Column(Column::new_unqualified(name))
}

/// A field of `schema` by name: a top-level column of exactly that name, else a dotted path
/// into structs (`user.id`: the member `id` of the column `user`), read from `base(root)`.
pub fn field_expr(schema: &Schema, name: &str, base: impl Fn(&str) -> Expr) -> Expr {
    if schema.field_with_name(name).is_ok() || !name.contains('.') {
        return base(name);
    }
    let mut parts = name.split('.');
    let root = parts.next().unwrap_or(name);
    parts.fold(base(root), |e, member| {
        deltalake::datafusion::functions::core::expr_fn::get_field(e, member.to_string())
    })
}

/// A column of the MERGE target (alias `t`).
pub(crate) fn target(name: &str) -> Expr {
    Expr::Column(Column::new(Some("t"), name))
}

/// A column of the MERGE source (alias `s`).
pub(crate) fn source(name: &str) -> Expr {
    Expr::Column(Column::new(Some("s"), name))
}

/// A MERGE of `source` (alias `s`, in `ctx`'s session) into `table` (alias `t`) on
/// `predicate`, committed with `properties`; the caller adds the clauses.
pub(crate) fn merge_builder(
    table: &DeltaTable,
    ctx: &SessionContext,
    source: deltalake::datafusion::prelude::DataFrame,
    predicate: Expr,
    properties: CommitProperties,
) -> MergeBuilder {
    crate::table::read_through_table_store(ctx, table);
    table
        .clone()
        .merge(source, predicate)
        .with_session_state(Arc::new(ctx.state()))
        .with_source_alias("s")
        .with_target_alias("t")
        .with_commit_properties(properties)
}

/// A DataFusion session whose Parquet reads use plain string types: files written by a MERGE
/// must read back with the table's file schema (DataFusion would otherwise use view types).
pub(crate) fn plain_types_session() -> SessionContext {
    SessionContext::new_with_config(SessionConfig::new().set_bool(
        "datafusion.execution.parquet.schema_force_view_types",
        false,
    ))
}

impl WindowTable {
    /// The current rows holding any key of `offered` (in the scope's reach: the window's
    /// address, or the whole table), projected to `columns`. Reads this writer's version.
    pub async fn incumbents(
        &mut self,
        window: Window,
        scope: MergeScope,
        key_columns: &[String],
        offered: &RecordBatch,
        columns: &[String],
    ) -> Result<Vec<RecordBatch>, PublishError> {
        let address = self.address(window);
        let delta = |source: DeltaTableError| PublishError::Delta {
            window: address.label(),
            source,
        };
        let df_error = |e: deltalake::datafusion::error::DataFusionError| delta(e.into());
        if self.version().is_none() || offered.num_rows() == 0 {
            return Ok(Vec::new());
        }
        self.catch_up().await.map_err(delta)?;
        let ctx = plain_types_session();
        crate::table::read_through_table_store(&ctx, &self.loaded);
        let provider = self.loaded.table_provider().await.map_err(df_error)?;
        let mut current = ctx.read_table(provider).map_err(df_error)?;
        match scope {
            MergeScope::Window => {
                for (k, v) in address.pairs() {
                    current = current
                        .filter(col_named(k).eq(lit(v.to_string())))
                        .map_err(df_error)?;
                }
            }
            MergeScope::Table => {
                match self.key_ranges(offered, key_columns).await.map_err(delta)? {
                    Some((_, ranges)) if ranges.excludes_every_file() => return Ok(Vec::new()),
                    Some((column, ranges)) => {
                        current = current
                            .filter(ranges.predicate(col_named(&column)))
                            .map_err(df_error)?;
                    }
                    None => {}
                }
            }
        }
        // The key fields on both sides, renamed so the join sides cannot be confused (and a
        // nested key is a column of its own).
        let schema = offered.schema();
        let mine: Vec<String> = (0..key_columns.len()).map(|i| format!("__t{i}")).collect();
        let renamed: Vec<String> = (0..key_columns.len()).map(|i| format!("__k{i}")).collect();
        let mut projection: Vec<Expr> = columns.iter().map(|c| col_named(c)).collect();
        projection.extend(
            key_columns
                .iter()
                .zip(&mine)
                .map(|(k, m)| field_expr(&schema, k, col_named).alias(m)),
        );
        let current = current.select(projection).map_err(df_error)?;
        let keys = ctx
            .read_batch(offered.clone())
            .and_then(|df| {
                df.select(
                    key_columns
                        .iter()
                        .zip(&renamed)
                        .map(|(k, r)| field_expr(&schema, k, col_named).alias(r))
                        .collect::<Vec<Expr>>(),
                )
            })
            .map_err(df_error)?;
        let left: Vec<&str> = mine.iter().map(String::as_str).collect();
        let right: Vec<&str> = renamed.iter().map(String::as_str).collect();
        current
            .join(keys, JoinType::LeftSemi, &left, &right, None)
            .and_then(|df| df.select(columns.iter().map(|c| col_named(c)).collect::<Vec<Expr>>()))
            .map_err(df_error)?
            .collect()
            .await
            .map_err(df_error)
    }

    /// One commit: a MERGE whose predicate matches the row key and, in window scope, pins the
    /// window's address (typed literals; only that partition is read and rewritten). Absent
    /// keys are inserted; present ones are left alone or replaced, per [`MergeAction`]. Offered
    /// rows must be unique by key. With no offered row nothing is committed (the returned
    /// version is the loaded one and `files_added` is 0).
    pub async fn merge(&mut self, m: MergePublication) -> Result<Published, PublishError> {
        let address = self.address(m.window);
        let label = address.label();
        let delta = |source| PublishError::Delta {
            window: label.clone(),
            source,
        };
        if m.key_columns.is_empty() {
            return Err(PublishError::Invalid {
                window: label,
                reason: "a merge needs a row key".into(),
            });
        }
        let n = m.rows.num_rows();
        if n > 0 && self.schema_change_pending() {
            // deltalake's MERGE writes its own metadata for new columns, with a new table id:
            // the new columns are committed first, by themselves.
            self.commit_schema_change(&m.pipeline, &label).await?;
        }
        if n == 0 {
            return Ok(Published {
                version: self.version().unwrap_or_default(),
                files_removed: 0,
                files_added: 0,
                rows: 0,
                rows_net: 0,
                bytes_added: 0,
            });
        }
        let rows = match &m.deletes {
            None => m.rows.clone(),
            Some(flags) => with_delete_flags(&m.rows, flags).map_err(|e| delta(e.into()))?,
        };
        let (ctx, df, mut names) = merge_source(&rows, &address).map_err(delta)?;
        names.retain(|n| n != DELETE_FLAG);
        let predicate = join_predicate(&m, &address);
        let txns = self.txn_actions(&m.pipeline, &m.txns, m.published_at_ms)?;
        let changed = m
            .windows_changed
            .iter()
            .map(|w| (*w, self.address(*w)))
            .collect();
        let mut info = commit_info(&m, &address, changed);
        // deltalake's MERGE reads and commits through its own snapshot: bring it to this
        // writer's head first.
        self.catch_up().await.map_err(delta)?;
        let predicate = match m.scope {
            MergeScope::Window => predicate,
            MergeScope::Table => self
                .within_key_ranges(predicate, &m, &mut info)
                .await
                .map_err(delta)?,
        };
        let snapshot = self.loaded.snapshot().map_err(delta)?;
        let read_version = snapshot.version();
        let properties = commit_properties(snapshot, txns, Some(info), self.commit_retries);
        let builder = merge_builder(&self.loaded, &ctx, df, predicate, properties);
        let deletes = m.deletes.is_some();
        let result = with_clauses(builder, m.action, deletes, &names)
            .map_err(delta)?
            .await;
        let (table, metrics) = result.map_err(|e| commit_error(label.clone(), read_version, e))?;
        let committed = table.version() != self.loaded.version();
        self.loaded = table;
        // A MERGE rewrites files anywhere in its reach: rebuild the address index on next use.
        self.index = None;
        if committed {
            for (partition, offset) in &m.txns {
                self.txns.insert(app_id(&m.pipeline, partition), *offset);
            }
        }
        Ok(Published {
            version: self.version().unwrap_or_default(),
            files_removed: metrics.num_target_files_removed,
            files_added: metrics.num_target_files_added,
            rows: (metrics.num_target_rows_inserted
                + metrics.num_target_rows_updated
                + metrics.num_target_rows_deleted) as i64,
            rows_net: metrics.num_target_rows_inserted as i64
                - metrics.num_target_rows_deleted as i64,
            bytes_added: 0,
        })
    }
}

/// The MERGE's join: the row key's fields equal on both sides and, in window scope, the
/// target pinned to the window's address (typed literals).
fn join_predicate(m: &MergePublication, address: &sluice_window::Address) -> Expr {
    let schema = m.rows.schema();
    let pins = match m.scope {
        MergeScope::Window => address
            .pairs()
            .map(|(k, v)| target(k).eq(lit(v.to_string())))
            .collect(),
        MergeScope::Table => Vec::new(),
    };
    let keys = m
        .key_columns
        .iter()
        .map(|k| field_expr(&schema, k, target).eq(field_expr(&schema, k, source)));
    pins.into_iter()
        .chain(keys)
        .reduce(Expr::and)
        .unwrap_or(lit(false))
}

/// sluice's part of the MERGE commit's `commitInfo`.
fn commit_info(
    m: &MergePublication,
    address: &sluice_window::Address,
    changed: Vec<(Window, sluice_window::Address)>,
) -> serde_json::Value {
    let changed: Vec<serde_json::Value> = changed
        .into_iter()
        .filter(|(w, _)| *w != m.window)
        .map(|(w, a)| {
            json!({
                "window": a.hive_path(),
                "window_start": w.start().to_rfc3339(),
                "window_end": w.end().to_rfc3339(),
            })
        })
        .collect();
    json!({
        "windows_changed": changed,
        "pipeline": m.pipeline,
        "window": address.hive_path(),
        "window_start": m.window.start().to_rfc3339(),
        "window_end": m.window.end().to_rfc3339(),
        "mode": match m.action {
            MergeAction::InsertAbsent => "merge_absent",
            MergeAction::Upsert => "merge_upsert",
            MergeAction::Versions => "merge_versions",
        },
        "scope": m.scope.name(),
        "rows_offered": m.rows.num_rows(),
        "positions": m.position_ranges,
    })
}

/// `builder` with the clauses of `action`: a delete (with `deletes`, the first clause: a
/// delete removes its key's row, and only the other rows update or insert), the update of a
/// present row, and the insert of an absent one. Columns go by name as they are: a name is
/// never parsed (`a.b`, quotes).
fn with_clauses(
    builder: MergeBuilder,
    action: MergeAction,
    deletes: bool,
    names: &[String],
) -> Result<MergeBuilder, DeltaTableError> {
    let is_delete = || source(DELETE_FLAG).eq(lit(true));
    let is_upsert = || source(DELETE_FLAG).eq(lit(false));
    let mut builder = builder;
    if deletes {
        builder = builder.when_matched_delete(|delete| delete.predicate(is_delete()))?;
    }
    if action == MergeAction::Versions {
        let end = Column::new_unqualified(HISTORY_END_AT);
        builder =
            builder.when_matched_update(|update| update.update(end, source(HISTORY_END_AT)))?;
    }
    if action == MergeAction::Upsert {
        builder = builder.when_matched_update(|update| {
            let update = names.iter().fold(update, |u, c| {
                u.update(Column::new_unqualified(c), source(c))
            });
            match deletes {
                true => update.predicate(is_upsert()),
                false => update,
            }
        })?;
    }
    builder.when_not_matched_insert(|insert| {
        let insert = names
            .iter()
            .fold(insert, |i, c| i.set(Column::new_unqualified(c), source(c)));
        match deletes {
            true => insert.predicate(is_upsert()),
            false => insert,
        }
    })
}

impl WindowTable {
    /// `predicate` within the key ranges of `m`'s rows (a table-scope MERGE's, see
    /// [`KeyRanges`]), noted in `info`; as it is for a key that is not ranged.
    async fn within_key_ranges(
        &self,
        predicate: Expr,
        m: &MergePublication,
        info: &mut serde_json::Value,
    ) -> Result<Expr, DeltaTableError> {
        let Some((column, ranges)) = self.key_ranges(&m.rows, &m.key_columns).await? else {
            return Ok(predicate);
        };
        info["key_ranges"] = json!({
            "files": ranges.files,
            "files_pruned": ranges.files_pruned,
        });
        Ok(predicate.and(ranges.predicate(target(&column))))
    }

    /// The ranges of the offered values of the first key column over the files of this
    /// writer's version ([`KeyRanges`]), with that column's name; `None` for a key whose
    /// first column is nested or of a type that is not ranged.
    async fn key_ranges(
        &self,
        offered: &RecordBatch,
        key_columns: &[String],
    ) -> Result<Option<(String, KeyRanges)>, DeltaTableError> {
        let Some(first) = key_columns.first() else {
            return Ok(None);
        };
        let Some(column) = offered.column_by_name(first) else {
            return Ok(None);
        };
        let ranges = KeyRanges::new(column.as_ref(), first, file_stats(&self.loaded).await?);
        if let Some(r) = &ranges {
            tracing::debug!(key = %first, files = r.files, files_pruned = r.files_pruned, "key ranges");
        }
        Ok(ranges.map(|r| (first.clone(), r)))
    }
}
