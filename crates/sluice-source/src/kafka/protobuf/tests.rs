use std::collections::HashMap;

use prost_reflect::prost::Message;
use prost_reflect::{DynamicMessage, MapKey, Value};

use super::schema::ProtoSchema;
use super::*;
use crate::kafka::wire::MAGIC;
use crate::registry::{RegisteredSchema, RegistryAuth, RegistryOptions};

const EVENTS: &str = r#"
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Order {
  enum Status { STATUS_UNSPECIFIED = 0; PAID = 1; SHIPPED = 2; }
  message Line { string sku = 1; uint32 qty = 2; }
  string id = 1;
  int64 amount_cents = 2;
  uint64 big = 3;
  Status status = 4;
  repeated Line lines = 5;
  map<string, int64> counters = 6;
  optional string coupon = 7;
  google.protobuf.Timestamp at = 8;
  bytes blob = 9;
  double ratio = 10;
  Line first = 11;
  google.protobuf.Int64Value maybe = 12;
  repeated string tags = 13;
  oneof payment { string card = 14; string iban = 15; }
}

message Refund { string order_id = 1; int32 cents = 2; }
"#;

fn schema(id: u32, kind: SchemaKind, text: &str) -> RegisteredSchema {
    RegisteredSchema {
        id,
        kind,
        text: text.into(),
        references: Vec::new(),
    }
}

fn messages() -> ProtobufMessages {
    let options = RegistryOptions::new("http://127.0.0.1:9", RegistryAuth::None).unwrap();
    let mut registry = SchemaRegistry::new(options);
    registry.keep(schema(1, SchemaKind::Protobuf, EVENTS));
    registry.keep(schema(2, SchemaKind::Avro, "\"long\""));
    registry.keep(schema(
        3,
        SchemaKind::Protobuf,
        "syntax = \"proto3\"; message {",
    ));
    ProtobufMessages::new(registry)
}

fn compiled() -> ProtoSchema {
    ProtoSchema::compile(&schema(1, SchemaKind::Protobuf, EVENTS), &HashMap::new()).unwrap()
}

/// A message of schema 1 in the wire format: `indexes` as the serializers write them.
fn framed(id: u32, indexes: &[u8], body: &[u8]) -> Vec<u8> {
    let mut m = vec![MAGIC];
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(indexes);
    m.extend_from_slice(body);
    m
}

fn order(id: &str, amount: i64) -> DynamicMessage {
    let desc = compiled().message(&[0]).unwrap();
    let mut m = DynamicMessage::new(desc.clone());
    m.set_field_by_name("id", Value::String(id.into()));
    m.set_field_by_name("amount_cents", Value::I64(amount));
    m
}

fn full_order() -> DynamicMessage {
    let schema = compiled();
    let mut m = order("o-1", -9_007_199_254_740_993);
    m.set_field_by_name("big", Value::U64(u64::MAX));
    m.set_field_by_name("status", Value::EnumNumber(2));
    let line_desc = schema.message(&[0, 0]).unwrap();
    let line = |sku: &str, qty: u32| {
        let mut l = DynamicMessage::new(line_desc.clone());
        l.set_field_by_name("sku", Value::String(sku.into()));
        l.set_field_by_name("qty", Value::U32(qty));
        Value::Message(l)
    };
    m.set_field_by_name("lines", Value::List(vec![line("a", 2), line("b", 0)]));
    m.set_field_by_name(
        "counters",
        Value::Map(HashMap::from([(
            MapKey::String("views".into()),
            Value::I64(7),
        )])),
    );
    let ts_desc = schema
        .pool()
        .get_message_by_name("google.protobuf.Timestamp")
        .unwrap();
    let mut at = DynamicMessage::new(ts_desc);
    at.set_field_by_name("seconds", Value::I64(1_790_000_000));
    at.set_field_by_name("nanos", Value::I32(123_456_000));
    m.set_field_by_name("at", Value::Message(at));
    m.set_field_by_name("blob", Value::Bytes(vec![0, 255, 10].into()));
    m.set_field_by_name("ratio", Value::F64(0.1));
    m.set_field_by_name("first", line("z", 1));
    m.set_field_by_name("tags", Value::List(vec![Value::String("x".into())]));
    m.set_field_by_name("iban", Value::String("DE00".into()));
    m
}

