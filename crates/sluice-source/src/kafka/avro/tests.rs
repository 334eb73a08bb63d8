use super::*;
use crate::kafka::wire::MAGIC;

/// Each message as its row's JSON text or its dead letter's reason and detail.
fn outcomes(rows: MessageRows) -> Vec<String> {
    let lines: Vec<Vec<String>> = rows
        .batches
        .iter()
        .map(|b| {
            let text = String::from_utf8(crate::rows::json_lines(b).unwrap()).unwrap();
            text.lines().map(str::to_string).collect()
        })
        .collect();
    let mut next = vec![0usize; lines.len()];
    rows.slots
        .into_iter()
        .map(|s| match s.expect("decoded") {
            Slot::Row(b) => {
                next[b] += 1;
                lines[b][next[b] - 1].clone()
            }
            Slot::Bad(reason) => format!("{}: {}", reason.as_str(), reason.detail()),
        })
        .collect()
}
use crate::registry::{RegisteredSchema, RegistryAuth, RegistryOptions};

/// Avro's binary encoding of a long (zigzag varint).
fn long(v: i64, out: &mut Vec<u8>) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let b = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn string(s: &str, out: &mut Vec<u8>) {
    long(s.len() as i64, out);
    out.extend_from_slice(s.as_bytes());
}

const V1: &str = r#"{"type":"record","name":"E","fields":[
    {"name":"id","type":"string"},
    {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
    {"name":"n","type":"long"}]}"#;
const V2: &str = r#"{"type":"record","name":"E","fields":[
    {"name":"id","type":"string"},
    {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
    {"name":"n","type":"long"},
    {"name":"coupon","type":["null","string"],"default":null}]}"#;

/// A message of schema `id` (1: V1, 2: V2).
fn message(id: u32, key: &str, ms: i64, n: i64, coupon: Option<&str>) -> Vec<u8> {
    let mut out = vec![MAGIC];
    out.extend_from_slice(&id.to_be_bytes());
    string(key, &mut out);
    long(ms, &mut out);
    long(n, &mut out);
    if id == 2 {
        match coupon {
            None => long(0, &mut out),
            Some(c) => {
                long(1, &mut out);
                string(c, &mut out);
            }
        }
    }
    out
}

fn messages() -> AvroMessages {
    let options = RegistryOptions::new("http://127.0.0.1:9", RegistryAuth::None).unwrap();
    let mut registry = SchemaRegistry::new(options);
    for (id, text) in [(1, V1), (2, V2)] {
        registry.keep(RegisteredSchema {
            id,
            kind: SchemaKind::Avro,
            text: text.into(),
            references: Vec::new(),
        });
    }
    registry.keep(RegisteredSchema {
        id: 3,
        kind: SchemaKind::Protobuf,
        text: "syntax = \"proto3\";".into(),
        references: Vec::new(),
    });
    AvroMessages::new(registry)
}

fn decode(payloads: &[Option<Vec<u8>>]) -> Vec<String> {
    let mut avro = messages();
    let borrowed: Vec<Option<&[u8]>> = payloads.iter().map(|p| p.as_deref()).collect();
    crate::kafka::block_on(avro.prepare(&borrowed)).unwrap();
    outcomes(avro.decode(&borrowed))
}

#[test]
fn rows_of_two_schema_versions_decode_in_order() {
    let got = decode(&[
        Some(message(1, "a", 1_790_000_000_123, 1, None)),
        Some(message(2, "b", 1_790_000_000_000, -2, Some("X"))),
        Some(message(2, "c", 0, 3, None)),
        Some(message(1, "d", 1, i64::MAX, None)),
    ]);
    assert_eq!(
        got,
        [
            r#"{"id":"a","ts":"2026-09-21T14:13:20.123Z","n":1}"#,
            r#"{"id":"b","ts":"2026-09-21T14:13:20Z","n":-2,"coupon":"X"}"#,
            r#"{"id":"c","ts":"1970-01-01T00:00:00Z","n":3}"#,
            r#"{"id":"d","ts":"1970-01-01T00:00:00.001Z","n":9223372036854775807}"#,
        ]
    );
}

