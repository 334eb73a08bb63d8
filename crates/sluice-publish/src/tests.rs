use std::sync::Arc;

use deltalake::arrow::array::{Int64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use sluice_stage::{StageOptions, Stager};
use sluice_window::{AddressLayout, Shard, TimeFormat, Window, WindowSize};

use super::*;

fn record_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("ts", DataType::Utf8, true)]))
}

fn rows(table: &WindowTable, n: i64, first_offset: i64) -> RecordBatch {
    RecordBatch::try_new(
        table.file_schema().clone(),
        vec![
            Arc::new(StringArray::from(vec!["2026-10-03T14:00:00Z"; n as usize])),
            Arc::new(StringArray::from(vec!["in.ndjson"; n as usize])),
            Arc::new(Int64Array::from(
                (first_offset..first_offset + n).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

async fn setup(dir: &std::path::Path) -> (WindowTable, Window) {
    let size = WindowSize::parse("1h").unwrap();
    let options = TableOptions {
        location: dir.to_str().unwrap().to_string(),
        storage_options: Default::default(),
        checkpoint_interval: 100,
        ..TableOptions::new("")
    };
    let table = WindowTable::open_or_create(
        &options,
        Some(&record_schema()),
        AddressLayout::DtHour,
        size,
    )
    .await
    .unwrap();
    let t = TimeFormat::Rfc3339
        .parse_str("2026-10-03T14:00:00Z")
        .unwrap();
    (table, Window::containing(size, t))
}

fn publication(window: Window, files: Vec<sluice_stage::StagedFile>, offset: i64) -> Publication {
    Publication {
        pipeline: "p".into(),
        window,
        files,
        replace: Replace::Window,
        coverage: Coverage {
            partition: "in.ndjson".into(),
            offset,
        },
        txns: vec![("in.ndjson".into(), offset)],
        position_ranges: serde_json::json!([]),
        published_at_ms: 1_000,
    }
}

#[tokio::test]
async fn swap_replaces_the_window_and_records_offsets_and_coverage() {
    let dir = tempfile::tempdir().unwrap();
    let (mut table, window) = setup(dir.path()).await;
    let address = AddressLayout::DtHour.address(window);
    let mut stager = Stager::new(table.store(), "a1", StageOptions::default());
    let schema = table.file_schema().clone();
    let first = stager
        .stage(&address, &schema, vec![rows(&table, 3, 0)])
        .await
        .unwrap();
    let v1 = table
        .publish(publication(window, vec![first], 30))
        .await
        .unwrap();
    assert_eq!((v1.version, v1.files_removed, v1.rows), (1, 0, 3));

    let second = stager
        .stage(&address, &schema, vec![rows(&table, 5, 7)])
        .await
        .unwrap();
    let v2 = table
        .publish(publication(window, vec![second.clone()], 50))
        .await
        .unwrap();
    assert_eq!((v2.version, v2.files_removed, v2.rows), (2, 1, 5));
    let files = table.files_at(&address).await.unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].path, second.path);

    // Moving a resume position backwards is refused before anything is written.
    let third = stager
        .stage(&address, &schema, vec![rows(&table, 1, 0)])
        .await
        .unwrap();
    let err = table
        .publish(publication(window, vec![third], 10))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            PublishError::TxnRegression {
                committed: 50,
                proposed: 10,
                ..
            }
        ),
        "{err}"
    );

    // A fresh process reads offsets and coverage back from the table alone.
    let (mut reopened, _) = setup(dir.path()).await;
    let offsets = reopened
        .resume_offsets("p", &["in.ndjson".into(), "other".into()])
        .await
        .unwrap();
    assert_eq!(offsets.get("in.ndjson"), Some(&50));
    assert_eq!(offsets.get("other"), None);
    let windows = reopened.published_windows("p").await.unwrap();
    assert_eq!(
        windows,
        vec![PublishedWindow {
            window,
            coverage: Coverage {
                partition: "in.ndjson".into(),
                offset: 50
            }
        }]
    );
    assert!(reopened.published_windows("q").await.unwrap().is_empty());
    // The lowest source offset of the window's rows, from the files' statistics (a Kafka
    // backfill's retention check): the published file holds offsets 7..12.
    let first = reopened.first_offsets("p").await.unwrap();
    assert_eq!(
        first.into_iter().collect::<Vec<_>>(),
        vec![(window, Some(7))]
    );
    assert!(reopened.first_offsets("q").await.unwrap().is_empty());

    let listing = list_windows(reopened.delta_table().await.unwrap())
        .await
        .unwrap();
    assert_eq!(listing.len(), 1);
    assert_eq!(listing[0].address, "dt=2026-10-03/hour=14");
    assert_eq!(
        (listing[0].rows, listing[0].files, listing[0].version),
        (5, 1, Some(2))
    );
    assert_eq!(listing[0].publications, 2);
}

/// A group commit: three windows in one version, each swapped whole with its own coverage,
/// the txn moved once to the last publication's offset; a window twice, or an empty group, is
/// refused before anything is written.
#[tokio::test]
async fn a_group_commit_publishes_each_window_whole_in_one_version() {
    let dir = tempfile::tempdir().unwrap();
    let (mut table, first_window) = setup(dir.path()).await;
    let mut stager = Stager::new(table.store(), "g1", StageOptions::default());
    let schema = table.file_schema().clone();
    let size = first_window.size().as_micros();
    let windows: Vec<Window> = (0..3)
        .map(|i| {
            let start = first_window.start().as_micros() + i * size;
            Window::containing(
                first_window.size(),
                sluice_window::EventTime::from_micros(start),
            )
        })
        .collect();
    // One window already holds rows: the group swaps them out.
    let old = stager
        .stage(
            &table.address(windows[1]),
            &schema,
            vec![rows(&table, 9, 0)],
        )
        .await
        .unwrap();
    table
        .publish(publication(windows[1], vec![old], 5))
        .await
        .unwrap();
    let mut group = Vec::new();
    for (i, window) in windows.iter().enumerate() {
        let file = stager
            .stage(
                &table.address(*window),
                &schema,
                vec![rows(&table, i as i64 + 1, 0)],
            )
            .await
            .unwrap();
        group.push(publication(*window, vec![file], 10 * (i as i64 + 1)));
    }
    let twice = vec![group[0].clone(), group[0].clone()];
    let err = table.publish_group(twice).await.unwrap_err();
    assert!(matches!(err, PublishError::Invalid { .. }), "{err}");
    let err = table.publish_group(Vec::new()).await.unwrap_err();
    assert!(matches!(err, PublishError::Invalid { .. }), "{err}");
    assert_eq!(table.version(), Some(1), "nothing was written");

    let published = table.publish_group(group).await.unwrap();
    let summary: Vec<(u64, usize, i64)> = published
        .iter()
        .map(|p| (p.version, p.files_removed, p.rows))
        .collect();
    assert_eq!(summary, vec![(2, 0, 1), (2, 1, 2), (2, 0, 3)]);

    // Read back by a fresh process: each window's rows and coverage, the txn at the last
    // publication's offset, and the listing naming version 2 for every window.
    let (mut reopened, _) = setup(dir.path()).await;
    let offsets = reopened
        .resume_offsets("p", &["in.ndjson".into()])
        .await
        .unwrap();
    assert_eq!(offsets.get("in.ndjson"), Some(&30));
    let coverage: Vec<(Window, i64)> = reopened
        .published_windows("p")
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.window, p.coverage.offset))
        .collect();
    assert_eq!(
        coverage,
        vec![(windows[0], 10), (windows[1], 20), (windows[2], 30)]
    );
    let listing = list_windows(reopened.delta_table().await.unwrap())
        .await
        .unwrap();
    let rows_and_versions: Vec<(i64, Option<u64>, usize)> = listing
        .iter()
        .map(|l| (l.rows, l.version, l.publications))
        .collect();
    assert_eq!(
        rows_and_versions,
        vec![(1, Some(2), 1), (2, Some(2), 2), (3, Some(2), 1)]
    );
}

