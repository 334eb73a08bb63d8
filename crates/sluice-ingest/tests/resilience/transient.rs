//! Seeded transient faults: 10% of store operations fail (half of the failing writes land
//! first); bounded, jittered retries and resuming from the table give the clean run's table.
//! When retries run out, the run stops with a clear error and a plain restart finishes.
//!
//! A create-only put that landed before it failed is a success once its retry reads back its
//! own bytes (`RetryStore`); before that, each one cost a resume from the table, and eight in
//! a row without a commit (about one CI run in five) ended the run.

use std::sync::Arc;

use sluice_faults::{FaultPlan, FaultStore};
use sluice_publish::RetryPolicy;

use crate::harness::{check_every_version, dead_letters, local_root, rows_at, Policy, Run, Script};

/// Processes a seed may start (each stopped by a fault that outlasted its retries while it
/// opened the tables, or by twenty resumes in a row without a commit) before one finishes.
const PROCESSES_MAX: usize = 10;

/// Seeds from `SLUICE_FAULT_SEED` (one seed, to reproduce) or a fixed list.
fn seeds() -> Vec<u64> {
    match std::env::var("SLUICE_FAULT_SEED") {
        Ok(s) => vec![s.parse().expect("SLUICE_FAULT_SEED is a number")],
        Err(_) => vec![1, 2, 3, 4, 5, 6],
    }
}

