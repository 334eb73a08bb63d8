use std::sync::Arc;

use object_store::local::LocalFileSystem;
use sluice_stage::{StageOptions, Stager};

use super::*;
use crate::testing::{hour, open, options_of, publish};
use crate::{compact, CompactRule};

/// (address, version, rows, reason) of each change.
fn summary(changes: &[WindowChange]) -> Vec<(String, u64, i64, ChangeReason)> {
    changes
        .iter()
        .map(|c| (c.address.clone(), c.version, c.rows, c.reason))
        .collect()
}

#[tokio::test]
async fn first_publications_are_complete_later_ones_rewritten_and_compaction_is_no_change() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = open(dir.path(), None, None).await;
    let created = table.version().unwrap();
    let mut feed = ChangeFeed::after(table.delta_table().await.unwrap(), "p")
        .await
        .unwrap();
    let mut stager = Stager::new(table.store(), "w", StageOptions::default());
    let (a, b) = (hour("2026-10-03T14:00:00Z"), hour("2026-10-03T15:00:00Z"));
    let v1 = publish(&mut table, &mut stager, a, 2, 10, 0).await;
    let v2 = publish(&mut table, &mut stager, b, 1, 5, 20).await;
    let v3 = publish(&mut table, &mut stager, a, 3, 10, 25).await;
    // Compaction rewrites a's files with the same rows: not a change of the window.
    let report = compact(
        &options_of(dir.path(), Arc::new(LocalFileSystem::new())),
        &CompactRule::default(),
        "c",
        9_000,
    )
    .await
    .unwrap();
    assert_eq!(report.compacted.len(), 1, "{report:?}");
    let fresh = crate::open_table(dir.path().to_str().unwrap(), &Default::default(), None)
        .await
        .unwrap();
    let changes = feed.read(&fresh).await.unwrap();
    let (ha, hb) = ("dt=2026-10-03/hour=14", "dt=2026-10-03/hour=15");
    assert_eq!(
        summary(&changes),
        [
            (ha.into(), v1, 20, ChangeReason::Complete),
            (hb.into(), v2, 5, ChangeReason::Complete),
            (ha.into(), v3, 30, ChangeReason::Rewritten),
        ]
    );
    assert_eq!(feed.through(), fresh.version().unwrap() as u64);
    assert!(v1 > created as u64);
    let c = &changes[2];
    assert_eq!(c.idempotency_key, format!("{}/{ha}/{v3}", c.table_id));
    assert!(!c.table_id.is_empty());
    assert_eq!(
        (
            c.window_start.as_str(),
            c.window_end.as_str(),
            c.pipeline.as_str()
        ),
        ("2026-10-03T14:00:00Z", "2026-10-03T15:00:00Z", "p")
    );
    // Nothing new: nothing read.
    assert!(feed.read(&fresh).await.unwrap().is_empty());

    // Another pipeline's feed sees none of it.
    let created_table = crate::open_table(
        dir.path().to_str().unwrap(),
        &Default::default(),
        Some(created as u64),
    )
    .await
    .unwrap();
    let mut other = ChangeFeed::after(&created_table, "q").await.unwrap();
    assert!(other.read(&fresh).await.unwrap().is_empty());

    // A feed started after v1 knows window a held rows then.
    let at_v1 = crate::open_table(dir.path().to_str().unwrap(), &Default::default(), Some(v1))
        .await
        .unwrap();
    let mut later = ChangeFeed::after(&at_v1, "p").await.unwrap();
    assert_eq!(
        summary(&later.read(&fresh).await.unwrap()),
        [
            (hb.into(), v2, 5, ChangeReason::Complete),
            (ha.into(), v3, 30, ChangeReason::Rewritten),
        ]
    );
}

/// A read that fails part way (here a commit that cannot be read) leaves the feed where it
/// was: the next read returns every change again, the ones before the failure included, so
/// a notifier that retries passes nothing over.
#[tokio::test]
async fn a_failed_read_leaves_the_feed_where_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = open(dir.path(), None, None).await;
    let mut feed = ChangeFeed::after(table.delta_table().await.unwrap(), "p")
        .await
        .unwrap();
    let before = feed.through();
    let mut stager = Stager::new(table.store(), "w", StageOptions::default());
    let (a, b) = (hour("2026-10-03T14:00:00Z"), hour("2026-10-03T15:00:00Z"));
    let v1 = publish(&mut table, &mut stager, a, 1, 4, 0).await;
    let v2 = publish(&mut table, &mut stager, b, 1, 6, 10).await;
    let fresh = crate::open_table(dir.path().to_str().unwrap(), &Default::default(), None)
        .await
        .unwrap();
    let commit = dir.path().join(format!("_delta_log/{v2:020}.json"));
    let aside = dir.path().join("aside.json");
    std::fs::rename(&commit, &aside).unwrap();
    let err = feed.read(&fresh).await.unwrap_err();
    assert!(
        matches!(err, NotifyLogError::Cleaned { version, .. } if version == v2),
        "{err}"
    );
    assert_eq!(feed.through(), before, "nothing was applied");
    std::fs::rename(&aside, &commit).unwrap();
    assert_eq!(
        summary(&feed.read(&fresh).await.unwrap()),
        [
            (
                "dt=2026-10-03/hour=14".into(),
                v1,
                4,
                ChangeReason::Complete
            ),
            (
                "dt=2026-10-03/hour=15".into(),
                v2,
                6,
                ChangeReason::Complete
            ),
        ]
    );
}

