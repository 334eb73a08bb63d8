//! A table's columns: the file schema every staged file is written with (record fields, then
//! the position columns), as Delta stores it, and its growth by schema evolution: new columns
//! and struct members committed as a metadata action with the next commit of rows that need
//! them; only before a MERGE across the table, which cannot carry one, as a commit of their
//! own ([`WindowTable::commit_schema_change`]).

use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::kernel::engine::arrow_conversion::{TryIntoArrow, TryIntoKernel};
use deltalake::kernel::{Action, MetadataExt, StructField, StructType};
use deltalake::protocol::DeltaOperation;
use deltalake::DeltaTableError;
use serde_json::json;

use crate::table::error::OpenError;
use crate::table::error::PublishError;
use crate::table::land::CommitRequest;
use crate::table::options::{OFFSET_COLUMN, SOURCE_COLUMN};
use crate::table::window_table::WindowTable;

impl WindowTable {
    /// The record fields alone (the file schema without the position columns).
    pub fn record_schema(&self) -> SchemaRef {
        Arc::new(record_part(&self.file_schema))
    }

    /// Grows the table's columns to hold `record` (the record fields; the position columns
    /// are added): the change is committed with this writer's next commit, as a metadata
    /// action in the same commit as the rows that need it. Returns the paths of the columns
    /// added (empty when the table has them all). `record` may only add to the table's
    /// columns (top-level columns and struct members).
    pub fn grow_schema(&mut self, record: &SchemaRef) -> Result<Vec<String>, OpenError> {
        let base = record_part(self.schema_change.as_ref().unwrap_or(&self.file_schema));
        let more = record_part(normalized(&with_position_columns(record))?.as_ref());
        let records =
            sluice_stage::union(&base, &more).map_err(|e| OpenError::Schema(e.to_string()))?;
        // Record fields first, the position columns last, as in every file.
        let union = normalized(&with_position_columns(&Arc::new(records)))?;
        let added = added_paths(&self.file_schema, &union);
        debug_assert!(
            (self.file_schema.fields().iter()).all(|f| union.field_with_name(f.name()).is_ok()),
            "E6: schema evolution keeps every column the table has"
        );
        self.schema_change = (!added.is_empty()).then_some(union);
        Ok(added)
    }

    /// The file schema this writer stages with: the table's, grown by
    /// [`WindowTable::grow_schema`] if a change is waiting for its commit.
    pub fn staging_schema(&self) -> &SchemaRef {
        self.schema_change.as_ref().unwrap_or(&self.file_schema)
    }

    /// Whether a schema change waits for this writer's next commit.
    pub fn schema_change_pending(&self) -> bool {
        self.schema_change.is_some()
    }

    /// The metadata action of a waiting schema change, for the next commit.
    pub(crate) fn schema_action(&self) -> Result<Option<Action>, DeltaTableError> {
        let Some(grown) = &self.schema_change else {
            return Ok(None);
        };
        let snapshot = self.loaded.snapshot()?;
        let metadata = snapshot.metadata().clone();
        let partition_columns = metadata.partition_columns().to_vec();
        let mut fields: Vec<StructField> = {
            let kernel: StructType = grown
                .as_ref()
                .try_into_kernel()
                .map_err(|e| DeltaTableError::Generic(e.to_string()))?;
            kernel.fields().cloned().collect()
        };
        fields.extend(
            snapshot
                .schema()
                .fields()
                .filter(|f| partition_columns.contains(f.name()))
                .cloned(),
        );
        let schema = StructType::try_new(fields)?;
        Ok(Some(Action::Metadata(metadata.with_schema(&schema)?)))
    }

    /// Commits a waiting schema change by itself: a metadata action, no files, no `txn`
    /// (Delta's ADD COLUMN). deltalake's MERGE cannot carry one (it would write metadata of
    /// its own, with a new table id), so a MERGE of rows with new columns comes after this
    /// commit. The new columns are nullable: until the MERGE lands, readers read them as
    /// null, and a crash in between leaves the table so (the resumed run publishes the rows
    /// again, under the grown schema). `label` names the publication in errors.
    pub(crate) async fn commit_schema_change(
        &mut self,
        pipeline: &str,
        label: &str,
    ) -> Result<(), PublishError> {
        let delta = |source| PublishError::Delta {
            window: label.to_string(),
            source,
        };
        let Some(grown) = &self.schema_change else {
            return Ok(());
        };
        // The top-level columns added (informational: the metadata action is the change).
        let new: Vec<Field> = grown
            .fields()
            .iter()
            .filter(|f| self.file_schema.field_with_name(f.name()).is_err())
            .map(|f| f.as_ref().clone())
            .collect();
        let kernel: StructType = (&Schema::new(new))
            .try_into_kernel()
            .map_err(|e| delta(DeltaTableError::Generic(e.to_string())))?;
        let fields: Vec<StructField> = kernel.fields().cloned().collect();
        let added = self.pending_added();
        let Some(metadata) = self.schema_action().map_err(delta)? else {
            return Ok(());
        };
        self.land(CommitRequest {
            actions: vec![metadata],
            txns: Vec::new(),
            info: Some(json!({"pipeline": pipeline, "schema_added": added})),
            operation: DeltaOperation::AddColumn { fields },
            label: label.to_string(),
        })
        .await?;
        self.schema_committed();
        Ok(())
    }