fn decode(payloads: &[Option<Vec<u8>>]) -> Vec<String> {
    let mut protobuf = messages();
    let borrowed: Vec<Option<&[u8]>> = payloads.iter().map(|p| p.as_deref()).collect();
    // Id 999 is not asked for: this registry cannot be reached, and prepare waits for it.
    let known: Vec<Option<&[u8]>> = borrowed
        .iter()
        .copied()
        .filter(|p| crate::kafka::wire::framing(*p).ok() != Some(999))
        .collect();
    crate::kafka::block_on(protobuf.prepare(&known)).unwrap();
    protobuf
        .decode(&borrowed)
        .into_iter()
        .map(|o| match o {
            Outcome::Row(line) => String::from_utf8(line).unwrap(),
            Outcome::Bad(reason) => format!("{}: {}", reason.as_str(), reason.detail()),
        })
        .collect()
}

#[test]
fn a_message_reads_as_proto3_json_with_every_field_and_no_value_changed() {
    let got = decode(&[Some(framed(1, &[0], &full_order().encode_to_vec()))]);
    assert_eq!(
        got,
        [concat!(
            r#"{"id":"o-1","amount_cents":-9007199254740993,"big":18446744073709551615,"#,
            r#""status":"SHIPPED","lines":[{"sku":"a","qty":2},{"sku":"b","qty":0}],"#,
            r#""counters":{"views":7},"at":"2026-09-21T14:13:20.123456Z","blob":"AP8K","#,
            r#""ratio":0.1,"first":{"sku":"z","qty":1},"tags":["x"],"iban":"DE00"}"#
        )]
    );
}

#[test]
fn unset_fields_are_defaults_without_presence_and_absent_with_it() {
    let got = decode(&[Some(framed(1, &[0], &order("o-2", 0).encode_to_vec()))]);
    assert_eq!(
        got,
        [concat!(
            r#"{"id":"o-2","amount_cents":0,"big":0,"status":"STATUS_UNSPECIFIED","lines":[],"#,
            r#""counters":{},"blob":"","ratio":0.0,"tags":[]}"#
        )]
    );
}

