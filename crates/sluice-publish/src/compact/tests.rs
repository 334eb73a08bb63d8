use std::sync::Arc;

use deltalake::arrow::array::{Array, Int64Array, RecordBatch};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use object_store::local::LocalFileSystem;
use sluice_faults::{FaultPlan, FaultStore};
use sluice_stage::{StageOptions, Stager};
use sluice_window::Shard;

use super::*;
use crate::testing::{hour, offsets_at, open, options_of, publish, rows};
use crate::{Publication, PublishError, Replace};

#[tokio::test]
async fn a_window_of_fifty_small_files_becomes_one_and_no_other_window_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = open(dir.path(), None, None).await;
    let mut stager = Stager::new(table.store(), "w", StageOptions::default());
    let target = hour("2026-10-03T14:00:00Z");
    let others = [hour("2026-10-03T13:00:00Z"), hour("2026-10-03T15:00:00Z")];
    publish(&mut table, &mut stager, others[0], 3, 10, 0).await;
    publish(&mut table, &mut stager, target, 50, 20, 100).await;
    publish(&mut table, &mut stager, others[1], 3, 10, 2_000).await;
    let before = offsets_at(&mut table, target).await;
    let windows_before = table.published_windows("p").await.unwrap();
    assert_eq!(before.len(), 1_000);

    let counting = FaultStore::new(Arc::new(LocalFileSystem::new()), FaultPlan::PassThrough);
    let rule = CompactRule {
        from: Some(target.start()),
        to: Some(target.end()),
        ..CompactRule::default()
    };
    let report = compact(
        &options_of(dir.path(), Arc::new(counting.clone())),
        &rule,
        "c1",
        5_000,
    )
    .await
    .unwrap();
    assert_eq!(report.compacted.len(), 1, "{report:?}");
    let c = &report.compacted[0];
    assert_eq!((c.files_before, c.files_after, c.rows), (50, 1, 1_000));
    assert!(report.gave_way.is_empty() && report.not_windows == 0);

    // Every data object it touched is under the compacted window's address.
    let window_dir = format!("{}/", table.address(target).hive_path());
    let strays: Vec<_> = counting
        .log()
        .into_iter()
        .filter(|op| !op.path.contains("/_delta_log") && !op.path.contains(&window_dir))
        .collect();
    assert!(
        strays.is_empty(),
        "compaction touched other paths: {strays:?}"
    );
    let reads = counting
        .log()
        .into_iter()
        .filter(|op| op.path.contains(&window_dir) && op.kind.starts_with("get"))
        .count();
    assert_eq!(reads, 50, "each input file read once");

    // The same rows, the same coverage; other windows untouched; a derived table reading
    // the commits since sees no address whose rows changed.
    let version_before = table.version().unwrap();
    table.reload().await.unwrap();
    let now = table.version().unwrap();
    let changed = crate::addresses_changed(table.delta_table().await.unwrap(), version_before, now)
        .await
        .unwrap();
    assert_eq!(changed, Some(Default::default()));
    assert_eq!(offsets_at(&mut table, target).await, before);
    assert_eq!(
        table.files_at(&table.address(target)).await.unwrap().len(),
        1
    );
    for w in others {
        assert_eq!(table.files_at(&table.address(w)).await.unwrap().len(), 3);
    }
    assert_eq!(table.published_windows("p").await.unwrap(), windows_before);

    // Twice changes nothing.
    let again = compact(
        &options_of(dir.path(), Arc::new(LocalFileSystem::new())),
        &rule,
        "c2",
        6_000,
    )
    .await
    .unwrap();
    assert!(
        again.compacted.is_empty() && again.left_alone == 1,
        "{again:?}"
    );
}

