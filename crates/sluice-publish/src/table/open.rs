//! Opening a window table, or creating it with its address columns and properties, and
//! checking which pipelines may write it.

use std::collections::HashMap;

use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::{StructField, StructType};
use deltalake::operations::create::CreateBuilder;
use deltalake::{DeltaTableError, TableProperty};
use sluice_window::{valid_pipeline_name, AddressLayout, WindowSize};

use crate::table::contract;
use crate::table::error::OpenError;
use crate::table::files::active_files;
use crate::table::location::{missing_local_dir, unloaded_table};
use crate::table::options::{
    Pipelines, ReservedKind, TableOptions, OFFSET_COLUMN, PIPELINES_KEY, PIPELINE_KEY,
    SOURCE_COLUMN,
};
use crate::table::schema::{
    all_nullable, kernel_to_arrow, normalized, signature, with_position_columns,
};
use crate::table::window_table::{Share, WindowTable};

impl WindowTable {
    /// Opens the table, or creates it with `record_schema` plus the position and address
    /// columns. For an existing table, `record_schema` (if given) must match its columns;
    /// without one, the table's own schema is used.
    pub async fn open_or_create(
        options: &TableOptions,
        record_schema: Option<&SchemaRef>,
        layout: AddressLayout,
        size: WindowSize,
    ) -> Result<Self, OpenError> {
        Self::open_or_create_with(options, record_schema, layout, size, true, true).await
    }