#[tokio::test]
async fn a_stale_writer_of_the_same_window_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let (mut a, window) = setup(dir.path()).await;
    let (mut b, _) = setup(dir.path()).await;
    let address = AddressLayout::DtHour.address(window);
    let schema = a.file_schema().clone();
    let mut sa = Stager::new(a.store(), "a", StageOptions::default());
    let mut sb = Stager::new(b.store(), "b", StageOptions::default());
    let fa = sa
        .stage(&address, &schema, vec![rows(&a, 2, 0)])
        .await
        .unwrap();
    let fb = sb
        .stage(&address, &schema, vec![rows(&b, 2, 0)])
        .await
        .unwrap();
    a.publish(publication(window, vec![fa], 20)).await.unwrap();
    let err = b
        .publish(publication(window, vec![fb], 20))
        .await
        .unwrap_err();
    // The commit does not retry blindly: the stale writer learns the table moved and must
    // re-read it (its own earlier attempt may be what moved it).
    assert!(
        matches!(
            err,
            PublishError::TableMoved {
                read_version: 0,
                ..
            }
        ),
        "{err}"
    );
    b.reload().await.unwrap();
    assert_eq!(b.version(), Some(1));
}

#[tokio::test]
async fn schema_and_layout_mismatches_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _ = setup(dir.path()).await;
    let options = TableOptions {
        location: dir.path().to_str().unwrap().to_string(),
        storage_options: Default::default(),
        checkpoint_interval: 100,
        ..TableOptions::new("")
    };
    let other = Arc::new(Schema::new(vec![Field::new("ts", DataType::Int64, true)]));
    let hour = WindowSize::parse("1h").unwrap();
    let err = WindowTable::open_or_create(&options, Some(&other), AddressLayout::DtHour, hour)
        .await
        .unwrap_err();
    assert!(matches!(err, OpenError::SchemaMismatch { .. }), "{err}");
    let five = WindowSize::parse("5m").unwrap();
    let err = WindowTable::open_or_create(&options, None, AddressLayout::WindowStart, five)
        .await
        .unwrap_err();
    assert!(matches!(err, OpenError::PartitionMismatch { .. }), "{err}");
    let reserved = Arc::new(Schema::new(vec![Field::new("hour", DataType::Utf8, true)]));
    let fresh = tempfile::tempdir().unwrap();
    let options = TableOptions {
        location: fresh.path().to_str().unwrap().to_string(),
        ..options
    };
    let err = WindowTable::open_or_create(&options, Some(&reserved), AddressLayout::DtHour, hour)
        .await
        .unwrap_err();
    assert!(matches!(err, OpenError::ReservedColumn { .. }), "{err}");
}

