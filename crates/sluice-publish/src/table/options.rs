//! What a window table is opened with ([`TableOptions`]), the columns and properties sluice
//! gives every table it creates, and the names sluice writes in its log.

use std::collections::HashMap;
use std::sync::Arc;

use object_store::ObjectStore;
use sluice_window::{AddressLayout, Shard};

use crate::table::contract;
use sluice_store::RetryPolicy;

/// Column holding each row's source partition (for NDJSON: the file name).
pub const SOURCE_COLUMN: &str = "_sluice_source";
/// Column holding each row's source offset (for NDJSON: the byte offset of its line).
pub const OFFSET_COLUMN: &str = "_sluice_offset";

/// Which column sluice adds a record field collides with ([`OpenError::ReservedColumn`](crate::OpenError::ReservedColumn)).
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
    /// The pipeline's options that decide what the table holds (see [`Contract`](crate::Contract)): recorded
    /// in a new table, checked against an existing one's ([`OpenError::ContractMismatch`](crate::OpenError::ContractMismatch)).
    /// `None`: not checked (readers, tests of one layer).
    pub contract: Option<contract::Contract>,
    /// How far each notify target of the pipeline has been delivered: every commit of the
    /// writer records them (`txn` appIds `<pipeline>/.notify/<target>`), so a notifier
    /// running beside the writer never commits to the table itself (see [`crate::marks`]).
    pub notified: crate::marks::DeliveredMarks,
    /// Keep a change data feed (`--change-feed`): a new table is created with
    /// `delta.enableChangeDataFeed`, an existing one gets it by a metadata commit
    /// ([`WindowTable::enable_change_feed`](crate::WindowTable::enable_change_feed)). False leaves a table as it is.
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

/// The top-level columns sluice writes itself in a raw table with this layout, several
/// pipelines or not, sharded or not: the address (partition) columns and the position
/// columns. No record field may be named like one.
pub fn reserved_columns(layout: AddressLayout, pipelines: bool, sharded: bool) -> Vec<String> {
    let mut columns = layout.table_columns(pipelines, sharded);
    columns.extend([SOURCE_COLUMN.to_string(), OFFSET_COLUMN.to_string()]);
    columns
}

/// The `txn` appId of `partition` of `pipeline`.
pub(crate) fn app_id(pipeline: &str, partition: &str) -> String {
    format!("{pipeline}/{partition}")
}