#[tokio::test]
async fn files_are_cut_at_the_target_size_and_the_writer_keeps_publishing() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = open(dir.path(), None, None).await;
    let mut stager = Stager::new(table.store(), "w", StageOptions::default());
    let window = hour("2026-10-03T14:00:00Z");
    publish(&mut table, &mut stager, window, 12, 500, 0).await;
    let files = table.files_at(&table.address(window)).await.unwrap();
    let bytes: i64 = files.iter().map(|f| f.size_bytes).sum();
    // A target of a quarter of the window: 4 files of about equal rows.
    let rule = CompactRule {
        target_file_bytes: bytes / 4 + 1,
        ..CompactRule::default()
    };
    let mut compactor = Stager::new(table.store(), "c", StageOptions::default());
    let c = table
        .compact_window(window, "p", &mut compactor, &rule, 2_000)
        .await
        .unwrap()
        .expect("12 files become 4");
    assert_eq!((c.files_before, c.files_after, c.rows), (12, 4, 6_000));
    let after = table.files_at(&table.address(window)).await.unwrap();
    let counts: Vec<i64> = after.iter().map(|f| f.rows.unwrap()).collect();
    assert_eq!(counts, vec![1_500; 4]);
    assert_eq!(
        offsets_at(&mut table, window).await,
        (0..6_000).collect::<Vec<_>>()
    );
    assert!(table
        .compact_window(window, "p", &mut compactor, &rule, 2_500)
        .await
        .unwrap()
        .is_none());

    // The writer's index is exact: a swap of the window replaces the compacted files.
    publish(&mut table, &mut stager, window, 1, 7, 6_000).await;
    table.reload().await.unwrap();
    assert_eq!(
        offsets_at(&mut table, window).await,
        (6_000..6_007).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_sharded_writer_retrying_over_a_compaction_in_its_shard_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let shard = Some(Shard(2));
    let mut writer = open(dir.path(), None, shard).await;
    let mut stager = Stager::new(writer.store(), "w", StageOptions::default());
    let (a, b) = (hour("2026-10-03T14:00:00Z"), hour("2026-10-03T15:00:00Z"));
    publish(&mut writer, &mut stager, a, 5, 10, 0).await;
    writer.files_at(&writer.address(a)).await.unwrap(); // the writer's index holds a's files
                                                        // A compaction of window a lands while the writer holds the version before it.
    let rule = CompactRule {
        from: Some(a.start()),
        to: Some(a.end()),
        ..CompactRule::default()
    };
    let options = options_of(dir.path(), Arc::new(LocalFileSystem::new()));
    let report = compact(&options, &rule, "c", 3_000).await.unwrap();
    assert_eq!(report.compacted.len(), 1, "{report:?}");
    // The writer's next commit, at window b, would retry over it (another address) and keep
    // an index that still lists a's replaced files, so a later swap of a would leave the
    // compacted file beside its own. The shard's fence makes it conflict instead.
    let address = writer.address(b);
    let schema = writer.file_schema().clone();
    let file = stager
        .stage(&address, &schema, vec![rows(&schema, 50..60)])
        .await
        .unwrap();
    let err = writer
        .publish(Publication {
            pipeline: "p".into(),
            window: b,
            files: vec![file],
            replace: Replace::Window,
            coverage: Coverage {
                partition: "in".into(),
                offset: 60,
            },
            txns: vec![("in".into(), 60)],
            position_ranges: json!([]),
            published_at_ms: 4_000,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, PublishError::Conflict { .. }), "{err}");
    // Re-read, a swap of a replaces the compacted file.
    writer.reload().await.unwrap();
    publish(&mut writer, &mut stager, a, 1, 60, 100).await;
    writer.reload().await.unwrap();
    assert_eq!(
        offsets_at(&mut writer, a).await,
        (100..160).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_compaction_gives_way_to_a_publication_of_its_window() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = open(dir.path(), None, None).await;
    let mut stager = Stager::new(table.store(), "w", StageOptions::default());
    let window = hour("2026-10-03T14:00:00Z");
    publish(&mut table, &mut stager, window, 4, 10, 0).await;
    let mut compactor = open(dir.path(), None, None).await;
    compactor
        .files_at(&compactor.address(window))
        .await
        .unwrap();
    // The stream republishes the window after the compactor read it.
    publish(&mut table, &mut stager, window, 2, 10, 40).await;
    let mut cstager = Stager::new(compactor.store(), "c", StageOptions::default());
    let err = compactor
        .compact_window(window, "p", &mut cstager, &CompactRule::default(), 9_000)
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    table.reload().await.unwrap();
    assert_eq!(
        offsets_at(&mut table, window).await,
        (40..60).collect::<Vec<_>>()
    );
}

#[test]
fn a_plan_compacts_only_what_it_shrinks() {
    let file = |size_bytes| PublishedFile {
        path: String::new(),
        size_bytes,
        rows: Some(1),
        partition_values: Vec::new(),
        pipeline: None,
        coverage: None,
    };
    let rule = CompactRule {
        target_file_bytes: 100,
        files_min: 1,
        ..CompactRule::default()
    };
    assert_eq!(rule.files_after(&[file(10)]), None);
    assert_eq!(rule.files_after(&[file(10), file(10)]), Some(1));
    assert_eq!(
        rule.files_after(&[file(60), file(60)]),
        None,
        "2 files either way"
    );
    assert_eq!(rule.files_after(&[file(60), file(60), file(60)]), Some(2));
    assert_eq!(rule.files_after(&vec![file(2); 50]), Some(1));
    let at_least_4 = CompactRule {
        files_min: 4,
        ..rule.clone()
    };
    assert_eq!(at_least_4.files_after(&vec![file(2); 4]), None);
    assert_eq!(at_least_4.files_after(&vec![file(2); 5]), Some(1));
}

#[test]
fn split_rows_takes_exactly_n_rows_across_batches() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("o", DataType::Int64, true),
    ]));
    let batches = vec![
        rows(&schema, 0..3),
        rows(&schema, 3..10),
        rows(&schema, 10..12),
    ];
    let (head, tail) = split_rows(batches, 5);
    let count = |b: &[RecordBatch]| b.iter().map(|b| b.num_rows()).sum::<usize>();
    assert_eq!((count(&head), count(&tail)), (5, 7));
    let first_of_tail = tail[0]
        .column(2)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .value(0);
    assert_eq!(first_of_tail, 5);
    assert!(head
        .iter()
        .chain(&tail)
        .all(|b| b.num_rows() > 0 || b.column(0).is_empty()));
}