#[tokio::test]
async fn delivery_records_move_forward_only_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = open(dir.path(), None, None).await;
    let mut stager = Stager::new(table.store(), "w", StageOptions::default());
    let v1 = publish(
        &mut table,
        &mut stager,
        hour("2026-10-03T14:00:00Z"),
        1,
        3,
        0,
    )
    .await;
    let location = dir.path().to_str().unwrap();
    let mut delta = crate::open_table(location, &Default::default(), None)
        .await
        .unwrap();
    assert_eq!(notified_through(&delta, "p", "hook").await.unwrap(), None);
    let recorded = record_notified(&mut delta, "p", "hook", v1, 5_000)
        .await
        .unwrap()
        .expect("a first record commits");
    assert_eq!(recorded, v1 + 1);
    // Not backwards, not again.
    assert_eq!(
        record_notified(&mut delta, "p", "hook", v1, 6_000)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        record_notified(&mut delta, "p", "hook", v1 - 1, 6_000)
            .await
            .unwrap(),
        None
    );
    // The record is not a change of any window. (A run never commits a record beside its
    // writer: the writer records the marks itself. Here the writer re-reads the table.)
    let mut feed = ChangeFeed::after(&delta, "p").await.unwrap();
    table.reload().await.unwrap();
    let v3 = publish(
        &mut table,
        &mut stager,
        hour("2026-10-03T15:00:00Z"),
        1,
        3,
        3,
    )
    .await;
    let reopened = crate::open_table(location, &Default::default(), None)
        .await
        .unwrap();
    assert_eq!(
        notified_through(&reopened, "p", "hook").await.unwrap(),
        Some(v1)
    );
    assert_eq!(
        notified_through(&reopened, "p", "other").await.unwrap(),
        None
    );
    assert_eq!(
        summary(&feed.read(&reopened).await.unwrap()),
        [(
            "dt=2026-10-03/hour=15".into(),
            v3,
            3,
            ChangeReason::Complete
        )]
    );
    assert!(matches!(
        notified_through(&reopened, "p", "no/slash").await,
        Err(NotifyLogError::BadTargetName(_))
    ));
}

