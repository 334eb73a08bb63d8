//! Opening a window table: where it lives and how its store is reached ([`TableOptions`]),
//! creating it with its address columns and properties, checking which pipelines may write
//! it, and reading back what recovery needs (published windows, resume offsets, files).
//!
//! [`WindowTable`]'s writing is split by concern into sub-modules: `commit` (a window's
//! publication, one commit), `merge` (MERGE publications) and `schema` (growing the table's
//! schema in the commit of the first rows that need it). The table uses only leaf modules of
//! the crate (local listing, retries, tags, notify marks); the others (derived, dead letters,
//! listing, gc, notify) use it, so the crate's modules form no circle.

pub(crate) mod change_feed;
pub(crate) mod commit;
pub(crate) mod contract;
mod files;
pub(crate) mod key_ranges;
pub(crate) mod land;
pub(crate) mod location;
pub(crate) mod merge;
pub(crate) mod schema;

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::{StructField, StructType};
use deltalake::operations::create::CreateBuilder;
use deltalake::{DeltaTable, DeltaTableError, TableProperty};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use sluice_window::{
    valid_pipeline_name, Address, AddressLayout, Shard, Window, WindowSize, PIPELINE_COLUMN,
};

use crate::retry::RetryPolicy;
use commit::Coverage;
use contract::ContractDifference;
pub use files::active_files;
pub(crate) use files::file_of;
pub use location::{
    local_path, location_url, open_table, open_table_with, read_through_table_store, source_store,
};
pub mod store_options;
pub(crate) use location::{missing_local_dir, open_table_if_exists, unloaded_table};
use schema::{
    all_nullable, kernel_to_arrow, normalized, record_part, signature, with_position_columns,
};

/// Column holding each row's source partition (for NDJSON: the file name).
pub const SOURCE_COLUMN: &str = "_sluice_source";
/// Column holding each row's source offset (for NDJSON: the byte offset of its line).
pub const OFFSET_COLUMN: &str = "_sluice_offset";

/// Which column sluice adds a record field collides with ([`OpenError::ReservedColumn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservedKind {
    /// A window address column (`dt`, `hour`, `window_start`, ...).
    Address,
    /// A source position column (`_sluice_source`, `_sluice_offset`).
    Position,
}

impl std::fmt::Display for ReservedKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReservedKind::Address => "the address column",
            ReservedKind::Position => "a position column",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("table location {0:?} is not a valid path or URL")]
    Location(String),
    #[error("opening the Delta table at {url} failed: {source}")]
    Delta {
        url: String,
        source: DeltaTableError,
    },
    #[error("the table at {url} has partition columns {found:?}, but this pipeline's address layout needs {expected:?}")]
    PartitionMismatch {
        url: String,
        found: Vec<String>,
        expected: Vec<String>,
    },
    #[error("the table at {url} has columns {found}, but the record schema gives {expected}")]
    SchemaMismatch {
        url: String,
        found: String,
        expected: String,
    },
    #[error("record field {field:?} collides with {kind} sluice adds")]
    ReservedColumn { field: String, kind: ReservedKind },
    #[error("the record schema cannot be stored in Delta: {0}")]
    Schema(String),
    #[error("the table at {0} does not exist yet and no record schema was given")]
    NeedSchema(String),
    #[error("the table at {url} belongs to pipeline {owner:?}; pipeline {pipeline:?} would replace its windows. Give --pipeline {owner}, write to another table, or create the table with --pipelines many to hold several pipelines side by side")]
    ForeignPipeline {
        url: String,
        owner: String,
        pipeline: String,
    },
    #[error("the table at {url} was created for {found} pipeline(s), not {requested}")]
    PipelinesMismatch {
        url: String,
        found: &'static str,
        requested: &'static str,
    },
    #[error("pipeline name {0:?} is not valid: use 1 to 128 letters, digits, '_', '-' or '.', not starting with '.'")]
    PipelineName(String),
    /// The run's options disagree with those the table records for the pipeline.
    #[error("the table at {url} was written by pipeline {pipeline:?} with other options: {}", differences.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("; "))]
    ContractMismatch {
        url: String,
        pipeline: String,
        differences: Vec<ContractDifference>,
    },
    #[error("recording the pipeline's options in the table at {url} failed: {source}")]
    RecordContract {
        url: String,
        source: DeltaTableError,
    },
    /// Nothing at the location is a Delta table (readers never create one).
    #[error("no Delta table at {0}")]
    NoTable(String),
    #[error("the table at {url} has no version {version}; its latest is {latest}")]
    NoVersion {
        url: String,
        version: u64,
        latest: u64,
    },
}

