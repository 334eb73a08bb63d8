//! Decoding on several threads gives, chunk for chunk, what one decoder gives: rows,
//! offsets, event times, rejects, the fields each chunk added, and the final schema; over
//! dirty and evolving input (fields that appear later, nested ones, bad lines, wrong types).

use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use proptest::prelude::*;
use sluice_window::TimeFormat;

use super::*;
use crate::decode::{DecodeOptions, SchemaEvolution};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Utf8, true),
        Field::new("id", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
    ]))
}

/// One line of a dirty, evolving stream: most are clean; some bring a field the schema
/// lacks (top level or nested, some only later in the stream), some are bad.
fn line(kind: u8, i: usize) -> String {
    let ts = format!("2026-10-03T14:{:02}:{:02}Z", (i / 60) % 60, i % 60);
    match kind {
        0..=11 => format!(r#"{{"ts":"{ts}","id":"e{i}","n":{i}}}"#),
        12 => format!(r#"{{"ts":"{ts}","id":"e{i}","n":{i},"coupon":"c{i}"}}"#),
        13 => format!(r#"{{"ts":"{ts}","id":"e{i}","user":{{"plan":"pro","seats":{i}}}}}"#),
        14 => format!(r#"{{"ts":"{ts}","id":"e{i}","user":{{"region":"eu"}},"tags":["a","b"]}}"#),
        15 => format!(r#"{{"ts":"{ts}","id":"e{i}","n":"not a number"}}"#),
        16 => format!(r#"{{"id":"e{i}","n":{i}}}"#),
        17 => format!(r#"{{"ts":"yesterday","id":"e{i}"}}"#),
        18 => format!(r#"{{"ts":"{ts}","id":"e{i}","#),
        _ => format!(r#"{{"ts":"{ts}","id":"e{i}","n":{i},"null_later":null}}"#),
    }
}

/// Chunks of consecutive lines with their byte offsets, as a file reader cuts them.
fn chunks(kinds: &[u8], lines_per_chunk: usize) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut offset = 0i64;
    for (c, group) in kinds.chunks(lines_per_chunk.max(1)).enumerate() {
        let mut data = Vec::new();
        for (j, &k) in group.iter().enumerate() {
            data.extend_from_slice(line(k, c * lines_per_chunk + j).as_bytes());
            data.push(b'\n');
        }
        let len = data.len() as i64;
        out.push(Chunk {
            file: 0,
            start: offset,
            data,
            message_offsets: None,
            ..Chunk::default()
        });
        offset += len;
    }
    out
}

fn decoder(evolution: SchemaEvolution) -> LineDecoder {
    let options = DecodeOptions {
        key: vec!["id".into()],
        evolution,
        ..DecodeOptions::new("ts", TimeFormat::Rfc3339)
    };
    LineDecoder::new(schema(), options).unwrap()
}

/// A decode as comparable text: everything a run takes from it.
fn summary(result: &Result<Decoded, DecodeError>) -> String {
    match result {
        Err(e) => format!("error: {e}"),
        Ok(d) => format!(
            "file {} offsets {:?} times {:?} rejects {:?} added {:?} ignored {:?}/{} schema {:?} rows {:?}",
            d.file,
            d.offsets,
            d.event_times,
            d.rejects,
            d.added,
            d.ignored,
            d.ignored_rows,
            d.batch.schema(),
            d.batch.columns(),
        ),
    }
}

fn one_after_another(evolution: SchemaEvolution, chunks: &[Chunk]) -> (Vec<String>, SchemaRef) {
    let mut d = decoder(evolution);
    let mut out = Vec::new();
    for c in chunks {
        let r = d.decode(c);
        let stop = r.is_err();
        out.push(summary(&r));
        if stop {
            break;
        }
    }
    (out, d.schema().clone())
}

fn dealt(
    evolution: SchemaEvolution,
    chunks: &[Chunk],
    threads: usize,
) -> (Vec<String>, SchemaRef, usize) {
    let mut p = ParallelDecoder::new(decoder(evolution), threads);
    let mut out = Vec::new();
    let mut starts = Vec::new();
    'deals: for deal in chunks.chunks(p.threads()) {
        for (r, chunk) in p.decode(deal.to_vec()).decoded {
            starts.push(chunk.start);
            let stop = r.is_err();
            out.push(summary(&r));
            if stop {
                break 'deals;
            }
        }
    }
    let expected: Vec<i64> = chunks.iter().take(starts.len()).map(|c| c.start).collect();
    assert_eq!(starts, expected, "chunks come back in order");
    (out, p.decoder().schema().clone(), p.threads())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn dealt_chunks_decode_as_one_decoder_decodes_them(
        kinds in proptest::collection::vec(0u8..20, 1..120),
        lines_per_chunk in 1usize..9,
        threads in 1usize..5,
        evolution in prop_oneof![
            Just(SchemaEvolution::Add),
            Just(SchemaEvolution::Reject),
            Just(SchemaEvolution::Ignore),
        ],
    ) {
        let chunks = chunks(&kinds, lines_per_chunk);
        let (expected, expected_schema) = one_after_another(evolution, &chunks);
        let (got, got_schema, used) = dealt(evolution, &chunks, threads);
        prop_assert_eq!(used, threads);
        prop_assert_eq!(got, expected);
        prop_assert_eq!(got_schema, expected_schema);
    }
}

#[test]
fn a_field_that_appears_in_a_helpers_chunk_grows_the_schema_once_in_order() {
    // Chunk 1 (a helper's) adds `coupon`; chunk 2 (another helper's, decoded under the old
    // schema) adds `user`: it is decoded again, after `coupon`, as one decoder would.
    let chunks = chunks(&[0, 0, 12, 0, 13, 12], 2);
    let mut p = ParallelDecoder::new(decoder(SchemaEvolution::Add), 3);
    let deal = p.decode(chunks.clone());
    let added: Vec<Vec<String>> = deal
        .decoded
        .iter()
        .map(|(r, _)| r.as_ref().unwrap().added.clone())
        .collect();
    assert_eq!(
        added,
        vec![vec![], vec!["coupon".to_string()], vec!["user".to_string()]]
    );
    let names: Vec<String> = p
        .decoder()
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["ts", "id", "n", "coupon", "user"]);
    let last = deal.decoded[2].0.as_ref().unwrap();
    assert_eq!(
        last.batch.schema().fields().len(),
        5,
        "decoded under the grown schema"
    );
    assert!(deal.busy > std::time::Duration::ZERO);
}