#[test]
fn message_indexes_pick_the_message_of_the_file() {
    let schema = compiled();
    let mut refund = DynamicMessage::new(schema.message(&[1]).unwrap());
    refund.set_field_by_name("order_id", Value::String("o-1".into()));
    refund.set_field_by_name("cents", Value::I32(-5));
    let mut line = DynamicMessage::new(schema.message(&[0, 0]).unwrap());
    line.set_field_by_name("sku", Value::String("s".into()));
    // Indexes: a count then the indexes, all zigzag; [1] is count 1 (2), index 1 (2).
    let got = decode(&[
        Some(framed(1, &[2, 2], &refund.encode_to_vec())),
        Some(framed(1, &[4, 0, 0], &line.encode_to_vec())),
        Some(framed(1, &[2, 0], &order("o-3", 1).encode_to_vec())),
    ]);
    assert_eq!(got[0], r#"{"order_id":"o-1","cents":-5}"#);
    assert_eq!(got[1], r#"{"sku":"s","qty":0}"#);
    assert!(
        got[2].starts_with(r#"{"id":"o-3","amount_cents":1,"#),
        "{}",
        got[2]
    );
}

#[test]
fn every_bad_message_is_a_dead_letter_and_the_good_ones_around_it_are_rows() {
    let good = || Some(framed(1, &[0], &order("g", 1).encode_to_vec()));
    let body = full_order().encode_to_vec();
    let mut undeclared = order("u", 1).encode_to_vec();
    undeclared.extend_from_slice(&[0x98, 0x06, 0x01]); // field 99, varint 1
    let got = decode(&[
        good(),
        None,
        Some(b"{\"json\":1}".to_vec()),
        Some(framed(999, &[0], &body)),
        Some(framed(2, &[0], &body)),
        Some(framed(3, &[0], &body)),
        Some(vec![MAGIC, 0, 0]),
        Some(framed(1, &[0], &body[..body.len() - 3])),
        Some(framed(1, &[0x81], &[])),
        Some(framed(1, &[2, 14], &body)),
        Some(framed(1, &[0xfe, 0x01], &body)),
        Some(framed(1, &[0], &[0x08, 0x01])),
        Some(framed(1, &[0], &undeclared)),
        good(),
    ]);
    let reasons: Vec<&str> = got.iter().map(|g| g.split(':').next().unwrap()).collect();
    assert_eq!(
        reasons,
        [
            r#"{"id""#,
            "null_value",
            "no_magic_byte",
            "unknown_schema_id",
            "unknown_schema_id",
            "unknown_schema_id",
            "truncated",
            "truncated",
            "truncated",
            "schema_mismatch",
            "schema_mismatch",
            "schema_mismatch",
            "schema_mismatch",
            r#"{"id""#,
        ],
        "{got:#?}"
    );
    assert!(
        got[4].contains("schema id 2 is a AVRO schema, not Protobuf"),
        "{}",
        got[4]
    );
    assert!(
        got[5].contains("schema id 3 does not compile"),
        "{}",
        got[5]
    );
    assert!(
        got[9].contains("message indexes [7] name no message"),
        "{}",
        got[9]
    );
    assert!(
        got[12].contains("field number 99 is not in shop.v1.Order"),
        "{}",
        got[12]
    );
}

#[test]
fn hostile_bodies_are_dead_letters_without_a_panic() {
    let mut payloads = Vec::new();
    let mut seed: u64 = 0x5eed_0045;
    for n in 0..300usize {
        let mut body = Vec::new();
        for _ in 0..(n % 40) {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            body.push((seed >> 56) as u8);
        }
        payloads.push(Some(framed(1, &[], &body)));
    }
    // A length-delimited field claiming 2^62 bytes, and a nesting 200 deep.
    payloads.push(Some(framed(
        1,
        &[0],
        &[0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f],
    )));
    let mut deep = Vec::new();
    for _ in 0..200 {
        let mut outer = vec![0x5a]; // field 11 (first), length-delimited
        outer.push(deep.len() as u8);
        outer.extend_from_slice(&deep);
        deep = outer;
        if deep.len() > 120 {
            break;
        }
    }
    payloads.push(Some(framed(1, &[0], &deep)));
    let got = decode(&payloads);
    assert_eq!(got.len(), payloads.len());
    for (g, p) in got.iter().zip(&payloads) {
        let known = g.starts_with('{')
            || ["truncated:", "schema_mismatch:"]
                .iter()
                .any(|r| g.starts_with(r));
        assert!(known, "seed 0x5eed0045: {p:?} -> {g}");
    }
}

#[test]
fn a_schema_registered_as_a_serialized_file_descriptor_reads_the_same() {
    use base64::Engine;
    let compiled = compiled();
    let file = compiled.pool().get_file_by_name("schema-1.proto").unwrap();
    let mut proto = file.file_descriptor_proto().clone();
    proto.name = Some("shop/v1/events.proto".into());
    let text = base64::engine::general_purpose::STANDARD.encode(proto.encode_to_vec());
    let serialized =
        ProtoSchema::compile(&schema(7, SchemaKind::Protobuf, &text), &HashMap::new()).unwrap();
    let body = full_order().encode_to_vec();
    let desc = serialized.message(&[0]).unwrap();
    assert_eq!(desc.full_name(), "shop.v1.Order");
    let from_text = decode_one(1, &compiled, &[&[0][..], &body].concat());
    let from_serialized = decode_one(7, &serialized, &[&[0][..], &body].concat());
    match (from_text, from_serialized) {
        (Outcome::Row(a), Outcome::Row(b)) => assert_eq!(a, b),
        other => panic!("{other:?}"),
    }
}

/// The columns a new table takes from schema `text` (registered as `id`, no references).
fn columns_of(id: u32, text: &str) -> Result<deltalake::arrow::datatypes::SchemaRef, String> {
    let options = RegistryOptions::new("http://127.0.0.1:9", RegistryAuth::None).unwrap();
    let mut registry = SchemaRegistry::new(options);
    let registered = schema(id, SchemaKind::Protobuf, text);
    crate::kafka::block_on(table_schema(&mut registry, &registered)).unwrap()
}

#[test]
fn a_new_table_takes_the_columns_of_the_first_message() {
    use deltalake::arrow::datatypes::DataType;
    let table = columns_of(1, EVENTS).unwrap();
    let types: Vec<String> = table
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), f.data_type()))
        .collect();
    assert_eq!(
        types[..4],
        [
            "id Utf8",
            "amount_cents Int64",
            "big Decimal128(20, 0)",
            "status Utf8"
        ]
    );
    let DataType::List(item) = table.field_with_name("lines").unwrap().data_type() else {
        panic!("{types:?}")
    };
    let DataType::Struct(line) = item.data_type() else {
        panic!("{types:?}")
    };
    let line: Vec<_> = line
        .iter()
        .map(|f| (f.name().as_str(), f.data_type().clone()))
        .collect();
    assert_eq!(line, [("sku", DataType::Utf8), ("qty", DataType::Int64)]);
    assert!(matches!(
        table.field_with_name("counters").unwrap().data_type(),
        DataType::Map(..)
    ));
    assert_eq!(
        table.field_with_name("at").unwrap().data_type(),
        &DataType::Timestamp(
            deltalake::arrow::datatypes::TimeUnit::Microsecond,
            Some("UTC".into())
        )
    );
    assert_eq!(
        table.field_with_name("maybe").unwrap().data_type(),
        &DataType::Int64
    );
    assert_eq!(
        table.field_with_name("iban").unwrap().data_type(),
        &DataType::Utf8
    );
    let recursive = "syntax = \"proto3\"; message Node { string v = 1; Node next = 2; }";
    let err = columns_of(5, recursive).unwrap_err();
    assert!(err.contains("Node contains itself"), "{err}");
}

