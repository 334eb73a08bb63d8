//! Opening a run's raw table: open it, or create it with the declared record schema (a schema
//! file) or else one inferred from the source's first lines; and the record schema to decode
//! with: the table's, grown by the declared fields it lacks when schema evolution adds
//! columns (they enter the table with its next commit). An existing table's schema is the
//! contract: nothing is inferred for it.

use std::sync::Arc;

use deltalake::arrow::datatypes::{Schema, SchemaRef};
use sluice_publish::{OpenError, TableOptions, WindowTable};
use sluice_source::{schema, NdjsonSource, SchemaError, SchemaEvolution, SourceError};
use sluice_window::{AddressLayout, WindowSize};

/// Why the raw table could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenRawError {
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The table is new and has no schema file: reading the lines to infer one failed.
    #[error(transparent)]
    Read(#[from] SourceError),
    /// The table is new and has no schema file: no schema could be inferred.
    #[error(transparent)]
    Infer(#[from] SchemaError),
    /// The schema file's fields conflict with the table's.
    #[error(transparent)]
    Conflict(#[from] sluice_stage::SchemaConflict),
    /// The schema file has fields the table lacks, and schema evolution does not add them.
    #[error("the schema file has fields the table does not have; a table grows only with --schema-evolution add (the table has: {table_fields})")]
    WouldGrow { table_fields: String },
}

/// How a run's raw table is opened.
#[derive(Debug, Clone)]
pub struct RawTableSpec<'a> {
    pub options: &'a TableOptions,
    /// The schema file's record schema, if one was given.
    pub declared: Option<&'a SchemaRef>,
    pub layout: AddressLayout,
    pub window: WindowSize,
    pub evolution: SchemaEvolution,
    /// Where a new table without a schema file infers its schema, and from how many lines.
    pub infer_from: Option<(&'a NdjsonSource, usize)>,
}

/// Opens or creates the raw table (see the module doc); returns it with the record schema
/// to decode with.
pub async fn open_raw(spec: RawTableSpec<'_>) -> Result<(WindowTable, SchemaRef), OpenRawError> {
    let opened =
        WindowTable::open_or_create(spec.options, spec.declared, spec.layout, spec.window).await;
    let table = match (opened, spec.infer_from) {
        (Err(OpenError::NeedSchema(_)), Some((source, lines))) => {
            let head = source.head_lines(lines)?;
            let inferred = schema::infer(head.iter().map(Vec::as_slice), lines)?;
            WindowTable::open_or_create(spec.options, Some(&inferred), spec.layout, spec.window)
                .await?
        }
        (opened, _) => opened?,
    };
    let record = table.record_schema();
    let record = match spec.declared {
        None => record,
        Some(declared) => {
            let union = sluice_stage::union(&record, declared)?;
            if sluice_stage::extends(declared, &record) {
                record
            } else if spec.evolution == SchemaEvolution::Add {
                Arc::new(union)
            } else {
                return Err(OpenRawError::WouldGrow {
                    table_fields: field_names(&record),
                });
            }
        }
    };
    Ok((table, record))
}

/// `name: type` of each field, for messages.
pub fn field_names(schema: &Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| format!("{}: {}", f.name(), schema::type_name(f.data_type())))
        .collect::<Vec<_>>()
        .join(", ")
}
