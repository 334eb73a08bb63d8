use std::sync::Arc;

use object_store::local::LocalFileSystem;
use sluice_stage::{StageOptions, Stager};
use sluice_window::{TimeFormat, Window, WindowSize};

use super::*;
use crate::testing::{hour, offsets_at, open, options_of, publish};

fn at(text: &str) -> EventTime {
    TimeFormat::Rfc3339.parse_str(text).unwrap()
}

fn rule(ended_before: &str, dry_run: bool) -> ExpireRule {
    ExpireRule {
        ended_before: at(ended_before),
        window: None,
        dry_run,
    }
}

#[tokio::test]
async fn expiry_removes_exactly_the_windows_that_ended_before_the_cutoff() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = open(dir.path(), None, None).await;
    let mut stager = Stager::new(table.store(), "w", StageOptions::default());
    let windows: Vec<Window> = ["12", "13", "14"]
        .iter()
        .map(|h| hour(&format!("2026-10-03T{h}:00:00Z")))
        .collect();
    for (i, w) in windows.iter().enumerate() {
        publish(&mut table, &mut stager, *w, 2, 10, 100 * i as i64).await;
    }
    let options = options_of(dir.path(), Arc::new(LocalFileSystem::new()));
    let version = table.version();

    // The 13:00 window ends at 14:00, not before it: only 12:00 is due. A dry run says so
    // and commits nothing.
    let dry = expire(&options, &rule("2026-10-03T14:00:00Z", true), 9_000)
        .await
        .unwrap();
    let addresses: Vec<&str> = dry.expired.iter().map(|e| e.address.as_str()).collect();
    assert_eq!(addresses, ["dt=2026-10-03/hour=12"]);
    assert_eq!(
        (
            dry.expired[0].files,
            dry.expired[0].rows,
            dry.expired[0].version
        ),
        (2, 20, None)
    );
    table.reload().await.unwrap();
    assert_eq!(table.version(), version);

    let done = expire(&options, &rule("2026-10-03T14:00:00Z", false), 9_000)
        .await
        .unwrap();
    assert_eq!(done.expired.len(), 1);
    assert_eq!(done.expired[0].version, Some(version.unwrap() + 1));
    table.reload().await.unwrap();
    assert_eq!(table.windows().await.unwrap(), windows[1..].to_vec());
    assert_eq!(
        offsets_at(&mut table, windows[1]).await,
        (100..120).collect::<Vec<_>>()
    );
    // Twice changes nothing; a microsecond later the 13:00 window is due too.
    let again = expire(&options, &rule("2026-10-03T14:00:00Z", false), 9_500)
        .await
        .unwrap();
    assert!(again.expired.is_empty(), "{again:?}");
    let later = expire(&options, &rule("2026-10-03T14:00:00.000001Z", false), 9_600)
        .await
        .unwrap();
    assert_eq!(later.expired.len(), 1);
    table.reload().await.unwrap();
    assert_eq!(table.windows().await.unwrap(), windows[2..].to_vec());
    // The removals change data: a derived table sees both windows change.
    let now = table.version().unwrap();
    let changed =
        crate::addresses_changed(table.delta_table().await.unwrap(), version.unwrap(), now)
            .await
            .unwrap()
            .unwrap();
    assert_eq!(changed.len(), 2);
}

#[tokio::test]
async fn a_writer_expiring_its_windows_keeps_publishing_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = open(dir.path(), None, None).await;
    let mut stager = Stager::new(table.store(), "w", StageOptions::default());
    let (a, b) = (hour("2026-10-03T12:00:00Z"), hour("2026-10-03T13:00:00Z"));
    publish(&mut table, &mut stager, a, 1, 10, 0).await;
    publish(&mut table, &mut stager, b, 1, 10, 10).await;
    table.files_at(&table.address(a)).await.unwrap();
    let gone = table
        .expire_windows("p", at("2026-10-03T13:30:00Z"), |_| false, 5_000)
        .await
        .unwrap();
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].address, "dt=2026-10-03/hour=12");
    // The index knows: the window is gone, and a swap of b replaces only b's file.
    assert!(table.files_at(&table.address(a)).await.unwrap().is_empty());
    publish(&mut table, &mut stager, b, 1, 5, 20).await;
    table.reload().await.unwrap();
    assert_eq!(table.windows().await.unwrap(), vec![b]);
    assert_eq!(
        offsets_at(&mut table, b).await,
        (20..25).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_window_start_table_without_recorded_options_needs_the_window_size() {
    let dir = tempfile::tempdir().unwrap();
    let options = TableOptions {
        location: dir.path().to_str().unwrap().to_string(),
        ..TableOptions::new("")
    };
    let size = WindowSize::parse("15m").unwrap();
    let mut table = WindowTable::open_or_create(
        &options,
        Some(&crate::testing::record_schema()),
        AddressLayout::WindowStart,
        size,
    )
    .await
    .unwrap();
    let mut stager = Stager::new(table.store(), "w", StageOptions::default());
    let w = Window::containing(size, at("2026-10-03T12:00:00Z"));
    publish(&mut table, &mut stager, w, 1, 3, 0).await;
    let err = expire(&options, &rule("2026-10-04T00:00:00Z", true), 1)
        .await
        .unwrap_err();
    assert!(matches!(err, ExpireError::NoWindowSize { .. }), "{err}");
    // Given the size, the window [12:00, 12:15) is due at 12:15:00.000001, not at 12:15.
    let sized = |before: &str| ExpireRule {
        window: Some(size),
        ..rule(before, false)
    };
    let kept = expire(&options, &sized("2026-10-03T12:15:00Z"), 1)
        .await
        .unwrap();
    assert!(kept.expired.is_empty());
    let gone = expire(&options, &sized("2026-10-03T12:15:00.000001Z"), 1)
        .await
        .unwrap();
    assert_eq!(gone.expired.len(), 1);
}
