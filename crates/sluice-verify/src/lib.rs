//! sluice-verify: checks a table against what sluice promises, reading its log and files and
//! writing nothing.
//!
//! - **Files** ([`files`]): every file the table references is in the store, as long as its
//!   `add` action says, with the rows its statistics say.
//! - **Windows**: each window holds the rows its last publication recorded in the commit's
//!   metadata (a swap, a rewrite, a compaction; a MERGE records what it offered, not the
//!   window's rows, and is not compared).
//! - **Rows** ([`rows`], by the contract each pipeline recorded, [`promise`]): no row key twice
//!   in a window (swap, merge per window), in the table (a mirror), or at one start (a
//!   history); a history's versions do not overlap; no row of a key whose tombstone has a
//!   higher sequence.
//! - **Offsets** ([`log`]): every source partition's recorded offset only moves forward
//!   through the retained log.
//!
//! Each [`Finding`] names the version that made it: the commit that added the file, wrote
//! the duplicate, or last published the window. `sluice verify` prints them and exits 4 when
//! there is any.

mod files;
mod finding;
mod log;
mod promise;
mod rows;

use deltalake::datafusion::prelude::SessionContext;
use deltalake::{DeltaTable, DeltaTableError};
use futures::future::BoxFuture;
use serde::Serialize;

pub use finding::{Check, Finding};

/// Row findings shown per check by default; the rest are counted in one more finding.
pub const EXAMPLES_PER_CHECK_DEFAULT: usize = 20;

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("reading the table failed: {0}")]
    Delta(#[from] DeltaTableError),
    #[error("listing the log failed: {0}")]
    ListLog(object_store::Error),
    #[error("reading commit {version} failed: {source}")]
    Log {
        version: u64,
        source: object_store::Error,
    },
    #[error("reading {path} failed: {source}")]
    Store {
        path: String,
        source: object_store::Error,
    },
    #[error("reading a file's footer failed: {0}")]
    Footer(#[from] sluice_stage::StageError),
    #[error("querying the rows failed: {0}")]
    Query(#[from] deltalake::datafusion::error::DataFusionError),
    #[error("the tombstone table does not fit the contract: {0}")]
    Tombstones(String),
}

/// What `verify` read and found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The table version verified.
    pub version: u64,
    /// The oldest commit the log still holds (older ones survive in a checkpoint only).
    pub log_from_version: Option<u64>,
    pub files: usize,
    /// Windows whose rows were compared with their last publication's count.
    pub windows_compared: usize,
    /// The pipelines whose rows were checked against their contract.
    pub pipelines_checked: Vec<String>,
    /// What could not be checked, and why.
    pub skipped: Vec<String>,
    pub findings: Vec<Finding>,
}

impl Report {
    /// Whether the table keeps every promise checked.
    pub fn holds(&self) -> bool {
        self.findings.is_empty()
    }
}

/// Verifies `table` as loaded (its version), an operation to `.await`.
///
/// ```no_run
/// # async fn f(table: deltalake::DeltaTable) -> Result<(), sluice_verify::VerifyError> {
/// let report = sluice_verify::Verify::new(table).await?;
/// for finding in &report.findings {
///     println!("{finding}");
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Verify {
    table: DeltaTable,
    tombstones: Option<DeltaTable>,
    examples_max: usize,
}

impl Verify {
    pub fn new(table: DeltaTable) -> Self {
        Verify {
            table,
            tombstones: None,
            examples_max: EXAMPLES_PER_CHECK_DEFAULT,
        }
    }

    /// The tombstone table of a mirror or history with deletes (`--tombstones`).
    pub fn with_tombstones(mut self, tombstones: Option<DeltaTable>) -> Self {
        self.tombstones = tombstones;
        self
    }

    /// Row findings shown per check (at least 1); the rest are counted.
    pub fn with_examples_max(mut self, examples_max: usize) -> Self {
        self.examples_max = examples_max.max(1);
        self
    }

    async fn run(self) -> Result<Report, VerifyError> {
        let mut skipped = Vec::new();
        let snapshot = self.table.snapshot()?;
        let version = snapshot.version();
        let partition_columns = snapshot.metadata().partition_columns().to_vec();
        let configuration = snapshot.metadata().configuration().clone();
        let schema = snapshot.snapshot().arrow_schema();
        let store = self.table.object_store();
        let log = log::read_log(store.as_ref(), version, &partition_columns).await?;
        let files = files::table_files(&self.table, &partition_columns).await?;
        let (mut findings, readable) = files::check_files(store, &files, &log).await?;
        if readable.is_some() {
            skipped.push(
                "the rows of missing or unreadable files are not checked (see their findings)"
                    .into(),
            );
        }
        let (windows, windows_compared) = files::check_windows(&files, &log);
        findings.extend(windows);
        findings.extend(log.regressions.iter().cloned());
        let (promises, why) = promise::promises(&configuration, &schema);
        skipped.extend(why);
        let scan = rows::RowScan {
            ctx: SessionContext::new(),
            table: &self.table,
            schema,
            partition_columns,
            log: &log,
            readable,
            examples_max: self.examples_max,
        };
        for promise in &promises {
            if promise.deletes && self.tombstones.is_none() {
                skipped.push(format!(
                    "pipeline {}: no tombstone table, so rows are not checked against deletes",
                    promise.pipeline
                ));
            }
            findings.extend(scan.check(promise, self.tombstones.as_ref()).await?);
        }
        findings.sort_by_key(|f| (f.check, f.version));
        Ok(Report {
            version,
            log_from_version: log.first,
            files: files.len(),
            windows_compared,
            pipelines_checked: promises.iter().map(|p| p.pipeline.clone()).collect(),
            skipped,
            findings,
        })
    }
}

impl std::future::IntoFuture for Verify {
    type Output = Result<Report, VerifyError>;
    type IntoFuture = BoxFuture<'static, Self::Output>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}
