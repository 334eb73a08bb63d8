//! What a check found: one broken promise, named by the check that found it and the table
//! version that made it.

use serde::Serialize;

/// The promises `sluice verify` checks, one per kind of finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// A file the table references is not in the store.
    MissingFile,
    /// A file in the store is not a Parquet file sluice can read the footer of.
    UnreadableFile,
    /// A file's size in the store differs from the size its `add` action records.
    FileSize,
    /// A file holds another number of rows than its statistics say.
    FileRows,
    /// A window holds another number of rows than its last publication recorded.
    WindowRows,
    /// A row key appears more than once where the table's mode promises one row per key.
    DuplicateKey,
    /// Two versions of a history's key overlap, or a version ends before it starts.
    HistoryOverlap,
    /// A key's row is in the table while a tombstone with a higher sequence deleted it.
    TombstoneAboveRow,
    /// A source partition's recorded offset moved backwards.
    OffsetRegression,
}

impl Check {
    pub fn name(self) -> &'static str {
        match self {
            Check::MissingFile => "missing_file",
            Check::UnreadableFile => "unreadable_file",
            Check::FileSize => "file_size",
            Check::FileRows => "file_rows",
            Check::WindowRows => "window_rows",
            Check::DuplicateKey => "duplicate_key",
            Check::HistoryOverlap => "history_overlap",
            Check::TombstoneAboveRow => "tombstone_above_row",
            Check::OffsetRegression => "offset_regression",
        }
    }
}

/// One broken promise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub check: Check,
    /// The table version that made it (added the file, published the window, wrote the
    /// duplicate), when the retained log holds it.
    pub version: Option<u64>,
    /// For people: what is wrong, where, with the values involved.
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.version {
            Some(v) => write!(f, "{} (version {v}): {}", self.check.name(), self.message),
            None => write!(f, "{}: {}", self.check.name(), self.message),
        }
    }
}
