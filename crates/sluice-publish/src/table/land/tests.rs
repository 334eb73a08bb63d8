use std::sync::Arc;

use object_store::local::LocalFileSystem;
use sluice_faults::{FaultPlan, FaultStore};
use sluice_stage::{StageOptions, Stager};

use super::*;
use crate::open_table;
use crate::testing::{hour, offsets_at, open_with, publish};

fn windows(n: usize) -> Vec<sluice_window::Window> {
    (0..n)
        .map(|h| hour(&format!("2026-10-{:02}T{:02}:00:00Z", 1 + h / 24, h % 24)))
        .collect()
}

/// Every version a writer landed directly is a Delta commit like deltalake's own: a fresh
/// reader sees the same files, rows, coverage and offsets as the writer, checkpoints are
/// written every interval, and the writer's own view, brought forward, equals the reader's.
#[tokio::test]
async fn direct_commits_read_back_as_deltalake_commits_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = open_with(dir.path(), None, None, 10).await;
    let created = table.version().unwrap();
    let mut stager = Stager::new(table.store(), "w", StageOptions::default());
    let hours = windows(5);
    let mut last = std::collections::HashMap::new();
    for i in 0..25i64 {
        let w = hours[i as usize % hours.len()];
        let first = i * 100;
        let v = publish(&mut table, &mut stager, w, 2, 10, first).await;
        assert_eq!(v, created + 1 + i as u64, "one version per publication");
        last.insert(w, (first..first + 20).collect::<Vec<_>>());
    }
    let head = table.version().unwrap();

    // A fresh reader, through deltalake alone.
    let reader = open_table(dir.path().to_str().unwrap(), &Default::default(), None)
        .await
        .unwrap();
    assert_eq!(reader.version(), Some(head));
    let mut read: Vec<_> = crate::table::active_files(&reader)
        .await
        .unwrap()
        .into_iter()
        .map(|f| (f.path, f.rows, f.coverage))
        .collect();
    read.sort();
    let mut own = Vec::new();
    for w in &hours {
        let address = table.address(*w);
        for f in table.files_at(&address).await.unwrap() {
            own.push((f.path, f.rows, f.coverage));
        }
        assert_eq!(offsets_at(&mut table, *w).await, last[w]);
    }
    own.sort();
    assert_eq!(read, own);
    assert_eq!(read.len(), 10, "two files in each of five windows");
    let txn = reader
        .snapshot()
        .unwrap()
        .transaction_version(reader.log_store().as_ref(), "p/in")
        .await
        .unwrap();
    assert_eq!(txn, Some(24 * 100 + 20));

    // Checkpoints at every version v with (v + 1) a multiple of the interval.
    let log = dir.path().join("_delta_log");
    for v in (0..=head).filter(|v| checkpoint_at(*v, 10)) {
        let name = format!("{v:020}.checkpoint.parquet");
        assert!(log.join(&name).exists(), "no checkpoint {name}");
    }

    // The writer's own view, brought forward, is the reader's.
    let caught_up = table.delta_table().await.unwrap();
    assert_eq!(caught_up.version(), Some(head));
    let mut mine: Vec<_> = crate::table::active_files(caught_up)
        .await
        .unwrap()
        .into_iter()
        .map(|f| (f.path, f.rows, f.coverage))
        .collect();
    mine.sort();
    assert_eq!(mine, read);
}

/// A commit lands only on the version the writer read: another writer's version in between
/// is `TableMoved`, and nothing of the loser's is in the table until it re-reads.
#[tokio::test]
async fn a_direct_commit_on_a_version_another_writer_took_is_table_moved() {
    let dir = tempfile::tempdir().unwrap();
    let hours = windows(3);
    let mut a = open_with(dir.path(), None, None, 100).await;
    let mut a_stager = Stager::new(a.store(), "a", StageOptions::default());
    publish(&mut a, &mut a_stager, hours[0], 1, 10, 0).await;
    let mut b = open_with(dir.path(), None, None, 100).await;
    let mut b_stager = Stager::new(b.store(), "b", StageOptions::default());
    let taken = publish(&mut b, &mut b_stager, hours[1], 1, 10, 10).await;

    let address = a.address(hours[2]);
    let schema = a.file_schema().clone();
    let file = a_stager
        .stage(
            &address,
            &schema,
            vec![crate::testing::rows(&schema, 20..30)],
        )
        .await
        .unwrap();
    let lost = a
        .publish(crate::Publication {
            pipeline: "p".into(),
            window: hours[2],
            files: vec![file],
            replace: crate::Replace::Window,
            coverage: crate::Coverage {
                partition: "in".into(),
                offset: 30,
            },
            txns: vec![("in".into(), 30)],
            position_ranges: serde_json::json!([]),
            published_at_ms: 1_000,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(lost, PublishError::TableMoved { read_version, .. } if read_version + 1 == taken),
        "{lost:?}"
    );
    let reader = open_table(dir.path().to_str().unwrap(), &Default::default(), None)
        .await
        .unwrap();
    assert_eq!(reader.version(), Some(taken));

    a.reload().await.unwrap();
    let v = publish(&mut a, &mut a_stager, hours[2], 1, 10, 20).await;
    assert_eq!(v, taken + 1);
    for (w, offsets) in [(hours[0], 0..10), (hours[1], 10..20), (hours[2], 20..30)] {
        assert_eq!(offsets_at(&mut a, w).await, offsets.collect::<Vec<_>>());
    }
}

/// What flattens publish latency: a publication's log operations are one put of its
/// version, the same with 10 windows in the table as with 250 — no listing of the log and
/// no read of it (checkpoint versions aside, once per interval).
#[tokio::test]
async fn a_publication_puts_its_version_and_reads_nothing_of_the_log_however_large_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let counting = FaultStore::new(Arc::new(LocalFileSystem::new()), FaultPlan::PassThrough);
    let mut table = open_with(dir.path(), Some(Arc::new(counting.clone())), None, 100).await;
    let mut stager = Stager::new(table.store(), "w", StageOptions::default());
    let hours = windows(250);
    let log_ops_since = |from: usize| {
        counting.log()[from..]
            .iter()
            .filter(|op| op.path.contains("_delta_log"))
            .map(|op| {
                (
                    op.kind,
                    op.path.rsplit('/').next().unwrap_or("").to_string(),
                )
            })
            .collect::<Vec<_>>()
    };
    let mut seen = Vec::new();
    for (i, w) in hours.iter().enumerate() {
        let before = counting.log().len();
        let v = publish(&mut table, &mut stager, *w, 1, 5, i as i64 * 5).await;
        if i == 10 || i == 249 {
            assert!(
                !checkpoint_at(v, 100),
                "pick publications off the checkpoints"
            );
            let ops = log_ops_since(before);
            assert_eq!(
                ops,
                vec![("put", format!("{v:020}.json"))],
                "publication {i} (version {v})"
            );
            seen.push(v);
        }
    }
    assert_eq!(seen.len(), 2);
}
