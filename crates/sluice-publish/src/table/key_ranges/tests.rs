use std::sync::Arc;

use deltalake::arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array, StringArray};
use deltalake::datafusion::logical_expr::col;
use proptest::prelude::*;

use super::*;

fn int(v: i64) -> Bound {
    Bound::Int(v)
}

fn stats(min: i64, max: i64) -> Option<String> {
    Some(format!(
        r#"{{"numRecords": 10, "minValues": {{"id": {min}}}, "maxValues": {{"id": {max}}}}}"#
    ))
}

#[test]
fn a_file_between_two_offered_keys_cuts_the_range_and_is_pruned() {
    let keys: ArrayRef = Arc::new(Int64Array::from(vec![5, 95, 3, 5]));
    let files = vec![stats(0, 10), stats(40, 60), stats(90, 100), stats(200, 300)];
    let ranges = KeyRanges::new(keys.as_ref(), "id", files).expect("an integer key");
    assert_eq!(ranges.ranges(), [(int(3), int(5)), (int(95), int(95))]);
    assert_eq!((ranges.files, ranges.files_pruned), (4, 2));
    assert!(!ranges.excludes_every_file());
    let predicate = ranges.predicate(col("id")).to_string();
    assert!(
        predicate.contains("id >= Int64(3) AND id <= Int64(5)") && predicate.contains("Int64(95)"),
        "{predicate}"
    );
}

#[test]
fn a_file_without_statistics_is_read_and_cuts_nothing() {
    let keys: ArrayRef = Arc::new(Int32Array::from(vec![1, 50]));
    let files = vec![None, stats(10, 20), Some("{\"numRecords\": 3}".into())];
    let ranges = KeyRanges::new(keys.as_ref(), "id", files).expect("an integer key");
    assert_eq!(ranges.ranges(), [(int(1), int(1)), (int(50), int(50))]);
    assert_eq!((ranges.files, ranges.files_pruned), (3, 1));
    // The literals take the column's type.
    assert!(ranges
        .predicate(col("id"))
        .to_string()
        .contains("Int32(50)"));
}

#[test]
fn keys_outside_every_file_prune_every_file() {
    let keys: ArrayRef = Arc::new(StringArray::from(vec!["x-1", "x-2"]));
    let files = vec![
        Some(r#"{"minValues": {"id": "a"}, "maxValues": {"id": "m"}}"#.to_string()),
        Some(r#"{"minValues": {"id": "n"}, "maxValues": {"id": "w"}}"#.to_string()),
    ];
    let ranges = KeyRanges::new(keys.as_ref(), "id", files).expect("a string key");
    assert_eq!(
        ranges.ranges(),
        [(Bound::Str("x-1".into()), Bound::Str("x-2".into()))]
    );
    assert!(ranges.excludes_every_file());
    assert!(KeyRanges::new(keys.as_ref(), "id", Vec::new())
        .expect("a string key")
        .excludes_every_file());
}

#[test]
fn keys_of_other_types_are_not_ranged() {
    let keys: ArrayRef = Arc::new(Float64Array::from(vec![1.5]));
    assert_eq!(KeyRanges::new(keys.as_ref(), "id", vec![stats(0, 1)]), None);
}

#[test]
fn no_range_is_false() {
    let keys: ArrayRef = Arc::new(Int64Array::from(Vec::<i64>::new()));
    let ranges = KeyRanges::new(keys.as_ref(), "id", vec![stats(0, 1)]).expect("integers");
    assert_eq!(ranges.predicate(col("id")).to_string(), "Boolean(false)");
}

/// Sorted distinct keys and files (bounds, or none) over a small domain, so that files
/// and keys meet often.
fn keys_and_files() -> impl Strategy<Value = (Vec<Bound>, Vec<Option<(Bound, Bound)>>)> {
    let keys = proptest::collection::btree_set(0i64..400, 0..120)
        .prop_map(|s| s.into_iter().map(Bound::Int).collect::<Vec<_>>());
    let file = proptest::option::weighted(0.9, (0i64..420, 0i64..30))
        .prop_map(|f| f.map(|(lo, width)| (Bound::Int(lo), Bound::Int(lo + width))));
    (keys, proptest::collection::vec(file, 0..60))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Every offered key is in a range (so the ranges change no MERGE result), a file that
    /// holds an offered key meets a range (it is read), and, uncoalesced, a file with
    /// statistics that holds none meets none (it is pruned).
    #[test]
    fn ranges_cover_every_key_and_meet_exactly_the_files_that_may_hold_one(
        (keys, files) in keys_and_files(),
        max in 1usize..8,
    ) {
        let cut_ranges = cut(&keys, &files);
        let ranges = coalesced(cut_ranges.clone(), max);
        prop_assert!(ranges.len() <= max);
        prop_assert!(ranges.windows(2).all(|w| w[0].1 < w[1].0), "sorted, disjoint: {ranges:?}");
        for key in &keys {
            prop_assert!(meets(&ranges, key, key), "key {key:?} outside {ranges:?}");
        }
        for (lo, hi) in files.iter().flatten() {
            let holds = keys.iter().any(|k| lo <= k && k <= hi);
            if holds {
                prop_assert!(meets(&ranges, lo, hi), "file {lo:?}..{hi:?} holds a key, pruned");
            }
            if !holds && cut_ranges.len() <= max {
                prop_assert!(!meets(&ranges, lo, hi), "file {lo:?}..{hi:?} holds none, read");
            }
        }
    }
}
