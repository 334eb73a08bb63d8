//! Kafka messages in schema-registry formats, end to end: the real binary reading a tansu
//! topic whose Avro or Protobuf messages confluent-kafka's serializers wrote against the
//! suite's schema registry (tests/servers/registry.py), with bad messages among them and the
//! registry down when the run starts.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{interop, produce_with_python, query_csv, BIN};
use crate::servers::{create_topic, produce_values, tansu, Registry};
use sluice_source::generate::{generate, GeneratorSpec, Shape};

const NESTED_SCHEMA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/kafka/github-events.toml"
);

/// Avro's encoding of a long (zigzag varint).
fn avro_long(v: i64, out: &mut Vec<u8>) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// The wire format's prefix: magic byte 0 and the schema id.
fn prefix(id: u32) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend_from_slice(&id.to_be_bytes());
    out
}

/// `events` nested events over `hours` (the second half with two more fields) as NDJSON.
fn nested_events(seed: u64, events: u64, hours: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let spec = GeneratorSpec {
        seed,
        events,
        hours,
        shape: Shape::Nested,
        new_fields_from: Some(events / 2),
        ..Default::default()
    };
    generate(&spec, &mut out).unwrap();
    out
}

fn lines_of(ndjson: &[u8]) -> Vec<&[u8]> {
    ndjson
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect()
}

/// `sluice run` of `topic` in `format` through the registry into `table`, keyed by
/// `event_id`, until the topic has been idle 5 s, with `extra` options; what it printed.
fn run_through_registry(
    (broker, registry): (&crate::servers::Server, &Registry),
    (topic, format): (&str, &str),
    table: &Path,
    extra: &[&str],
) -> String {
    let source = format!("kafka:{topic}");
    let mut args = vec!["run", "--source", &source, "--brokers", &broker.address];
    args.extend(["--input-format", format, "--schema-registry", &registry.url]);
    args.extend(["--table", table.to_str().unwrap(), "--key", "event_id"]);
    args.extend(["--until-idle", "5s"]);
    args.extend(extra);
    crate::common::ok(&args)
}

/// Checks with Python delta-rs that `table` holds every event of `sent` as it was sent;
/// returns the dead letters of `dlq` as `source_offset,reason,detail` rows.
fn read_back(table: &Path, dlq: &Path, sent: &Path) -> Vec<String> {
    let same = interop(
        "same_events.py",
        &[table.as_os_str(), sent.as_os_str(), "event_id".as_ref()],
    );
    eprint!("read back with Python delta-rs: {same}");
    let dead = query_csv(
        &[("t", dlq)],
        "SELECT source_offset, reason, detail FROM t ORDER BY source_offset",
    );
    eprintln!("dead letters:\n{}", dead.join("\n"));
    dead
}

/// The dead letters (`source_offset,reason,detail` rows) are `expect`'s reasons with a
/// detail containing its text, at consecutive offsets from `first_offset`.
fn assert_dead_letters(dead: &[String], first_offset: usize, expect: &[(&str, &str)]) {
    assert_eq!(dead.len(), expect.len(), "{dead:?}");
    for (i, (row, (reason, detail))) in dead.iter().zip(expect).enumerate() {
        let offset = first_offset + i;
        assert!(
            row.starts_with(&format!("{offset},{reason},")) && row.contains(detail),
            "{row} is not {offset},{reason},...{detail}..."
        );
    }
}

