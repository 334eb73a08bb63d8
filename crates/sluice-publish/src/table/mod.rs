//! The window table: a Delta table sluice publishes windows to.
//!
//! [`WindowTable`] (`window_table`) is what a writer holds of the table; each job it does is
//! a module of its own, an `impl WindowTable`: `open` (open or create it, with its address
//! columns and properties), `state` (read back its files, windows and resume offsets),
//! `contract_in_table` (check and record the run's contract), `commit` (a window's
//! publication, one commit), `land` (putting a commit in the log at a cost that does not grow
//! with the table), `merge` (MERGE publications), `schema` (growing its columns in the commit
//! of the first rows that need them), `change_feed` (the change data feed of a swap) and
//! `location` (where it lives and how its store is reached); `files` reads the files of a
//! table's log as sluice tags them, `key_ranges` the key ranges of a window's files. Below them are the leaves they
//! share: `options` ([`TableOptions`], the names sluice writes), `error`, `contract` (the
//! contract's terms). This module only names them: its files form no circle, and the table
//! uses only leaf modules of the crate (local listing, retries, tags, notify marks).

pub(crate) mod change_feed;
pub(crate) mod commit;
pub(crate) mod contract;
pub(crate) mod contract_in_table;
pub(crate) mod error;
mod files;
pub(crate) mod key_ranges;
pub(crate) mod land;
pub(crate) mod location;
pub(crate) mod merge;
mod open;
pub(crate) mod options;
pub(crate) mod schema;
mod state;
pub(crate) mod window_table;

pub use error::{OpenError, PublishError};
pub use files::active_files;
pub(crate) use files::file_of;
pub(crate) use location::open_table_if_exists;
pub use location::{
    local_path, location_url, open_table, open_table_with, read_through_table_store,
};
pub(crate) use options::app_id;
pub use options::{
    reserved_columns, Pipelines, ReservedKind, TableOptions, CHECKPOINT_INTERVAL_DEFAULT,
    OFFSET_COLUMN, PIPELINES_KEY, PIPELINE_KEY, SOURCE_COLUMN,
};
pub(crate) use state::data_file_schema;
pub(crate) use window_table::{address_key, pipeline_of};
pub use window_table::{table_id, Coverage, PublishedFile, PublishedWindow, WindowTable};
