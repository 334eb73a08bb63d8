//! Crash points of a mirror (`--merge-scope table --sequence-field --delete-when`): a change
//! log with inserts, updates, deletes, keys created again, duplicates, late changes older
//! than a delete and a field new to the table from some change on, run through a store that crashes after operation N, for every N, then
//! restarted: the table always ends as the crash-free run left it, which is the log's final
//! state per key (a deleted key absent, never brought back); with history (`--scd 2`), the
//! versions the log implies.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use object_store::ObjectStore;
use sluice_faults::{FaultPlan, FaultStore};
use sluice_ingest::{
    DeletePredicate, DeleteRule, FixedClock, IngestConfig, Ingester, KeySpec, LatePolicy,
    PublishMode, RunSummary,
};
use sluice_publish::{
    DeadLetterTable, MergeScope, TableOptions, WindowTable, HISTORY_END_AT, HISTORY_START_AT,
};
use sluice_source::{LineDecoder, NdjsonSource};
use sluice_stage::StageOptions;
use sluice_window::TimeFormat;

use crate::harness::{layout, local_root, sql_lines, window_size};

/// One change of the log: key, operation, sequence, minute and second of its event time.
type Change = (&'static str, &'static str, i64, (u32, u32));

/// The log in delivery order (at least once, partly out of order). Sequences are the
/// source's order; event times come from clocks that disagree with it now and then.
#[rustfmt::skip]
const LOG: &[Change] = &[
    ("k1", "c", 1, (0, 5)),
    ("k2", "c", 2, (0, 10)),
    ("k3", "c", 3, (0, 20)),
    ("k1", "u", 4, (0, 40)),
    ("k2", "d", 6, (1, 5)),
    ("k4", "c", 7, (1, 10)),
    // Delivered again, late.
    ("k1", "u", 4, (0, 40)),
    ("k3", "u", 8, (1, 50)),
    ("k5", "c", 9, (2, 0)),
    // Older than k2's delete, arriving after it: k2 stays deleted.
    ("k2", "u", 5, (0, 50)),
    ("k5", "d", 10, (2, 20)),
    ("k4", "u", 11, (2, 30)),
    ("k5", "c", 12, (3, 5)),
    ("k3", "d", 13, (3, 10)),
    ("k6", "d", 14, (3, 20)),
    // A clock behind: k4's update lands in an earlier window than its row.
    ("k4", "u", 15, (1, 30)),
    // Older than k3's delete, in a window already published.
    ("k3", "u", 9, (1, 55)),
    ("k6", "c", 16, (4, 0)),
    ("k1", "d", 17, (4, 10)),
    ("k7", "c", 18, (6, 0)),
];

/// From this sequence on, changes carry a field the table does not have yet (`note`): the
/// source's schema grew, and the mirror adds the column before the MERGE of its rows.
const NOTE_FROM: i64 = 12;

/// `note` of a change: its text from [`NOTE_FROM`] on, else empty (null).
fn note(lsn: i64) -> String {
    if lsn >= NOTE_FROM {
        format!("n{lsn}")
    } else {
        String::new()
    }
}

fn line((id, op, lsn, (minute, second)): &Change) -> String {
    let note = match *lsn >= NOTE_FROM {
        true => format!(",\"note\":\"{}\"", note(*lsn)),
        false => String::new(),
    };
    format!(
        "{{\"id\":\"{id}\",\"op\":\"{op}\",\"lsn\":{lsn},\"ts\":\"2026-10-03T14:{minute:02}:{second:02}Z\",\"balance\":{}{note}}}\n",
        lsn * 10
    )
}