/// How many pipelines a table holds, recorded in the table when it is created
/// ([`PIPELINES_KEY`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pipelines {
    /// One pipeline owns the table (its name is recorded, [`PIPELINE_KEY`]); another is
    /// refused before it writes anything: its windows would replace the owner's.
    #[default]
    One,
    /// Several pipelines, each at addresses of its own (the `pipeline` partition column):
    /// each swaps only its own files.
    Many,
}

impl Pipelines {
    pub fn parse_name(name: &str) -> Option<Self> {
        match name {
            "one" => Some(Pipelines::One),
            "many" => Some(Pipelines::Many),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Pipelines::One => "one",
            Pipelines::Many => "many",
        }
    }
}

/// Table property: `one` or `many` ([`Pipelines`]).
pub const PIPELINES_KEY: &str = "sluice.pipelines";
/// Table property: the pipeline that owns a table of one pipeline.
pub const PIPELINE_KEY: &str = "sluice.pipeline";

/// `delta.checkpointInterval` of the tables sluice creates, unless told otherwise: a
/// checkpoint every 100 commits (Spark's default is 10; sluice commits once per window, and a
/// checkpoint rewrites the whole table state).
pub const CHECKPOINT_INTERVAL_DEFAULT: u64 = 100;

/// Where the table lives, how its store is reached, and how new tables are created.
#[derive(Debug, Clone)]
pub struct TableOptions {
    pub location: String,
    pub storage_options: HashMap<String, String>,
    /// `delta.checkpointInterval` for tables sluice creates.
    pub checkpoint_interval: u64,
    /// The object store to use instead of the one `location` names, rooted at the store's
    /// root (`/`), not at the table. The seam for fault injection and custom stores.
    pub store: Option<Arc<dyn ObjectStore>>,
    /// Retries of transient store failures, applied to every operation of the writer.
    pub retry: RetryPolicy,
    /// This writer's shard of a table that several writers share (the `shard` partition
    /// column); `None`: the table has one writer per pipeline and no shard column.
    pub shard: Option<Shard>,
    /// Attempts at a commit whose version another writer took first, when the commits in
    /// between do not conflict with it (deltalake's conflict checker: other windows or
    /// shards, other `txn` appIds). 0 for a table with one writer: any commit in between
    /// means the table must be re-read. Writers of a sharded table need retries: their
    /// commits race all the time, on disjoint addresses.
    pub commit_retries: usize,
    /// The pipeline that writes through these options, checked against the table's
    /// ([`Pipelines`]); `None` for readers.
    pub pipeline: Option<String>,
    /// How many pipelines a new table holds; for an existing table, `Some` must agree with
    /// what it was created with.
    pub pipelines: Option<Pipelines>,
    /// The pipeline's options that decide what the table holds (see [`contract`]): recorded
    /// in a new table, checked against an existing one's ([`OpenError::ContractMismatch`]).
    /// `None`: not checked (readers, tests of one layer).
    pub contract: Option<contract::Contract>,
    /// How far each notify target of the pipeline has been delivered: every commit of the
    /// writer records them (`txn` appIds `<pipeline>/.notify/<target>`), so a notifier
    /// running beside the writer never commits to the table itself (see [`crate::marks`]).
    pub notified: crate::marks::DeliveredMarks,
    /// Keep a change data feed (`--change-feed`): a new table is created with
    /// `delta.enableChangeDataFeed`, an existing one gets it by a metadata commit
    /// ([`WindowTable::enable_change_feed`]). False leaves a table as it is.
    pub change_feed: bool,
}

