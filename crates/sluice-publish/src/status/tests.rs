use serde_json::json;
use sluice_stage::{StageOptions, Stager};
use sluice_window::Shard;

use super::*;
use crate::testing::{hour, open_with, publish, rows};
use crate::{Coverage, Publication, Replace, WindowTable};

/// A checkpoint every 3 commits: status reads txns from it and the commits after.
async fn table_at(dir: &std::path::Path, shard: Option<Shard>) -> WindowTable {
    open_with(dir, None, shard, 3).await
}

#[tokio::test]
async fn status_reads_every_txn_from_the_checkpoint_and_the_commits_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = table_at(dir.path(), None).await;
    let mut stager = Stager::new(table.store(), "w", StageOptions::default());
    // A txn only the first commit carries: after the checkpoint it is read from there.
    let first = hour("2026-10-03T09:00:00Z");
    let address = table.address(first);
    let schema = table.file_schema().clone();
    let file = stager
        .stage(&address, &schema, vec![rows(&schema, 0..3)])
        .await
        .unwrap();
    table
        .publish(Publication {
            pipeline: "p".into(),
            window: first,
            files: vec![file],
            replace: Replace::Window,
            coverage: Coverage {
                partition: "other".into(),
                offset: 5,
            },
            txns: vec![("other".into(), 5)],
            position_ranges: json!([]),
            published_at_ms: 500,
        })
        .await
        .unwrap();
    for h in 10..18 {
        let w = hour(&format!("2026-10-03T{h}:00:00Z"));
        let parts = if h == 12 { 4 } else { 1 };
        publish(&mut table, &mut stager, w, parts, 10, h * 100).await;
    }
    table.reload().await.unwrap();
    let delta = table.delta_table().await.unwrap();
    let s = status(delta).await.unwrap();
    let checkpoint = s.checkpoint.clone().expect("a checkpoint");
    assert!(checkpoint.commits_since > 0, "{checkpoint:?}");
    assert_eq!(s.version, 9);
    assert_eq!(p_other(&s), Some(5));
    // Every txn status read is the one deltalake looks up by its app id.
    let (txns, _) = read_txns(delta.object_store().as_ref(), s.version)
        .await
        .unwrap();
    assert!(!txns.is_empty());
    let snapshot = delta.snapshot().unwrap();
    for (app_id, txn) in &txns {
        let looked_up = snapshot
            .transaction_version(delta.log_store().as_ref(), app_id)
            .await
            .unwrap();
        assert_eq!(looked_up, Some(txn.version), "{app_id}");
    }
    let p = &s.pipelines[0];
    assert_eq!(p.pipeline, "p");
    assert_eq!(p.positions["in"].version, 1_710);
    assert_eq!(p.last_window.as_deref(), Some("2026-10-03T17:00:00Z"));
    assert_eq!(p.positions["in"].last_updated_ms, Some(1_000));
    assert_eq!((p.windows, p.files, p.rows), (9, 12, 113));
    assert_eq!(p.windows_of_several_files, 1);
    assert_eq!(p.most_files[0].window, "dt=2026-10-03/hour=12");
    assert_eq!(p.most_files[0].files, 4);
    assert_eq!(p.first_window.as_deref(), Some("2026-10-03T09:00:00Z"));
    assert_eq!(p.windows_complete, None);
    assert_eq!(
        s.last_commit.as_ref().unwrap().sluice.as_deref(),
        Some("publish")
    );
    assert_eq!((s.log.oldest_commit, s.log.commits), (Some(0), 10));
    assert_eq!((s.log.objects, s.log.bytes), (None, None));
    let (objects, bytes) = log_size(delta).await.unwrap();
    assert!(objects > 10 && bytes > 0, "{objects} {bytes}");

    // The log's cleanup removes the oldest commits: the oldest left is found (without a
    // listing), for each number of commits removed below the checkpoint.
    for removed in 1..=6u64 {
        let commit = dir
            .path()
            .join(format!("_delta_log/{:020}.json", removed - 1));
        std::fs::remove_file(commit).unwrap();
        let mut reopened = table_at(dir.path(), None).await;
        reopened.reload().await.unwrap();
        let s = status(reopened.delta_table().await.unwrap()).await.unwrap();
        assert_eq!(
            (s.log.oldest_commit, s.log.commits),
            (Some(removed), 10 - removed),
            "{removed} removed"
        );
    }
}