/// The versions of the log (`--scd 2`): `id,lsn,balance,note,start,end` of each change that is
/// not a delete, from its sequence to its key's next one (-1: current).
fn model_history() -> Vec<String> {
    let mut by_key: BTreeMap<&str, Vec<&Change>> = BTreeMap::new();
    for c in LOG {
        by_key.entry(c.0).or_default().push(c);
    }
    let mut out = Vec::new();
    for (_, mut changes) in by_key {
        changes.sort_by_key(|c| c.2);
        changes.dedup_by_key(|c| c.2);
        for (j, (id, op, lsn, _)) in changes.iter().enumerate() {
            if *op != "d" {
                let end = changes.get(j + 1).map_or(-1, |n| n.2);
                out.push(format!(
                    "{id},{lsn},{},{},{lsn},{end}",
                    lsn * 10,
                    note(*lsn)
                ));
            }
        }
    }
    out.sort();
    out
}

/// `id,lsn,balance,note` of each key whose change with the highest sequence is not a delete.
fn model() -> Vec<String> {
    let mut last: BTreeMap<&str, &Change> = BTreeMap::new();
    for c in LOG {
        let e = last.entry(c.0).or_insert(c);
        if c.2 > e.2 {
            *e = c;
        }
    }
    last.values()
        .filter(|(_, op, _, _)| *op != "d")
        .map(|(id, _, lsn, _)| format!("{id},{lsn},{},{}", lsn * 10, note(*lsn)))
        .collect()
}

fn config(table_dir: &Path, store: Arc<dyn ObjectStore>, history: bool) -> IngestConfig {
    IngestConfig {
        expectations: Default::default(),
        pipeline: "mirror".into(),
        window: window_size(),
        layout: layout(),
        lateness_ms: 30_000,
        key: Some(KeySpec {
            columns: vec!["id".into()],
            time_field: "ts".into(),
            time: TimeFormat::Rfc3339.into(),
            sequence: vec!["lsn".into()],
        }),
        late: LatePolicy::Rewrite,
        mode: PublishMode::Merge(MergeScope::Table),
        max_rewrite_age_ms: None,
        skew: sluice_window::SkewGuard::DEFAULT,
        flush_bytes_max: 16 << 20,
        chunk_bytes: 400,
        late_batch_ms: 0,
        chunks_in_flight_max: 2,
        decode_threads: 1,
        group_windows_max: 256,
        stage: StageOptions::default(),
        restart: sluice_ingest::RestartPolicy::immediate(0),
        compact: None,
        retain_ms: None,
        deletes: Some(DeleteRule {
            when: DeletePredicate::new("op = 'd'"),
            tombstones: TableOptions {
                store: Some(store),
                ..TableOptions::new(format!("{}_tombstones", table_dir.display()))
            },
        }),
        history,
    }
}

/// One run of the log into `table_dir` through `store`.
async fn run(
    input: &Path,
    table_dir: &Path,
    store: Arc<dyn ObjectStore>,
    attempt: &str,
    history: bool,
) -> Result<RunSummary, String> {
    let options = TableOptions {
        store: Some(store.clone()),
        ..TableOptions::new(table_dir.to_str().expect("utf-8 path"))
    };
    let field = |name: &str, t: DataType| Field::new(name, t, true);
    let mut fields = vec![
        field("id", DataType::Utf8),
        field("op", DataType::Utf8),
        field("lsn", DataType::Int64),
        field("ts", DataType::Utf8),
        field("balance", DataType::Int64),
    ];
    if history {
        fields.push(field(HISTORY_START_AT, DataType::Int64));
        fields.push(field(HISTORY_END_AT, DataType::Int64));
    }
    let schema: SchemaRef = Arc::new(Schema::new(fields));
    let table = WindowTable::open_or_create(&options, Some(&schema), layout(), window_size())
        .await
        .map_err(|e| format!("open: {e}"))?;
    let dlq = DeadLetterTable::open_or_create(&TableOptions {
        location: format!("{}_dlq", table_dir.display()),
        ..options.clone()
    })
    .await
    .map_err(|e| format!("open the dead-letter table: {e}"))?;
    let source = NdjsonSource::open(input).map_err(|e| e.to_string())?;
    let decoder = LineDecoder::new(
        table.record_schema(),
        sluice_source::DecodeOptions::new("ts", TimeFormat::Rfc3339),
    )
    .map_err(|e| e.to_string())?;
    let clock = FixedClock(1_800_000_000_000);
    let ingester = Ingester::recover(
        config(table_dir, store, history),
        source,
        decoder,
        table,
        dlq,
        attempt.into(),
        &clock,
    )
    .await
    .map_err(|e| format!("recover: {e}"))?;
    let (summary, _) = ingester.run().await.map_err(|e| format!("run: {e}"))?;
    Ok(summary)
}