impl TableOptions {
    /// Options for `location` with defaults: no storage options, a checkpoint every
    /// [`CHECKPOINT_INTERVAL_DEFAULT`] commits, the store the location names, default retries.
    pub fn new(location: impl Into<String>) -> Self {
        TableOptions {
            location: location.into(),
            storage_options: HashMap::new(),
            checkpoint_interval: CHECKPOINT_INTERVAL_DEFAULT,
            store: None,
            retry: RetryPolicy::default(),
            shard: None,
            commit_retries: 0,
            pipeline: None,
            pipelines: None,
            contract: None,
            notified: Default::default(),
            change_feed: false,
        }
    }
}

/// A file at a window's address, read from the table state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedFile {
    pub path: String,
    pub size_bytes: i64,
    pub rows: Option<i64>,
    pub partition_values: Vec<(String, String)>,
    pub pipeline: Option<String>,
    pub coverage: Option<Coverage>,
}

/// The files of each address, keyed by the address's sorted `(column, value)` pairs.
pub(crate) type AddressIndex = HashMap<Vec<(String, String)>, Vec<PublishedFile>>;

/// A window of this pipeline that the table holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedWindow {
    pub window: Window,
    /// The highest coverage over the window's files.
    pub coverage: Coverage,
}

/// A Delta table that sluice publishes windows to.
pub struct WindowTable {
    /// deltalake's view of the table, at the version it was last loaded or brought to. It
    /// may be behind this writer's own commits ([`WindowTable::own_head`]): read it through
    /// [`WindowTable::delta_table`], or after [`WindowTable::catch_up`].
    pub(crate) loaded: DeltaTable,
    /// The version of this writer's latest commit, while `loaded` is behind it: commits
    /// written directly to the log leave deltalake's snapshot where it was, because bringing
    /// it forward costs a pass over every file of the table (see [`land`]).
    pub(crate) own_head: Option<u64>,
    pub(crate) url: String,
    /// Which addresses are this writer's.
    pub(crate) share: Share,
    pub(crate) file_schema: SchemaRef,
    /// `txn` versions known to be in the table: read at recovery, updated on publish.
    pub(crate) txns: HashMap<String, i64>,
    /// The files of each address (sorted `(column, value)` pairs) at the loaded version:
    /// built from the table's file list on first use, then kept current by this writer's own
    /// swaps. A publish thus never walks the whole file list, which deltalake rebuilds after
    /// every commit at a cost growing with the table (the cause of publish latency growing
    /// with the number of windows). It is exact because a commit only lands on top of the
    /// version this writer read (no blind retries); a reload or a MERGE drops it.
    pub(crate) index: Option<AddressIndex>,
    /// See [`TableOptions::commit_retries`].
    pub(crate) commit_retries: usize,
    /// A grown file schema to commit with the next commit (a metadata action in the same
    /// commit as the first rows that carry its new columns, never a commit of its own).
    pub(crate) schema_change: Option<SchemaRef>,
    /// See [`TableOptions::notified`].
    pub(crate) notified: crate::marks::DeliveredMarks,
    /// Whether this writer created the table (see [`WindowTable::remove_if_unwritten`]).
    pub(crate) created: bool,
    /// The row key its change data feed compares rows by ([`WindowTable::set_change_key`]).
    pub(crate) change_key: Vec<String>,
}

/// The top-level columns sluice writes itself in a raw table with this layout, several
/// pipelines or not, sharded or not: the address (partition) columns and the position
/// columns. No record field may be named like one.
pub fn reserved_columns(layout: AddressLayout, pipelines: bool, sharded: bool) -> Vec<String> {
    let mut columns = layout.table_columns(pipelines, sharded);
    columns.extend([SOURCE_COLUMN.to_string(), OFFSET_COLUMN.to_string()]);
    columns
}

/// A writer's share of a table: the windows' layout and size, and the pipeline and shard
/// its addresses carry (in a table of several pipelines, a sharded table). Pure: it maps
/// windows to addresses and back, and says which files are this writer's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Share {
    pub layout: AddressLayout,
    pub size: WindowSize,
    /// In a table of several pipelines, this writer's pipeline.
    pub pipeline: Option<String>,
    /// See [`TableOptions::shard`].
    pub shard: Option<Shard>,
}

