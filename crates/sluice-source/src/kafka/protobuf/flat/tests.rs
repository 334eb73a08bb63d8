//! Flat messages read off the wire land as their proto3 JSON lands: random messages of every
//! scalar kind (extremes, defaults, unset `optional`s, fields sent twice), decoded both ways
//! into the table their schema makes, give the same batch; what is irregular declines.

use prost_reflect::prost::Message;
use prost_reflect::{DynamicMessage, Value};
use sluice_window::TimeFormat;

use crate::chunk::{ArrowRows, Chunk};
use crate::decode::{DecodeOptions, LineDecoder};
use crate::kafka::protobuf::ProtobufMessages;
use crate::kafka::wire::{MessageRows, Outcome, Slot, MAGIC};
use crate::registry::{
    RegisteredSchema, RegistryAuth, RegistryOptions, SchemaKind, SchemaRegistry,
};

const FLAT: &str = r#"
syntax = "proto3";
package t;
message Flat {
  enum Kind { KIND_UNSPECIFIED = 0; VIEW = 1; BUY = 2; }
  string id = 1;
  int32 i32 = 2;
  sint32 s32 = 3;
  sfixed32 f32 = 4;
  uint32 u32 = 5;
  fixed32 x32 = 6;
  int64 i64 = 7;
  sint64 s64 = 8;
  sfixed64 f64 = 9;
  uint64 u64 = 10;
  fixed64 x64 = 11;
  bool flag = 12;
  Kind kind = 13;
  double ratio = 14;
  optional string note = 15;
  optional int64 maybe = 16;
  optional Kind maybe_kind = 17;
  optional double maybe_ratio = 18;
  string ts = 19;
}
message Nested { Flat inner = 1; }
"#;

fn messages() -> ProtobufMessages {
    let options = RegistryOptions::new("http://127.0.0.1:9", RegistryAuth::None).unwrap();
    let mut registry = SchemaRegistry::new(options);
    registry.keep(RegisteredSchema {
        id: 1,
        kind: SchemaKind::Protobuf,
        text: FLAT.into(),
        references: Vec::new(),
    });
    let mut protobuf = ProtobufMessages::new(registry);
    let one = framed(0, &[]);
    crate::kafka::block_on(protobuf.prepare(&[Some(&one)])).unwrap();
    protobuf
}

/// A message of schema 1 in the wire format, message index `index`.
fn framed(index: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![MAGIC, 0, 0, 0, 1];
    match index {
        0 => m.push(0),
        i => m.extend_from_slice(&[2, i * 2]),
    }
    m.extend_from_slice(body);
    m
}

/// A small seeded generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[(self.next() % from.len() as u64) as usize]
    }
}

/// A random Flat message: each field set or not, to an extreme or an ordinary value.
fn random_flat(rng: &mut Rng, protobuf: &ProtobufMessages) -> DynamicMessage {
    let schema = protobuf.schemas[&1].as_ref().unwrap();
    let mut m = DynamicMessage::new(schema.message(&[0]).unwrap());
    // Which fields are set: one bit each.
    let (bits, mut field) = (rng.next(), 0);
    let mut set = |m: &mut DynamicMessage, name: &str, value: Value| {
        if bits >> field & 1 == 1 {
            m.set_field_by_name(name, value);
        }
        field += 1;
    };
    let texts = ["", "a", "adé", "日本", "\u{1F600}", "quote\"back\\slash"];
    let i32s = [0, 1, -1, i32::MIN, i32::MAX, 300];
    let u32s = [0, 1, u32::MAX, 128];
    let i64s = [0, -1, i64::MIN, i64::MAX, 9_007_199_254_740_993];
    let u64s = [0, 1, u64::MAX, 1 << 63];
    let doubles = [0.0, -0.0, 0.1, 1e308, -5e-324, 123.456];
    set(&mut m, "id", Value::String(rng.pick(&texts).into()));
    set(&mut m, "i32", Value::I32(rng.pick(&i32s)));
    set(&mut m, "s32", Value::I32(rng.pick(&i32s)));
    set(&mut m, "f32", Value::I32(rng.pick(&i32s)));
    set(&mut m, "u32", Value::U32(rng.pick(&u32s)));
    set(&mut m, "x32", Value::U32(rng.pick(&u32s)));
    set(&mut m, "i64", Value::I64(rng.pick(&i64s)));
    set(&mut m, "s64", Value::I64(rng.pick(&i64s)));
    set(&mut m, "f64", Value::I64(rng.pick(&i64s)));
    set(&mut m, "u64", Value::U64(rng.pick(&u64s)));
    set(&mut m, "x64", Value::U64(rng.pick(&u64s)));
    set(&mut m, "flag", Value::Bool(rng.pick(&[true, false])));
    set(&mut m, "kind", Value::EnumNumber(rng.pick(&[0, 1, 2])));
    set(&mut m, "ratio", Value::F64(rng.pick(&doubles)));
    set(&mut m, "note", Value::String(rng.pick(&texts).into()));
    set(&mut m, "maybe", Value::I64(rng.pick(&i64s)));
    set(&mut m, "maybe_kind", Value::EnumNumber(rng.pick(&[0, 2])));
    set(&mut m, "maybe_ratio", Value::F64(rng.pick(&doubles)));
    m.set_field_by_name("ts", Value::String("2026-10-03T14:00:00Z".into()));
    m
}

