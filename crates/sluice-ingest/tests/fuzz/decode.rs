//! The decoder and schema inference against any message: every message is one row or one
//! dead letter, at its own offset, whatever the chunks it arrives in; the schema it grows is
//! one a Delta table can hold; no message makes a decode fail.

use std::collections::BTreeMap;
use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::StructType;
use proptest::prelude::*;
use proptest::sample::select;
use sluice_source::schema::{acceptable, infer, parse_type, same_column};
use sluice_source::{Chunk, DecodeOptions, Decoded, LineDecoder, SchemaEvolution};
use sluice_window::TimeFormat;

use crate::inputs::{line, Line};
use crate::runner::fuzz;

pub const RESERVED: [&str; 4] = ["dt", "hour", "_sluice_source", "_sluice_offset"];

fn reserved() -> Vec<String> {
    RESERVED.iter().map(|s| s.to_string()).collect()
}

fn evolutions() -> impl Strategy<Value = SchemaEvolution> {
    select(vec![
        SchemaEvolution::Add,
        SchemaEvolution::Add,
        SchemaEvolution::Reject,
        SchemaEvolution::Ignore,
    ])
}

/// What became of one message: a row, or a dead letter's reason.
pub type Verdicts = BTreeMap<i64, &'static str>;

/// The messages decoded in `pieces` chunks (cut at the same places for the same count); the
/// verdict of every offset, each offset at most once.
pub fn decode_in_pieces(
    decoder: &mut LineDecoder,
    lines: &[Line],
    pieces: usize,
) -> Result<(Verdicts, Vec<Decoded>), TestCaseError> {
    let per_piece = lines.len().div_ceil(pieces.max(1)).max(1);
    let mut verdicts = Verdicts::new();
    let mut all = Vec::new();
    for (p, piece) in lines.chunks(per_piece).enumerate() {
        let first = (p * per_piece) as i64;
        let chunk = Chunk::messages(
            1,
            piece
                .iter()
                .enumerate()
                .map(|(i, l)| (first + i as i64, l.bytes.as_slice())),
        );
        let decoded = decoder
            .decode(&chunk)
            .map_err(|e| TestCaseError::fail(format!("a message failed the decode: {e}")))?;
        prop_assert_eq!(decoded.batch.num_rows(), decoded.offsets.len());
        prop_assert_eq!(decoded.event_times.len(), decoded.offsets.len());
        for &o in &decoded.offsets {
            prop_assert!(verdicts.insert(o, "row").is_none(), "offset {} twice", o);
        }
        for r in &decoded.rejects {
            prop_assert!(
                verdicts.insert(r.offset, r.reason.as_str()).is_none(),
                "offset {} twice",
                r.offset
            );
        }
        all.push(decoded);
    }
    let expected: Vec<i64> = (0..lines.len() as i64).collect();
    let seen: Vec<i64> = verdicts.keys().copied().collect();
    prop_assert_eq!(seen, expected, "every message is a row or a dead letter");
    Ok((verdicts, all))
}

/// A schema a Delta table can hold and every reader accepts: names readers accept, unique
/// ignoring case at every level, none like a column sluice adds.
pub fn check_storable(schema: &SchemaRef) -> Result<(), TestCaseError> {
    fn names(fields: &Fields, at: &str) -> Result<(), TestCaseError> {
        for (i, f) in fields.iter().enumerate() {
            prop_assert!(acceptable(f.name()), "column {at}{:?}", f.name());
            for g in fields.iter().skip(i + 1) {
                prop_assert!(
                    !same_column(f.name(), g.name()),
                    "{at}{} and {}",
                    f.name(),
                    g.name()
                );
            }
            let mut t = f.data_type();
            while let DataType::List(e) | DataType::Map(e, _) = t {
                t = e.data_type();
            }
            if let DataType::Struct(members) = t {
                names(members, &format!("{at}{}.", f.name()))?;
            }
        }
        Ok(())
    }
    names(schema.fields(), "")?;
    for f in schema.fields() {
        prop_assert!(
            !RESERVED.iter().any(|r| same_column(r, f.name())),
            "{}",
            f.name()
        );
    }
    let kernel: Result<StructType, _> = schema.as_ref().try_into_kernel();
    prop_assert!(kernel.is_ok(), "{:?}", kernel.err());
    Ok(())
}

/// A schema inferred from the messages themselves: every message is a row or a dead letter
/// in one chunk or several alike, the schema is storable, and no record the schema was
/// inferred from is refused for its types or fields (inference holds every value it saw).
#[test]
fn every_message_is_a_row_or_a_dead_letter_under_an_inferred_schema() {
    fuzz(
        "decode, inferred schema",
        800,
        (
            prop::collection::vec(line(), 1..24),
            evolutions(),
            any::<bool>(),
            2usize..5,
        ),
        |(lines, evolution, keyed, pieces)| {
            let Ok(schema) = infer(lines.iter().map(|l| l.bytes.as_slice()), 1000, &reserved())
            else {
                return Ok(()); // no object among them: nothing to infer, the run refuses
            };
            check_storable(&schema)?;
            let options = DecodeOptions {
                key: if keyed { vec!["id".into()] } else { Vec::new() },
                evolution,
                reserved: reserved(),
                ..DecodeOptions::new("ts", TimeFormat::Rfc3339)
            };
            // A time or key field of a type the options cannot read: the run refuses to start.
            let Ok(decoder) = LineDecoder::new(schema, options) else {
                return Ok(());
            };
            let (whole, _) = decode_in_pieces(&mut decoder.clone(), &lines, 1)?;
            let mut cut = decoder.clone();
            let (pieced, _) = decode_in_pieces(&mut cut, &lines, pieces)?;
            prop_assert_eq!(&whole, &pieced, "the same messages in other chunks");
            check_storable(cut.schema())?;
            for (offset, reason) in &whole {
                let clean = lines[*offset as usize].clean;
                prop_assert!(
                    !clean || !matches!(*reason, "wrong_type" | "unknown_field" | "malformed_json"),
                    "message {} (seen by inference) is {}: {:?}",
                    offset,
                    reason,
                    lines[*offset as usize]
                );
            }
            Ok(())
        },
    );
}