/// Every kind of bad message is a dead letter with its position, reason and schema id, the
/// good messages around them are rows; and a registry that is down for 20 s when the run
/// starts delays it and loses nothing.
#[test]
fn bad_avro_messages_are_dead_letters_and_a_registry_down_for_20s_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = tansu();
    let mut registry = Registry::start(dir.path().join("registry.json"));
    create_topic(&broker, "avro", 1);
    // 400 nested events (the last 200 with schema version 2), in two halves with the bad
    // messages between them.
    let events = nested_events(7, 400, 4);
    let lines = lines_of(&events);
    let (first, second) = lines.split_at(lines.len() / 2);
    let write = |name: &str, lines: &[&[u8]]| {
        let path = dir.path().join(name);
        std::fs::write(&path, lines.join(&b'\n')).unwrap();
        path
    };
    let produce_avro = |path: &Path| {
        produce_with_python(
            "avro",
            Some(&registry.url),
            &[],
            &broker.address,
            "avro",
            path,
        )
    };
    eprint!("{}", produce_avro(&write("first.ndjson", first)));
    // Schema id 1 is version 1 (the registry numbers schemas from 1).
    let mut truncated = prefix(1);
    avro_long(8, &mut truncated);
    truncated.extend_from_slice(b"e-cut"); // a string of 8 bytes that ends after 5
    let mut mismatch = prefix(1);
    avro_long(-5, &mut mismatch); // a string of length -5
    let mut unknown = prefix(999);
    unknown.extend_from_slice(b"\x02x");
    let bad: Vec<(&str, Option<&[u8]>)> = vec![
        ("tombstone", None),
        ("json", Some(b"{\"event_id\":\"j\"}")),
        ("unknown", Some(&unknown)),
        ("short", Some(&[0, 0, 0])),
        ("truncated", Some(&truncated)),
        ("mismatch", Some(&mismatch)),
    ];
    produce_values(&broker, "avro", bad);
    eprint!("{}", produce_avro(&write("second.ndjson", second)));
    let all = write("events.ndjson", &lines);

    registry.stop();
    let table = dir.path().join("t");
    let dlq = dir.path().join("t_dlq");
    let started = Instant::now();
    let mut run = Command::new(BIN)
        .args([
            "run",
            "--source",
            "kafka:avro",
            "--brokers",
            &broker.address,
        ])
        .args(["--input-format", "avro", "--schema-registry", &registry.url])
        .arg("--table")
        .arg(&table)
        .args([
            "--schema",
            NESTED_SCHEMA,
            "--key",
            "event_id",
            "--until-idle",
            "5s",
        ])
        .env("SLUICE_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(20));
    assert!(
        run.try_wait().unwrap().is_none(),
        "the run ended while the registry was down"
    );
    assert!(
        !table.join("_delta_log").exists()
            || query_csv(&[("t", &table)], "SELECT count(*) FROM t") == ["0"]
    );
    registry.restart();
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    eprintln!(
        "the run took {:.1} s with the registry down for its first 20 s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        stderr.contains("the schema registry failed; trying again"),
        "{stderr}"
    );
    eprint!("{}", String::from_utf8_lossy(&out.stdout));

    let dead = read_back(&table, &dlq, &all);
    // The bad messages follow the first half's (offsets from 0).
    let expect = [
        ("null_value", "no value"),
        ("no_magic_byte", "0x7b"),
        ("unknown_schema_id", "schema id 999"),
        ("truncated", "prefix is 5"),
        ("truncated", "schema id 1"),
        ("schema_mismatch", "schema id 1"),
    ];
    assert_dead_letters(&dead, first.len(), &expect);
    // The run's contract names the format it read.
    let status = crate::common::ok(&["status", "--table", table.to_str().unwrap()]);
    assert!(status.contains("input-format=avro"), "{status}");
}

