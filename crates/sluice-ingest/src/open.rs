//! Opening a run's raw table: open it, or create it with the declared record schema (a schema
//! file) or else one inferred from the source's first lines; and the record schema to decode
//! with: the table's, grown by the declared fields it lacks when schema evolution adds
//! columns (they enter the table with its next commit). An existing table's schema is the
//! contract: nothing is inferred for it.
//!
//! Nothing is written before the run's options are known to work: the decoder (time field,
//! key) is built against the schema first, and only then is a new table created or an
//! existing table's contract recorded ([`run_contract`]).

use std::sync::Arc;

use deltalake::arrow::datatypes::{Schema, SchemaRef};
use sluice_publish::{reserved_columns, Contract, OpenError, Pipelines, TableOptions, WindowTable};
use sluice_source::{
    schema, DecodeError, DecodeOptions, LineDecoder, NdjsonSource, SchemaError, SchemaEvolution,
    SourceError,
};
use sluice_window::{AddressLayout, WindowSize};

use crate::{IngestConfig, PublishMode};

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
    /// The decode options do not fit the record schema (no such time field or key field).
    /// Nothing was written.
    #[error("{source} (fields: {fields})")]
    Decode { source: DecodeError, fields: String },
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
    /// How records are decoded: checked against the record schema before anything is written.
    pub decode: DecodeOptions,
}

/// Opens or creates the raw table (see the module doc); returns it with the decoder for its
/// record schema.
pub async fn open_raw(
    mut spec: RawTableSpec<'_>,
) -> Result<(WindowTable, LineDecoder), OpenRawError> {
    let existing =
        WindowTable::open_existing(spec.options, spec.declared, spec.layout, spec.window).await?;
    let Some(mut table) = existing else {
        // The columns the new table will have besides the record's: no field is named so.
        spec.decode.reserved = reserved_columns(
            spec.layout,
            spec.options.pipelines == Some(Pipelines::Many),
            spec.options.shard.is_some(),
        );
        let record = match spec.declared {
            Some(declared) => declared.clone(),
            None => match spec.infer_from {
                Some((source, lines)) => {
                    let head = source.head_lines(lines)?;
                    schema::infer(head.iter().map(Vec::as_slice), lines, &spec.decode.reserved)?
                }
                None => return Err(OpenError::NeedSchema(spec.options.location.clone()).into()),
            },
        };
        let decoder =
            LineDecoder::new(record.clone(), spec.decode).map_err(decode_error(&record))?;
        let table =
            WindowTable::open_or_create(spec.options, Some(&record), spec.layout, spec.window)
                .await?;
        return Ok((table, decoder));
    };
    spec.decode.reserved = table.reserved_columns();
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
    let decoder = LineDecoder::new(record.clone(), spec.decode).map_err(decode_error(&record))?;
    table.record_contract(spec.options).await?;
    Ok((table, decoder))
}

/// Why the decode options do not fit `record` (no such time field or key field).
fn decode_error(record: &Schema) -> impl FnOnce(DecodeError) -> OpenRawError + '_ {
    |source| OpenRawError::Decode {
        source,
        fields: field_names(record),
    }
}

/// The terms of a run's contract with its table (see [`sluice_publish::Contract`]): what its
/// rows mean. Each is spelled as the option that sets it, so a refused run's message and a
/// command that fills left-out options from the table use the command line's words.
pub fn run_contract(config: &IngestConfig, decode: &DecodeOptions) -> Contract {
    let (mode, scope) = match config.mode {
        PublishMode::Swap => ("swap", ""),
        PublishMode::Merge(scope) => ("merge", scope.name()),
    };
    Contract::new()
        .with(terms::TIME_FIELD, decode.time_field.clone())
        .with(terms::TIME_FORMAT, decode.time.format.name())
        .with(terms::TIME_ZONE, decode.time.zone.name())
        .with(terms::WINDOW, config.window.label())
        .with(terms::ADDRESS, config.layout.name())
        .with(terms::KEY, decode.key.join(","))
        .with(terms::MODE, mode)
        .with(terms::MERGE_SCOPE, scope)
        .with(terms::LATE, config.late.name())
}

/// The names of a run contract's terms: the options that set them, without `--`.
pub mod terms {
    pub const TIME_FIELD: &str = "time-field";
    pub const TIME_FORMAT: &str = "time-format";
    pub const TIME_ZONE: &str = "time-zone";
    pub const WINDOW: &str = "window";
    pub const ADDRESS: &str = "address";
    pub const KEY: &str = "key";
    pub const MODE: &str = "mode";
    pub const MERGE_SCOPE: &str = "merge-scope";
    pub const LATE: &str = "late";
    /// A derived table's raw table (its URL).
    pub const RAW: &str = "raw";
    /// A derived table's query.
    pub const SQL: &str = "sql";
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