#[tokio::test]
async fn a_sharded_window_is_complete_when_every_shard_sealed_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut shards = Vec::new();
    for n in [0, 1] {
        shards.push(table_at(dir.path(), Some(Shard(n))).await);
    }
    let (a, b) = (hour("2026-10-03T10:00:00Z"), hour("2026-10-03T11:00:00Z"));
    // Shard 0 has sealed through 12:00, shard 1 through 11:00: window a (ends 11:00) is
    // complete, window b (ends 12:00) is not.
    for (n, table) in shards.iter_mut().enumerate() {
        let mut stager = Stager::new(table.store(), format!("s{n}"), StageOptions::default());
        for (i, w) in [a, b].into_iter().enumerate() {
            let address = table.address(w);
            let schema = table.file_schema().clone();
            let file = stager
                .stage(&address, &schema, vec![rows(&schema, 0..5)])
                .await
                .unwrap();
            let sealed_h = if n == 0 { 12 } else { 11 };
            let sealed_us = hour(&format!("2026-10-03T{sealed_h}:00:00Z"))
                .start()
                .as_micros();
            let sealed = crate::shard_sealed_txn(Shard(n as u32));
            let txns = vec![
                (format!("topic/{n}"), 10 * (i as i64 + 1)),
                (sealed, if i == 1 { sealed_us } else { 0 }),
            ];
            table
                .publish(Publication {
                    pipeline: "p".into(),
                    window: w,
                    files: vec![file],
                    replace: Replace::Window,
                    coverage: Coverage {
                        partition: format!("topic/{n}"),
                        offset: 10,
                    },
                    txns,
                    position_ranges: json!([]),
                    published_at_ms: 1_000,
                })
                .await
                .unwrap();
        }
    }
    let table = crate::open_table(dir.path().to_str().unwrap(), &Default::default(), None)
        .await
        .unwrap();
    let s = status(&table).await.unwrap();
    let p = &s.pipelines[0];
    assert_eq!(p.shards, Some(2));
    assert_eq!(
        (p.windows, p.windows_complete, p.windows_incomplete),
        (2, Some(1), Some(1))
    );
    assert_eq!(p.positions["topic/0"].version, 20);
    assert_eq!(p.positions["topic/1"].version, 20);
    assert_eq!(p.files, 4);
}

fn p_other(s: &TableStatus) -> Option<i64> {
    s.pipelines[0].positions.get("other").map(|t| t.version)
}

/// Fast on a long log: status reads the snapshot (the last checkpoint and the commits after
/// it), never a commit the checkpoint already holds; checked by the store's operation log.
#[tokio::test]
async fn status_reads_no_commit_older_than_the_last_checkpoint() {
    use std::sync::Arc;

    use object_store::local::LocalFileSystem;
    use sluice_faults::{FaultPlan, FaultStore};

    let dir = tempfile::tempdir().unwrap();
    let mut table = open_with(dir.path(), None, None, 10).await;
    let mut stager = Stager::new(table.store(), "w", StageOptions::default());
    for i in 0..45 {
        let w = hour(&format!("2026-10-03T{:02}:00:00Z", 10 + i % 5));
        publish(&mut table, &mut stager, w, 1, 10, i * 10).await;
    }
    let store = FaultStore::new(Arc::new(LocalFileSystem::new()), FaultPlan::PassThrough);
    let options = crate::TableOptions {
        store: Some(Arc::new(store.clone())),
        ..crate::TableOptions::new(dir.path().to_str().unwrap())
    };
    let delta = crate::table::open_table_if_exists(&options)
        .await
        .unwrap()
        .expect("the table");
    let s = status(&delta).await.unwrap();
    // Version 0 created the table; 45 publications follow.
    assert_eq!(s.version, 45);
    // A checkpoint every 10 commits: the last at version 39 (the 40th commit).
    assert_eq!(s.checkpoint.as_ref().map(|c| c.version), Some(39));
    assert_eq!(s.pipelines[0].positions["in"].version, 450);
    assert_eq!(s.pipelines[0].windows, 5);
    let commits_read: Vec<u64> = store
        .log()
        .iter()
        .filter(|op| op.kind == "get")
        .filter_map(|op| {
            let name = op.path.rsplit('/').next()?;
            let digits = name.strip_suffix(".json")?;
            (digits.len() == 20).then(|| digits.parse().ok())?
        })
        .collect();
    assert!(!commits_read.is_empty(), "{:?}", store.log());
    assert!(
        commits_read.iter().all(|v| *v > 39),
        "commits read: {commits_read:?}"
    );
}
