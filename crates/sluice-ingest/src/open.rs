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

use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
pub use sluice_publish::terms;
use sluice_publish::{reserved_columns, Contract, OpenError, Pipelines, TableOptions, WindowTable};
use sluice_source::schema::SOURCE_NAME_KEY;
use sluice_source::{
    schema, DecodeError, DecodeOptions, LineDecoder, MessageColumns, MessagePart, NdjsonSource,
    SchemaError, SchemaEvolution, SourceError,
};
use sluice_window::{AddressLayout, Shard, WindowSize};

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
    /// The `--delete-when` predicate does not fit the record schema. Nothing was written.
    #[error(transparent)]
    Deletes(#[from] crate::deletes::DeletePredicateError),
    /// History's version columns do not fit the record schema (`--scd 2`). Nothing was
    /// written.
    #[error("--scd 2: {0}")]
    VersionColumns(String),
    /// An expectation does not fit the record schema. Nothing was written.
    #[error(transparent)]
    Expectations(#[from] crate::expectations::ExpectationError),
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
    /// Which changes are deletes: checked likewise.
    pub deletes: Option<&'a crate::deletes::DeletePredicate>,
    /// The rules on the rows: checked likewise.
    pub expectations: &'a crate::expectations::Expectations,
    /// History (`--scd 2`): a new table gets the version columns, typed as the sequence.
    pub history: bool,
}

/// Commit attempts of a shard's writer when another shard took the version first: the
/// writers of one table race on every commit, on disjoint addresses, so a commit is retried
/// over commits that do not conflict with it (see `TableOptions::commit_retries`).
pub const SHARD_COMMIT_RETRIES: usize = 15;

/// The options of the writer of `shard` of a sharded table (a Kafka run's: a shard per topic
/// partition): `table`'s, in that shard, with the commit retries of writers that race on
/// disjoint addresses. The one place a shard's writer is configured.
pub fn shard_writer_options(table: &TableOptions, shard: Shard) -> TableOptions {
    TableOptions {
        shard: Some(shard),
        commit_retries: table.commit_retries.max(SHARD_COMMIT_RETRIES),
        ..table.clone()
    }
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
        // An inferred field named like the time column or a message column is stored under
        // another name.
        spec.decode.reserved.extend(spec.decode.time_column.clone());
        let message_columns = &spec.decode.message_columns;
        spec.decode
            .reserved
            .extend(message_columns.parts.iter().map(|p| p.column()));
        if spec.history {
            let names = [crate::history::START_AT, crate::history::END_AT];
            spec.decode.reserved.extend(names.map(String::from));
        }
        let record = match spec.declared {
            Some(declared) => declared.clone(),
            None => match spec.infer_from {
                Some((source, lines)) => {
                    let mut head = source.head_lines(lines)?;
                    if let Some(envelope) = spec.decode.envelope {
                        // The rows, not their envelopes (a record that is no change is
                        // left out: it is a dead letter once read).
                        head = head
                            .iter()
                            .filter_map(|l| envelope.unwrap_line(l).ok())
                            .collect();
                    }
                    let inferred = schema::infer(
                        head.iter().map(Vec::as_slice),
                        lines,
                        &spec.decode.reserved,
                    )?;
                    // Parquet files declare their columns' types: those, not the text's.
                    let footer = source.footer_types().and_then(|footer| {
                        match spec.decode.envelope {
                            // A change's columns: the row's are its image's.
                            Some(envelope) => envelope.row_schema(&footer).ok().map(Arc::new),
                            None => Some(footer),
                        }
                    });
                    match footer {
                        Some(footer) => sluice_source::rows::with_footer_types(&inferred, &footer),
                        None => inferred,
                    }
                }
                None => return Err(OpenError::NeedSchema(spec.options.location.clone()).into()),
            },
        };
        let record = with_time_column(&record, spec.decode.time_column.as_deref())
            .map_err(decode_error(&record))?;
        let record = with_message_columns(&record, &spec.decode.message_columns)
            .map_err(decode_error(&record))?;
        let record = match spec.history {
            true => with_version_columns(&record, &spec.decode.sequence)
                .map_err(OpenRawError::VersionColumns)?,
            false => record,
        };
        let decoder =
            LineDecoder::new(record.clone(), spec.decode).map_err(decode_error(&record))?;
        if let Some(deletes) = spec.deletes {
            deletes.check(&record)?;
        }
        spec.expectations.check(&record)?;
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
    // A table written before it had a time column (the contract refuses one that records
    // another) gets it as a new column, as a declared field.
    let record = match spec.decode.time_column.as_deref() {
        Some(name) if record.field_with_name(name).is_err() => {
            if spec.evolution != SchemaEvolution::Add {
                return Err(OpenRawError::WouldGrow {
                    table_fields: field_names(&record),
                });
            }
            with_time_column(&record, Some(name)).map_err(decode_error(&record))?
        }
        _ => record,
    };
    // So does one written before it had the message columns asked for.
    let message_columns = &spec.decode.message_columns;
    let lacks = |p: &MessagePart| record.field_with_name(&p.column()).is_err();
    if message_columns.parts.iter().any(lacks) && spec.evolution != SchemaEvolution::Add {
        return Err(OpenRawError::WouldGrow {
            table_fields: field_names(&record),
        });
    }
    let record = with_message_columns(&record, message_columns).map_err(decode_error(&record))?;
    let decoder = LineDecoder::new(record.clone(), spec.decode).map_err(decode_error(&record))?;
    if let Some(deletes) = spec.deletes {
        deletes.check(&record)?;
    }
    spec.expectations.check(&record)?;
    table.record_contract(spec.options).await?;
    if spec.options.change_feed {
        table.enable_change_feed().await?;
    }
    Ok((table, decoder))
}

/// `record` with the message columns (`--kafka-columns`) it lacks added last, each read under
/// a name no record has. A record field of such a name is refused: the column would replace
/// its values.
fn with_message_columns(
    record: &SchemaRef,
    columns: &MessageColumns,
) -> Result<SchemaRef, DecodeError> {
    let mut fields: Vec<Field> = record.fields().iter().map(|f| f.as_ref().clone()).collect();
    for part in &columns.parts {
        let column = columns.field(*part);
        match record.field_with_name(column.name()) {
            Ok(f) if f.metadata().get(SOURCE_NAME_KEY) == Some(&part.read_name()) => {}
            Ok(_) => {
                return Err(DecodeError::MessageColumn {
                    name: column.name().clone(),
                    why: "the records have a field of that name".into(),
                })
            }
            Err(_) => fields.push(column),
        }
    }
    Ok(Arc::new(Schema::new_with_metadata(
        fields,
        record.metadata().clone(),
    )))
}

/// `record` with history's version columns, of the type of its one sequence field.
fn with_version_columns(record: &SchemaRef, sequence: &[String]) -> Result<SchemaRef, String> {
    let [field] = sequence else {
        return Err(
            "needs one --sequence-field (a version starts and ends at a sequence value)".into(),
        );
    };
    let types = crate::deletes::field_types(record, std::slice::from_ref(field))
        .map_err(|e| e.to_string())?;
    crate::history::with_version_columns(record, &types[0].1)
}

/// The JSON key the time column is read from: none a stream writes.
const TIME_COLUMN_READ_NAME: &str = "\u{0}sluice.time_column";

/// `record` with the time column `name` (`--time-column`) added last: a `timestamp` (UTC)
/// that the decoder fills with each row's event time. A record field of that name is refused:
/// the column would replace its values.
fn with_time_column(record: &SchemaRef, name: Option<&str>) -> Result<SchemaRef, DecodeError> {
    let Some(name) = name else {
        return Ok(record.clone());
    };
    if record.field_with_name(name).is_ok() {
        return Err(DecodeError::TimeColumn {
            name: name.to_string(),
            why: "the records have a field of that name; choose another name".into(),
        });
    }
    let mut fields: Vec<Field> = record.fields().iter().map(|f| f.as_ref().clone()).collect();
    // Read under a name no record field is read by (a renamed field is read by its own
    // name, which may be `name`): a record key of that name is a clash, not the column.
    let read_as = [(
        SOURCE_NAME_KEY.to_string(),
        TIME_COLUMN_READ_NAME.to_string(),
    )];
    fields.push(
        Field::new(
            name,
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        )
        .with_metadata(read_as.into_iter().collect()),
    );
    Ok(Arc::new(Schema::new_with_metadata(
        fields,
        record.metadata().clone(),
    )))
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
        .with(
            terms::TIME_COLUMN,
            decode.time_column.clone().unwrap_or_default(),
        )
        .with(terms::WINDOW, config.window.label())
        .with(terms::ADDRESS, config.layout.name())
        .with(terms::KEY, decode.key.join(","))
        .with(terms::SEQUENCE_FIELD, decode.sequence.join(","))
        .with(terms::ENVELOPE, decode.envelope.map_or("", |e| e.name()))
        .with(
            terms::DELETE_WHEN,
            config
                .deletes
                .as_ref()
                .map(|d| d.when.sql().to_string())
                .unwrap_or_default(),
        )
        .with(terms::SCD, if config.history { "2" } else { "" })
        .with(terms::EXPECT, config.expectations.to_term())
        .with(terms::MODE, mode)
        .with(terms::MERGE_SCOPE, scope)
        .with(terms::LATE, config.late.name())
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
