//! `sluice backfill` and `rewrite` of a Kafka (sharded) table from its topic: each partition's
//! retained messages recomputed into its own shard, equal to what the stream published, and
//! recognised by a stream that reads the same messages later.

use std::collections::BTreeMap;
use std::path::Path;

use sluice_source::generate::{GeneratorSpec, Shape};

use crate::common::{ok, scalar, seed, sluice, stream_slices, stream_slices_of};
use crate::servers::{create_topic, produce, tansu, Server};

const PARTITIONS: u32 = 4;
const TOPIC: &str = "orders";
const SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/schema.toml");
/// Windows 06:00 to 17:00 of the generated day (2026-10-03).
const FROM: &str = "2026-10-03T06:00Z";
const TO: &str = "2026-10-03T18:00Z";
const IN_RANGE: &str = "hour >= 6 AND hour < 18";

fn kafka_args<'a>(broker: &'a Server, table: &'a str) -> Vec<&'a str> {
    vec![
        "--source",
        "kafka:orders",
        "--brokers",
        &broker.address,
        "--table",
        table,
        "--schema",
        SCHEMA,
        "--key",
        "event_id",
    ]
}

/// The stream: one process reads the topic to its end.
fn stream(broker: &Server, table: &str, group: &str) -> String {
    let mut args = vec!["run"];
    args.extend(kafka_args(broker, table));
    args.extend(["--group", group, "--until-idle", "3s"]);
    ok(&args)
}

fn backfill(broker: &Server, table: &str, what: &str, range: &[&str]) -> serde_json::Value {
    let mut args = vec![what];
    args.extend(kafka_args(broker, table));
    args.extend(range);
    args.extend(["--format", "json"]);
    serde_json::from_str(&ok(&args)).expect("one JSON object")
}

/// The rows of `table` in range, every column (the source position of each winner too),
/// sorted.
fn rows(table: &Path, filter: &str) -> Vec<String> {
    let out = select_all(table, "csv", filter);
    let mut lines: Vec<String> = out.lines().skip(1).map(str::to_string).collect();
    lines.sort();
    lines
}

/// `SELECT * FROM t WHERE filter` over `table`, in `format`.
fn select_all(table: &Path, format: &str, filter: &str) -> String {
    ok(&[
        "query",
        "--table",
        &format!("t={}", table.display()),
        "--format",
        format,
        &format!("SELECT * FROM t WHERE {filter}"),
    ])
}

/// Each file's window address with its shard, sorted (the sharded layout).
fn addresses(table: &Path) -> Vec<String> {
    let mut windows: Vec<String> = addresses_with_versions(table)
        .into_iter()
        .map(|(address, _)| address)
        .collect();
    windows.sort();
    windows
}

fn in_range(addresses: &[String]) -> Vec<String> {
    addresses
        .iter()
        .filter(|a| {
            let hour: u32 = a
                .split("hour=")
                .nth(1)
                .and_then(|h| h.split('/').next())
                .and_then(|h| h.parse().ok())
                .unwrap_or(99);
            (6..18).contains(&hour)
        })
        .cloned()
        .collect()
}