#[test]
fn every_bad_message_is_a_dead_letter_and_the_good_ones_around_it_are_rows() {
    let good = |k: &str| Some(message(1, k, 1000, 7, None));
    let mut truncated = message(1, "t", 1000, 7, None);
    truncated.truncate(truncated.len() - 1);
    let mut trailing = message(1, "x", 1000, 7, None);
    trailing.extend_from_slice(&[0, 1, 2]);
    let mut mismatch = vec![MAGIC, 0, 0, 0, 1];
    long(-5, &mut mismatch); // a string of length -5
    let got = decode(&[
        good("a"),
        None,
        Some(b"{\"json\":1}".to_vec()),
        good("b"),
        Some(truncated),
        good("c"),
        Some(vec![MAGIC, 0, 0]),
        Some(trailing),
        Some(mismatch),
        Some(message(3, "p", 0, 0, None)),
        good("d"),
        Some(Vec::new()),
    ]);
    let reasons: Vec<&str> = got.iter().map(|g| g.split(':').next().unwrap()).collect();
    assert_eq!(
        reasons,
        [
            "{\"id\"",
            "null_value",
            "no_magic_byte",
            "{\"id\"",
            "truncated",
            "{\"id\"",
            "truncated",
            "schema_mismatch",
            "schema_mismatch",
            "unknown_schema_id",
            "{\"id\"",
            "no_magic_byte",
        ],
        "{got:#?}"
    );
    for (i, key) in [(0, "a"), (3, "b"), (5, "c"), (10, "d")] {
        assert!(
            got[i].starts_with(&format!("{{\"id\":\"{key}\"")),
            "{}",
            got[i]
        );
    }
    assert!(
        got[9].contains("schema id 3 is a PROTOBUF schema"),
        "{}",
        got[9]
    );
}

/// Avro's logical and complex types, as the JSON lines decoding reads (and the table stores).
#[test]
fn logical_types_maps_arrays_and_enums_keep_their_values() {
    const TYPES: &str = r#"{"type":"record","name":"T","fields":[
        {"name":"d","type":{"type":"int","logicalType":"date"}},
        {"name":"t","type":{"type":"long","logicalType":"timestamp-millis"}},
        {"name":"m","type":{"type":"long","logicalType":"timestamp-micros"}},
        {"name":"p","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
        {"name":"u","type":{"type":"string","logicalType":"uuid"}},
        {"name":"e","type":{"type":"enum","name":"K","symbols":["a","b"]}},
        {"name":"labels","type":{"type":"map","values":"long"}},
        {"name":"tags","type":{"type":"array","items":"string"}},
        {"name":"b","type":"bytes"},
        {"name":"f","type":"float"},
        {"name":"ok","type":"boolean"},
        {"name":"o","type":["null",{"type":"record","name":"O","fields":[{"name":"x","type":"int"}]}]}
    ]}"#;
    let mut m = vec![MAGIC, 0, 0, 0, 9];
    long(20_729, &mut m); // 2026-10-03
    long(1_790_000_000_123, &mut m);
    long(1_790_000_000_123_456, &mut m);
    long(2, &mut m); // 2 bytes of decimal: 12345 (123.45)
    m.extend_from_slice(&[0x30, 0x39]);
    string("0f8fad5b-d9cb-469f-a165-70867728950e", &mut m);
    long(1, &mut m); // enum symbol b
    long(2, &mut m); // a map block of 2
    string("x", &mut m);
    long(1, &mut m);
    string("y", &mut m);
    long(-2, &mut m);
    long(0, &mut m);
    long(2, &mut m); // an array block of 2
    string("p", &mut m);
    string("q", &mut m);
    long(0, &mut m);
    long(3, &mut m);
    m.extend_from_slice(&[0, 1, 2]);
    m.extend_from_slice(&1.5f32.to_le_bytes());
    m.push(1);
    long(1, &mut m); // the record branch of the union
    long(-7, &mut m);
    let mut avro = messages();
    avro.registry.keep(RegisteredSchema {
        id: 9,
        kind: SchemaKind::Avro,
        text: TYPES.into(),
        references: Vec::new(),
    });
    let payloads = [Some(m.as_slice())];
    crate::kafka::block_on(avro.prepare(&payloads)).unwrap();
    let got = outcomes(avro.decode(&payloads));
    assert_eq!(
        got,
        [concat!(
            r#"{"d":"2026-10-03","t":"2026-09-21T14:13:20.123Z","m":"2026-09-21T14:13:20.123456Z","#,
            r#""p":123.45,"u":"0f8fad5b-d9cb-469f-a165-70867728950e","e":"b","labels":{"x":1,"y":-2},"#,
            r#""tags":["p","q"],"b":"AAEC","f":1.5,"ok":true,"o":{"x":-7}}"#
        )]
    );
}

