//! Publishing: the only crate of sluice that touches the Delta log.
//!
//! One sealed window becomes one Delta commit ([`WindowTable::publish`]):
//! - `remove` every file at the window's address (swap) — or none, when late rows are added
//!   to a window whose rows are keyed by source position and so cannot collide;
//! - `add` the staged files, each tagged with the pipeline and the window's *coverage* (the
//!   source position below which every event of the window was handled);
//! - one `txn` per source partition whose resume position advanced
//!   (appId `<pipeline>/<partition>`, version = resume offset);
//! - the window's address as the commit's read predicate, so a concurrent change to the same
//!   window conflicts instead of being overwritten;
//! - commit metadata naming the window, its row count and its source position range;
//! - on a table with a change data feed, when the commit replaces rows, a `cdc` file per
//!   window with the rows that really changed (`table::change_feed`).
//!
//! Recovery reads the same state back ([`WindowTable::resume_offsets`],
//! [`WindowTable::published_windows`]): `txn` actions and `add` tags both live in the table
//! state, so they survive checkpoints and log cleanup (E4).
//!
//! Storage guarantee relied on: the log store's commit is a put-if-absent of
//! `_delta_log/<version>.json` (local file systems, S3 with conditional put, GCS, Azure), so
//! two writers can never both create one version.
//!
//! Failure model: the writer reaches its store through `sluice_store::RetryStore` (bounded, jittered
//! retries of transient failures). A table with one writer per pipeline commits once against
//! the snapshot the writer read: if the table moved (another writer, or this writer's own
//! earlier attempt that landed but reported failure), [`WindowTable::publish`] returns
//! [`PublishError::TableMoved`] instead of re-checking and retrying, and the caller re-reads
//! the table, where the answer is. The writers of a sharded table (one per Kafka partition)
//! race on disjoint addresses all the time: their commits go through Delta's conflict
//! checker ([`TableOptions::commit_retries`]), which lets a commit land over others that
//! touched other shards and other `txn` appIds, and reports a real conflict as one.

mod compact;
mod derived;
mod dlq;
mod expire;
mod gc;
mod listing;
mod log_txns;
mod marks;
mod notify;
mod overlay;
mod status;
mod table;
mod tombstones;
mod vacuum;

pub use compact::{
    compact, CompactError, CompactReport, CompactRule, Compacted, TARGET_FILE_BYTES_DEFAULT,
};
pub use derived::{DerivedPublication, DerivedTable, RAW_VERSION_TXN};
pub use dlq::{
    dead_letter_schema, DeadLetter, DeadLetterError, DeadLetterExpiryRule, DeadLetterOwner,
    DeadLetterTable, DeadLettersExpired, MeantFor, REPLAYED_REASON, TABLE_ID_COLUMN,
};
pub use expire::{
    expire, ExpireError, ExpireReport, ExpireRule, Expired, EXPIRE_WINDOWS_PER_COMMIT_MAX,
};
pub use gc::{delete_orphans, find_orphans, GcError, Orphan};
pub use listing::{
    addresses_changed, list_windows, published_windows_of, schema_history, shard_sealed_txn,
    ListError, SchemaStep, ShardSeal, WindowListing,
};
pub use notify::{
    notified_through, notify_txn, record_notified, valid_target_name, ChangeFeed, ChangeReason,
    DeliveredMarks, NotifyLogError, WindowChange,
};
pub use overlay::{write_to_memory, Overlay};
/// How a table's store operations are retried ([`TableOptions::retry`]).
pub use sluice_store::RetryPolicy;
pub use status::{
    commit_history, log_size, read_txns, status, CheckpointStatus, LastCommit, LogStatus,
    PipelineStatus, StatusError, TableStatus, Txn, WindowFiles,
};
pub use table::commit::{Publication, Published, Replace, STATE_TXN_PREFIX};
pub use table::contract::{
    contract_key, terms, Contract, ContractDifference, CHANGEABLE, CONTRACT_KEY_PREFIX,
};
pub use table::contract_in_table::recorded_contract;
pub use table::merge::{
    field_expr, MergeAction, MergePublication, MergeScope, HISTORY_END_AT, HISTORY_START_AT,
};
pub use table::{
    active_files, local_path, location_url, open_table, open_table_with, read_through_table_store,
    reserved_columns, table_id, Coverage, OpenError, Pipelines, PublishError, PublishedFile,
    PublishedWindow, ReservedKind, TableOptions, WindowTable, CHECKPOINT_INTERVAL_DEFAULT,
    OFFSET_COLUMN, PIPELINES_KEY, PIPELINE_KEY, SOURCE_COLUMN,
};
pub use tombstones::{
    expire_tombstones, TombstoneError, TombstoneTable, Tombstones, DELETED_AT_COLUMN,
    TOMBSTONE_PIPELINE_COLUMN,
};
pub use vacuum::{vacuum, VacuumError, Vacuumed};

/// Tag keys on `add` actions written by sluice.
pub mod tags {
    /// The pipeline that published the file.
    pub const PIPELINE: &str = "sluice.pipeline";
    /// Source partition of the window's coverage position.
    pub const COVERAGE_PARTITION: &str = "sluice.coverage.partition";
    /// Offset of the window's coverage position.
    pub const COVERAGE_OFFSET: &str = "sluice.coverage.offset";
}

/// The `txn` partition names that store a file source's read order: `.rank/<file name>`,
/// whose version is the file's rank (`sluice_source`'s arrival order). A leading dot: no
/// source file is hidden, so no source partition has such a name.
pub const RANK_TXN_PREFIX: &str = ".rank/";

/// The `txn` partition names that store the stored size a file source's compressed or
/// Parquet file had when it was read to its end: `.end/<file name>` (its offset then says
/// only "at its end"; a later run refuses the file if its size changed).
pub const END_TXN_PREFIX: &str = ".end/";

/// The key under which sluice's commit metadata appears in `commitInfo`.
pub const COMMIT_INFO_KEY: &str = "sluice";

#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;