/// A backfill of a time range equals the stream's result in that range (every row, with the
/// same winner of each key's deliveries, at the same shard addresses: 0 lost, 0 duplicates),
/// twice changes nothing, and a stream that then reads the whole topic into the backfilled
/// table publishes the other windows only, ending equal to the stream's table; a rewrite of
/// one window republishes it with the same rows; an NDJSON backfill of a Kafka table is
/// refused with the reason.
#[test]
fn a_kafka_backfill_of_a_time_range_equals_the_stream_and_twice_changes_nothing() {
    let seed = seed("kafka backfill");
    let dir = tempfile::tempdir().unwrap();
    let broker = tansu();
    create_topic(&broker, TOPIC, PARTITIONS);
    let (_, bytes) = stream_slices(6_000, 24, seed, 1, 0).remove(0);
    let messages: Vec<(String, Vec<u8>)> = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_slice(l).unwrap();
            (v["event_id"].as_str().unwrap().to_string(), l.to_vec())
        })
        .collect();
    produce(&broker, TOPIC, &messages);

    // The stream's table.
    let streamed = dir.path().join("streamed");
    let s = streamed.to_str().unwrap();
    eprintln!("stream: {}", stream(&broker, s, "stream"));
    let expected = rows(&streamed, IN_RANGE);
    assert!(expected.len() > 2_000, "{} rows in range", expected.len());

    // A backfill of the range into a new table.
    let backfilled = dir.path().join("backfilled");
    let b = backfilled.to_str().unwrap();
    let first = backfill(&broker, b, "backfill", &["--from", FROM, "--to", TO]);
    eprintln!("backfill: {first}");
    assert_eq!(first["partitions"], PARTITIONS, "{first}");
    assert_eq!(first["messages"], messages.len(), "{first}");
    let got = rows(&backfilled, "true");
    assert_eq!(got.len(), expected.len(), "rows of the backfilled range");
    assert!(
        got == expected,
        "the backfilled rows differ from the stream's"
    );
    assert_eq!(
        scalar(
            &backfilled,
            "SELECT count(*) - count(DISTINCT event_id) FROM t"
        ),
        "0"
    );
    assert_eq!(
        addresses(&backfilled),
        in_range(&addresses(&streamed)),
        "the backfill's shard addresses differ from the stream's"
    );
    let windows = first["windows_republished"].as_u64().unwrap();
    assert_eq!(windows as usize, addresses(&backfilled).len());

    // Twice changes nothing.
    let version = crate::common::version(&backfilled);
    let second = backfill(&broker, b, "backfill", &["--from", FROM, "--to", TO]);
    assert_eq!(second["windows_republished"], 0, "{second}");
    assert_eq!(second["windows_unchanged"], windows, "{second}");
    assert_eq!(crate::common::version(&backfilled), version, "{second}");

    // A stream over the whole topic into the backfilled table publishes the windows outside
    // the range only (it reads the backfilled windows' messages as published), and ends
    // equal to the stream's table; once more, it commits nothing.
    let before = addresses_with_versions(&backfilled);
    eprintln!("stream after the backfill: {}", stream(&broker, b, "after"));
    let after = addresses_with_versions(&backfilled);
    for (address, version) in &before {
        assert_eq!(
            after.iter().find(|(a, _)| a == address).map(|(_, v)| v),
            Some(version),
            "{address}: the stream republished a backfilled window"
        );
    }
    assert!(rows(&backfilled, "true") == rows(&streamed, "true"));
    assert_eq!(addresses(&backfilled), addresses(&streamed));
    let version = crate::common::version(&backfilled);
    stream(&broker, b, "again");
    assert_eq!(crate::common::version(&backfilled), version);

    // A backfill over the stream's own table leaves its rows as they were.
    let over = backfill(&broker, s, "backfill", &["--from", FROM, "--to", TO]);
    eprintln!("backfill over the stream's table: {over}");
    assert!(rows(&streamed, IN_RANGE) == expected);

    // A rewrite of one window the backfill covered changes nothing (as a second backfill);
    // with --force it republishes its shards, with the same rows.
    let rewrite = backfill(&broker, b, "rewrite", &["--at", "2026-10-03T09:30Z"]);
    assert_eq!(rewrite["windows_republished"], 0, "{rewrite}");
    assert_eq!(rewrite["windows_unchanged"], PARTITIONS, "{rewrite}");
    assert_eq!(crate::common::version(&backfilled), version);
    let forced = &["--at", "2026-10-03T09:30Z", "--force"];
    let rewrite = backfill(&broker, b, "rewrite", forced);
    assert_eq!(rewrite["windows_republished"], PARTITIONS, "{rewrite}");
    assert!(rows(&backfilled, "true") == rows(&streamed, "true"));

    // A rewrite that keeps a derived table derives the complete windows of every shard, as a
    // batch `derive` of the same raw table does.
    let sql = "revenue=SELECT country, count(*) AS orders FROM window GROUP BY country";
    let kept = dir.path().join("revenue");
    let table = format!("revenue={}", kept.display());
    let derived = backfill(
        &broker,
        s,
        "rewrite",
        &[
            "--at",
            "2026-10-03T09:30Z",
            "--force",
            "--derive",
            &table,
            "--derive-sql",
            sql,
        ],
    );
    eprintln!("rewrite with a derived table: {derived}");
    let batch = dir.path().join("batch");
    let table = format!("revenue={}", batch.display());
    ok(&[
        "derive",
        "--table",
        s,
        "--derive",
        &table,
        "--derive-sql",
        sql,
        "--from",
        "2026-10-03",
        "--to",
        "2026-10-04",
    ]);
    let revenue = |t: &Path| {
        let mut rows =
            crate::common::query_csv(&[("d", t)], "SELECT dt, hour, country, orders FROM d");
        rows.sort();
        rows
    };
    let (kept, batch) = (revenue(&kept), revenue(&batch));
    assert!(kept.len() > 24, "{} derived rows", kept.len());
    assert!(
        kept.iter().all(|r| batch.contains(r)),
        "a derived row differs from the batch derive's"
    );

    // An NDJSON file does not say which partition a line came from.
    let input = dir.path().join("events.ndjson");
    std::fs::write(&input, &bytes).unwrap();
    let out = sluice(&[
        "backfill",
        "--source",
        &format!("ndjson:{}", input.display()),
        "--table",
        b,
        "--from",
        FROM,
        "--to",
        TO,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is a Kafka table"), "{stderr}");
    assert_eq!(
        rows(&backfilled, "true").len(),
        rows(&streamed, "true").len()
    );
}

/// Each window address (with its shard) and the version that last published it.
fn addresses_with_versions(table: &Path) -> Vec<(String, String)> {
    let out = ok(&[
        "windows",
        "--table",
        table.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    out.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].to_string(), f[3].to_string())
        })
        .collect()
}

