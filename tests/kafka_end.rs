//! The end of a bounded Kafka run (`--until-idle`) when its last publication conflicts.
//!
//! A run that reaches its idle time publishes every window its partitions hold. That commit
//! can lose a race that has nothing to do with who owns the partition: another shard's
//! commit grew the table's schema (deltalake reports `MetadataChanged`), or carries a `txn`
//! this commit also carries. The run used to take any conflict there for "the partition has
//! a new owner", leave, and end successfully with the partition's last rows only in the
//! topic. Here the conflict is placed deterministically, between the run's last reads of the
//! table and its commit (the store's hook before the first commit), and the rows must land.

use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::kernel::{DataType as DeltaType, StructField};
use sluice_faults::{FaultPlan, FaultStore};
use sluice_ingest::{
    Clock, IngestConfig, KafkaRun, KeySpec, LatePolicy, PublishMode, SHARD_COMMIT_RETRIES,
};
use sluice_publish::{RetryPolicy, TableOptions, WindowTable};
use sluice_source::kafka::{KafkaOptions, StartAt};
use sluice_source::{DecodeOptions, LineDecoder};
use sluice_window::{AddressLayout, Shard, TimeFormat, WindowSize};
use tokio::sync::watch;

use crate::common::scalar;
use crate::servers::{create_topic, produce, tansu};

/// Rows in the topic: all in one hour, so no window seals before the run's end.
const EVENTS: usize = 300;

struct Wall;

impl Clock for Wall {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis() as i64
    }
}

fn record_schema() -> Arc<Schema> {
    let text = |name| Field::new(name, DataType::Utf8, true);
    Arc::new(Schema::new(vec![
        text("event_id"),
        text("ts"),
        text("user_id"),
        text("country"),
        text("kind"),
        Field::new("amount", DataType::Float64, true),
    ]))
}

fn config(window: WindowSize) -> IngestConfig {
    IngestConfig {
        expectations: Default::default(),
        pipeline: "sluice".into(),
        window,
        layout: AddressLayout::default_for(window),
        lateness_ms: 10 * 60_000,
        key: Some(KeySpec {
            columns: vec!["event_id".into()],
            time_field: "ts".into(),
            time: TimeFormat::Rfc3339.into(),
            sequence: Vec::new(),
        }),
        flush_bytes_max: 16 << 20,
        chunk_bytes: 4 << 20,
        chunks_in_flight_max: 2,
        decode_threads: 2,
        group_windows_max: 256,
        late_batch_ms: 0,
        stage: Default::default(),
        restart: sluice_ingest::RestartPolicy::new(5),
        late: LatePolicy::Rewrite,
        mode: PublishMode::Swap,
        max_rewrite_age_ms: None,
        skew: sluice_window::SkewGuard::DEFAULT,
        compact: None,
        retain_ms: None,
        deletes: None,
        history: false,
    }
}

/// The topic's messages: `EVENTS` distinct events in one hour.
fn events() -> Vec<(String, Vec<u8>)> {
    (0..EVENTS)
        .map(|i| {
            let line = serde_json::json!({
                "event_id": format!("e{i:04}"),
                "ts": format!("2026-10-03T10:{:02}:{:02}Z", i / 60 % 60, i % 60),
                "user_id": format!("u{}", i % 7),
                "country": "PT",
                "kind": "view",
                "amount": i as f64,
            });
            (format!("k{i}"), line.to_string().into_bytes())
        })
        .collect()
}

/// A bounded run (it ends after 3 s without messages) of `topic` into the table at
/// `table_dir`, read and written through `store`, as consumer group `group`.
fn bounded_run(
    broker: &str,
    topic: &str,
    group: &str,
    table_dir: &std::path::Path,
    store: Arc<dyn object_store::ObjectStore>,
    config: IngestConfig,
) -> KafkaRun {
    let mut options = TableOptions::new(table_dir.to_str().unwrap());
    options.store = Some(store);
    options.commit_retries = SHARD_COMMIT_RETRIES;
    let dlq = format!("{}_dlq", table_dir.display());
    KafkaRun {
        config,
        kafka: KafkaOptions {
            brokers: broker.into(),
            topic: topic.into(),
            group: group.into(),
            start: StartAt::Earliest,
            client_options: Vec::new(),
            chunk_messages_max: KafkaOptions::CHUNK_MESSAGES_MAX_DEFAULT,
            chunk_ms_max: KafkaOptions::CHUNK_MS_MAX_DEFAULT,
            payload: Default::default(),
        },
        dlq: TableOptions::new(dlq),
        table: options,
        record_schema: Some(record_schema()),
        decoder: LineDecoder::new(
            record_schema(),
            DecodeOptions::new("ts", TimeFormat::Rfc3339),
        )
        .unwrap(),
        attempt: group.into(),
        until_idle_ms: Some(3_000),
        max_events: None,
        tick_ms: sluice_ingest::TICK_MS_DEFAULT,
        idle_timeout_ms: None,
    }
}