impl Share {
    /// The address of `window` in this share.
    pub fn address(&self, window: Window) -> Address {
        let mut address = self.layout.address(window);
        if let Some(p) = &self.pipeline {
            address = address.in_pipeline(p);
        }
        match self.shard {
            Some(shard) => address.in_shard(shard),
            None => address,
        }
    }

    /// Whether a file with these partition values is in this share (any file of a table
    /// without pipeline and shard columns).
    pub fn owns(&self, partition_values: &[(String, String)]) -> bool {
        let pipeline_ok = self.pipeline.as_ref().is_none_or(|p| {
            partition_values
                .iter()
                .any(|(k, v)| k == PIPELINE_COLUMN && v == p)
        });
        pipeline_ok && (self.shard.is_none() || Shard::of(partition_values) == self.shard)
    }

    /// The window of a file of this share, if its partition values are one of this table's.
    pub fn window_of(&self, partition_values: &[(String, String)]) -> Option<Window> {
        if !self.owns(partition_values) {
            return None;
        }
        self.layout.window_of(self.size, partition_values).ok()
    }
}

impl std::fmt::Debug for WindowTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowTable")
            .field("url", &self.url)
            .field("share", &self.share)
            .finish()
    }
}

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
        let made_dir = location::MadeDir::before_opening(options);
        let file_schema_of = |schema: &SchemaRef| {
            if positions {
                with_position_columns(schema)
            } else {
                all_nullable(schema)
            }
        };
        let (mut table, url) = unloaded_table(options)?;
        let url_text = url.to_string();
        let delta = |source| OpenError::Delta {
            url: url_text.clone(),
            source,
        };
        let exists = location::table_exists(&table).await.map_err(delta)?;
        if !exists && !create {
            return Err(OpenError::NoTable(url_text));
        }
        if let Some(p) = &options.pipeline {
            if !valid_pipeline_name(p) {
                return Err(OpenError::PipelineName(p.clone()));
            }
        }
        // How many pipelines the table holds: recorded at creation.
        let pipelines = if exists {
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
                    url: url_text,
                    found: found.name(),
                    requested: requested.name(),
                });
            }
            if let (Some(given), Some(p)) = (&options.contract, &options.pipeline) {
                contract::check(&url_text, snapshot.metadata().configuration(), p, given)?;
            }
            found
        } else {
            options.pipelines.unwrap_or_default()
        };
        let pipeline_column = match (pipelines, &options.pipeline) {
            (Pipelines::Many, Some(p)) => Some(p.clone()),
            _ => None,
        };
        let partition_columns =
            layout.table_columns(pipelines == Pipelines::Many, options.shard.is_some());
        if let Some(schema) = record_schema {
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
        }
        let file_schema = if exists {
            let snapshot = table.snapshot().map_err(delta)?;
            let found = snapshot.metadata().partition_columns().to_vec();
            if found != partition_columns {
                return Err(OpenError::PartitionMismatch {
                    url: url_text,
                    found,
                    expected: partition_columns,
                });
            }
            if let (Pipelines::One, Some(pipeline)) = (pipelines, &options.pipeline) {
                let owner = match snapshot.metadata().configuration().get(PIPELINE_KEY) {
                    Some(owner) => Some(owner.clone()),
                    // Written before tables recorded their pipeline: the files say.
                    None => active_files(&table)
                        .await
                        .map_err(delta)?
                        .into_iter()
                        .find_map(|f| f.pipeline.filter(|p| p != pipeline)),
                };
                if let Some(owner) = owner.filter(|o| o != pipeline) {
                    return Err(OpenError::ForeignPipeline {
                        url: url_text,
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
                let ours = normalized(&file_schema_of(schema))?;
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
                        url: url_text,
                        found: signature(&table_file_schema),
                        expected: signature(&ours),
                    });
                }
            }
            table_file_schema
        } else {
            let schema = record_schema.ok_or_else(|| OpenError::NeedSchema(url_text.clone()))?;
            let file_schema = normalized(&file_schema_of(schema))?;
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
            match created {
                Ok(t) => table = t,
                Err(e) => {
                    // Another writer created it first (the writers of a sharded table start
                    // together): open theirs, checked like any existing table.
                    let (theirs, _) = unloaded_table(options)?;
                    if !location::table_exists(&theirs).await.map_err(delta)? {
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

    /// The top-level columns sluice writes itself in this table (see [`reserved_columns`]).
    pub fn reserved_columns(&self) -> Vec<String> {
        reserved_columns(
            self.share.layout,
            self.share.pipeline.is_some(),
            self.share.shard.is_some(),
        )
    }

    /// The schema of staged files: record fields, then the position columns.
    pub fn file_schema(&self) -> &SchemaRef {
        &self.file_schema
    }

    /// The record fields alone (the file schema without the position columns).
    pub fn record_schema(&self) -> SchemaRef {
        Arc::new(record_part(&self.file_schema))
    }

    /// An object store rooted at the table root, for staging.
    pub fn store(&self) -> Arc<dyn ObjectStore> {
        self.loaded.object_store()
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn layout(&self) -> AddressLayout {
        self.share.layout
    }

    /// This writer's shard, for a sharded table.
    pub fn shard(&self) -> Option<Shard> {
        self.share.shard
    }

    /// The address of `window` in this writer's share of the table (its pipeline's, in a
    /// table of several pipelines; its shard's, in a sharded table).
    pub fn address(&self, window: Window) -> Address {
        self.share.address(window)
    }

    /// The table's id (`metaData.id`, see [`table_id`]).
    pub fn id(&self) -> Result<String, DeltaTableError> {
        table_id(&self.loaded)
    }

    pub fn size(&self) -> WindowSize {
        self.share.size
    }

    /// The table's version as this writer knows it: its own latest commit, or the version it
    /// loaded.
    pub fn version(&self) -> Option<u64> {
        self.own_head.or(self.loaded.version())
    }

    /// deltalake's view of the table at [`WindowTable::version`] (brought forward first if
    /// this writer's own commits left it behind), for reading the table: SQL, file lists,
    /// the log.
    pub async fn delta_table(&mut self) -> Result<&DeltaTable, DeltaTableError> {
        self.catch_up().await?;
        Ok(&self.loaded)
    }

    /// Re-reads the table state (after a conflict, or to see other writers' commits): its
    /// files, and its columns (another writer may have added some); a schema change not
    /// committed yet is dropped (the caller grows the schema again from what it re-reads).
    pub async fn reload(&mut self) -> Result<(), DeltaTableError> {
        self.index = None;
        self.schema_change = None;
        self.own_head = None;
        self.loaded.update_state().await?;
        self.file_schema = data_file_schema(self.loaded.snapshot()?)?;
        Ok(())
    }

    /// The committed resume offset of each partition (`txn` appId `<pipeline>/<partition>`).
    pub async fn resume_offsets(
        &mut self,
        pipeline: &str,
        partitions: &[String],
    ) -> Result<HashMap<String, i64>, DeltaTableError> {
        self.txns.clear();
        self.catch_up().await?;
        let mut offsets = HashMap::new();
        if let Some(version) = self.loaded.version() {
            // One replay of the log for every partition: delta-rs's lookup replays it once per
            // app id, which a source of many files (two txns each) would pay per file.
            let store = self.loaded.object_store();
            if let Some(all) = crate::log_txns::txns_if_complete(store.as_ref(), version).await {
                for p in partitions {
                    let app_id = app_id(pipeline, p);
                    if let Some(txn) = all.get(&app_id) {
                        self.txns.insert(app_id, txn.version);
                        offsets.insert(p.clone(), txn.version);
                    }
                }
                return Ok(offsets);
            }
        }
        let snapshot = self.loaded.snapshot()?;
        let log_store = self.loaded.log_store();
        let lookups = partitions.iter().map(|p| {
            let app_id = app_id(pipeline, p);
            let log_store = log_store.clone();
            async move {
                let v = snapshot
                    .transaction_version(log_store.as_ref(), &app_id)
                    .await?;
                Ok::<_, DeltaTableError>((p.clone(), app_id, v))
            }
        });
        let found: Vec<_> = futures::stream::iter(lookups)
            .buffered(8)
            .try_collect()
            .await?;
        for (partition, app_id, version) in found {
            if let Some(v) = version {
                self.txns.insert(app_id, v);
                offsets.insert(partition, v);
            }
        }
        Ok(offsets)
    }

    /// The address index, built from the table's file list on first use.
    async fn index(&mut self) -> Result<&mut AddressIndex, DeltaTableError> {
        if self.index.is_none() {
            self.catch_up().await?;
            let mut index: AddressIndex = HashMap::new();
            if self.loaded.version().is_some() {
                for file in active_files(&self.loaded).await? {
                    index
                        .entry(file.partition_values.clone())
                        .or_default()
                        .push(file);
                }
            }
            self.index = Some(index);
        }
        Ok(self.index.get_or_insert_with(HashMap::new))
    }

    /// The files currently at `address` (from the address index, built on first use).
    pub async fn files_at(
        &mut self,
        address: &Address,
    ) -> Result<Vec<PublishedFile>, DeltaTableError> {
        Ok(self
            .index()
            .await?
            .get(&address_key(address))
            .cloned()
            .unwrap_or_default())
    }

    /// Every window that has files in this writer's share of the table, in time order;
    /// addresses that are not windows of this table's layout and size are left out.
    pub async fn windows(&mut self) -> Result<Vec<Window>, DeltaTableError> {
        let share = self.share.clone();
        self.windows_in(&share).await
    }

    /// Every window that has files of this writer's pipeline in any shard, in time order: a
    /// sharded table's windows whole, as derived tables read them ([`WindowTable::windows`]
    /// for a table without shards).
    pub async fn windows_of_every_shard(&mut self) -> Result<Vec<Window>, DeltaTableError> {
        let every_shard = Share {
            shard: None,
            ..self.share.clone()
        };
        self.windows_in(&every_shard).await
    }

    /// Every window with files in `share` of the table, in time order.
    async fn windows_in(&mut self, share: &Share) -> Result<Vec<Window>, DeltaTableError> {
        let mut windows: Vec<Window> = self
            .index()
            .await?
            .iter()
            .filter(|(_, files)| !files.is_empty())
            .filter_map(|(key, _)| share.window_of(key))
            .collect();
        windows.sort();
        windows.dedup();
        Ok(windows)
    }
}

/// The columns of the table's data files: its schema without the partition columns.
pub(crate) fn data_file_schema(
    snapshot: &deltalake::table::state::DeltaTableState,
) -> Result<SchemaRef, DeltaTableError> {
    let partition_columns = snapshot.metadata().partition_columns().to_vec();
    let data_fields: Vec<StructField> = snapshot
        .schema()
        .fields()
        .filter(|f| !partition_columns.contains(f.name()))
        .cloned()
        .collect();
    kernel_to_arrow(data_fields).map_err(|e| DeltaTableError::Generic(e.to_string()))
}

/// An address as the index keys it: `(column, value)` pairs sorted by column, as
/// [`PublishedFile::partition_values`].
pub(crate) fn address_key(address: &Address) -> Vec<(String, String)> {
    let mut key: Vec<(String, String)> = address
        .pairs()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    key.sort();
    key
}

/// The pipeline whose files are at address `key`: its pipeline column (a table of several
/// pipelines), else the table's owner ([`PIPELINE_KEY`]), else the files' pipeline tag.
pub(crate) fn pipeline_of(
    key: &[(String, String)],
    owner: Option<&str>,
    files: &[PublishedFile],
) -> Option<String> {
    key.iter()
        .find(|(k, _)| k == PIPELINE_COLUMN)
        .map(|(_, v)| v.clone())
        .or_else(|| owner.map(str::to_string))
        .or_else(|| files.iter().find_map(|f| f.pipeline.clone()))
}

/// A Delta table's id (its `metaData.id`): fixed at creation, so a table removed and created
/// again at the same location has another one. (The kernel keeps its getter internal; the
/// action serializes it.)
pub fn table_id(table: &DeltaTable) -> Result<String, DeltaTableError> {
    let metadata = serde_json::to_value(table.snapshot()?.metadata())?;
    match metadata.get("id").and_then(|id| id.as_str()) {
        Some(id) => Ok(id.to_string()),
        None => Err(DeltaTableError::MetadataError(
            "the table's metadata has no id".into(),
        )),
    }
}

pub(crate) fn app_id(pipeline: &str, partition: &str) -> String {
    format!("{pipeline}/{partition}")
}