/// The nested events' schema file (before they gain `coupon` and `actor.plan`).
const NESTED_SCHEMA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/kafka/github-events.toml"
);

/// The shapes of real streams through a Kafka backfill: nested messages that gain two fields
/// mid-topic (one a new struct member), messages without their row key, torn JSON and
/// events dated 2099. A backfill of a time range into a new table lands exactly the stream's
/// rows of that range (every nested value, the late-added fields included) and reports every
/// bad message the stream dead-lettered, by reason: none is dropped without a word.
#[test]
fn a_kafka_backfill_of_nested_evolving_dirty_messages_equals_the_stream() {
    let seed = seed("kafka backfill, dirty");
    let dir = tempfile::tempdir().unwrap();
    let broker = tansu();
    create_topic(&broker, TOPIC, 3);
    let events = 3_000;
    let (_, bytes) = stream_slices_of(
        &GeneratorSpec {
            seed,
            events,
            hours: 24,
            shape: Shape::Nested,
            null_key_per_mille: 20,
            new_fields_from: Some(events / 2),
            far_future_events: 2,
            ..Default::default()
        },
        1,
        400,
    )
    .remove(0);
    // Kafka keys as a producer would set them: the event id where there is one.
    let messages: Vec<(String, Vec<u8>)> = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
        .map(|(i, l)| {
            let key = serde_json::from_slice::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v["event_id"].as_str().map(str::to_string))
                .unwrap_or_else(|| format!("no-key-{i}"));
            (key, l.to_vec())
        })
        .collect();
    produce(&broker, TOPIC, &messages);
    let args = |table: &Path| -> Vec<String> {
        [
            "--source",
            "kafka:orders",
            "--brokers",
            &broker.address,
            "--table",
            table.to_str().unwrap(),
            "--schema",
            NESTED_SCHEMA,
            "--key",
            "event_id",
        ]
        .map(str::to_string)
        .to_vec()
    };

    let streamed = dir.path().join("streamed");
    let mut run = vec!["run".to_string()];
    run.extend(args(&streamed));
    run.extend(["--group", "dirty", "--until-idle", "3s"].map(str::to_string));
    eprintln!(
        "stream: {}",
        ok(&run.iter().map(String::as_str).collect::<Vec<_>>())
    );
    let dead = dead_letter_reasons(&streamed);
    let dead_total: u64 = dead.values().sum();
    let all = json_rows(&streamed, "true");
    assert_eq!(
        all.len() as u64 + dead_total,
        messages.len() as u64 - duplicate_deliveries(&messages),
        "every message is a row or a dead letter ({dead:?})"
    );
    assert!(dead.get("missing_key").is_some_and(|n| *n > 0), "{dead:?}");
    assert!(
        dead.get("malformed_json").is_some_and(|n| *n > 0),
        "{dead:?}"
    );
    // The range's day only: the events dated 2099 fall in hours of the range too.
    let expected = json_rows(
        &streamed,
        &format!("CAST(dt AS VARCHAR) = '2026-10-03' AND {IN_RANGE}"),
    );
    assert!(
        expected.iter().any(|r| r.contains("\"coupon\":\"")),
        "rows of the range after the new fields"
    );

    let backfilled = dir.path().join("backfilled");
    let mut fill = vec!["backfill".to_string()];
    fill.extend(args(&backfilled));
    fill.extend(["--from", FROM, "--to", TO, "--format", "json"].map(str::to_string));
    let out: serde_json::Value =
        serde_json::from_str(&ok(&fill.iter().map(String::as_str).collect::<Vec<_>>())).unwrap();
    eprintln!("backfill: {out}");
    assert_eq!(out["messages"], messages.len(), "{out}");
    assert_eq!(out["rejected"], dead_total, "{out}");
    // Where its time went, as a run reports it, summed over the partitions.
    for phase in ["decode", "route", "dedupe", "encode", "upload", "commit"] {
        let secs = out["busy_seconds"][phase].as_f64().unwrap_or(0.0);
        assert!(secs > 0.0, "busy_seconds.{phase}: {out}");
    }
    let by_reason: BTreeMap<String, u64> =
        serde_json::from_value(out["rejected_by_reason"].clone()).unwrap();
    assert_eq!(by_reason, dead, "bad messages by reason: backfill, stream");
    let got = json_rows(&backfilled, "true");
    assert_eq!(got.len(), expected.len(), "rows of the backfilled range");
    assert!(
        got == expected,
        "the backfilled rows differ from the stream's"
    );
}

