//! Debezium change events in every format that can hold them land as their JSON does: the
//! same change log as NDJSON (the model, held against PostgreSQL in tests/postgres.rs), as a
//! Parquet file pyarrow writes, and as Avro or Protobuf messages through the schema registry
//! the way Debezium's converters write them (with tombstones after deletes) mirror into the
//! same table, row for row, with the same dead letters.

use std::path::Path;

use crate::cdc::{debezium, key_only, user};
use crate::common::*;

/// A change log with what a mirror must get right: snapshot reads, an update, a delete and
/// the key created again (key reuse), an update that arrives after a later one of its key, a
/// delete of that key, and a truncate (no row: a dead letter).
fn change_log() -> String {
    [
        debezium("r", "null", &user(1, "ada"), 100, 0),
        debezium("r", "null", &user(2, "bob"), 100, 0),
        debezium("c", "null", &user(3, "cyd"), 200, 5),
        debezium("u", &user(1, "ada"), &user(1, "ada l."), 210, 6),
        debezium("d", &key_only(2), "null", 220, 7),
        "{\"before\":null,\"after\":null,\"op\":\"t\",\"source\":{\"lsn\":225},\"ts_ms\":1791036480000}\n"
            .to_string(),
        debezium("c", "null", &user(2, "bob again"), 240, 9),
        debezium("u", &user(3, "cyd k."), &user(3, "cyd m."), 260, 11),
        debezium("u", &user(3, "cyd"), &user(3, "cyd k."), 230, 8),
        debezium("c", "null", &user(4, "dan"), 270, 12),
        debezium("d", &key_only(4), "null", 280, 13),
    ]
    .concat()
}

/// What the mirror of [`change_log`] holds, and its dead letters.
fn mirror_of(table: &Path) -> (Vec<String>, Vec<String>) {
    let rows = query_csv(
        &[("t", table)],
        "SELECT id, name, score, __op, __streamed, __source['lsn'], __source['table'] \
         FROM t ORDER BY id",
    );
    (rows, dead_letters(table))
}

/// The arguments of a run that mirrors `source` into `table` (with an hour of lateness, no
/// change of the log is late), with `extra` ones.
fn mirror_args<'a>(source: &'a str, table: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--source",
        source,
        "--table",
        table.to_str().unwrap(),
    ];
    args.extend(["--lateness", "1h"]);
    args.extend(debezium_mirror("id"));
    args.extend(extra);
    args
}

/// The model: the change log as NDJSON, mirrored.
fn model(dir: &Path, log: &Path) -> (Vec<String>, Vec<String>) {
    let table = dir.join("model");
    let source = format!("ndjson:{}", log.display());
    ok(&mirror_args(&source, &table, &[]));
    let model = mirror_of(&table);
    assert_eq!(
        model.0,
        [
            "1,ada l.,1.5,u,true,210,users",
            "2,bob again,1.5,c,true,240,users",
            "3,cyd m.,1.5,u,true,260,users",
        ]
    );
    assert_eq!(model.1, ["bad_envelope,1"]);
    model
}

/// Parquet files of changes (`before`/`after` struct columns) mirror as their NDJSON does;
/// the new table's columns are the rows' (the footer's image types), not the envelope's.
#[test]
fn debezium_changes_in_parquet_files_mirror_as_their_json_does() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("changes.ndjson");
    std::fs::write(&log, change_log()).unwrap();
    let model = model(dir.path(), &log);
    let parquet = dir.path().join("parquet");
    std::fs::create_dir_all(&parquet).unwrap();
    let out = parquet.join("changes.parquet");
    eprint!(
        "{}",
        interop("debezium_parquet.py", &[log.as_os_str(), out.as_os_str()])
    );
    let table = dir.path().join("from_parquet");
    let source = format!("parquet:{}", parquet.display());
    ok(&mirror_args(&source, &table, &[]));
    assert_eq!(mirror_of(&table), model);
    let columns = query_csv(
        &[("t", &table)],
        "SELECT arrow_typeof(id), arrow_typeof(score), arrow_typeof(__source) FROM t LIMIT 1",
    );
    let types = columns.concat();
    assert!(
        types.starts_with("Int64,Float64,") && types.contains("Struct("),
        "{types}"
    );
}

/// Debezium's Avro converter through the schema registry (confluent-kafka's AvroSerializer,
/// keys and values, a tombstone after each delete), read from tansu into a new table that
/// takes its columns from the registry: the mirror equals the NDJSON model's.
#[cfg(feature = "kafka")]
#[test]
fn debezium_avro_changes_through_the_registry_mirror_as_their_json_does() {
    registry_changes_mirror_as_their_json_does("avro");
}

/// The same with Debezium's Protobuf converter (tests/interop/debezium.proto).
#[cfg(feature = "kafka")]
#[test]
fn debezium_protobuf_changes_through_the_registry_mirror_as_their_json_does() {
    registry_changes_mirror_as_their_json_does("protobuf");
}

/// [`change_log`] produced in `format` through the schema registry to tansu, mirrored by a
/// run into a new table that takes its columns from the registry: equal to the NDJSON
/// model's, with two tombstones left out; a run again lands nothing new.
#[cfg(feature = "kafka")]
fn registry_changes_mirror_as_their_json_does(format: &str) {
    use crate::servers::{create_topic, tansu, Registry};

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("changes.ndjson");
    std::fs::write(&log, change_log()).unwrap();
    let model = model(dir.path(), &log);
    let broker = tansu();
    let registry = Registry::start(dir.path().join("registry.json"));
    let topic = format!("dbserver1.public.users_{format}");
    create_topic(&broker, &topic, 1);
    let produced = interop(
        "produce_debezium.py",
        &[
            "--format".as_ref(),
            format.as_ref(),
            "--registry".as_ref(),
            registry.url.as_ref(),
            broker.address.as_ref(),
            topic.as_ref(),
            log.as_os_str(),
        ],
    );
    eprint!("{produced}");
    let table = dir.path().join(format!("from_{format}"));
    let source = format!("kafka:{topic}");
    let args = mirror_args(
        &source,
        &table,
        &[
            "--brokers",
            &broker.address,
            "--input-format",
            format,
            "--schema-registry",
            &registry.url,
            "--until-idle",
            "5s",
        ],
    );
    let stderr = ok_stderr(&args);
    assert!(
        stderr.contains("2 Kafka tombstones (messages without a value) left out"),
        "{stderr}"
    );
    assert_eq!(mirror_of(&table), model);
    let v = version(&table);
    ok(&args);
    assert_eq!(version(&table), v, "a run again commits nothing");
    assert_eq!(mirror_of(&table), model);
}