    /// Paths of the columns the waiting schema change adds.
    pub fn pending_added(&self) -> Vec<String> {
        match &self.schema_change {
            Some(grown) => added_paths(&self.file_schema, grown),
            None => Vec::new(),
        }
    }

    /// After a commit that carried the waiting schema change: it is the table's.
    pub(crate) fn schema_committed(&mut self) {
        if let Some(grown) = self.schema_change.take() {
            self.file_schema = grown;
        }
    }
}

pub(crate) fn all_nullable(schema: &SchemaRef) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<Field>>(),
    ))
}

/// A file schema's record fields (without the position columns).
pub(crate) fn record_part(file_schema: &Schema) -> Schema {
    let fields: Vec<Field> = file_schema
        .fields()
        .iter()
        .filter(|f| f.name() != SOURCE_COLUMN && f.name() != OFFSET_COLUMN)
        .map(|f| f.as_ref().clone())
        .collect();
    Schema::new(fields)
}

pub(crate) fn with_position_columns(record: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = record
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    fields.push(Field::new(SOURCE_COLUMN, DataType::Utf8, false));
    fields.push(Field::new(OFFSET_COLUMN, DataType::Int64, false));
    Arc::new(Schema::new(fields))
}

/// `schema` as Delta stores and gives it back (list elements named `element`, map entries
/// `key_value`, ...): what files are written with must equal what the table reads as.
pub(crate) fn normalized(schema: &SchemaRef) -> Result<SchemaRef, OpenError> {
    let kernel: StructType = schema
        .as_ref()
        .try_into_kernel()
        .map_err(|e| OpenError::Schema(e.to_string()))?;
    kernel_to_arrow(kernel.fields().cloned().collect())
}

/// Paths (`coupon`, `user.plan`) of the fields `new` has and `old` lacks.
pub(crate) fn added_paths(old: &Schema, new: &Schema) -> Vec<String> {
    fn walk(old: Option<&DataType>, new: &DataType, at: &str, out: &mut Vec<String>) {
        match (old, new) {
            (Some(DataType::Struct(a)), DataType::Struct(b)) => {
                for f in b.iter() {
                    let path = format!("{at}.{}", f.name());
                    match a.iter().find(|g| g.name() == f.name()) {
                        Some(g) => walk(Some(g.data_type()), f.data_type(), &path, out),
                        None => out.push(path),
                    }
                }
            }
            (Some(DataType::List(a)), DataType::List(b)) => {
                walk(Some(a.data_type()), b.data_type(), &format!("{at}[]"), out)
            }
            (Some(DataType::Map(a, _)), DataType::Map(b, _)) => walk(
                Some(a.data_type()),
                b.data_type(),
                &format!("{at}{{}}"),
                out,
            ),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for f in new.fields() {
        match old.field_with_name(f.name()) {
            Ok(g) => walk(Some(g.data_type()), f.data_type(), f.name(), &mut out),
            Err(_) => out.push(f.name().clone()),
        }
    }
    // Map entries are `key_value`: show `attrs{}.x`, not `attrs{}.key_value.value.x`.
    out.into_iter()
        .map(|p| {
            p.replace("{}.key_value.value", "{}")
                .replace("[].element", "[]")
        })
        .collect()
}

pub(crate) fn kernel_to_arrow(fields: Vec<StructField>) -> Result<SchemaRef, OpenError> {
    let kernel = StructType::try_new(fields).map_err(|e| OpenError::Schema(e.to_string()))?;
    let arrow: Schema = (&kernel)
        .try_into_arrow()
        .map_err(|e| OpenError::Schema(e.to_string()))?;
    Ok(Arc::new(arrow))
}

/// `name: type, ...`: what must agree between a record schema and a table.
pub(crate) fn signature(schema: &SchemaRef) -> String {
    schema
        .fields()
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.data_type()))
        .collect::<Vec<_>>()
        .join(", ")
}