    /// As [`WindowTable::open_or_create`] for an existing table; `None`, with nothing
    /// created (not even a local directory), when there is no table at the location. Callers
    /// validate what they can against the table (or the schema a new one would get) before
    /// anything is written.
    pub async fn open_existing(
        options: &TableOptions,
        record_schema: Option<&SchemaRef>,
        layout: AddressLayout,
        size: WindowSize,
    ) -> Result<Option<Self>, OpenError> {
        match Self::open_or_create_with(options, record_schema, layout, size, true, false).await {
            Ok(table) => Ok(Some(table)),
            Err(OpenError::NoTable(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// As [`WindowTable::open_or_create`]; `positions`: whether files carry the source
    /// position columns (a raw table) or only the given fields (a derived table); `create`:
    /// whether a missing table is created (else [`OpenError::NoTable`], nothing created).
    pub(crate) async fn open_or_create_with(
        options: &TableOptions,
        record_schema: Option<&SchemaRef>,
        layout: AddressLayout,
        size: WindowSize,
        positions: bool,
        create: bool,
    ) -> Result<Self, OpenError> {
        if !create && options.store.is_none() && missing_local_dir(&options.location) {
            return Err(OpenError::NoTable(options.location.clone()));
        }
        // A refusal before the table is created (a record field named like an address column,
        // say) leaves nothing behind, not even the directory opening makes.
        let made_dir = crate::table::location::MadeDir::before_opening(options);
        let (mut table, url) = unloaded_table(options)?;
        let url_text = url.to_string();
        let delta = |source| OpenError::Delta {
            url: url_text.clone(),
            source,
        };
        let exists = crate::table::location::table_exists(&table)
            .await
            .map_err(delta)?;
        if !exists && !create {
            return Err(OpenError::NoTable(url_text));
        }
        if let Some(p) = invalid_pipeline_name(options) {
            return Err(OpenError::PipelineName(p.clone()));
        }
        // How many pipelines the table holds: recorded at creation.
        let pipelines = if exists {
            recorded_pipelines(&mut table, options, &url_text).await?
        } else {
            options.pipelines.unwrap_or_default()
        };
        let pipeline_column = match (pipelines, &options.pipeline) {
            (Pipelines::Many, Some(p)) => Some(p.clone()),
            _ => None,
        };
        let partition_columns =
            layout.table_columns(pipelines == Pipelines::Many, options.shard.is_some());
        check_reserved(record_schema, &partition_columns, positions)?;
        let wanted = Wanted {
            options,
            record_schema,
            pipelines,
            partition_columns: &partition_columns,
            positions,
            url: &url_text,
        };
        let file_schema = if exists {
            wanted.existing_file_schema(&table).await?
        } else {
            let (created, file_schema) = wanted.create(&table).await?;
            match created {
                Ok(t) => table = t,
                Err(e) => {
                    // Another writer created it first (the writers of a sharded table start
                    // together): open theirs, checked like any existing table.
                    let (theirs, _) = unloaded_table(options)?;
                    let exists = crate::table::location::table_exists(&theirs).await;
                    if !exists.map_err(delta)? {
                        return Err(delta(e));
                    }
                    return Box::pin(Self::open_or_create_with(
                        options,
                        record_schema,
                        layout,
                        size,
                        positions,
                        create,
                    ))
                    .await;
                }
            }
            file_schema
        };
        made_dir.keep();
        Ok(WindowTable {
            loaded: table,
            own_head: None,
            url: url.to_string(),
            share: Share {
                layout,
                size,
                pipeline: pipeline_column,
                shard: options.shard,
            },
            file_schema,
            txns: HashMap::new(),
            index: None,
            commit_retries: options.commit_retries,
            schema_change: None,
            notified: options.notified.clone(),
            created: !exists,
            change_key: Vec::new(),
        })
    }
}

/// The pipeline `options` name, if it is not a valid pipeline name.
fn invalid_pipeline_name(options: &TableOptions) -> Option<&String> {
    options
        .pipeline
        .as_ref()
        .filter(|p| !valid_pipeline_name(p))
}

/// The files' columns of a table of `schema`: with the source position columns (a raw
/// table), or the fields alone, all nullable (a derived table).
fn file_schema_of(schema: &SchemaRef, positions: bool) -> SchemaRef {
    if positions {
        with_position_columns(schema)
    } else {
        all_nullable(schema)
    }
}

/// How many pipelines the existing `table` holds (loaded here), checked against what
/// `options` ask for, and the run's contract against the one it records.
async fn recorded_pipelines(
    table: &mut deltalake::DeltaTable,
    options: &TableOptions,
    url_text: &str,
) -> Result<Pipelines, OpenError> {
    let delta = |source| OpenError::Delta {
        url: url_text.to_string(),
        source,
    };
    table.load().await.map_err(delta)?;
    let snapshot = table.snapshot().map_err(delta)?;
    let recorded = snapshot
        .metadata()
        .configuration()
        .get(PIPELINES_KEY)
        .cloned();
    let found = recorded
        .as_deref()
        .and_then(Pipelines::parse_name)
        .unwrap_or(Pipelines::One);
    if let Some(requested) = options.pipelines.filter(|r| *r != found) {
        return Err(OpenError::PipelinesMismatch {
            url: url_text.to_string(),
            found: found.name(),
            requested: requested.name(),
        });
    }
    if let (Some(given), Some(p)) = (&options.contract, &options.pipeline) {
        crate::table::contract_in_table::check(
            url_text,
            snapshot.metadata().configuration(),
            p,
            given,
        )?;
    }
    Ok(found)
}

/// A record field named like an address column, or like a source position column of a raw
/// table, is refused.
fn check_reserved(
    record_schema: Option<&SchemaRef>,
    partition_columns: &[String],
    positions: bool,
) -> Result<(), OpenError> {
    let Some(schema) = record_schema else {
        return Ok(());
    };
    for f in schema.fields() {
        let kind = if partition_columns.contains(f.name()) {
            ReservedKind::Address
        } else if positions && (f.name() == SOURCE_COLUMN || f.name() == OFFSET_COLUMN) {
            ReservedKind::Position
        } else {
            continue;
        };
        return Err(OpenError::ReservedColumn {
            field: f.name().clone(),
            kind,
        });
    }
    Ok(())
}

/// What the opener asks of the table: its pipelines, partition columns and record schema.
struct Wanted<'a> {
    options: &'a TableOptions,
    record_schema: Option<&'a SchemaRef>,
    pipelines: Pipelines,
    partition_columns: &'a [String],
    positions: bool,
    url: &'a str,
}

impl Wanted<'_> {
    fn delta(&self) -> impl Fn(DeltaTableError) -> OpenError + '_ {
        |source| OpenError::Delta {
            url: self.url.to_string(),
            source,
        }
    }

    /// The files' schema of the existing `table`, once its partition columns, its owner and
    /// its columns agree with what is asked.
    async fn existing_file_schema(
        &self,
        table: &deltalake::DeltaTable,
    ) -> Result<SchemaRef, OpenError> {
        let delta = self.delta();
        let (options, record_schema, pipelines) =
            (self.options, self.record_schema, self.pipelines);
        let (positions, url_text) = (self.positions, self.url);
        let partition_columns = self.partition_columns.to_vec();
        let snapshot = table.snapshot().map_err(&delta)?;
        let found = snapshot.metadata().partition_columns().to_vec();
        if found != partition_columns {
            return Err(OpenError::PartitionMismatch {
                url: url_text.to_string(),
                found,
                expected: partition_columns,
            });
        }
        if let (Pipelines::One, Some(pipeline)) = (pipelines, &options.pipeline) {
            let owner = match snapshot.metadata().configuration().get(PIPELINE_KEY) {
                Some(owner) => Some(owner.clone()),
                // Written before tables recorded their pipeline: the files say.
                None => active_files(table)
                    .await
                    .map_err(&delta)?
                    .into_iter()
                    .find_map(|f| f.pipeline.filter(|p| p != pipeline)),
            };
            if let Some(owner) = owner.filter(|o| o != pipeline) {
                return Err(OpenError::ForeignPipeline {
                    url: url_text.to_string(),
                    owner,
                    pipeline: pipeline.clone(),
                });
            }
        }
        let kernel = snapshot.schema();
        let data_fields: Vec<StructField> = kernel
            .fields()
            .filter(|f| !partition_columns.contains(f.name()))
            .cloned()
            .collect();
        let table_file_schema = kernel_to_arrow(data_fields)?;
        if let Some(schema) = record_schema {
            let ours = normalized(&file_schema_of(schema, positions))?;
            // A raw table's columns only grow (schema evolution adds to them): the record
            // schema may lack columns the table has, or have new ones, but a field of two
            // types is a conflict. A derived table's columns are its query's, exactly.
            let agrees = if positions {
                sluice_stage::union(&table_file_schema, &ours).is_ok()
            } else {
                signature(&ours) == signature(&table_file_schema)
            };
            if !agrees {
                return Err(OpenError::SchemaMismatch {
                    url: url_text.to_string(),
                    found: signature(&table_file_schema),
                    expected: signature(&ours),
                });
            }
        }
        Ok(table_file_schema)
    }

    /// Creates the table (version 0) with the record schema's columns, the partition columns
    /// and sluice's properties: the created table, or the error of a create that lost its
    /// race; and the files' schema.
    async fn create(
        &self,
        table: &deltalake::DeltaTable,
    ) -> Result<(Result<deltalake::DeltaTable, DeltaTableError>, SchemaRef), OpenError> {
        let (options, record_schema, pipelines) =
            (self.options, self.record_schema, self.pipelines);
        let (positions, url_text) = (self.positions, self.url);
        let partition_columns = self.partition_columns.to_vec();
        let schema = record_schema.ok_or_else(|| OpenError::NeedSchema(url_text.to_string()))?;
        let file_schema = normalized(&file_schema_of(schema, positions))?;
        let mut fields: Vec<Field> = file_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.extend(
            partition_columns
                .iter()
                .map(|c| Field::new(c, DataType::Utf8, false)),
        );
        let kernel: StructType = (&Schema::new(fields))
            .try_into_kernel()
            .map_err(|e| OpenError::Schema(e.to_string()))?;
        let mut properties: Vec<(String, String)> =
            vec![(PIPELINES_KEY.to_string(), pipelines.name().to_string())];
        if let (Pipelines::One, Some(p)) = (pipelines, &options.pipeline) {
            properties.push((PIPELINE_KEY.to_string(), p.clone()));
        }
        if let (Some(given), Some(p)) = (&options.contract, &options.pipeline) {
            properties.push((contract::contract_key(p), given.to_property()));
        }
        let created = CreateBuilder::new()
            .with_log_store(table.log_store())
            // Version 0 or nothing: deltalake retries a create that lost its race as a
            // commit at the next version (a second CREATE, with a new table id).
            .with_commit_properties(CommitProperties::default().with_max_retries(0))
            // sluice's own properties (`sluice.*`) are not Delta's.
            .with_raise_if_key_not_exists(false)
            .with_columns(kernel.fields().cloned())
            .with_partition_columns(partition_columns.clone())
            .with_configuration_property(
                TableProperty::CheckpointInterval,
                Some(options.checkpoint_interval.max(1).to_string()),
            )
            .with_configuration_property(
                TableProperty::EnableChangeDataFeed,
                options.change_feed.then(|| "true".to_string()),
            )
            .with_configuration(
                properties
                    .into_iter()
                    .map(|(k, v)| (k, Some(v)))
                    .collect::<HashMap<String, Option<String>>>(),
            )
            .await;
        Ok((created, file_schema))
    }
}
