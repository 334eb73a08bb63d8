//! Column names for record fields, as Delta readers resolve them.
//!
//! - Delta column names are case-insensitive: a table cannot hold `Amount` and `amount`, and
//!   readers (Spark by default) resolve either spelling to the one column. A record's key is
//!   looked up the same way: its field's own name first, then ignoring case; a key that
//!   matches a column only by case is written to that column.
//! - Spark refuses column names holding any of ` ,;{}()\n\t=` unless the table uses column
//!   mapping, which sluice's own Parquet files do not. A field named so, or empty, or with
//!   a control character, or spelled like a column the table already has or one sluice adds
//!   (the address and position columns), becomes a column under a new name: each refused
//!   character an `_`, then `_2`, `_3`, ... until no column has it. The column keeps the
//!   field's own name in its metadata ([`SOURCE_NAME_KEY`]), which every later run, and any
//!   reader, maps back by.

use std::collections::HashMap;

use deltalake::arrow::datatypes::{DataType, Field, Fields};

/// Column metadata naming the record field a renamed column holds.
pub const SOURCE_NAME_KEY: &str = "sluice.sourceName";

/// Whether readers refuse `c` in a column name (Spark's list, and control characters).
fn refused(c: char) -> bool {
    " ,;{}()\n\t=".contains(c) || c.is_control()
}

/// Whether `name` can be a column as it is (before looking at the other columns).
pub fn acceptable(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(refused)
}

/// The record field a column holds: its own name, or the one it was renamed from.
pub fn source_name(field: &Field) -> &str {
    field
        .metadata()
        .get(SOURCE_NAME_KEY)
        .map(String::as_str)
        .unwrap_or(field.name())
}

/// Whether two names are one column to Delta (equal ignoring case, as the Delta kernel
/// compares them: Unicode lowercase).
pub fn same_column(a: &str, b: &str) -> bool {
    a == b || a.to_lowercase() == b.to_lowercase()
}

/// How a record's key found its field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// The field's own name, exactly.
    Exact(usize),
    /// Only ignoring case: the key is written to this field.
    Folded(usize),
}

impl Found {
    pub fn index(self) -> usize {
        match self {
            Found::Exact(i) | Found::Folded(i) => i,
        }
    }
}

/// The field of `fields` that a record's `key` names: its source name exactly, else ignoring
/// case.
pub(crate) fn lookup(fields: &Fields, key: &str) -> Option<Found> {
    if let Some(i) = fields.iter().position(|f| source_name(f) == key) {
        return Some(Found::Exact(i));
    }
    let folded = key.to_lowercase();
    fields
        .iter()
        .position(|f| source_name(f).to_lowercase() == folded || f.name().to_lowercase() == folded)
        .map(Found::Folded)
}

/// Finds fields by key for many keys at once (schema inference), as [`lookup`] does.
#[derive(Debug, Clone, Default)]
pub(crate) struct NameIndex {
    exact: HashMap<String, usize>,
    folded: HashMap<String, usize>,
}

impl NameIndex {
    pub fn get(&self, key: &str) -> Option<usize> {
        self.exact
            .get(key)
            .or_else(|| self.folded.get(&key.to_lowercase()))
            .copied()
    }

    pub fn insert(&mut self, key: &str, at: usize) {
        self.exact.entry(key.to_string()).or_insert(at);
        self.folded.entry(key.to_lowercase()).or_insert(at);
    }
}

/// A new nullable field for the record key `key`, among `siblings` (the struct's other
/// columns) and, at the top level, the `reserved` columns sluice adds: named `key` when
/// readers accept that name and no column is spelled like it; otherwise renamed (see the
/// module doc), with the key in its metadata.
pub(crate) fn new_field(key: &str, t: DataType, siblings: &[&str], reserved: &[String]) -> Field {
    let taken = |name: &str| {
        siblings.iter().any(|s| same_column(s, name))
            || reserved.iter().any(|r| same_column(r, name))
    };
    if acceptable(key) && !taken(key) {
        return Field::new(key, t, true);
    }
    let base: String = if key.is_empty() {
        "_".to_string()
    } else {
        key.chars()
            .map(|c| if refused(c) { '_' } else { c })
            .collect()
    };
    let mut name = base.clone();
    let mut n = 1u32;
    while taken(&name) {
        n += 1;
        name = format!("{base}_{n}");
    }
    let metadata = HashMap::from([(SOURCE_NAME_KEY.to_string(), key.to_string())]);
    Field::new(name, t, true).with_metadata(metadata)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_readers_refuse_or_that_a_column_has_are_renamed_and_remembered() {
        let reserved = vec!["dt".to_string(), "hour".to_string()];
        let named = |key: &str, siblings: &[&str]| {
            let f = new_field(key, DataType::Utf8, siblings, &reserved);
            (f.name().clone(), source_name(&f).to_string())
        };
        assert_eq!(named("amount", &["id"]), ("amount".into(), "amount".into()));
        assert_eq!(named("a b", &[]), ("a_b".into(), "a b".into()));
        assert_eq!(named("a b", &["a_b"]), ("a_b_2".into(), "a b".into()));
        assert_eq!(named("x,y", &[]), ("x_y".into(), "x,y".into()));
        assert_eq!(named("p(q)", &[]), ("p_q_".into(), "p(q)".into()));
        assert_eq!(named("k=", &[]), ("k_".into(), "k=".into()));
        assert_eq!(
            named("tab\there", &[]),
            ("tab_here".into(), "tab\there".into())
        );
        assert_eq!(named("", &[]), ("_".into(), "".into()));
        assert_eq!(named("Hour", &[]), ("Hour_2".into(), "Hour".into()));
        assert_eq!(
            named("AMOUNT", &["amount"]),
            ("AMOUNT_2".into(), "AMOUNT".into())
        );
        assert!(!acceptable("a\u{7f}b"));
        assert!(acceptable("été.x-y"));
    }

    #[test]
    fn keys_find_their_field_exactly_then_ignoring_case() {
        let fields = Fields::from(vec![
            Field::new("Amount", DataType::Int64, true),
            new_field("a b", DataType::Utf8, &["Amount"], &[]),
            Field::new("amount_x", DataType::Int64, true),
        ]);
        assert_eq!(lookup(&fields, "Amount"), Some(Found::Exact(0)));
        assert_eq!(lookup(&fields, "amount"), Some(Found::Folded(0)));
        assert_eq!(lookup(&fields, "a b"), Some(Found::Exact(1)));
        assert_eq!(lookup(&fields, "A B"), Some(Found::Folded(1)));
        // The column's own name, when renamed, is a spelling of it too.
        assert_eq!(lookup(&fields, "a_b"), Some(Found::Folded(1)));
        assert_eq!(lookup(&fields, "amountx"), None);
    }
}
