//! Zombie writers (E3): two processes run the same pipeline over the same input against the
//! same table, their commit attempts interleaved by a turnstile. Each commit by one makes the
//! other's next commit fail the Delta check; the loser re-reads the table and resumes, and
//! the table ends as one clean run.

use std::sync::Arc;

use sluice_faults::{FaultStore, Turnstile};

use crate::harness::{check_every_version, dead_letters, local_root, rows_at, Policy, Run, Script};

async fn zombies(keyed: bool, policy: Policy) {
    let tmp = tempfile::tempdir().unwrap();
    let script = Script::write(tmp.path());
    let dir = tmp.path().join("table");
    let run = Run {
        restarts_max: 20,
        policy,
        ..Run::new(keyed)
    };
    // Both processes find the tables created (by an earlier run).
    run.create_tables(&dir).await;
    let turns = Turnstile::new(2);
    let writer = |w: usize| {
        let store = FaultStore::with_turnstile(local_root(), turns.clone(), w);
        let turns = turns.clone();
        let run = &run;
        let script = &script;
        let dir = dir.clone();
        async move {
            let result = run
                .run(&script.dir, &dir, Arc::new(store), &format!("w{w}"))
                .await;
            turns.finish(w);
            result
        }
    };
    let (zero, one) = (writer(0), writer(1));
    let (a, b) = tokio::join!(zero, one);
    let (a, b) = (a.expect("writer 0 finishes"), b.expect("writer 1 finishes"));
    let attempts = turns.attempts();
    let landed: Vec<usize> = attempts
        .iter()
        .filter(|(_, ok)| *ok)
        .map(|(w, _)| *w)
        .collect();
    println!(
        "zombies ({}, {policy:?}): commit attempts in turn order {attempts:?}; resumes from the table: writer 0 {}, writer 1 {}",
        if keyed { "keyed" } else { "by position" },
        a.restarts,
        b.restarts
    );
    assert!(
        landed.contains(&0) && landed.contains(&1),
        "both writers committed some windows: {attempts:?}"
    );
    assert!(
        a.restarts + b.restarts > 0,
        "a stale writer was rejected and re-read the table"
    );
    let (rows, _) = rows_at(&dir, None).await;
    assert_eq!(rows, script.expected_final(keyed, policy));
    check_every_version(&dir, &script, keyed, policy)
        .await
        .unwrap();
    assert_eq!(
        dead_letters(&dir).await,
        script.expected_dead_letters(policy)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_writers_interleaved_end_as_one_clean_run_keyed_by_position() {
    zombies(false, Policy::Rewrite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_writers_interleaved_end_as_one_clean_run_keyed_by_event_id() {
    zombies(true, Policy::Rewrite).await;
}

/// Merge mode: a MERGE that read a version another writer moved past fails its commit; the
/// writer re-reads the table and merges again, and the winners stay the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_writers_interleaved_end_as_one_clean_run_upserted_in_merge_mode() {
    zombies(true, Policy::Upsert).await;
}