/// Writers of a sharded table (one per Kafka partition): a commit on another shard is retried
/// over, but a zombie writer of a shard — one that read the table before the shard's new owner
/// published — is refused by the conflict on the partition's `txn`, whatever window it
/// publishes.
/// Shard `shard`'s writer of an hourly table at `dir`, created if missing, with retries on.
async fn sharded_table(dir: &std::path::Path, shard: Shard, size: WindowSize) -> WindowTable {
    let options = TableOptions {
        location: dir.to_str().unwrap().to_string(),
        shard: Some(shard),
        commit_retries: 15,
        ..TableOptions::new("")
    };
    WindowTable::open_or_create(
        &options,
        Some(&record_schema()),
        AddressLayout::DtHour,
        size,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn sharded_writers_race_on_other_shards_but_a_zombie_of_one_shard_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let size = WindowSize::parse("1h").unwrap();
    let at = |t: &str| Window::containing(size, TimeFormat::Rfc3339.parse_str(t).unwrap());
    let (w14, w15) = (at("2026-10-03T14:00:00Z"), at("2026-10-03T15:00:00Z"));
    let open = |shard: u32| sharded_table(dir.path(), Shard(shard), size);
    let mut zombie = open(3).await;
    let mut owner = open(3).await;
    let mut neighbour = open(4).await;
    let publish = |table: &mut WindowTable, window: Window, partition: &str, offset: i64| {
        let address = table.address(window);
        let schema = table.file_schema().clone();
        let batch = rows(table, 2, offset);
        let mut stager = Stager::new(table.store(), "a", StageOptions::default());
        let partition = partition.to_string();
        async move {
            let file = stager.stage(&address, &schema, vec![batch]).await.unwrap();
            let mut p = publication(window, vec![file], offset);
            p.coverage.partition = partition.clone();
            p.txns = vec![(partition, offset)];
            p
        }
    };
    let p = publish(&mut owner, w15, "events/3", 20).await;
    assert_eq!(owner.publish(p).await.unwrap().version, 1);
    // Another shard, from a stale read: retried over the owner's commit.
    let p = publish(&mut neighbour, w14, "events/4", 7).await;
    assert_eq!(neighbour.publish(p).await.unwrap().version, 2);
    // The zombie of shard 3 publishes another window: refused.
    let p = publish(&mut zombie, w14, "events/3", 10).await;
    let err = zombie.publish(p).await.unwrap_err();
    assert!(matches!(err, PublishError::Conflict { .. }), "{err}");

    let mut reader = open(3).await;
    assert!(reader
        .files_at(&reader.address(w14))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        reader.files_at(&reader.address(w15)).await.unwrap().len(),
        1
    );
    let offsets = reader
        .resume_offsets("p", &["events/3".to_string(), "events/4".to_string()])
        .await
        .unwrap();
    assert_eq!(offsets.get("events/3"), Some(&20));
    assert_eq!(offsets.get("events/4"), Some(&7));
    assert_eq!(reader.version(), Some(2));
}

#[tokio::test]
async fn a_window_of_a_sharded_table_is_complete_when_every_shard_has_sealed_it() {
    let dir = tempfile::tempdir().unwrap();
    let size = WindowSize::parse("1h").unwrap();
    let time = |t: &str| TimeFormat::Rfc3339.parse_str(t).unwrap();
    let (w14, w15) = (
        Window::containing(size, time("2026-10-03T14:00:00Z")),
        Window::containing(size, time("2026-10-03T15:00:00Z")),
    );
    let open = |shard: u32| sharded_table(dir.path(), Shard(shard), size);
    // Shard `shard` publishes `window`, sealed through `through`.
    let publish = |shard: u32, window: Window, offset: i64, through: &str| {
        let through = time(through).as_micros();
        async move {
            let mut table = open(shard).await;
            let address = table.address(window);
            let schema = table.file_schema().clone();
            let batch = rows(&table, 2, offset);
            let mut stager = Stager::new(table.store(), "a", StageOptions::default());
            let file = stager.stage(&address, &schema, vec![batch]).await.unwrap();
            let partition = format!("events/{shard}");
            let mut p = publication(window, vec![file], offset);
            p.coverage.partition = partition.clone();
            p.txns = vec![
                (partition, offset),
                (shard_sealed_txn(Shard(shard)), through),
            ];
            table.publish(p).await.unwrap();
            table
        }
    };
    let seals = |mut table: WindowTable| async move {
        list_windows(table.delta_table().await.unwrap())
            .await
            .unwrap()
            .into_iter()
            .map(|w| {
                (
                    w.address,
                    w.seal.map(|s| (s.sealed, s.shards_sealed, s.shards)),
                )
            })
            .collect::<Vec<_>>()
    };
    publish(3, w14, 10, "2026-10-03T15:00:00Z").await;
    let table = publish(4, w14, 20, "2026-10-03T14:59:00Z").await;
    assert_eq!(
        seals(table).await,
        [
            ("dt=2026-10-03/hour=14/shard=3".into(), Some((true, 1, 2))),
            ("dt=2026-10-03/hour=14/shard=4".into(), Some((false, 1, 2))),
        ]
    );
    // Shard 4 moves past hour 14: the window is complete; hour 15 is sealed by nobody yet.
    let table = publish(4, w15, 30, "2026-10-03T15:10:00Z").await;
    assert_eq!(
        seals(table).await,
        [
            ("dt=2026-10-03/hour=14/shard=3".into(), Some((true, 2, 2))),
            ("dt=2026-10-03/hour=14/shard=4".into(), Some((true, 2, 2))),
            ("dt=2026-10-03/hour=15/shard=4".into(), Some((false, 0, 2))),
        ]
    );
}

/// A table records its pipeline's contract at creation; a writer with another is refused
/// before it writes; a table without one gets it recorded once; nothing is created by looking.
#[tokio::test]
async fn the_contract_is_recorded_checked_and_never_created_by_a_look() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().join("t");
    let hour = WindowSize::parse("1h").unwrap();
    let contract = Contract::new().with("window", "1h").with("key", "id");
    let options = TableOptions {
        pipeline: Some("p".into()),
        contract: Some(contract.clone()),
        ..TableOptions::new(location.to_str().unwrap())
    };
    let missing = WindowTable::open_existing(&options, None, AddressLayout::DtHour, hour)
        .await
        .unwrap();
    assert!(missing.is_none());
    assert!(recorded_contract(&options, "p").await.unwrap().is_none());
    assert!(!location.exists(), "a look creates nothing");

    WindowTable::open_or_create(
        &options,
        Some(&record_schema()),
        AddressLayout::DtHour,
        hour,
    )
    .await
    .unwrap();
    assert_eq!(
        recorded_contract(&options, "p").await.unwrap(),
        Some(contract)
    );
    let other = TableOptions {
        contract: Some(Contract::new().with("window", "1h").with("key", "user")),
        ..options.clone()
    };
    let err = WindowTable::open_or_create(&other, None, AddressLayout::DtHour, hour)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("key is id in the table, user in this run"),
        "{err}"
    );
    let versions = |t: &WindowTable| t.version();

    // A table without a contract (written before contracts): recorded once, in one commit.
    let legacy = tempfile::tempdir().unwrap();
    let plain = TableOptions {
        pipeline: Some("p".into()),
        ..TableOptions::new(legacy.path().to_str().unwrap())
    };
    WindowTable::open_or_create(&plain, Some(&record_schema()), AddressLayout::DtHour, hour)
        .await
        .unwrap();
    let with = TableOptions {
        contract: Some(Contract::new().with("window", "1h")),
        ..plain.clone()
    };
    let mut table = WindowTable::open_or_create(&with, None, AddressLayout::DtHour, hour)
        .await
        .unwrap();
    assert_eq!(versions(&table), Some(0));
    table.record_contract(&with).await.unwrap();
    assert_eq!(versions(&table), Some(1));
    table.record_contract(&with).await.unwrap();
    assert_eq!(versions(&table), Some(1), "recorded once");
    assert_eq!(
        recorded_contract(&with, "p").await.unwrap(),
        Some(Contract::new().with("window", "1h"))
    );
}