#[test]
fn hostile_schemas_are_errors_without_a_panic() {
    use base64::Engine;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let descriptor = |f: &dyn Fn(&mut prost_reflect::prost_types::FileDescriptorProto)| {
        let mut proto = compiled()
            .pool()
            .get_file_by_name("schema-1.proto")
            .unwrap()
            .file_descriptor_proto()
            .clone();
        f(&mut proto);
        b64(&proto.encode_to_vec())
    };
    let texts = [
        "syntax = \"proto3\"; message A { B b = 1; }".to_string(),
        "syntax = \"proto3\"; message A { int32 a = 1; int32 b = 1; }".to_string(),
        "syntax = \"proto3\"; import \"missing.proto\"; message A {}".to_string(),
        "syntax = \"proto9\";".to_string(),
        "message".repeat(1000),
        "{".repeat(10_000),
        b64(b"\x0a\xff\xff\xff\xff\x0f"),
        descriptor(&|p| p.message_type[0].field[0].type_name = Some(".no.Such".into())),
        descriptor(&|p| p.message_type[0].field[1].number = Some(-4)),
        descriptor(&|p| p.dependency.push("schema-1.proto".into())),
        descriptor(&|p| p.message_type[0].nested_type.clear()),
    ];
    for text in &texts {
        let got = ProtoSchema::compile(&schema(9, SchemaKind::Protobuf, text), &HashMap::new());
        assert!(got.is_err(), "{text:?} compiled");
    }
    // Random bytes, as base64 and as text: an error, or (by chance) a file that decodes
    // safely; never a panic.
    let mut seed: u64 = 0x5eed_0046;
    for n in 0..100usize {
        let mut bytes = Vec::new();
        for _ in 0..(n * 3 % 200) {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            bytes.push((seed >> 56) as u8);
        }
        for text in [b64(&bytes), String::from_utf8_lossy(&bytes).into_owned()] {
            let got =
                ProtoSchema::compile(&schema(9, SchemaKind::Protobuf, &text), &HashMap::new());
            if let Ok(schema) = &got {
                let _ = decode_one(9, schema, &[0, 0x0a, 0x01, b'x']);
            }
        }
    }
    // Two files importing each other (references can name any files) are an error too.
    let a = schema(
        10,
        SchemaKind::Protobuf,
        "syntax = \"proto3\"; import \"b.proto\"; message A {}",
    );
    let b = schema(
        11,
        SchemaKind::Protobuf,
        "syntax = \"proto3\"; import \"schema-10.proto\"; message B {}",
    );
    let files = HashMap::from([
        ("b.proto".to_string(), b),
        ("schema-10.proto".to_string(), a.clone()),
    ]);
    let cycle = ProtoSchema::compile(&a, &files);
    assert!(cycle.is_err(), "an import cycle compiled");
}

mod values {
    //! Any values of the message's fields come out of decoding as the same values: the
    //! proto3 JSON a row is read from changes none of them.
    use super::*;
    use proptest::prelude::*;