/// Hostile bodies (lengths and counts far past the message's bytes, random bytes) are dead
/// letters: never a panic, never an allocation of what a length claims.
#[test]
fn hostile_lengths_and_counts_are_dead_letters() {
    const LISTS: &str = r#"{"type":"record","name":"L","fields":[
        {"name":"s","type":"string"},
        {"name":"a","type":{"type":"array","items":"long"}},
        {"name":"m","type":{"type":"map","values":"string"}},
        {"name":"b","type":"bytes"}]}"#;
    let mut avro = messages();
    avro.registry.keep(RegisteredSchema {
        id: 4,
        kind: SchemaKind::Avro,
        text: LISTS.into(),
        references: Vec::new(),
    });
    let body = |parts: &[i64]| {
        let mut m = vec![MAGIC, 0, 0, 0, 4];
        for p in parts {
            long(*p, &mut m);
        }
        m
    };
    let mut hostile = vec![
        body(&[i64::MAX / 2]),      // a string of 2^62 bytes
        body(&[0, 1 << 40]),        // an array of 2^40 items
        body(&[0, -(1 << 40), 8]),  // a negative block count with a byte size
        body(&[0, 0, 1 << 40]),     // a map of 2^40 entries
        body(&[0, 0, 0, i64::MAX]), // bytes of 2^63 - 1
        body(&[0, 0, 0, -1]),       // bytes of length -1
        body(&[0, i64::MIN]),       // the lowest count
    ];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for n in 0..200 {
        let mut m = vec![MAGIC, 0, 0, 0, 4];
        for _ in 0..(n % 40) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            m.push(seed as u8);
        }
        hostile.push(m);
    }
    let payloads: Vec<Option<&[u8]>> = hostile.iter().map(|m| Some(m.as_slice())).collect();
    crate::kafka::block_on(avro.prepare(&payloads)).unwrap();
    let got = outcomes(avro.decode(&payloads));
    assert_eq!(got.len(), hostile.len());
    for (i, g) in got.iter().take(7).enumerate() {
        assert!(
            g.starts_with("truncated") || g.starts_with("schema_mismatch"),
            "message {i}: {g}"
        );
    }
}

/// A string that is not UTF-8 is a dead letter, never a row holding other text.
#[test]
fn a_string_that_is_not_utf8_is_a_dead_letter() {
    let mut bad = vec![MAGIC, 0, 0, 0, 1];
    long(2, &mut bad);
    bad.extend_from_slice(&[0xff, 0xfe]);
    long(1000, &mut bad);
    long(7, &mut bad);
    let got = decode(&[Some(message(1, "ok", 1000, 1, None)), Some(bad)]);
    assert!(got[0].starts_with("{\"id\":\"ok\""), "{}", got[0]);
    assert!(got[1].starts_with("schema_mismatch"), "{}", got[1]);
}

/// A writer schema with Confluent schema references (a record registered once under its own
/// subject, used by name): its messages decode with the referenced types in place, fetched
/// by subject and version.
#[test]
fn a_schema_that_references_named_types_of_other_subjects_decodes() {
    use crate::registry::SchemaReference;
    const GEO: &str =
        r#"{"type":"record","name":"com.acme.Geo","fields":[{"name":"lat","type":"double"}]}"#;
    const ADDRESS: &str = r#"{"type":"record","name":"Address","namespace":"com.acme",
        "fields":[{"name":"city","type":"string"},{"name":"geo","type":"Geo"}]}"#;
    const ORDER: &str = r#"{"type":"record","name":"Order","namespace":"com.acme","fields":[
        {"name":"id","type":"string"},
        {"name":"ship","type":"Address"},
        {"name":"bill","type":["null","com.acme.Address"]}]}"#;
    let reference = |name: &str, subject: &str| SchemaReference {
        name: name.into(),
        subject: subject.into(),
        version: 1,
    };
    let mut avro = messages();
    let address = RegisteredSchema {
        id: 31,
        kind: SchemaKind::Avro,
        text: ADDRESS.into(),
        references: vec![reference("com.acme.Geo", "geo")],
    };
    let geo = RegisteredSchema {
        id: 32,
        kind: SchemaKind::Avro,
        text: GEO.into(),
        references: Vec::new(),
    };
    avro.registry.keep_version("address", 1, address);
    avro.registry.keep_version("geo", 1, geo);
    avro.registry.keep(RegisteredSchema {
        id: 30,
        kind: SchemaKind::Avro,
        text: ORDER.into(),
        references: vec![reference("com.acme.Address", "address")],
    });
    let mut m = vec![MAGIC, 0, 0, 0, 30];
    let string = |s: &str, m: &mut Vec<u8>| {
        long(s.len() as i64, m);
        m.extend_from_slice(s.as_bytes());
    };
    string("o1", &mut m);
    string("Paris", &mut m); // ship.city
    m.extend_from_slice(&48.85f64.to_le_bytes()); // ship.geo.lat
    long(1, &mut m); // bill: the Address branch
    string("Lyon", &mut m);
    m.extend_from_slice(&45.75f64.to_le_bytes());
    let payloads = [Some(&m[..])];
    crate::kafka::block_on(avro.prepare(&payloads)).unwrap();
    assert_eq!(
        outcomes(avro.decode(&payloads)),
        [concat!(
            r#"{"id":"o1","ship":{"city":"Paris","geo":{"lat":48.85}},"#,
            r#""bill":{"city":"Lyon","geo":{"lat":45.75}}}"#
        )]
    );
}
