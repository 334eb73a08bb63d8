//! Why a window table could not be opened ([`OpenError`]) or a publication committed
//! ([`PublishError`]).

use deltalake::kernel::transaction::{CommitConflictError, TransactionError};
use deltalake::DeltaTableError;

use crate::table::contract::ContractDifference;
use crate::table::options::ReservedKind;

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

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("publishing window {window} conflicted with a commit of another writer ({source}): another writer is publishing to this table (a second run of the pipeline?); the writer re-reads the table before it goes on")]
    Conflict {
        window: String,
        source: CommitConflictError,
    },
    #[error("publishing window {window}: another writer committed to the table since this writer read version {read_version} (a second run of the pipeline?); the writer re-reads the table before it goes on")]
    TableMoved { window: String, read_version: u64 },
    #[error("refusing to move txn {app_id} back from {committed} to {proposed}: the resume position must never go backwards")]
    TxnRegression {
        app_id: String,
        committed: i64,
        proposed: i64,
    },
    #[error("invalid publication of window {window}: {reason}")]
    Invalid { window: String, reason: String },
    #[error("Delta commit of window {window} failed: {source}")]
    Delta {
        window: String,
        source: DeltaTableError,
    },
}

impl PublishError {
    /// A lost commit race: another writer (or this one's earlier attempt) moved the table
    /// first; re-read it and decide again.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            PublishError::Conflict { .. } | PublishError::TableMoved { .. }
        )
    }

    /// Whether re-reading the table may get past this error: conflicts, and Delta failures
    /// (store failures that outlasted their retries).
    pub fn is_resumable(&self) -> bool {
        self.is_conflict() || matches!(self, PublishError::Delta { .. })
    }
}

/// What a failed commit means for a writer that never retries blindly: a concurrent commit
/// conflicting with it, or a table that moved past the version it read; anything else is a
/// Delta error.
pub(crate) fn commit_error(window: String, read_version: u64, e: DeltaTableError) -> PublishError {
    match e {
        DeltaTableError::Transaction {
            source: TransactionError::CommitConflict(source),
        } => PublishError::Conflict { window, source },
        DeltaTableError::Transaction {
            source: TransactionError::MaxCommitAttempts(_),
        }
        | DeltaTableError::VersionAlreadyExists(_) => PublishError::TableMoved {
            window,
            read_version,
        },
        source => PublishError::Delta { window, source },
    }
}
