use deltalake::arrow::array::{Array, Int64Array, StringArray};

use super::*;
use crate::table::OpenError;
use crate::{DeadLetter, DeadLetterOwner, TableOptions};

fn options(dir: &std::path::Path) -> TableOptions {
    TableOptions::new(dir.to_str().unwrap())
}

fn letter(offset: i64) -> DeadLetter {
    DeadLetter {
        source: "in".into(),
        offset,
        reason: "malformed_json".into(),
        detail: "expected value".into(),
        raw: format!("{{torn {offset}"),
        window: None,
    }
}

/// `pipeline`'s dead letters for the table of id `t1`.
fn owner(pipeline: &str) -> DeadLetterOwner {
    DeadLetterOwner {
        pipeline: pipeline.into(),
        table_id: "t1".into(),
        contract: String::new(),
    }
}

/// Appends one dead letter of `pipeline` at `offset`, detected at `at_ms`.
async fn append(table: &mut DeadLetterTable, pipeline: &str, offset: i64, at_ms: i64) {
    let options = sluice_stage::StageOptions::default();
    let attempt = format!("{pipeline}-{offset}-{at_ms}");
    let mut stager = sluice_stage::Stager::new(table.store(), attempt, options);
    table
        .append(
            &owner(pipeline),
            &[letter(offset)],
            &[("in".into(), offset + 1)],
            at_ms,
            &mut stager,
        )
        .await
        .unwrap();
}

/// (pipeline, source offset) of every dead letter in the table, sorted.
async fn letters(table: &DeadLetterTable) -> Vec<(String, i64)> {
    let store = table.table.log_store().object_store(None);
    let mut out = Vec::new();
    let snapshot = table.table.snapshot().unwrap();
    for view in snapshot.log_data().iter() {
        for batch in sluice_stage::read_parquet(store.as_ref(), &view.path())
            .await
            .unwrap()
        {
            let column = |name: &str| batch.column_by_name(name).unwrap().clone();
            let pipelines = column("pipeline");
            let pipelines = pipelines.as_any().downcast_ref::<StringArray>().unwrap();
            let offsets = column("source_offset");
            let offsets = offsets.as_any().downcast_ref::<Int64Array>().unwrap();
            for i in 0..batch.num_rows() {
                assert!(!pipelines.is_null(i));
                out.push((pipelines.value(i).to_string(), offsets.value(i)));
            }
        }
    }
    out.sort();
    out
}

fn rule(before_ms: i64, pipeline: Option<&str>, dry_run: bool) -> DeadLetterExpiryRule {
    DeadLetterExpiryRule {
        detected_before_ms: before_ms,
        pipeline: pipeline.map(str::to_string),
        meant_for: MeantFor::Any,
        dry_run,
    }
}

const DAY_MS: i64 = 86_400_000;

fn pairs(list: &[(&str, i64)]) -> Vec<(String, i64)> {
    list.iter().map(|(p, o)| (p.to_string(), *o)).collect()
}

#[tokio::test]
async fn expiry_removes_exactly_the_dead_letters_detected_before_the_cutoff() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = DeadLetterTable::open_or_create(&options(dir.path()))
        .await
        .unwrap();
    // Pipeline a: detected on days 1, 2 and 3; pipeline b: day 1. Instants with a
    // sub-second part, which the log's statistics keep to the millisecond.
    let t = |day: i64| day * DAY_MS + 123;
    append(&mut table, "a", 10, t(1)).await;
    append(&mut table, "a", 20, t(2)).await;
    append(&mut table, "a", 30, t(3)).await;
    append(&mut table, "b", 40, t(1)).await;
    let version = table.table.version().unwrap();

    // A dry run reports and commits nothing.
    let dry = table
        .expire(&rule(t(2), Some("a"), true), t(9))
        .await
        .unwrap();
    assert_eq!((dry.files, dry.rows, dry.version), (1, 1, None));
    assert_eq!(table.table.version().unwrap(), version);
    assert_eq!(letters(&table).await.len(), 4);

    // The cutoff is strict: a's day-2 letter, detected exactly at it, stays; b's day-1
    // letter is another pipeline's.
    let done = table
        .expire(&rule(t(2), Some("a"), false), t(9))
        .await
        .unwrap();
    assert_eq!((done.files, done.rows), (1, 1), "{done:?}");
    assert_eq!(done.version, Some(version + 1));
    assert_eq!(done.files_kept_whole, 0);
    // The next of a's files falls due once the cutoff passes its (millisecond) instant.
    assert_eq!(done.next_due_ms, Some(t(2) + 1));
    assert_eq!(
        letters(&table).await,
        pairs(&[("a", 20), ("a", 30), ("b", 40)])
    );

    // Again: nothing due, nothing committed.
    let again = table
        .expire(&rule(t(2), Some("a"), false), t(9))
        .await
        .unwrap();
    assert_eq!((again.files, again.version), (0, None));
    assert_eq!(table.table.version().unwrap(), version + 1);

    // Every pipeline's, one millisecond past day 2: b's day-1 and a's day-2 letters go.
    let all = table
        .expire(&rule(t(2) + 1, None, false), t(9))
        .await
        .unwrap();
    assert_eq!((all.files, all.rows), (2, 2), "{all:?}");
    assert_eq!(letters(&table).await, pairs(&[("a", 30)]));

    // The dead-letter offsets stay: a replay still skips the expired records.
    let offsets = table
        .committed_offsets(&owner("a"), &["in".into()])
        .await
        .unwrap();
    assert_eq!(offsets.get("in"), Some(&31));
    let offsets = table
        .committed_offsets(&owner("b"), &["in".into()])
        .await
        .unwrap();
    assert_eq!(offsets.get("in"), Some(&41));

    // Another process reads the same table as this one left it.
    let reopened = DeadLetterTable::open(&options(dir.path())).await.unwrap();
    assert_eq!(letters(&reopened).await, pairs(&[("a", 30)]));
}