    fn check(
        id: &str,
        cents: i64,
        big: u64,
        ratio: f64,
        blob: &[u8],
        tags: &[String],
        counters: &[(String, i64)],
    ) -> Result<(), TestCaseError> {
        let mut m = order(id, cents);
        m.set_field_by_name("big", Value::U64(big));
        m.set_field_by_name("blob", Value::Bytes(blob.to_vec().into()));
        let tags_value = tags.iter().map(|t| Value::String(t.clone())).collect();
        m.set_field_by_name("tags", Value::List(tags_value));
        let map = counters
            .iter()
            .map(|(k, v)| (MapKey::String(k.clone()), Value::I64(*v)))
            .collect();
        m.set_field_by_name("counters", Value::Map(map));
        let mut body = [&[0u8][..], &m.encode_to_vec()].concat();
        // `ratio` written by hand: prost-reflect's encoder leaves out a -0.0 (it equals the
        // default), which producers such as Python's write.
        body.push(10 << 3 | 1);
        body.extend_from_slice(&ratio.to_le_bytes());
        let Outcome::Row(line) = decode_one(1, &compiled(), &body) else {
            return Err(TestCaseError::fail("not a row"));
        };
        // (serde_json's own float parsing can miss by an ulp; the number's text is parsed
        // exactly below, as sluice's decoding parses it.)
        let row: serde_json::Value = serde_json::from_slice(&line).unwrap();
        let text = String::from_utf8(line.clone()).unwrap();
        let ratio_text = text
            .split("\"ratio\":")
            .nth(1)
            .and_then(|t| t.split([',', '}']).next())
            .unwrap_or_default();
        prop_assert_eq!(row["id"].as_str(), Some(id));
        prop_assert_eq!(row["amount_cents"].as_i64(), Some(cents));
        prop_assert_eq!(row["big"].as_u64(), Some(big));
        let parsed: f64 = ratio_text.parse().unwrap();
        prop_assert_eq!(parsed.to_bits(), ratio.to_bits(), "{}", ratio_text);
        use base64::Engine;
        let text = row["blob"].as_str().unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap();
        prop_assert_eq!(bytes.as_slice(), blob);
        let got_tags: Vec<&str> = row["tags"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t.as_str())
            .collect();
        prop_assert_eq!(
            got_tags,
            tags.iter().map(String::as_str).collect::<Vec<_>>()
        );
        // A map keeps one entry per key, the last one written.
        let want: std::collections::BTreeMap<&str, i64> =
            counters.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let got: std::collections::BTreeMap<&str, i64> = row["counters"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_i64().unwrap()))
            .collect();
        prop_assert_eq!(got, want);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn any_values_decode_to_the_same_values(
            id in any::<String>(),
            cents in any::<i64>(),
            big in any::<u64>(),
            // Finite doubles (a NaN or an infinity reads as text: a wrong_type dead letter
            // once the row meets its double column).
            ratio in any::<f64>().prop_filter("finite", |f| f.is_finite()),
            blob in proptest::collection::vec(any::<u8>(), 0..40),
            tags in proptest::collection::vec(any::<String>(), 0..4),
            counters in proptest::collection::vec((any::<String>(), any::<i64>()), 0..4),
        ) {
            check(&id, cents, big, ratio, &blob, &tags, &counters)?;
        }
    }
}

#[test]
fn negative_zero_keeps_its_sign() {
    let mut body = vec![0u8];
    body.extend_from_slice(&order("z", 1).encode_to_vec());
    body.push(10 << 3 | 1); // ratio, a 64-bit double
    body.extend_from_slice(&(-0.0f64).to_le_bytes());
    let Outcome::Row(line) = decode_one(1, &compiled(), &body) else {
        panic!("not a row")
    };
    let text = String::from_utf8(line).unwrap();
    assert!(text.contains(r#""ratio":-0.0"#), "{text}");
}

#[test]
fn deeply_nested_schemas_are_errors_without_a_crash() {
    // Nested declarations: the compiler's own limit.
    let mut nested = String::from("syntax = \"proto3\";\n");
    for i in 0..2_000 {
        nested.push_str(&format!("message M{i} {{ int32 v = 1; "));
    }
    nested.push_str(&"}".repeat(2_000));
    let got = ProtoSchema::compile(&schema(40, SchemaKind::Protobuf, &nested), &HashMap::new());
    assert!(got.is_err());
    // A chain of top-level messages, each a field of the one before: it compiles, and its
    // columns (a struct 2,000 deep) are refused, not walked off the stack.
    let mut chain = String::from("syntax = \"proto3\";\n");
    for i in 0..2_000 {
        chain.push_str(&format!(
            "message M{i} {{ int32 v = 1; M{} next = 2; }}\n",
            i + 1
        ));
    }
    chain.push_str("message M2000 { int32 v = 1; }\n");
    let err = columns_of(41, &chain).unwrap_err();
    assert!(err.contains("nested deeper than"), "{err}");
    // Its messages decode (prost-reflect's depth limit makes a body nested past it a dead
    // letter).
    let compiled =
        ProtoSchema::compile(&schema(41, SchemaKind::Protobuf, &chain), &HashMap::new()).unwrap();
    let mut deep = Vec::new();
    for _ in 0..150 {
        let mut outer = vec![0x12]; // field 2 (next), length-delimited
        let mut len = deep.len();
        while len >= 0x80 {
            outer.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        outer.push(len as u8);
        outer.extend_from_slice(&deep);
        deep = outer;
    }
    let got = decode_one(41, &compiled, &[&[0][..], &deep].concat());
    assert!(
        matches!(&got, Outcome::Bad(RejectReason::SchemaMismatch(why)) if why.contains("recursion")),
        "{got:?}"
    );
}
