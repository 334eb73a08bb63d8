//! Looks at a JSON line against the record schema without building its values (serde
//! visits the keys; values of known scalar fields are skipped): the fields the schema does
//! not have, at any depth; keys that name a column only ignoring case, or nested values where
//! a column holds text (the line must be rewritten, see [`super::rewrite`]); and keys that
//! name one column twice.

use std::fmt;

use deltalake::arrow::datatypes::{DataType, Fields};
use serde::de::{
    Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::value::RawValue;

use crate::schema::{lookup, Found};

/// One step from the top of a record to a struct that a field is a member of.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Step {
    /// A struct member, by the key the line spells it with.
    Member(String),
    /// The elements of an array.
    Element,
    /// The values of a map.
    Value,
}

/// A field the schema does not have: the struct it is in (`parent`, empty for the top
/// level), its key, and its value's JSON text (only when asked for; empty otherwise).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unknown {
    pub parent: Vec<Step>,
    pub name: String,
    pub value: String,
}

impl Unknown {
    /// `coupon`, `user.plan`, `items[].sku`, `attrs{}.note`: for messages.
    pub fn path(&self) -> String {
        path_of(&self.parent, &self.name)
    }
}

fn path_of(parent: &[Step], name: &str) -> String {
    let mut out = steps_path(parent);
    if !out.is_empty() {
        out.push('.');
    }
    out.push_str(name);
    out
}

/// `user.plan`, `items[]`: the path the steps lead to.
fn steps_path(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Member(m) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(m);
            }
            Step::Element => out.push_str("[]"),
            Step::Value => out.push_str("{}"),
        }
    }
    out
}

/// What [`walk`] found in a line.
#[derive(Debug, Default)]
pub(crate) struct Walked {
    /// Fields the schema does not have, in the order written; a field whose value is null
    /// is left out (it carries nothing a null column would not).
    pub unknown: Vec<Unknown>,
    /// A key names its column only ignoring case, or a nested value stands where the column
    /// holds text: decoding must read the line as [`super::rewrite`] spells it.
    pub rewrite: bool,
    /// Paths of columns that two keys of one object name (`Amount` and `amount`).
    pub clashes: Vec<String>,
    /// Paths of objects with nothing to store (`{}`, `{"a":{}}`) where the column is not a
    /// struct or a map: read as null (and counted as left out), as a field whose value is `{}`
    /// is before its column exists, so that no record's row depends on what came before it.
    pub emptied: Vec<String>,
}