#[tokio::test]
async fn a_compaction_re_lists_windows_another_writer_republished_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = open(dir.path(), None, None).await;
    let mut stager = Stager::new(writer.store(), "w", StageOptions::default());
    let (a, b) = (hour("2026-10-03T12:00:00Z"), hour("2026-10-03T13:00:00Z"));
    publish(&mut writer, &mut stager, a, 3, 10, 0).await;
    publish(&mut writer, &mut stager, b, 3, 10, 100).await;
    // The compaction lists both windows; just before its first commit (window a) the writer
    // republishes window b. The compaction's commit of a retries over that (another window),
    // and its listing of b is stale by then: compacting b from it would bring the replaced
    // rows back beside the new ones.
    let hook = Box::pin(async move {
        publish(&mut writer, &mut stager, b, 1, 5, 1_000).await;
    });
    let store = FaultStore::with_hook_before_first_commit(Arc::new(LocalFileSystem::new()), hook);
    let report = compact(
        &options_of(dir.path(), Arc::new(store)),
        &CompactRule::default(),
        "c",
        7_000,
    )
    .await
    .unwrap();
    let compacted: Vec<&str> = report
        .compacted
        .iter()
        .map(|c| c.address.as_str())
        .collect();
    assert_eq!(compacted, ["dt=2026-10-03/hour=12"], "{report:?}");
    let mut table = open(dir.path(), None, None).await;
    assert_eq!(offsets_at(&mut table, a).await, (0..30).collect::<Vec<_>>());
    assert_eq!(
        offsets_at(&mut table, b).await,
        (1_000..1_005).collect::<Vec<_>>()
    );
}