/// A sharded table: a window's first publications wait for the seals; it is `complete` at the
/// version whose commit moved the last seal of a shard holding files past its end, with the
/// rows of every shard, and `rewritten` at any later publication of any shard. A feed started
/// part way sorts the windows it finds the same way.
#[tokio::test]
async fn a_sharded_window_is_complete_when_the_last_shard_seals_past_it() {
    use crate::testing::record_schema;
    use sluice_window::{AddressLayout, Shard, TimeFormat, WindowSize};
    let dir = tempfile::tempdir().unwrap();
    let size = WindowSize::parse("1h").unwrap();
    let time = |t: &str| TimeFormat::Rfc3339.parse_str(t).unwrap().as_micros();
    let (w14, w15) = (hour("2026-10-03T14:00:00Z"), hour("2026-10-03T15:00:00Z"));
    let open_shard = |shard: u32| {
        let options = crate::TableOptions {
            location: dir.path().to_str().unwrap().to_string(),
            shard: Some(Shard(shard)),
            commit_retries: 15,
            ..crate::TableOptions::new("")
        };
        async move {
            crate::WindowTable::open_or_create(
                &options,
                Some(&record_schema()),
                AddressLayout::DtHour,
                size,
            )
            .await
            .unwrap()
        }
    };
    // Shard `shard` publishes `window` with `n` rows, sealed through `through`.
    let publish = |shard: u32, window: sluice_window::Window, n: i64, first: i64, through: &str| {
        let through = time(through);
        async move {
            let mut table = open_shard(shard).await;
            let address = table.address(window);
            let schema = table.file_schema().clone();
            let mut stager = Stager::new(
                table.store(),
                format!("s{shard}at{first}"),
                StageOptions::default(),
            );
            let file = stager
                .stage(
                    &address,
                    &schema,
                    vec![crate::testing::rows(&schema, first..first + n)],
                )
                .await
                .unwrap();
            let partition = format!("events/{shard}");
            table
                .publish(crate::Publication {
                    pipeline: "p".into(),
                    window,
                    files: vec![file],
                    replace: crate::Replace::AddLate,
                    coverage: crate::Coverage {
                        partition: partition.clone(),
                        offset: first + n,
                    },
                    txns: vec![
                        (partition, first + n),
                        (crate::shard_sealed_txn(Shard(shard)), through),
                    ],
                    position_ranges: serde_json::json!([]),
                    published_at_ms: 1_000,
                })
                .await
                .unwrap()
                .version
        }
    };
    let created = open_shard(4).await.version().unwrap();
    let at = |v: u64| {
        let location = dir.path().to_str().unwrap().to_string();
        async move {
            crate::open_table(&location, &Default::default(), Some(v))
                .await
                .unwrap()
        }
    };
    let mut feed = ChangeFeed::after(&at(created).await, "p").await.unwrap();
    let h14 = "dt=2026-10-03/hour=14";

    // Shard 4 publishes hour 14 but has not sealed it; shard 3 seals it: shard 4 holds it back.
    let v1 = publish(4, w14, 2, 0, "2026-10-03T14:59:00Z").await;
    assert!(feed.read(&at(v1).await).await.unwrap().is_empty());
    let v2 = publish(3, w14, 3, 0, "2026-10-03T15:00:00Z").await;
    assert!(feed.read(&at(v2).await).await.unwrap().is_empty());
    // Shard 4 moves on to hour 15: hour 14 is complete now, with both shards' rows.
    let v3 = publish(4, w15, 1, 2, "2026-10-03T15:10:00Z").await;
    let changes = feed.read(&at(v3).await).await.unwrap();
    assert_eq!(
        summary(&changes),
        [(h14.into(), v3, 5, ChangeReason::Complete)]
    );
    assert_eq!(
        changes[0].idempotency_key,
        format!("{}/{h14}/{v3}", changes[0].table_id)
    );
    assert_eq!(
        (
            changes[0].window_start.as_str(),
            changes[0].window_end.as_str()
        ),
        ("2026-10-03T14:00:00Z", "2026-10-03T15:00:00Z")
    );
    // Late rows of shard 3 rewrite it; hour 15 still waits for shard 3's seal.
    let v4 = publish(3, w14, 4, 3, "2026-10-03T15:00:00Z").await;
    assert_eq!(
        summary(&feed.read(&at(v4).await).await.unwrap()),
        [(h14.into(), v4, 9, ChangeReason::Rewritten)]
    );

    // Feeds started part way: at v2 hour 14 waits; at v3 it is complete already.
    let mut from_v2 = ChangeFeed::after(&at(v2).await, "p").await.unwrap();
    assert_eq!(
        summary(&from_v2.read(&at(v4).await).await.unwrap()),
        [
            (h14.into(), v3, 5, ChangeReason::Complete),
            (h14.into(), v4, 9, ChangeReason::Rewritten)
        ]
    );
    let mut from_v3 = ChangeFeed::after(&at(v3).await, "p").await.unwrap();
    assert_eq!(
        summary(&from_v3.read(&at(v4).await).await.unwrap()),
        [(h14.into(), v4, 9, ChangeReason::Rewritten)]
    );
    // Shard 3 seals past hour 15 with late rows of hour 14 (it has no rows of hour 15):
    // hour 15 still waits for shard 4, which then seals it with more rows of it.
    let v5 = publish(3, w14, 1, 7, "2026-10-03T16:00:00Z").await;
    assert_eq!(
        summary(&feed.read(&at(v5).await).await.unwrap()),
        [(h14.into(), v5, 10, ChangeReason::Rewritten)]
    );
    let v6 = publish(4, w15, 1, 3, "2026-10-03T16:05:00Z").await;
    assert_eq!(
        summary(&feed.read(&at(v6).await).await.unwrap()),
        [(
            "dt=2026-10-03/hour=15".into(),
            v6,
            2,
            ChangeReason::Complete
        )]
    );

    // Shard 5 (a partition that was behind) publishes its first files, rows of hour 14,
    // sealed only through 14:30: hours 14 and 15 are not complete at v7 any more (no
    // notification), and are complete again, with shard 5's rows, when it seals past them.
    let h15 = "dt=2026-10-03/hour=15";
    let v7 = publish(5, w14, 2, 0, "2026-10-03T14:30:00Z").await;
    assert!(feed.read(&at(v7).await).await.unwrap().is_empty());
    let v8 = publish(5, w15, 1, 2, "2026-10-03T16:00:00Z").await;
    let expected = [
        (h14.into(), v8, 12, ChangeReason::Complete),
        (h15.into(), v8, 3, ChangeReason::Complete),
    ];
    assert_eq!(summary(&feed.read(&at(v8).await).await.unwrap()), expected);
    // Whatever version a feed starts at, it tells the same from there on.
    for start in [v6, v7] {
        let mut late = ChangeFeed::after(&at(start).await, "p").await.unwrap();
        let changes = late.read(&at(v8).await).await.unwrap();
        assert_eq!(summary(&changes), expected, "a feed started at v{start}");
    }
}