/// Declared schemas of every type, flat and nested, with time fields of each kind.
fn declared() -> impl Strategy<Value = (SchemaRef, TimeFormat)> {
    let schema = |spec: &[(&str, &str)]| -> SchemaRef {
        Arc::new(Schema::new(
            spec.iter()
                .map(|(n, t)| Field::new(*n, parse_type(t).expect("a type"), true))
                .collect::<Vec<_>>(),
        ))
    };
    let flat = schema(&[
        ("ts", "string"),
        ("id", "string"),
        ("n", "long"),
        ("i", "integer"),
        ("s", "short"),
        ("b", "byte"),
        ("d", "double"),
        ("f", "float"),
        ("ok", "boolean"),
        ("day", "date"),
        ("at", "timestamp"),
        ("local", "timestamp_ntz"),
        ("blob", "binary"),
        ("price", "decimal(10,2)"),
        ("Amount", "long"),
    ]);
    let nested = schema(&[
        ("ts", "string"),
        ("id", "long"),
        ("user", "struct<Name:string,id:long,tags:array<string>>"),
        ("items", "array<struct<sku:string,qty:integer>>"),
        ("attrs", "map<string,string>"),
        ("scores", "map<string,double>"),
        ("note", "string"),
    ]);
    let timestamp = schema(&[("ts", "timestamp"), ("id", "string"), ("amount", "double")]);
    let epoch = schema(&[("ts", "long"), ("id", "string"), ("n", "decimal(38,0)")]);
    prop_oneof![
        Just((flat.clone(), TimeFormat::Rfc3339)),
        Just((
            flat,
            TimeFormat::parse_name("%Y/%m/%d %H:%M").expect("a pattern")
        )),
        Just((nested, TimeFormat::Rfc3339)),
        Just((timestamp, TimeFormat::Rfc3339)),
        Just((epoch, TimeFormat::EpochMillis)),
    ]
}

/// Change events (`--envelope debezium`) around any messages, some whole, some broken or
/// with an operation of another kind: each is a row or a dead letter (`bad_envelope` for
/// what is no change), in one chunk or several alike; a well-formed change of a clean
/// record is never refused for its envelope.
#[test]
fn every_message_is_a_row_or_a_dead_letter_in_an_envelope() {
    let op = proptest::sample::select(vec!["c", "u", "d", "r", "t", "x"]);
    fuzz(
        "decode, debezium envelope",
        600,
        (
            declared(),
            prop::collection::vec((line(), op, any::<bool>()), 1..24),
            2usize..5,
        ),
        |((schema, format), changes, pieces)| {
            let lines: Vec<Line> = changes
                .iter()
                .map(|(l, op, torn)| {
                    let image = if *op == "d" { "before" } else { "after" };
                    let mut bytes = format!("{{\"op\":\"{op}\",\"{image}\":").into_bytes();
                    bytes.extend(l.bytes.iter().map(|b| if *b == b'\n' { b' ' } else { *b }));
                    if !torn {
                        bytes.extend_from_slice(b",\"source\":{\"lsn\":1}}");
                    }
                    Line {
                        bytes,
                        clean: l.clean && !torn && matches!(*op, "c" | "u" | "d" | "r"),
                    }
                })
                .collect();
            let options = DecodeOptions {
                envelope: Some(sluice_source::envelope::Envelope::Debezium),
                reserved: reserved(),
                ..DecodeOptions::new("ts", format)
            };
            let Ok(decoder) = LineDecoder::new(schema, options) else {
                return Ok(());
            };
            let (whole, _) = decode_in_pieces(&mut decoder.clone(), &lines, 1)?;
            let (pieced, _) = decode_in_pieces(&mut decoder.clone(), &lines, pieces)?;
            prop_assert_eq!(&whole, &pieced, "the same messages in other chunks");
            for (offset, reason) in &whole {
                let line = &lines[*offset as usize];
                prop_assert!(
                    !(line.clean && *reason == "bad_envelope"),
                    "message {} is a clean change, refused: {:?}",
                    offset,
                    line
                );
            }
            Ok(())
        },
    );
}

/// A declared schema: every message is a row or a dead letter, in one chunk or several
/// alike, whatever the schema evolution policy; the grown schema is storable.
#[test]
fn every_message_is_a_row_or_a_dead_letter_under_a_declared_schema() {
    fuzz(
        "decode, declared schema",
        800,
        (
            declared(),
            prop::collection::vec(line(), 1..24),
            evolutions(),
            any::<bool>(),
            2usize..5,
        ),
        |((schema, format), lines, evolution, keyed, pieces)| {
            let options = DecodeOptions {
                key: if keyed { vec!["id".into()] } else { Vec::new() },
                evolution,
                reserved: reserved(),
                ..DecodeOptions::new("ts", format)
            };
            let decoder = LineDecoder::new(schema, options)
                .map_err(|e| TestCaseError::fail(format!("options: {e}")))?;
            let (whole, _) = decode_in_pieces(&mut decoder.clone(), &lines, 1)?;
            let mut cut = decoder.clone();
            let (pieced, _) = decode_in_pieces(&mut cut, &lines, pieces)?;
            prop_assert_eq!(&whole, &pieced, "the same messages in other chunks");
            check_storable(cut.schema())?;
            Ok(())
        },
    );
}