/// The table a new table of Flat gets, and its decoder (time `ts`).
fn decoder() -> LineDecoder {
    let protobuf = messages();
    let schema = protobuf.schemas[&1].as_ref().unwrap();
    let plan = super::FlatPlan::of(&schema.message(&[0]).unwrap()).unwrap();
    let table = crate::rows::table_schema(&plan.schema);
    LineDecoder::new(table, DecodeOptions::new("ts", TimeFormat::Rfc3339)).unwrap()
}

/// The direct path's rows as a chunk of Arrow rows (offsets = message index).
fn arrow_chunk(rows: MessageRows) -> Chunk {
    let mut offsets = vec![Vec::new(); rows.batches.len()];
    let mut bad = Vec::new();
    for (i, slot) in rows.slots.into_iter().enumerate() {
        match slot.unwrap() {
            Slot::Row(b) => offsets[b].push(i as i64),
            Slot::Bad(reason) => bad.push((i, reason.detail())),
        }
    }
    assert!(bad.is_empty(), "{bad:?}");
    let arrow = rows
        .batches
        .into_iter()
        .zip(offsets)
        .map(|(batch, offsets)| ArrowRows { batch, offsets })
        .collect();
    Chunk {
        file: 1,
        message_offsets: Some(Vec::new()),
        arrow,
        ..Chunk::default()
    }
}

fn json_chunk(outcomes: Vec<Outcome>) -> Chunk {
    let lines: Vec<(i64, Vec<u8>)> = outcomes
        .into_iter()
        .enumerate()
        .map(|(i, o)| match o {
            Outcome::Row(line) => (i as i64, line),
            Outcome::Bad(reason) => panic!("message {i}: {}", reason.detail()),
        })
        .collect();
    Chunk::messages(1, lines.iter().map(|(o, l)| (*o, l.as_slice())))
}

#[test]
fn flat_messages_land_as_their_proto3_json_lands() {
    let mut protobuf = messages();
    let mut rng = Rng(0x5eed);
    let mut payloads = Vec::new();
    for i in 0..600 {
        let mut body = random_flat(&mut rng, &protobuf).encode_to_vec();
        if i % 7 == 0 {
            // A field sent again: the last occurrence wins.
            body.extend(random_flat(&mut rng, &protobuf).encode_to_vec());
        }
        payloads.push(framed(0, &body));
    }
    let borrowed: Vec<Option<&[u8]>> = payloads.iter().map(|p| Some(p.as_slice())).collect();
    let direct = protobuf
        .decode_flat(&borrowed)
        .expect("flat, regular messages");
    let by_json = protobuf.decode(&borrowed);
    let decoder = decoder();
    let direct = decoder.clone().decode(&arrow_chunk(direct)).unwrap();
    let by_json = decoder.clone().decode(&json_chunk(by_json)).unwrap();
    assert!(direct.rejects.is_empty() && by_json.rejects.is_empty());
    assert_eq!(direct.offsets, by_json.offsets);
    direct.assert_same_columns(&by_json);
    assert_eq!(direct.batch.num_rows(), 600);
}

/// Anything the direct path does not read as the JSON path does declines the whole chunk.
#[test]
fn irregular_messages_and_other_types_decline() {
    let mut protobuf = messages();
    let good = framed(0, &[0x0a, 0x01, b'a']);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("an undeclared field number", framed(0, &[0xa0, 0x06, 0x01])),
        (
            "a wire type the field does not take",
            framed(0, &[0x0d, 1, 2, 3, 4]),
        ),
        ("a length past the end", framed(0, &[0x0a, 0x05, b'a'])),
        ("a cut-short varint", framed(0, &[0x10, 0x80])),
        ("text that is not UTF-8", framed(0, &[0x0a, 0x01, 0xff])),
        ("an enum number without a name", framed(0, &[0x68, 0x09])),
        (
            "a double that is not finite",
            framed(0, &[0x71, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f]),
        ),
        ("a message with a message field", framed(1, &[])),
    ];
    for (what, bad) in cases {
        let payloads = [Some(good.as_slice()), Some(bad.as_slice())];
        assert!(protobuf.decode_flat(&payloads).is_none(), "{what}");
    }
    // Messages that are dead letters before their body is read are the JSON path's too.
    let payloads = [Some(good.as_slice()), Some(&b"{}"[..]), None];
    let rows = protobuf.decode_flat(&payloads).unwrap();
    let reasons: Vec<String> = rows
        .slots
        .iter()
        .map(|s| match s.as_ref().unwrap() {
            Slot::Row(b) => format!("row of batch {b}"),
            Slot::Bad(r) => r.as_str().to_string(),
        })
        .collect();
    assert_eq!(reasons, ["row of batch 0", "no_magic_byte", "null_value"]);
}
