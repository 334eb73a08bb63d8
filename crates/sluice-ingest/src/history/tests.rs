//! History against a model: for any changes of a few keys (upserts and deletes at distinct
//! sequences), delivered in any order, in any batches, some twice, applying [`versions`]
//! batch after batch to a table (insert new versions, move the end of held ones; record new
//! tombstones) ends with each key's versions exactly those of its changes in sequence order.

use std::collections::BTreeMap;
use std::sync::Arc;

use deltalake::arrow::array::{AsArray, Int64Array, StringArray};
use deltalake::arrow::datatypes::Int64Type;
use proptest::prelude::*;

use super::*;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("lsn", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
        Field::new(START_AT, DataType::Int64, true),
        Field::new(END_AT, DataType::Int64, true),
    ]))
}

/// A version as the table holds it: (key, start) -> (value, end).
type Table = BTreeMap<(String, i64), (String, Option<i64>)>;

#[derive(Debug, Clone)]
struct Change {
    key: u8,
    lsn: i64,
    /// `None`: a delete.
    value: Option<u8>,
}

fn offered_batch(changes: &[Change]) -> RecordBatch {
    let ids: Vec<String> = changes.iter().map(|c| format!("k{}", c.key)).collect();
    let values: Vec<Option<String>> = changes
        .iter()
        .map(|c| c.value.map(|v| format!("v{v}")))
        .collect();
    let n = changes.len();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from(ids)),
            Arc::new(Int64Array::from_iter_values(changes.iter().map(|c| c.lsn))),
            Arc::new(StringArray::from(values)),
            Arc::new(Int64Array::from(vec![None; n])),
            Arc::new(Int64Array::from(vec![None; n])),
        ],
    )
    .unwrap()
}

/// A version of [`Table`]: its (key, start), its (value, end).
type Entry<'a> = (&'a (String, i64), &'a (String, Option<i64>));

/// The table's versions of `keys`.
fn held_batch(table: &Table, keys: &[String]) -> RecordBatch {
    let rows: Vec<Entry> = table
        .iter()
        .filter(|((k, _), _)| keys.contains(k))
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.0 .0.clone()),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0 .1))),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.1 .0.clone()),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0 .1))),
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.1 .1).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

fn tombstone_batch(tombstones: &[(String, i64)]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("lsn", DataType::Int64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(
                tombstones.iter().map(|t| t.0.clone()),
            )),
            Arc::new(Int64Array::from_iter_values(tombstones.iter().map(|t| t.1))),
        ],
    )
    .unwrap()
}

/// Applies one delivery (unique by key and sequence) to `table` and `tombstones`.
fn apply(table: &mut Table, tombstones: &mut Vec<(String, i64)>, batch: &[Change]) {
    let offered = offered_batch(batch);
    let deletes: Vec<bool> = batch.iter().map(|c| c.value.is_none()).collect();
    let keys: Vec<String> = batch.iter().map(|c| format!("k{}", c.key)).collect();
    let held = held_batch(table, &keys);
    let tombs = tombstone_batch(tombstones);
    let key = ["id".to_string()];
    let planned = versions(&offered, &deletes, &[held], &[tombs], &key, "lsn").unwrap();
    for i in planned.new_tombstones {
        tombstones.push((keys[i as usize].clone(), batch[i as usize].lsn));
    }
    let rows = &planned.rows;
    let ids = rows.column(0).as_string::<i32>();
    let values = rows.column(2).as_string::<i32>();
    let starts = rows.column(3).as_primitive::<Int64Type>();
    let ends = rows.column(4).as_primitive::<Int64Type>();
    for i in 0..rows.num_rows() {
        let end = (!ends.is_null(i)).then(|| ends.value(i));
        let at = (ids.value(i).to_string(), starts.value(i));
        assert_eq!(
            rows.column(1).as_primitive::<Int64Type>().value(i),
            starts.value(i)
        );
        table
            .entry(at)
            .and_modify(|(_, e)| *e = end)
            .or_insert((values.value(i).to_string(), end));
    }
}

/// The versions the changes imply: each upsert, until the key's next change.
fn model(changes: &[Change]) -> Table {
    let mut by_key: BTreeMap<u8, Vec<&Change>> = BTreeMap::new();
    for c in changes {
        by_key.entry(c.key).or_default().push(c);
    }
    let mut table = Table::new();
    for (key, mut list) in by_key {
        list.sort_by_key(|c| c.lsn);
        list.dedup_by_key(|c| c.lsn);
        for (j, c) in list.iter().enumerate() {
            if let Some(v) = c.value {
                let end = list.get(j + 1).map(|n| n.lsn);
                table.insert((format!("k{key}"), c.lsn), (format!("v{v}"), end));
            }
        }
    }
    table
}

proptest! {
    #[test]
    fn versions_are_the_changes_in_sequence_order_whatever_the_arrival(
        raw in proptest::collection::vec((0u8..4, 0i64..40, proptest::option::weighted(0.7, 0u8..5)), 1..40),
        order in proptest::collection::vec(any::<u16>(), 60),
        cuts in proptest::collection::vec(1usize..8, 1..20),
        again in proptest::collection::vec(any::<bool>(), 60),
    ) {
        // Distinct sequences per key (a change log's positions).
        let mut seen = std::collections::HashSet::new();
        let changes: Vec<Change> = raw
            .into_iter()
            .filter(|(k, l, _)| seen.insert((*k, *l)))
            .map(|(key, lsn, value)| Change { key, lsn, value })
            .collect();
        // Arrival: shuffled, some delivered twice.
        let mut arrival: Vec<Change> = changes.clone();
        for (i, c) in changes.iter().enumerate() {
            if again[i % again.len()] {
                arrival.push(c.clone());
            }
        }
        for i in (1..arrival.len()).rev() {
            let j = order[i % order.len()] as usize % (i + 1);
            arrival.swap(i, j);
        }
        let mut table = Table::new();
        let mut tombstones = Vec::new();
        let mut at = 0;
        let mut cut = cuts.iter().cycle();
        while at < arrival.len() {
            let n = (*cut.next().unwrap()).min(arrival.len() - at);
            let mut batch: Vec<Change> = Vec::new();
            for c in &arrival[at..at + n] {
                if !batch.iter().any(|b| b.key == c.key && b.lsn == c.lsn) {
                    batch.push(c.clone());
                }
            }
            apply(&mut table, &mut tombstones, &batch);
            at += n;
        }
        prop_assert_eq!(&table, &model(&changes));
        // A replay of everything changes nothing.
        let before = table.clone();
        apply(&mut table, &mut tombstones, &changes);
        prop_assert_eq!(&table, &before);
    }
}
