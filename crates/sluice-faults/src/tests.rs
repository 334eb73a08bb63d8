use std::sync::Arc;

use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions};

use crate::{FaultPlan, FaultStore, Outcome, Turnstile};

fn path(s: &str) -> Path {
    Path::from(s)
}

#[tokio::test]
async fn crash_after_n_runs_n_operations_and_the_nth_write_lands_but_fails() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let store = FaultStore::new(inner.clone(), FaultPlan::CrashAfter { ops: 2 });
    store.put(&path("a"), "1".into()).await.expect("op 1 runs");
    let err = store
        .put(&path("b"), "2".into())
        .await
        .expect_err("op 2 reports failure");
    assert!(err.to_string().contains("operation 2"), "{err}");
    assert!(inner.get(&path("b")).await.is_ok(), "op 2 landed");
    assert!(store.get(&path("a")).await.is_err(), "op 3 fails");
    store
        .put(&path("c"), "3".into())
        .await
        .expect_err("op 4 fails");
    assert!(inner.get(&path("c")).await.is_err(), "op 4 did not land");
    let outcomes: Vec<Outcome> = store.log().iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Ran,
            Outcome::FailedAfter,
            Outcome::FailedBefore,
            Outcome::FailedBefore
        ]
    );
}

#[tokio::test]
async fn crash_after_n_on_a_read_lets_the_read_succeed() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    inner.put(&path("a"), "1".into()).await.unwrap();
    let store = FaultStore::new(inner, FaultPlan::CrashAfter { ops: 1 });
    assert!(store.get(&path("a")).await.is_ok());
    let listed: Vec<_> = futures::StreamExt::collect::<Vec<_>>(store.list(None)).await;
    assert!(listed.iter().all(|r| r.is_err()) && !listed.is_empty());
    assert_eq!(store.ops(), 2);
}

#[tokio::test]
async fn an_outage_fails_its_operations_untouched_and_the_store_comes_back() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let store = FaultStore::new(inner.clone(), FaultPlan::Outage { from: 2, ops: 2 });
    store.put(&path("a"), "1".into()).await.expect("op 1 runs");
    let err = store
        .put(&path("b"), "2".into())
        .await
        .expect_err("op 2 fails");
    assert!(err.to_string().contains("operation 2"), "{err}");
    assert!(inner.get(&path("b")).await.is_err(), "op 2 did not land");
    assert!(store.get(&path("a")).await.is_err(), "op 3 fails");
    store.put(&path("c"), "3".into()).await.expect("op 4 runs");
    assert!(inner.get(&path("c")).await.is_ok(), "op 4 landed");
    let outcomes: Vec<Outcome> = store.log().iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Ran,
            Outcome::FailedBefore,
            Outcome::FailedBefore,
            Outcome::Ran
        ]
    );
}

#[tokio::test]
async fn transient_faults_follow_the_seed() {
    async fn outcomes(seed: u64) -> Vec<Outcome> {
        let store = FaultStore::new(
            Arc::new(InMemory::new()),
            FaultPlan::Transient {
                fail_per_mille: 300,
                seed,
                latency_ms_max: 0,
            },
        );
        for i in 0..200 {
            let _ = store.put(&path(&format!("f{i}")), "x".into()).await;
        }
        store.log().iter().map(|r| r.outcome).collect()
    }
    let a = outcomes(7).await;
    assert_eq!(a, outcomes(7).await, "same seed, same faults");
    assert_ne!(a, outcomes(8).await, "another seed, other faults");
    let failed = a.iter().filter(|o| **o != Outcome::Ran).count();
    assert!(
        (30..=90).contains(&failed),
        "about 30% of 200 fail, got {failed}"
    );
    assert!(a.contains(&Outcome::FailedAfter) && a.contains(&Outcome::FailedBefore));
}

#[tokio::test]
async fn turnstile_alternates_commit_attempts() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let turns = Turnstile::new(2);
    let create = || PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    };
    let writer = |w: usize, versions: Vec<u32>| {
        let store = FaultStore::with_turnstile(inner.clone(), turns.clone(), w);
        let turns = turns.clone();
        tokio::spawn(async move {
            for v in versions {
                let p = path(&format!("t/_delta_log/{v:020}.json"));
                let _ = store.put_opts(&p, "{}".into(), create()).await;
            }
            turns.finish(w);
        })
    };
    // Writer 1 starts first, but writer 0 has the first turn.
    let b = writer(1, vec![1, 3, 5, 7]);
    let a = writer(0, vec![0, 2]);
    a.await.unwrap();
    b.await.unwrap();
    let order: Vec<usize> = turns.attempts().iter().map(|(w, _)| *w).collect();
    assert_eq!(order, [0, 1, 0, 1, 1, 1]);
}