/// Walks `line` (one JSON object) against `fields`; unknown fields carry their value's text
/// if `values`. `Err` if the line is not valid JSON.
pub(crate) fn walk(
    line: &[u8],
    fields: &Fields,
    values: bool,
) -> Result<Walked, serde_json::Error> {
    let mut found = Walked::default();
    let mut de = serde_json::Deserializer::from_slice(line);
    TypeSeed {
        kind: Kind::Struct(fields),
        at: &mut Vec::new(),
        found: &mut found,
        values,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(found)
}

#[derive(Clone, Copy)]
enum Kind<'a> {
    Struct(&'a Fields),
    List(&'a DataType),
    Map(&'a DataType),
    /// A string column: any JSON value fits (a nested one as its JSON text).
    Text,
    Other,
}

impl<'a> Kind<'a> {
    fn of(t: &'a DataType) -> Kind<'a> {
        match t {
            DataType::Struct(fs) => Kind::Struct(fs),
            DataType::List(f) | DataType::LargeList(f) => Kind::List(f.data_type()),
            DataType::Map(entries, _) => match entries.data_type() {
                DataType::Struct(kv) if kv.len() == 2 => Kind::Map(kv[1].data_type()),
                _ => Kind::Other,
            },
            DataType::Utf8 => Kind::Text,
            _ => Kind::Other,
        }
    }
}

struct TypeSeed<'s, 'a> {
    kind: Kind<'a>,
    at: &'s mut Vec<Step>,
    found: &'s mut Walked,
    values: bool,
}

impl TypeSeed<'_, '_> {
    fn next<'s, 'b>(&'s mut self, kind: Kind<'b>) -> TypeSeed<'s, 'b> {
        TypeSeed {
            kind,
            at: self.at,
            found: self.found,
            values: self.values,
        }
    }

    /// The value here holds nothing (`{}`): read as null, and counted as left out.
    fn emptied(&mut self) {
        self.found.emptied.push(steps_path(self.at));
        self.found.rewrite = true;
    }
}

impl<'de> DeserializeSeed<'de> for TypeSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(mut self, d: D) -> Result<(), D::Error> {
        match self.kind {
            // A scalar's value is not ours to judge here (decoding does), but for an object
            // with nothing to store (read as null) and, in a text column, any nested value
            // (read as its JSON text).
            Kind::Other | Kind::Text => {
                let raw = <&RawValue>::deserialize(d)?;
                let seen = Seen::of(raw);
                if seen == Seen::Nested && holds_nothing(raw) {
                    self.emptied();
                } else if seen == Seen::Nested && matches!(self.kind, Kind::Text) {
                    self.found.rewrite = true;
                }
                Ok(())
            }
            _ => d.deserialize_any(self),
        }
    }
}

impl<'de> Visitor<'de> for TypeSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        match self.kind {
            Kind::Struct(fields) => {
                // Which columns this object's keys named, and whether exactly.
                let mut named: Vec<Found> = Vec::new();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match lookup(fields, &key) {
                        Some(found) => {
                            let i = found.index();
                            if let Some(earlier) = named.iter().find(|n| n.index() == i) {
                                // The same key twice is the last value, as JSON readers take
                                // it; two spellings of one column are two values for it.
                                if matches!(
                                    (earlier, found),
                                    (Found::Folded(_), _) | (_, Found::Folded(_))
                                ) {
                                    self.found.clashes.push(path_of(self.at, fields[i].name()));
                                }
                            }
                            named.push(found);
                            if matches!(found, Found::Folded(_)) {
                                self.found.rewrite = true;
                            }
                            self.at.push(Step::Member(key.into_owned()));
                            let kind = Kind::of(fields[i].data_type());
                            map.next_value_seed(self.next(kind))?;
                            self.at.pop();
                        }
                        None => {
                            let value: &RawValue = map.next_value()?;
                            if Seen::of(value) != Seen::Null {
                                self.found.unknown.push(Unknown {
                                    parent: self.at.clone(),
                                    name: key.into_owned(),
                                    value: if self.values {
                                        value.get().to_string()
                                    } else {
                                        String::new()
                                    },
                                });
                            }
                        }
                    }
                }
                // (Decoding reads a struct whose members are all null as null.)
            }
            // A map's `{}` is an empty map (data); its values are judged one by one.
            Kind::Map(value) => {
                self.at.push(Step::Value);
                while map.next_key::<IgnoredAny>()?.is_some() {
                    map.next_value_seed(self.next(Kind::of(value)))?;
                }
                self.at.pop();
            }
            // An object where the column is an array: read as null if it holds nothing.
            _ => {
                let mut nothing = true;
                while let Some((_, value)) = map.next_entry::<IgnoredAny, &RawValue>()? {
                    nothing &= holds_nothing(value);
                }
                if nothing {
                    self.emptied();
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        match self.kind {
            Kind::List(element) => {
                self.at.push(Step::Element);
                while seq
                    .next_element_seed(self.next(Kind::of(element)))?
                    .is_some()
                {}
                self.at.pop();
            }
            _ => while seq.next_element::<IgnoredAny>()?.is_some() {},
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// Whether a value is an object with nothing to store (see `Json::holds_nothing`).
fn holds_nothing(raw: &RawValue) -> bool {
    raw.get().starts_with('{')
        && crate::json::Json::parse(raw.get()).is_ok_and(|v| v.holds_nothing())
}

/// What kind of value a JSON value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Null,
    Scalar,
    Nested,
}

impl Seen {
    /// Read from the value's own text: serde_json validates it without reading numbers
    /// (`1e400`, which it cannot hold as a double, is valid JSON and arrow-json reads it).
    fn of(raw: &RawValue) -> Seen {
        match raw.get().as_bytes().first() {
            Some(b'n') => Seen::Null,
            Some(b'{' | b'[') => Seen::Nested,
            _ => Seen::Scalar,
        }
    }
}

#[cfg(test)]
mod tests {
    use deltalake::arrow::datatypes::Field;

    use super::*;
    use crate::schema::parse_type;

    fn fields(spec: &[(&str, &str)]) -> Fields {
        spec.iter()
            .map(|(n, t)| Field::new(*n, parse_type(t).unwrap(), true))
            .collect()
    }

    fn unknown_paths(line: &[u8], schema: &Fields) -> Vec<String> {
        let found = walk(line, schema, false).unwrap();
        found.unknown.iter().map(Unknown::path).collect()
    }

    #[test]
    fn unknown_fields_are_found_at_every_depth_and_nulls_are_not() {
        let schema = fields(&[
            ("id", "string"),
            ("user", "struct<name:string>"),
            ("items", "array<struct<sku:string>>"),
            ("attrs", "map<string,struct<v:long>>"),
        ]);
        let line = br#"{"id":"a","coupon":"X1","user":{"name":"n","plan":{"tier":2}},"items":[{"sku":"s","qty":3},{"sku":"t"}],"attrs":{"k":{"v":1,"note":"x"}},"gone":null,"key with \"quote\"":1}"#;
        let found = walk(line, &schema, true).unwrap();
        let paths: Vec<String> = found.unknown.iter().map(Unknown::path).collect();
        assert_eq!(
            paths,
            [
                "coupon",
                "user.plan",
                "items[].qty",
                "attrs{}.note",
                "key with \"quote\""
            ]
        );
        assert_eq!(found.unknown[1].value, r#"{"tier":2}"#);
        assert!(!found.rewrite && found.clashes.is_empty());
        let without = walk(line, &schema, false).unwrap();
        assert_eq!(without.unknown.len(), 5);
        assert!(without.unknown.iter().all(|u| u.value.is_empty()));
        assert!(unknown_paths(br#"{"id":"a"}"#, &schema).is_empty());
        // Wrong types are not this walker's business.
        assert!(unknown_paths(br#"{"user":5,"items":"x"}"#, &schema).is_empty());
        assert!(walk(br#"{"id":"a""#, &schema, true).is_err());
        assert!(walk(br#"{"id":"a"} x"#, &schema, true).is_err());
    }

    #[test]
    fn other_spellings_and_nested_values_in_text_columns_ask_for_a_rewrite() {
        let schema = fields(&[
            ("Amount", "long"),
            ("note", "string"),
            ("tags", "array<string>"),
            ("user", "struct<Name:string>"),
        ]);
        let check = |line: &[u8]| {
            let w = walk(line, &schema, false).unwrap();
            (w.rewrite, w.clashes, w.unknown.len())
        };
        assert_eq!(
            check(br#"{"Amount":1,"note":"x","tags":["a"]}"#),
            (false, vec![], 0)
        );
        assert_eq!(check(br#"{"amount":1}"#), (true, vec![], 0));
        assert_eq!(check(br#"{"user":{"name":"n"}}"#), (true, vec![], 0));
        assert_eq!(check(br#"{"note":{"a":1}}"#), (true, vec![], 0));
        assert_eq!(check(br#"{"tags":[1,"a",{"x":1}]}"#), (true, vec![], 0));
        assert_eq!(check(br#"{"note":5,"tags":[true]}"#), (false, vec![], 0));
        // Two spellings of one column in one object; the same key twice is not a clash.
        assert_eq!(
            check(br#"{"Amount":1,"amount":2}"#),
            (true, vec!["Amount".to_string()], 0)
        );
        assert_eq!(
            check(br#"{"user":{"Name":"a","NAME":"b"}}"#),
            (true, vec!["user.Name".to_string()], 0)
        );
        assert_eq!(check(br#"{"Amount":1,"Amount":2}"#), (false, vec![], 0));
        // Objects that hold nothing are null where the column is not a struct (decoding
        // reads those) or a map; an object with a null member holds that null.
        let emptied = |line: &[u8]| walk(line, &schema, true).unwrap().emptied;
        assert_eq!(
            emptied(br#"{"Amount":{},"tags":[{},"a"]}"#),
            ["Amount", "tags[]"]
        );
        assert_eq!(emptied(br#"{"user":{"Name":{"x":{}}}}"#), ["user.Name"]);
        assert!(emptied(br#"{"user":{}}"#).is_empty());
        assert!(emptied(br#"{"note":{"x":null}}"#).is_empty());
    }
}
