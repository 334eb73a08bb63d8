//! The window table itself: what a writer holds of a Delta table it publishes windows to
//! ([`WindowTable`]), the files at an address, and the share of the table that is a writer's.
//! What it does is in the modules beside this one, each an `impl WindowTable` of one job.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::arrow::datatypes::SchemaRef;
use deltalake::{DeltaTable, DeltaTableError};
use object_store::ObjectStore;
use sluice_window::{Address, AddressLayout, Shard, Window, WindowSize, PIPELINE_COLUMN};

use crate::table::options::reserved_columns;

/// The source position below which a publication handled every event of its window.
///
/// Ordered as the source is read: by partition name, then offset. (For NDJSON the partition
/// is the file, and files are read in name order.)
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Coverage {
    pub partition: String,
    pub offset: i64,
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
/// pipelines), else the table's owner ([`PIPELINE_KEY`](crate::PIPELINE_KEY)), else the files' pipeline tag.
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