#[test]
fn a_conflict_at_the_end_of_a_bounded_run_is_re_read_and_landed_not_left_in_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let broker = tansu();
    create_topic(&broker, "events", 1);
    let messages = events();
    produce(&broker, "events", &messages);

    let table_dir = dir.path().join("events");
    let location = table_dir.to_str().unwrap().to_string();
    let window = WindowSize::parse("1h").unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let summary = runtime.block_on(async {
        // The sharded table exists before the run, so the run's first commit attempt is its
        // last publication.
        let mut plain = TableOptions::new(location.clone());
        plain.shard = Some(Shard(0));
        let table = WindowTable::open_or_create(
            &plain,
            Some(&record_schema()),
            AddressLayout::default_for(window),
            window,
        )
        .await
        .unwrap();
        let decoder = LineDecoder::new(
            table.record_schema(),
            DecodeOptions::new("ts", TimeFormat::Rfc3339),
        )
        .unwrap();
        drop(table);

        // Another shard's writer grows the schema just before that commit.
        let grow_at = location.clone();
        let hook = Box::pin(async move {
            let table = sluice_publish::open_table(&grow_at, &Default::default(), None)
                .await
                .unwrap();
            table
                .add_columns()
                .with_fields([StructField::new("coupon", DeltaType::STRING, true)])
                .await
                .unwrap();
        });
        let store = FaultStore::with_hook_before_first_commit(
            Arc::new(object_store::local::LocalFileSystem::new()),
            hook,
        );
        let mut run = bounded_run(
            &broker.address,
            "events",
            "end",
            &table_dir,
            Arc::new(store),
            config(window),
        );
        run.record_schema = None;
        run.decoder = decoder;
        let (_stop, stopped) = watch::channel(false);
        run.run(&Wall, stopped)
            .await
            .expect("the run ends by idle time")
    });
    eprintln!(
        "run: {} messages, {} restarts from the table, {} commits",
        summary.messages, summary.run.restarts, summary.run.commits
    );

    // The conflict was met (the schema grew under the run) and the run went on.
    assert!(summary.run.restarts >= 1, "{summary:?}");
    let rows = scalar(
        &table_dir,
        "SELECT count(*), count(DISTINCT event_id), count(coupon) FROM t",
    );
    assert_eq!(rows, format!("{EVENTS},{EVENTS},0"));
    // The partition's position is past its last message: a later run replays nothing.
    let position = crate::common::commits(&table_dir)
        .values()
        .flatten()
        .filter(|a| a["txn"]["appId"] == "sluice/events/0")
        .map(|a| a["txn"]["version"].as_i64().unwrap())
        .max();
    assert_eq!(position, Some(EVENTS as i64));
}

/// The one restart rule in a Kafka run (the other modes' tests are the ingest crate's
/// `resilience::modes`): an outage of the table's store at the partition writer's first
/// staged file is resumed from the re-read table and every message lands once; a store that
/// never comes back ends the run after `--restarts-max` restarts in a row, with the limit's
/// message.
#[test]
fn a_kafka_run_resumes_after_an_outage_and_ends_at_its_restart_limit() {
    let dir = tempfile::tempdir().unwrap();
    let broker = tansu();
    create_topic(&broker, "outage", 1);
    produce(&broker, "outage", &events());
    let window = WindowSize::parse("1h").unwrap();
    let config = IngestConfig {
        restart: sluice_ingest::RestartPolicy::immediate(2),
        ..config(window)
    };
    let local = || -> Arc<dyn object_store::ObjectStore> {
        Arc::new(object_store::local::LocalFileSystem::new())
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let run = |name: &str, store: FaultStore| {
        let table_dir = dir.path().join(name);
        let mut run = bounded_run(
            &broker.address,
            "outage",
            name,
            &table_dir,
            Arc::new(store),
            config.clone(),
        );
        // No retry of the failed operation itself: the failure reaches the restart rule.
        run.table.retry = RetryPolicy {
            attempts_max: 1,
            backoff_ms_base: 0,
            backoff_ms_max: 0,
            jitter_seed: 1,
        };
        let (_stop, stopped) = watch::channel(false);
        let ran = runtime.block_on(run.run(&Wall, stopped));
        (table_dir, ran)
    };

    let counting = FaultStore::new(local(), FaultPlan::PassThrough);
    let (_, probe) = run("probe", counting.clone());
    probe.expect("a run on a working store");
    let first_staged = counting
        .log()
        .iter()
        .find(|r| r.kind == "put" && r.path.ends_with(".parquet"))
        .map(|r| r.n)
        .expect("the run stages a file");

    let outage = FaultStore::new(
        local(),
        FaultPlan::Outage {
            from: first_staged,
            ops: 2,
        },
    );
    let (table_dir, resumed) = run("resumed", outage.clone());
    let summary = resumed.expect("the run resumes after an outage of 2 operations");
    assert_eq!(outage.faults(), 2, "the outage was met");
    assert!(summary.run.restarts >= 1, "{summary:?}");
    let rows = scalar(
        &table_dir,
        "SELECT count(*), count(DISTINCT event_id) FROM t",
    );
    assert_eq!(rows, format!("{EVENTS},{EVENTS}"));

    let gone = FaultStore::new(local(), FaultPlan::CrashAfter { ops: first_staged });
    let (_, failed) = run("failed", gone);
    let error = failed.expect_err("a store that never comes back ends the run");
    let error = format!("{error}");
    assert!(error.contains("injected fault: operation"), "{error}");
    assert!(
        error.ends_with(
            "; gave up after 2 restarts in a row from the re-read tables (--restarts-max 2)"
        ),
        "{error}"
    );
}