async fn ten_percent(keyed: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let script = Script::write(tmp.path());
    let expected = script.expected_final(keyed, Policy::Rewrite);
    let mut resumes = 0;
    for seed in seeds() {
        let dir = tmp.path().join(format!("seed-{seed}"));
        let store = FaultStore::new(
            local_root(),
            FaultPlan::Transient {
                fail_per_mille: 100,
                seed,
                latency_ms_max: 2,
            },
        );
        // Two attempts: one operation in a hundred exhausts them, so every seed also resumes
        // from the table a few times, in the run or (when opening the tables fails) as a new
        // process, as a supervisor would start it.
        let run = Run {
            retry: RetryPolicy {
                attempts_max: 2,
                backoff_ms_base: 1,
                backoff_ms_max: 8,
                jitter_seed: seed,
            },
            restarts_max: 20,
            ..Run::new(keyed)
        };
        let mut processes = Vec::new();
        let summary = loop {
            let attempt = format!("a{}", processes.len());
            match run
                .run(&script.dir, &dir, Arc::new(store.clone()), &attempt)
                .await
            {
                Ok(summary) => break summary,
                Err(e) if processes.len() < PROCESSES_MAX => processes.push(e),
                Err(e) => panic!(
                    "seed {seed} (SLUICE_FAULT_SEED={seed} to reproduce): {e}; \
                     earlier processes: {processes:?}"
                ),
            }
        };
        for e in &processes {
            assert!(
                e.contains("injected fault: operation"),
                "seed {seed}: a process stopped by an injected fault: {e}"
            );
        }
        let (rows, _) = rows_at(&dir, None).await;
        assert_eq!(
            rows, expected,
            "seed {seed} (SLUICE_FAULT_SEED={seed} to reproduce)"
        );
        check_every_version(&dir, &script, keyed, Policy::Rewrite)
            .await
            .unwrap_or_else(|e| panic!("seed {seed} (SLUICE_FAULT_SEED={seed} to reproduce): {e}"));
        assert_eq!(
            dead_letters(&dir).await,
            script.expected_dead_letters(Policy::Rewrite),
            "seed {seed}"
        );
        println!(
            "seed {seed}: {} of {} operations faulted; {} resumes from the table in the run, \
             {} processes stopped before it",
            store.faults(),
            store.ops(),
            summary.restarts,
            processes.len()
        );
        assert!(store.faults() > 0, "seed {seed}: faults were injected");
        resumes += summary.restarts as usize + processes.len();
    }
    // One failing operation in a hundred over ~200 operations a seed: no resume in six
    // seeds has odds of about 1 in 100,000.
    assert!(
        resumes > 0 || seeds().len() == 1,
        "runs resumed from the table"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_percent_failing_operations_leave_the_clean_table_keyed_by_position() {
    ten_percent(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_percent_failing_operations_leave_the_clean_table_keyed_by_event_id() {
    ten_percent(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_retries_stop_with_a_clear_error_and_a_restart_finishes() {
    let tmp = tempfile::tempdir().unwrap();
    let script = Script::write(tmp.path());
    let dir = tmp.path().join("table");
    // No retries and no resuming: the first fault ends the process.
    let fragile = Run {
        restarts_max: 0,
        ..Run::new(false)
    };
    let mut errors = Vec::new();
    let mut finished = false;
    // With one operation in ten failing and no retries, a process survives the ~25 operations
    // of opening the tables and reading their state about one time in ten; the processes
    // that also publish make the progress. (Seeds 0..300 once sufficed with 210 processes; a
    // few more operations per recovery, one more txn lookup, took it past 300.)
    for seed in 0..2000u64 {
        let store = FaultStore::new(
            local_root(),
            FaultPlan::Transient {
                fail_per_mille: 100,
                seed,
                latency_ms_max: 0,
            },
        );
        match fragile
            .run(&script.dir, &dir, Arc::new(store), &format!("p{seed}"))
            .await
        {
            Ok(_) => {
                finished = true;
                break;
            }
            Err(e) => errors.push(e),
        }
    }
    assert!(
        finished,
        "restarting finishes the input; errors: {errors:?}"
    );
    assert!(!errors.is_empty(), "some process died of a fault");
    for e in &errors {
        assert!(
            e.contains("injected fault: operation"),
            "the error names the failed operation: {e}"
        );
    }
    // A fault the run could have resumed from says that the limit, not the fault, ended it.
    assert!(
        errors.iter().any(|e| e.contains(
            "; gave up after 0 restarts in a row from the re-read tables (--restarts-max 0)"
        )),
        "{errors:?}"
    );
    println!(
        "{} processes stopped by faults before one finished; first error: {}",
        errors.len(),
        errors[0]
    );
    let (rows, _) = rows_at(&dir, None).await;
    assert_eq!(rows, script.expected_final(false, Policy::Rewrite));
    check_every_version(&dir, &script, false, Policy::Rewrite)
        .await
        .unwrap();
    assert_eq!(
        dead_letters(&dir).await,
        script.expected_dead_letters(Policy::Rewrite)
    );
}

/// The one restart rule's limit: a store that fails every operation from three quarters of
/// a clean run on (a process whose disk went away) is restarted `restarts_max` times in a
/// row, each a re-read of the table that fails too, and the run ends naming the limit and
/// the fault; a process on a working store then finishes the clean run's table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_keeps_failing_ends_the_run_at_its_restart_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let script = Script::write(tmp.path());
    let run = Run {
        restarts_max: 2,
        ..Run::new(false)
    };
    let counting = FaultStore::new(local_root(), FaultPlan::PassThrough);
    run.run(
        &script.dir,
        &tmp.path().join("probe"),
        Arc::new(counting.clone()),
        "k",
    )
    .await
    .unwrap();
    let dir = tmp.path().join("table");
    let failing = FaultStore::new(
        local_root(),
        FaultPlan::CrashAfter {
            ops: counting.ops() * 3 / 4,
        },
    );
    let error = run
        .run(&script.dir, &dir, Arc::new(failing), "a")
        .await
        .unwrap_err();
    assert!(error.contains("injected fault: operation"), "{error}");
    assert!(
        error.ends_with(
            "; gave up after 2 restarts in a row from the re-read tables (--restarts-max 2)"
        ),
        "{error}"
    );
    run.run(&script.dir, &dir, local_root(), "b").await.unwrap();
    let (rows, _) = rows_at(&dir, None).await;
    assert_eq!(rows, script.expected_final(false, Policy::Rewrite));
}