/// Protobuf through the real serializer (confluent-kafka's ProtobufSerializer, the events of
/// examples/kafka/proto whose events.proto imports common.proto) with every kind of bad
/// message between two halves: each is a dead letter with its offset, reason and schema id,
/// the good messages around them are rows, read back as the producer sent them.
#[test]
fn bad_protobuf_messages_are_dead_letters_beside_the_good_ones() {
    let dir = tempfile::tempdir().unwrap();
    let broker = tansu();
    let registry = Registry::start(dir.path().join("registry.json"));
    create_topic(&broker, "proto", 1);
    let events = nested_events(11, 300, 3);
    let lines = lines_of(&events);
    let (first, second) = lines.split_at(lines.len() / 2);
    let produce = |name: &str, lines: &[&[u8]]| {
        let path = dir.path().join(format!("{name}.ndjson"));
        std::fs::write(&path, lines.join(&b'\n')).unwrap();
        let sent = dir.path().join(format!("{name}.sent.ndjson"));
        let extra = ["--sent".to_string(), sent.display().to_string()];
        let url = Some(registry.url.as_str());
        eprint!(
            "{}",
            produce_with_python("protobuf", url, &extra, &broker.address, "proto", &path)
        );
        std::fs::read(sent).unwrap()
    };
    let mut sent = produce("first", first);
    // The serializer registers common.proto (id 1), then the events' schema (id 2).
    let framed = |id: u32, indexes: &[u8], body: &[u8]| {
        let mut m = prefix(id);
        m.extend_from_slice(indexes);
        m.extend_from_slice(body);
        m
    };
    let truncated = framed(2, &[0], b"\x0a\x08e-cut"); // event_id: 8 bytes that end after 5
    let no_message = framed(2, &[2, 10], b"\x0a\x01x"); // indexes [5]: no 6th message
    let undeclared = framed(2, &[0], b"\x0a\x01u\x98\x06\x01"); // then field 99
    let wrong_wire = framed(2, &[0], b"\x08\x01"); // event_id (a string) as a varint
    let unknown = framed(999, &[0], b"\x0a\x01x");
    let bad: Vec<(&str, Option<&[u8]>)> = vec![
        ("tombstone", None),
        ("json", Some(b"{\"event_id\":\"j\"}")),
        ("unknown", Some(&unknown)),
        ("truncated", Some(&truncated)),
        ("no-message", Some(&no_message)),
        ("undeclared", Some(&undeclared)),
        ("wrong-wire", Some(&wrong_wire)),
    ];
    produce_values(&broker, "proto", bad);
    sent.extend(produce("second", second));
    let all = dir.path().join("sent.ndjson");
    std::fs::write(&all, sent).unwrap();

    let table = dir.path().join("t");
    let dlq = dir.path().join("t_dlq");
    run_through_registry(
        (&broker, &registry),
        ("proto", "protobuf"),
        &table,
        &["--schema", NESTED_SCHEMA],
    );
    let dead = read_back(&table, &dlq, &all);
    let expect = [
        ("null_value", "no value"),
        ("no_magic_byte", "0x7b"),
        ("unknown_schema_id", "schema id 999"),
        ("truncated", "schema id 2"),
        (
            "schema_mismatch",
            "message indexes [5] name no message of schema id 2",
        ),
        (
            "schema_mismatch",
            "field number 99 is not in sluice.example.GitHubEvent",
        ),
        ("schema_mismatch", "GitHubEvent of schema id 2"),
    ];
    assert_dead_letters(&dead, first.len(), &expect);
    let status = crate::common::ok(&["status", "--table", table.to_str().unwrap()]);
    assert!(status.contains("input-format=protobuf"), "{status}");
    // Read as JSON, the topic's messages would all be dead letters: the table's contract
    // refuses the run before it writes anything.
    let before = crate::common::commits(&table).len();
    let out = Command::new(BIN)
        .args([
            "run",
            "--source",
            "kafka:proto",
            "--brokers",
            &broker.address,
        ])
        .arg("--table")
        .arg(&table)
        .args(["--key", "event_id", "--until-idle", "2s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("input-format is protobuf in the table, json in this run"),
        "{stderr}"
    );
    assert_eq!(
        crate::common::commits(&table).len(),
        before,
        "nothing written"
    );
}

/// Avro whose schema references a named type of another subject (Confluent schema
/// references: Actor registered once, used by name, gaining a field in version 2 as the
/// events' schema does): a new table without `--schema` takes its columns from the latest
/// schema with the reference in place, and every event reads back as it was sent.
#[test]
fn avro_with_schema_references_lands_every_event() {
    let dir = tempfile::tempdir().unwrap();
    let broker = tansu();
    let registry = Registry::start(dir.path().join("registry.json"));
    create_topic(&broker, "refs", 2);
    let events = dir.path().join("events.ndjson");
    std::fs::write(&events, nested_events(13, 300, 3)).unwrap();
    let extra = ["--avro-references".to_string()];
    let url = Some(registry.url.as_str());
    eprint!(
        "{}",
        produce_with_python("avro", url, &extra, &broker.address, "refs", &events)
    );
    let table = dir.path().join("t");
    let out = run_through_registry((&broker, &registry), ("refs", "avro"), &table, &[]);
    eprint!("{out}");
    let dead = read_back(&table, &dir.path().join("t_dlq"), &events);
    assert!(dead.is_empty(), "{dead:?}");
    let plan = query_csv(
        &[("t", &table)],
        "SELECT count(*) FROM t WHERE t.actor.plan IS NOT NULL",
    );
    assert_ne!(
        plan,
        ["0"],
        "version 2 of the referenced Actor landed its new field"
    );
}

/// `--kafka-columns`: each row holds its message's key, timestamp, headers (in order, a
/// repeated key and a header without a value kept), partition and offset; the event time is
/// the message timestamp (`--time-field kafka_timestamp`, the values hold no time); a key that
/// is not UTF-8 makes its message a dead letter `wrong_type` (with `--kafka-bytes string`).
#[test]
fn the_messages_own_fields_land_as_columns() {
    use rdkafka::config::ClientConfig;
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let dir = tempfile::tempdir().unwrap();
    let broker = tansu();
    create_topic(&broker, "meta", 1);
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &broker.address)
        .set("linger.ms", "0")
        .set("batch.num.messages", "1")
        .create()
        .unwrap();
    // 2026-10-03T14:00:00Z and a second, a minute and an hour later.
    let base_ms = 1_791_036_000_000i64;
    let messages: [(&[u8], i64, &str); 4] = [
        (b"k-1", base_ms, r#"{"id":"a","v":1}"#),
        (b"k-2", base_ms + 1_000, r#"{"id":"b","v":2}"#),
        (b"\xff\xfe", base_ms + 60_000, r#"{"id":"c","v":3}"#),
        (b"k-4", base_ms + 3_600_000, r#"{"id":"d","v":4}"#),
    ];
    for (i, (key, ms, value)) in messages.iter().enumerate() {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "trace",
                value: Some(format!("t{i}").as_str()),
            })
            .insert(Header {
                key: "trace",
                value: Some("again"),
            })
            .insert(Header::<&str> {
                key: "empty",
                value: None,
            });
        let record = BaseRecord::to("meta")
            .key(*key)
            .payload(*value)
            .timestamp(*ms)
            .headers(headers);
        producer.send(record).map_err(|(e, _)| e).unwrap();
        producer.poll(std::time::Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let schema = dir.path().join("schema.toml");
    std::fs::write(
        &schema,
        "[[fields]]\nname = \"id\"\ntype = \"string\"\n\n[[fields]]\nname = \"v\"\ntype = \"long\"\n",
    )
    .unwrap();
    let table = dir.path().join("t");
    crate::common::ok(&[
        "run",
        "--source",
        "kafka:meta",
        "--brokers",
        &broker.address,
        "--table",
        table.to_str().unwrap(),
        "--schema",
        schema.to_str().unwrap(),
        "--kafka-columns",
        "key,timestamp,headers,partition,offset",
        "--time-field",
        "kafka_timestamp",
        "--until-idle",
        "3s",
    ]);
    let rows = query_csv(
        &[("t", &table)],
        "SELECT id, v, kafka_key, kafka_timestamp, kafka_partition, kafka_offset, \
         array_length(kafka_headers) AS headers, kafka_headers[1]['value'] AS first, \
         kafka_headers[2]['key'] AS second, kafka_headers[3]['value'] IS NULL AS empty, hour \
         FROM t ORDER BY kafka_offset",
    );
    assert_eq!(
        rows,
        [
            "a,1,k-1,2026-10-03T14:00:00Z,0,0,3,t0,trace,true,14",
            "b,2,k-2,2026-10-03T14:00:01Z,0,1,3,t1,trace,true,14",
            "d,4,k-4,2026-10-03T15:00:00Z,0,3,3,t3,trace,true,15",
        ]
    );
    let dead = query_csv(
        &[("d", &dir.path().join("t_dlq"))],
        "SELECT source_offset, reason FROM d",
    );
    assert_eq!(dead, ["2,wrong_type"]);
    // The columns are the table's contract: a run with others is refused.
    let out = Command::new(BIN)
        .args([
            "run",
            "--source",
            "kafka:meta",
            "--brokers",
            &broker.address,
        ])
        .arg("--table")
        .arg(&table)
        .args(["--kafka-columns", "key,timestamp"])
        .args(["--time-field", "kafka_timestamp", "--until-idle", "1s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("kafka-columns"),
        "{stderr}"
    );
}

/// A new table of an Avro topic, without `--schema`, takes the columns of the topic's latest
/// registered schema: Avro's types as the table's (an enum as text, a decimal, a map as a
/// map, an int as an int), and every event reads back as the producer sent it.
#[test]
fn a_new_avro_table_takes_its_columns_from_the_registry() {
    let dir = tempfile::tempdir().unwrap();
    let broker = tansu();
    let registry = Registry::start(dir.path().join("registry.json"));
    create_topic(&broker, "typed", 2);
    let mut events = Vec::new();
    let spec = GeneratorSpec {
        seed: 11,
        events: 300,
        hours: 3,
        shape: Shape::Nested,
        new_fields_from: Some(150),
        ..Default::default()
    };
    generate(&spec, &mut events).unwrap();
    let input = dir.path().join("events.ndjson");
    std::fs::write(&input, &events).unwrap();
    eprint!(
        "{}",
        produce_with_python(
            "avro",
            Some(&registry.url),
            &[],
            &broker.address,
            "typed",
            &input
        )
    );
    let table = dir.path().join("t");
    run_through_registry((&broker, &registry), ("typed", "avro"), &table, &[]);
    let types = query_csv(
        &[("t", &table)],
        "SELECT arrow_typeof(type), arrow_typeof(t.payload['amount']), \
         arrow_typeof(t.payload['labels']), arrow_typeof(t.repo['id']), arrow_typeof(coupon) \
         FROM t LIMIT 1",
    );
    eprintln!("column types: {types:?}");
    let types = types.join("");
    // (DataFusion reads strings as Utf8View.)
    for want in ["Utf8View,\"Decimal128(10, 2)\",\"Map(", ",Int32,Utf8View"] {
        assert!(types.contains(want), "{types}");
    }
    let same = interop(
        "same_events.py",
        &[table.as_os_str(), input.as_os_str(), "event_id".as_ref()],
    );
    eprint!("read back with Python delta-rs: {same}");
}

/// The flat events as a proto3 message, each field `optional` (a null stays null) and one of
/// each kind the direct path reads besides: an enum and a `uint64`.
const FLAT_PROTO: &str = r#"syntax = "proto3";
package flat;
message Event {
  enum Kind { KIND_UNSPECIFIED = 0; VIEW = 1; CART = 2; PURCHASE = 3; }
  optional string event_id = 1;
  optional string ts = 2;
  optional string user_id = 3;
  optional string country = 4;
  optional string kind = 5;
  optional double amount = 6;
  Kind kind_enum = 7;
  uint64 seq = 8;
}
"#;

/// Registers `schema` (Protobuf) for `subject`; its id.
fn register_protobuf(registry: &Registry, subject: &str, schema: &str) -> u32 {
    let body = serde_json::json!({"schemaType": "PROTOBUF", "schema": schema}).to_string();
    let url = format!("{}/subjects/{subject}/versions", registry.url);
    let answer = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let response = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/vnd.schemaregistry.v1+json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        response.text().await.unwrap()
    });
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    answer["id"].as_u64().unwrap() as u32
}

fn pb_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A flat event (a JSON object) as a message of [`FLAT_PROTO`] with schema id `id`, and the
/// row it stands for (the event with `kind_enum` and `seq`).
fn flat_message(id: u32, event: &serde_json::Value, seq: u64) -> (Vec<u8>, serde_json::Value) {
    let mut out = prefix(id);
    out.push(0); // message indexes: the first message
    for (number, name) in [
        (1u8, "event_id"),
        (2, "ts"),
        (3, "user_id"),
        (4, "country"),
        (5, "kind"),
    ] {
        if let Some(text) = event[name].as_str() {
            out.push(number << 3 | 2);
            pb_varint(text.len() as u64, &mut out);
            out.extend_from_slice(text.as_bytes());
        }
    }
    if let Some(amount) = event["amount"].as_f64() {
        out.push(6 << 3 | 1);
        out.extend_from_slice(&amount.to_le_bytes());
    }
    let kinds = ["KIND_UNSPECIFIED", "VIEW", "CART", "PURCHASE"];
    let kind = (seq % 4) as usize;
    let seq = seq >> 1;
    if kind != 0 {
        out.push(7 << 3);
        pb_varint(kind as u64, &mut out);
    }
    out.push(8 << 3);
    pb_varint(u64::MAX - seq, &mut out);
    let mut row = event.clone();
    row["kind_enum"] = kinds[kind].into();
    row["seq"] = (u64::MAX - seq).into();
    (out, row)
}

/// Flat Protobuf messages take the direct path into columns (no JSON text): every event lands
/// as sent, read back with Python delta-rs, an enum by name and a `uint64` whole; a message
/// with a field its schema does not declare, produced with the last 20 events to a second
/// run, sends its chunk the JSON way, where it is a dead letter and the messages after it
/// rows.
#[test]
fn flat_protobuf_messages_land_every_event_directly() {
    let dir = tempfile::tempdir().unwrap();
    let broker = tansu();
    let registry = Registry::start(dir.path().join("registry.json"));
    create_topic(&broker, "flat", 1);
    let id = register_protobuf(&registry, "flat-value", FLAT_PROTO);
    let mut events = Vec::new();
    let spec = GeneratorSpec {
        seed: 5,
        events: 2_000,
        hours: 3,
        ..Default::default()
    };
    generate(&spec, &mut events).unwrap();
    let mut messages = Vec::new();
    let mut sent = Vec::new();
    for line in lines_of(&events) {
        let Ok(event) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        // From the event's id (FNV-1a), so a duplicate delivery is the same message.
        let seq = event["event_id"]
            .as_str()
            .unwrap_or_default()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
        let (message, row) = flat_message(id, &event, seq);
        messages.push((
            event["event_id"].as_str().unwrap_or("").to_string(),
            message,
        ));
        sent.extend(serde_json::to_vec(&row).unwrap());
        sent.push(b'\n');
    }
    let (first, second) = messages.split_at(messages.len() - 20);
    let all = dir.path().join("sent.ndjson");
    std::fs::write(&all, sent).unwrap();
    let table = dir.path().join("t");
    let dlq = dir.path().join("t_dlq");
    // Whether a chunk of messages went the JSON way (sluice logs it).
    let run = || {
        let out = Command::new(BIN)
            .env("SLUICE_LOG", "sluice_source::kafka=debug")
            .args([
                "run",
                "--source",
                "kafka:flat",
                "--brokers",
                &broker.address,
            ])
            .args([
                "--input-format",
                "protobuf",
                "--schema-registry",
                &registry.url,
            ])
            .arg("--table")
            .arg(&table)
            .args(["--key", "event_id", "--until-idle", "5s"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        stderr.contains("read the JSON way")
    };
    let produce = |messages: &[(String, Vec<u8>)]| {
        let values = messages
            .iter()
            .map(|(k, v)| (k.as_str(), Some(v.as_slice())));
        produce_values(&broker, "flat", values);
    };
    produce(first);
    assert!(!run(), "flat, regular messages take the direct path");
    let mut undeclared = prefix(id);
    undeclared.extend_from_slice(b"\x00\x0a\x01u\x98\x06\x01"); // event_id "u", then field 99
    produce(&[("u".into(), undeclared)]);
    produce(second);
    assert!(run(), "a chunk with a bad message goes the JSON way");
    let dead = read_back(&table, &dlq, &all);
    assert_dead_letters(
        &dead,
        first.len(),
        &[("schema_mismatch", "field number 99 is not in flat.Event")],
    );
    let types = query_csv(
        &[("t", &table)],
        "SELECT arrow_typeof(kind_enum), arrow_typeof(seq), arrow_typeof(amount) FROM t LIMIT 1",
    );
    assert_eq!(types, ["Utf8View,\"Decimal128(20, 0)\",Float64"]);
}
