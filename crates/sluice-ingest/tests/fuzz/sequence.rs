//! Winners by sequence (`--sequence-field`): for any changes of a few keys, split between
//! rows the table holds and rows a window offers, dedupe keeps each key's highest (sequence,
//! then source position), and `drop_losers` then keeps exactly the offered winners whose
//! sequence is above the table's (an equal one is the same change again), whatever the
//! event times say; a model (a sorted map) decides.

use std::collections::BTreeMap;
use std::sync::Arc;

use deltalake::arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use proptest::prelude::*;
use sluice_ingest::{dedupe, drop_losers, KeySpec};
use sluice_window::TimeFormat;

use crate::runner::fuzz;

/// One change: its key, sequence, event time (minutes) and offset.
#[derive(Debug, Clone)]
struct Change {
    key: u8,
    sequence: i64,
    minute: u8,
    offset: i64,
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("lsn", DataType::Int64, true),
        Field::new("ts", DataType::Utf8, true),
        Field::new("_sluice_source", DataType::Utf8, false),
        Field::new("_sluice_offset", DataType::Int64, false),
    ]))
}

fn batch(changes: &[Change]) -> RecordBatch {
    let ids: Vec<String> = changes.iter().map(|c| format!("k{}", c.key)).collect();
    let times: Vec<String> = changes
        .iter()
        .map(|c| format!("2026-12-06T10:{:02}:00Z", c.minute % 60))
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from(ids)),
            Arc::new(Int64Array::from_iter_values(
                changes.iter().map(|c| c.sequence),
            )),
            Arc::new(StringArray::from(times)),
            Arc::new(StringArray::from(vec!["p0"; changes.len()])),
            Arc::new(Int64Array::from_iter_values(
                changes.iter().map(|c| c.offset),
            )),
        ],
    )
    .expect("aligned columns")
}

/// `(id, lsn, offset)` of each row.
fn rows(batch: &RecordBatch) -> Vec<(String, i64, i64)> {
    let ids = batch.column(0).as_string::<i32>();
    let lsns = batch.column(1).as_primitive::<Int64Type>();
    let offsets = batch.column(4).as_primitive::<Int64Type>();
    (0..batch.num_rows())
        .map(|i| (ids.value(i).to_string(), lsns.value(i), offsets.value(i)))
        .collect()
}

#[test]
fn the_highest_sequence_then_position_wins_whatever_the_times() {
    let change = (0u8..4, 0i64..6, 0u8..60).prop_map(|(key, sequence, minute)| Change {
        key,
        sequence,
        minute,
        offset: 0,
    });
    fuzz(
        "winners by sequence",
        600,
        (prop::collection::vec(change, 1..30), 0usize..30),
        |(mut changes, split)| {
            // Offsets are the changes' order of arrival, unique as source positions are.
            for (i, c) in changes.iter_mut().enumerate() {
                c.offset = i as i64;
            }
            let split = split.min(changes.len());
            let (held, offered) = changes.split_at(split);
            let key = KeySpec {
                columns: vec!["id".into()],
                time_field: "ts".into(),
                time: TimeFormat::Rfc3339.into(),
                sequence: vec!["lsn".into()],
            };
            let fail = |e: deltalake::arrow::error::ArrowError| TestCaseError::fail(e.to_string());
            // The table holds one row per key: the winner of the held changes.
            let table = dedupe(&schema(), &[batch(held)], &key).map_err(fail)?;
            let unique = dedupe(&schema(), &[batch(offered)], &key).map_err(fail)?;
            let kept = drop_losers(&unique, std::slice::from_ref(&table), &key).map_err(fail)?;

            // The model: per key, the best (sequence, offset) of each side.
            let best = |cs: &[Change]| {
                let mut m: BTreeMap<String, (i64, i64)> = BTreeMap::new();
                for c in cs {
                    let e = m
                        .entry(format!("k{}", c.key))
                        .or_insert((c.sequence, c.offset));
                    *e = (*e).max((c.sequence, c.offset));
                }
                m
            };
            let (held_best, offered_best) = (best(held), best(offered));
            let table_rows: BTreeMap<String, (i64, i64)> = rows(&table)
                .into_iter()
                .map(|(k, s, o)| (k, (s, o)))
                .collect();
            prop_assert_eq!(&table_rows, &held_best, "the held changes' winners");
            let expected: Vec<(String, i64, i64)> = offered_best
                .iter()
                .filter(|(k, v)| held_best.get(*k).is_none_or(|h| v.0 > h.0))
                .map(|(k, (s, o))| (k.clone(), *s, *o))
                .collect();
            let mut got = rows(&kept);
            got.sort();
            prop_assert_eq!(got, expected, "offered changes that change the table");
            prop_assert!(kept.column(1).null_count() == 0);
            Ok(())
        },
    );
}
