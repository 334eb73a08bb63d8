//! Row keys as bytes to hash and compare: what dedupe, key buckets and the late-row checks
//! index rows by.

use deltalake::arrow::array::{Array, ArrayRef, AsArray, GenericStringArray, OffsetSizeTrait};
use deltalake::arrow::datatypes::DataType;
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::row::{RowConverter, Rows, SortField};

/// The row keys of one batch's key columns. Two rows have equal [`KeyRows::key`]s exactly
/// when their key values are equal (a null is its own value, distinct from every string,
/// the empty one included), so a key indexes a hash map. Keys of two `KeyRows` compare
/// alike only when their columns have the same types: callers cast one side to the other's.
///
/// A key of one string column (the common case: an event id) is the string's own bytes;
/// converting it to arrow's row format first copied every key into blocks about twice its
/// length and was the largest part of dedupe's hashing cost. Other keys use the row format.
pub(crate) enum KeyRows {
    Utf8(GenericStringArray<i32>),
    LargeUtf8(GenericStringArray<i64>),
    Rows(Rows),
}

impl KeyRows {
    /// `columns` are the key columns (at least one), all of the batch's length.
    pub(crate) fn of(columns: &[ArrayRef]) -> Result<Self, ArrowError> {
        if let [column] = columns {
            match column.data_type() {
                DataType::Utf8 => return Ok(KeyRows::Utf8(column.as_string::<i32>().clone())),
                DataType::LargeUtf8 => {
                    return Ok(KeyRows::LargeUtf8(column.as_string::<i64>().clone()))
                }
                _ => {}
            }
        }
        let converter = RowConverter::new(
            columns
                .iter()
                .map(|c| SortField::new(c.data_type().clone()))
                .collect(),
        )?;
        Ok(KeyRows::Rows(converter.convert_columns(columns)?))
    }

    /// The key of row `i` (`None`: a one-column key that is null).
    pub(crate) fn key(&self, i: usize) -> Option<&[u8]> {
        match self {
            KeyRows::Utf8(a) => string_key(a, i),
            KeyRows::LargeUtf8(a) => string_key(a, i),
            KeyRows::Rows(rows) => Some(rows.row(i).data()),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            KeyRows::Utf8(a) => a.len(),
            KeyRows::LargeUtf8(a) => a.len(),
            KeyRows::Rows(rows) => rows.num_rows(),
        }
    }

    /// Every row's key, in row order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = Option<&[u8]>> + '_ {
        (0..self.len()).map(|i| self.key(i))
    }
}

fn string_key<O: OffsetSizeTrait>(a: &GenericStringArray<O>, i: usize) -> Option<&[u8]> {
    (!a.is_null(i)).then(|| a.value(i).as_bytes())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use deltalake::arrow::array::{Int64Array, LargeStringArray, StringArray};

    use super::*;

    /// Keys are equal exactly when the values are, for each representation: a null is
    /// neither the empty string nor the string "null", and a two-column key tells
    /// ("ab", "c") from ("a", "bc").
    #[test]
    fn keys_are_equal_exactly_when_the_values_are() {
        let values = vec![Some("a"), None, Some(""), Some("null"), Some("a"), None];
        let strings: ArrayRef = Arc::new(StringArray::from(values.clone()));
        let large: ArrayRef = Arc::new(LargeStringArray::from(values));
        for column in [strings, large] {
            let keys = KeyRows::of(&[column]).unwrap();
            let all: Vec<_> = keys.keys().collect();
            assert_eq!(all.len(), 6);
            assert_eq!(all[0], all[4]);
            assert_eq!(all[1], all[5]);
            for (i, j) in [(0, 1), (1, 2), (2, 3), (0, 2), (1, 3)] {
                assert_ne!(all[i], all[j], "rows {i} and {j}");
            }
        }
        let first: ArrayRef = Arc::new(StringArray::from(vec!["ab", "a", "ab"]));
        let second: ArrayRef = Arc::new(StringArray::from(vec!["c", "bc", "c"]));
        let keys = KeyRows::of(&[first, second]).unwrap();
        assert!(matches!(keys, KeyRows::Rows(_)));
        assert_ne!(keys.key(0), keys.key(1));
        assert_eq!(keys.key(0), keys.key(2));
        let numbers: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(1)]));
        let keys = KeyRows::of(&[numbers]).unwrap();
        assert_eq!(keys.key(0), keys.key(2));
        assert_ne!(keys.key(0), keys.key(1));
    }
}