async fn rows(table_dir: &Path, history: bool) -> Vec<String> {
    let sql = match history {
        true => "SELECT id, lsn, balance, note, __start_at, coalesce(__end_at, -1) FROM t",
        false => "SELECT id, lsn, balance, note FROM t",
    };
    sql_lines(&[("t", table_dir.display().to_string())], sql).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_of_a_mirror_with_deletes_ends_as_the_clean_run() {
    crash_points(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_of_a_history_with_deletes_ends_as_the_clean_run() {
    crash_points(true).await;
}

async fn crash_points(history: bool) {
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("log");
    std::fs::create_dir_all(&input).unwrap();
    let text: String = LOG.iter().map(line).collect();
    std::fs::write(input.join("changes.ndjson"), &text).unwrap();

    let oracle_dir = tmp.path().join("oracle");
    let counting = FaultStore::new(local_root(), FaultPlan::PassThrough);
    let summary = run(
        &input,
        &oracle_dir,
        Arc::new(counting.clone()),
        "oracle",
        history,
    )
    .await
    .expect("the crash-free run succeeds");
    let k = counting.ops();
    let oracle = rows(&oracle_dir, history).await;
    let model = if history { model_history() } else { model() };
    assert_eq!(oracle, model, "the crash-free run is the log's final state");
    assert!(
        summary.late >= 2 && summary.windows_published >= 5,
        "{summary:?}"
    );
    // A replay of the whole log, as a new file, changes nothing.
    let version = |dir: &Path| {
        let log = dir.join("_delta_log");
        std::fs::read_dir(log).unwrap().count()
    };
    let before = version(&oracle_dir);
    std::fs::write(input.join("replayed.ndjson"), &text).unwrap();
    run(&input, &oracle_dir, local_root(), "replay", history)
        .await
        .expect("the replay succeeds");
    assert_eq!(rows(&oracle_dir, history).await, oracle);
    assert_eq!(
        version(&oracle_dir),
        before,
        "a replay of the log commits nothing"
    );
    std::fs::remove_file(input.join("replayed.ndjson")).unwrap();

    let mut failures = Vec::new();
    for n in 1..=k {
        let dir = tmp.path().join(format!("crash-{n}"));
        let crashing = FaultStore::new(local_root(), FaultPlan::CrashAfter { ops: n });
        let first = run(&input, &dir, Arc::new(crashing.clone()), "a", history).await;
        let outcome = match run(&input, &dir, local_root(), "b", history).await {
            Err(e) => Err(format!("the restarted run failed: {e}")),
            Ok(_) => {
                let got = rows(&dir, history).await;
                match got == oracle {
                    true => Ok(()),
                    false => Err(format!("rows {got:?}, the clean run's {oracle:?}")),
                }
            }
        };
        if let Err(e) = outcome {
            let op = crashing.log().into_iter().find(|r| r.n == n);
            failures.push(format!(
                "crash point N={n} (crashed run: {}; operation N: {op:?}): {e}",
                first.map_or_else(|e| e, |_| "finished".into())
            ));
        }
        std::fs::remove_dir_all(&dir).ok();
    }
    println!(
        "crash points ({} with deletes): K = {k} object-store operations, {} of {k} points passed, {:.1} s",
        if history { "history" } else { "mirror" },
        k - failures.len() as u64,
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