/// Deliveries of an event id delivered before: the rows keyed dedupe collapses.
fn duplicate_deliveries(messages: &[(String, Vec<u8>)]) -> u64 {
    let keyed: Vec<&str> = messages
        .iter()
        .filter(|(k, _)| !k.starts_with("no-key-") && k != "torn")
        .map(|(k, _)| k.as_str())
        .collect();
    let distinct: std::collections::BTreeSet<&str> = keyed.iter().copied().collect();
    (keyed.len() - distinct.len()) as u64
}

/// The dead letters of `table`, counted by reason.
fn dead_letter_reasons(table: &Path) -> BTreeMap<String, u64> {
    let dlq = std::path::PathBuf::from(format!("{}_dlq", table.display()));
    crate::common::query_csv(
        &[("d", &dlq)],
        "SELECT reason, count(*) FROM d GROUP BY reason",
    )
    .iter()
    .map(|l| {
        let (reason, n) = l.split_once(',').unwrap();
        (reason.to_string(), n.parse().unwrap())
    })
    .collect()
}

/// The rows of `table` matching `filter` as JSON objects with their keys sorted at every
/// level (nested values kept; column order is the order fields appeared in, which may differ
/// between two tables), sorted.
fn json_rows(table: &Path, filter: &str) -> Vec<String> {
    let mut rows: Vec<String> = select_all(table, "json", filter)
        .lines()
        .map(|l| canonical(&serde_json::from_str(l).expect("a JSON row")))
        .collect();
    rows.sort();
    rows
}

fn canonical(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Object(map) => {
            let fields: BTreeMap<&String, String> =
                map.iter().map(|(k, v)| (k, canonical(v))).collect();
            let inner: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{}:{v}", serde_json::Value::String(k.to_string())))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        serde_json::Value::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(canonical).collect::<Vec<_>>().join(",")
            )
        }
        other => other.to_string(),
    }
}