/// The loser of two writers is told that another writer is active, not to do something.
#[test]
fn a_lost_commit_race_says_another_writer_is_publishing() {
    let moved = PublishError::TableMoved {
        window: "dt=2026-10-03/hour=14".into(),
        read_version: 7,
    };
    let text = moved.to_string();
    assert!(
        text.contains("another writer committed to the table since this writer read version 7")
            && text.contains("re-reads the table before it goes on"),
        "{text}"
    );
}

/// Writers of a sharded table start together and race to create it: the one that loses
/// opens the winner's table. deltalake retries a create that lost its race as a commit at
/// the next version, which made a second CREATE (version 1, another table id: notification
/// keys named the table by one id or the other depending on when a feed started).
#[tokio::test]
async fn a_writer_that_loses_the_race_to_create_the_table_opens_the_winners() {
    use futures::FutureExt;
    let dir = tempfile::tempdir().unwrap();
    let size = WindowSize::parse("1h").unwrap();
    let location = dir.path().to_str().unwrap().to_string();
    let options = |shard: u32| TableOptions {
        location: location.clone(),
        shard: Some(Shard(shard)),
        commit_retries: 15,
        ..TableOptions::new("")
    };
    // Shard 1 creates the table between shard 0's look (no table) and its create commit.
    let winner = options(1);
    let hook = async move {
        WindowTable::open_or_create(&winner, Some(&record_schema()), AddressLayout::DtHour, size)
            .await
            .unwrap();
    }
    .boxed();
    let store = sluice_faults::FaultStore::with_hook_before_first_commit(
        Arc::new(object_store::local::LocalFileSystem::new()),
        hook,
    );
    let loser = TableOptions {
        store: Some(Arc::new(store)),
        ..options(0)
    };
    let mut table =
        WindowTable::open_or_create(&loser, Some(&record_schema()), AddressLayout::DtHour, size)
            .await
            .unwrap();
    assert_eq!(table.version(), Some(0));
    let commits: Vec<_> = std::fs::read_dir(dir.path().join("_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    assert_eq!(commits, ["00000000000000000000.json"]);
    let id = |t: &deltalake::DeltaTable| {
        serde_json::to_value(t.snapshot().unwrap().metadata()).unwrap()["id"].clone()
    };
    let reader = crate::open_table(&location, &Default::default(), None)
        .await
        .unwrap();
    assert_eq!(id(table.delta_table().await.unwrap()), id(&reader));
}

/// Resume offsets come from one replay of the log, whatever it holds (commits, a checkpoint
/// and the commits after it), and from delta-rs when that replay cannot vouch for them (the
/// commits before the checkpoint cleaned up and `_last_checkpoint` gone): the same offsets.
#[tokio::test]
async fn resume_offsets_survive_checkpoints_and_log_cleanup() {
    let dir = tempfile::tempdir().unwrap();
    let options = TableOptions {
        location: dir.path().to_str().unwrap().to_string(),
        checkpoint_interval: 2,
        ..TableOptions::new("")
    };
    let size = WindowSize::parse("1h").unwrap();
    let schema = record_schema();
    let open = || async {
        WindowTable::open_or_create(&options, Some(&schema), AddressLayout::DtHour, size)
            .await
            .unwrap()
    };
    let t = TimeFormat::Rfc3339
        .parse_str("2026-10-03T14:00:00Z")
        .unwrap();
    let window = Window::containing(size, t);
    let mut table = open().await;
    let address = AddressLayout::DtHour.address(window);
    let mut stager = Stager::new(table.store(), "a1", StageOptions::default());
    let schema = table.file_schema().clone();
    for offset in [10, 20, 30, 40, 50] {
        let staged = stager
            .stage(&address, &schema, vec![rows(&table, 2, offset)])
            .await
            .unwrap();
        table
            .publish(publication(window, vec![staged], offset))
            .await
            .unwrap();
    }
    let names = ["in.ndjson".to_string(), "never".to_string()];
    let log = dir.path().join("_delta_log");
    let checkpoint: u64 = std::fs::read_dir(&log)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".checkpoint.parquet")?.parse().ok()
        })
        .max()
        .expect("a checkpoint");
    let offsets = open().await.resume_offsets("p", &names).await.unwrap();
    assert_eq!(offsets, [("in.ndjson".to_string(), 50)].into());
    for v in 0..checkpoint {
        std::fs::remove_file(log.join(format!("{v:020}.json"))).unwrap();
    }
    std::fs::remove_file(log.join("_last_checkpoint")).unwrap();
    let offsets = open().await.resume_offsets("p", &names).await.unwrap();
    assert_eq!(offsets, [("in.ndjson".to_string(), 50)].into());
}
