//! The one restart rule in every mode (a run, a followed run, a backfill, a derive of a range,
//! a derive following the raw table): a store outage in the middle of the work is resumed
//! from the re-read tables and the mode ends with the clean run's tables; a store that never
//! comes back ends the mode after `restarts_max` restarts in a row, with the limit's message.
//! (A Kafka run's mode is in the root package's `tests/kafka_end.rs`, beside the broker.)
//!
//! Each mode is first run on a counting store, to place the outage at a write three quarters
//! of the way to its last one.

use std::path::Path;
use std::sync::Arc;

use sluice_faults::{FaultPlan, FaultStore};

use crate::harness::{
    derived_from_raw, derived_rows, local_root, rows_at, DeriveMode, Policy, Run, Script,
};

/// What ends every mode that gave up at the limit of these tests.
const LIMIT: &str =
    "; gave up after 2 restarts in a row from the re-read tables (--restarts-max 2)";

/// A mode of the pipeline, run once over `dir` through `store`.
#[derive(Debug, Clone, Copy)]
enum Mode {
    Run,
    Follow,
    Backfill,
    Derive(DeriveMode),
}

impl Mode {
    fn settings(self) -> Run {
        Run {
            restarts_max: 2,
            follow: matches!(self, Mode::Follow),
            ..Run::new(false)
        }
    }

    /// Prepares `dir` as the mode finds it: a derive reads a raw table a clean run wrote.
    async fn prepare(self, script: &Script, dir: &Path) {
        if let Mode::Derive(_) = self {
            Run::new(false)
                .run(&script.dir, dir, local_root(), "raw")
                .await
                .unwrap();
        }
    }

    /// Runs the mode; `Ok` with the restarts it made, where it says.
    async fn run(
        self,
        script: &Script,
        dir: &Path,
        store: Arc<dyn object_store::ObjectStore>,
        attempt: &str,
    ) -> Result<Option<u64>, String> {
        let run = self.settings();
        match self {
            Mode::Run | Mode::Follow => run
                .run(&script.dir, dir, store, attempt)
                .await
                .map(|s| Some(s.restarts)),
            Mode::Backfill => run
                .backfill(&script.dir, dir, store, attempt)
                .await
                .map(|s| Some(s.restarts)),
            Mode::Derive(how) => run.derive(dir, store, how, attempt).await.map(|()| None),
        }
    }

    /// Checks the tables the mode leaves equal those of one clean run.
    async fn check_clean(self, script: &Script, dir: &Path) {
        match self {
            Mode::Derive(_) => {
                assert_eq!(
                    derived_rows(dir, "sum").await,
                    derived_from_raw(dir, "sum").await,
                    "{self:?}"
                );
            }
            _ => {
                let (rows, _) = rows_at(dir, None).await;
                assert_eq!(
                    rows,
                    script.expected_final(false, Policy::Rewrite),
                    "{self:?}"
                );
            }
        }
    }
}

/// The mode over an outage of two operations three quarters of the way in, then over a store
/// that fails from there on.
async fn outage_and_limit(mode: Mode) {
    let tmp = tempfile::tempdir().unwrap();
    let script = Script::write(tmp.path());
    let probe = tmp.path().join("probe");
    mode.prepare(&script, &probe).await;
    let counting = FaultStore::new(local_root(), FaultPlan::PassThrough);
    mode.run(&script, &probe, Arc::new(counting.clone()), "p")
        .await
        .unwrap_or_else(|e| panic!("{mode:?} on a working store: {e}"));
    // At its first write from three quarters of the way to its last one (a derive that
    // follows the raw table only reads once it caught up): in its work, past its opening.
    let writes: Vec<u64> = counting
        .log()
        .iter()
        .filter(|r| ["put", "put_multipart", "delete", "copy", "rename"].contains(&r.kind))
        .map(|r| r.n)
        .collect();
    let last_write = *writes.last().expect("the mode writes");
    let from = *writes
        .iter()
        .find(|n| **n >= last_write * 3 / 4)
        .expect("the last write is one");

    let resumed = tmp.path().join("resumed");
    mode.prepare(&script, &resumed).await;
    let outage = FaultStore::new(local_root(), FaultPlan::Outage { from, ops: 2 });
    let restarts = mode
        .run(&script, &resumed, Arc::new(outage.clone()), "o")
        .await
        .unwrap_or_else(|e| panic!("{mode:?} resumes after an outage of 2 operations: {e}"));
    assert_eq!(outage.faults(), 2, "{mode:?}: the outage was met");
    if let Some(restarts) = restarts {
        assert!(restarts >= 1, "{mode:?} restarted from the re-read tables");
    }
    mode.check_clean(&script, &resumed).await;

    let failed = tmp.path().join("failed");
    mode.prepare(&script, &failed).await;
    let gone = FaultStore::new(local_root(), FaultPlan::CrashAfter { ops: from });
    let error = mode
        .run(&script, &failed, Arc::new(gone), "g")
        .await
        .expect_err("a store that never comes back ends the mode");
    assert!(
        error.contains("injected fault: operation"),
        "{mode:?}: {error}"
    );
    assert!(error.ends_with(LIMIT), "{mode:?}: {error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_resumes_after_an_outage_and_ends_at_its_restart_limit() {
    outage_and_limit(Mode::Run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_run_resumes_after_an_outage_and_ends_at_its_restart_limit() {
    outage_and_limit(Mode::Follow).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_resumes_after_an_outage_and_ends_at_its_restart_limit() {
    outage_and_limit(Mode::Backfill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_derive_of_a_range_resumes_after_an_outage_and_ends_at_its_restart_limit() {
    outage_and_limit(Mode::Derive(DeriveMode::Range)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_derive_following_the_raw_table_resumes_after_an_outage_and_ends_at_its_restart_limit() {
    outage_and_limit(Mode::Derive(DeriveMode::Follow)).await;
}