#[tokio::test]
async fn a_dead_letter_appended_meanwhile_survives_an_expiry_and_a_lost_race_replans() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = DeadLetterTable::open_or_create(&options(dir.path()))
        .await
        .unwrap();
    append(&mut writer, "a", 10, DAY_MS).await;
    let mut first = DeadLetterTable::open(&options(dir.path())).await.unwrap();
    let mut second = DeadLetterTable::open(&options(dir.path())).await.unwrap();
    // The writer appends a new dead letter after both expirers read the table.
    append(&mut writer, "a", 20, 5 * DAY_MS).await;

    // A blind append does not conflict with the removal: it lands beside it.
    let done = first
        .expire(&rule(2 * DAY_MS, None, false), 6 * DAY_MS)
        .await
        .unwrap();
    assert_eq!((done.files, done.rows), (1, 1));
    // The second expirer planned the same file: its commit conflicts, it re-reads the
    // table and finds nothing left to do.
    let late = second
        .expire(&rule(2 * DAY_MS, None, false), 6 * DAY_MS)
        .await
        .unwrap();
    assert_eq!((late.files, late.version), (0, None), "{late:?}");

    let reader = DeadLetterTable::open(&options(dir.path())).await.unwrap();
    assert_eq!(letters(&reader).await, pairs(&[("a", 20)]));
}

#[tokio::test]
async fn opening_for_expiry_refuses_a_missing_table_and_one_that_is_not_dead_letters() {
    let dir = tempfile::tempdir().unwrap();
    let missing = DeadLetterTable::open(&options(&dir.path().join("nothing"))).await;
    assert!(
        matches!(missing, Err(DeadLetterError::Open(OpenError::NoTable(_)))),
        "{missing:?}"
    );
    let data = dir.path().join("data");
    crate::testing::open(&data, None, None).await;
    let refused = DeadLetterTable::open(&options(&data)).await;
    assert!(
        matches!(
            refused,
            Err(DeadLetterError::NotDeadLetters {
                column: "pipeline",
                ..
            })
        ),
        "{refused:?}"
    );
}

/// Dead letters of a table once at the location go, whatever their age; the table's own
/// stay; without a table there, every table's go.
#[tokio::test]
async fn the_dead_letters_of_other_tables_go_and_the_tables_own_stay() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = DeadLetterTable::open_or_create(&options(dir.path()))
        .await
        .unwrap();
    let append_for = |table_id: &'static str, offset: i64| {
        let owner = DeadLetterOwner {
            pipeline: "p".into(),
            table_id: table_id.into(),
            contract: String::new(),
        };
        (owner, offset)
    };
    for (owner, offset) in [
        append_for("old", 1),
        append_for("new", 2),
        append_for("old", 3),
    ] {
        let mut stager = sluice_stage::Stager::new(
            table.store(),
            format!("a{offset}"),
            sluice_stage::StageOptions::default(),
        );
        table
            .append(
                &owner,
                &[letter(offset)],
                &[("in".into(), offset + 1)],
                10 * DAY_MS,
                &mut stager,
            )
            .await
            .unwrap();
    }
    let others = |current: Option<&str>, dry_run: bool| DeadLetterExpiryRule {
        detected_before_ms: i64::MAX,
        pipeline: None,
        meant_for: MeantFor::OtherThan(current.map(str::to_string)),
        dry_run,
    };
    let found = table
        .expire(&others(Some("new"), true), 20 * DAY_MS)
        .await
        .unwrap();
    assert_eq!((found.files, found.rows, found.version), (2, 2, None));
    assert_eq!(letters(&table).await.len(), 3);
    let removed = table
        .expire(&others(Some("new"), false), 20 * DAY_MS)
        .await
        .unwrap();
    assert_eq!((removed.files, removed.rows), (2, 2));
    assert_eq!(letters(&table).await, pairs(&[("p", 2)]));
    // No table at the location now: the rest are another table's too.
    let removed = table
        .expire(&others(None, false), 20 * DAY_MS)
        .await
        .unwrap();
    assert_eq!(removed.rows, 1);
    assert!(letters(&table).await.is_empty());
}
