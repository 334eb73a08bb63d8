//! Finds the fields of a JSON line that the record schema does not have, at any depth,
//! without building the line's values (serde visits the keys; values of known scalar
//! fields are skipped).

use std::fmt;

use deltalake::arrow::datatypes::{DataType, Fields};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// One step from the top of a record to a struct that a field is a member of.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Step {
    /// A struct member by name.
    Member(String),
    /// The elements of an array.
    Element,
    /// The values of a map.
    Value,
}

/// A field the schema does not have: the struct it is in (`parent`, empty for the top
/// level), its name, and its value (only when asked for; `Null` otherwise).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unknown {
    pub parent: Vec<Step>,
    pub name: String,
    pub value: Value,
}

impl Unknown {
    /// `coupon`, `user.plan`, `items[].sku`, `attrs{}.note`: for messages.
    pub fn path(&self) -> String {
        let mut out = String::new();
        for step in &self.parent {
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
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(&self.name);
        out
    }
}

/// The fields of `line` (one JSON object) that `fields` does not have, in the order they
/// are written, each with its value if `values`. A field whose value is null is left out:
/// it carries nothing a null column would not. `Err` if the line is not valid JSON.
pub(crate) fn unknown_fields(
    line: &[u8],
    fields: &Fields,
    values: bool,
) -> Result<Vec<Unknown>, serde_json::Error> {
    let mut found = Vec::new();
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
            _ => Kind::Other,
        }
    }
}

struct TypeSeed<'s, 'a> {
    kind: Kind<'a>,
    at: &'s mut Vec<Step>,
    found: &'s mut Vec<Unknown>,
    values: bool,
}

impl<'de> DeserializeSeed<'de> for TypeSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match self.kind {
            // A scalar's value is not ours to judge here (decoding does).
            Kind::Other => d.deserialize_ignored_any(IgnoredAny).map(|_| ()),
            _ => d.deserialize_any(self),
        }
    }
}

impl<'de> Visitor<'de> for TypeSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        match self.kind {
            Kind::Struct(fields) => {
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match fields.iter().find(|f| f.name().as_str() == key.as_ref()) {
                        Some(f) => {
                            self.at.push(Step::Member(key.into_owned()));
                            map.next_value_seed(TypeSeed {
                                kind: Kind::of(f.data_type()),
                                at: self.at,
                                found: self.found,
                                values: self.values,
                            })?;
                            self.at.pop();
                        }
                        None if self.values => {
                            let value: Value = map.next_value()?;
                            if !value.is_null() {
                                self.found.push(Unknown {
                                    parent: self.at.clone(),
                                    name: key.into_owned(),
                                    value,
                                });
                            }
                        }
                        None => {
                            let value: NullOrNot = map.next_value()?;
                            if !value.0 {
                                self.found.push(Unknown {
                                    parent: self.at.clone(),
                                    name: key.into_owned(),
                                    value: Value::Null,
                                });
                            }
                        }
                    }
                }
            }
            Kind::Map(value) => {
                self.at.push(Step::Value);
                while map.next_key::<IgnoredAny>()?.is_some() {
                    map.next_value_seed(TypeSeed {
                        kind: Kind::of(value),
                        at: self.at,
                        found: self.found,
                        values: self.values,
                    })?;
                }
                self.at.pop();
            }
            _ => while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {},
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        match self.kind {
            Kind::List(element) => {
                self.at.push(Step::Element);
                while seq
                    .next_element_seed(TypeSeed {
                        kind: Kind::of(element),
                        at: self.at,
                        found: self.found,
                        values: self.values,
                    })?
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

/// Whether a value is null, read without keeping it.
struct NullOrNot(bool);

impl<'de> serde::Deserialize<'de> for NullOrNot {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NullOrNot;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<NullOrNot, E> {
                Ok(NullOrNot(true))
            }
            fn visit_bool<E>(self, _: bool) -> Result<NullOrNot, E> {
                Ok(NullOrNot(false))
            }
            fn visit_i64<E>(self, _: i64) -> Result<NullOrNot, E> {
                Ok(NullOrNot(false))
            }
            fn visit_u64<E>(self, _: u64) -> Result<NullOrNot, E> {
                Ok(NullOrNot(false))
            }
            fn visit_f64<E>(self, _: f64) -> Result<NullOrNot, E> {
                Ok(NullOrNot(false))
            }
            fn visit_str<E>(self, _: &str) -> Result<NullOrNot, E> {
                Ok(NullOrNot(false))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<NullOrNot, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(NullOrNot(false))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<NullOrNot, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(NullOrNot(false))
            }
        }
        d.deserialize_any(V)
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

    #[test]
    fn unknown_fields_are_found_at_every_depth_and_nulls_are_not() {
        let schema = fields(&[
            ("id", "string"),
            ("user", "struct<name:string>"),
            ("items", "array<struct<sku:string>>"),
            ("attrs", "map<string,struct<v:long>>"),
        ]);
        let line = br#"{"id":"a","coupon":"X1","user":{"name":"n","plan":{"tier":2}},"items":[{"sku":"s","qty":3},{"sku":"t"}],"attrs":{"k":{"v":1,"note":"x"}},"gone":null,"key with \"quote\"":1}"#;
        let found = unknown_fields(line, &schema, true).unwrap();
        let paths: Vec<String> = found.iter().map(Unknown::path).collect();
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
        assert_eq!(found[1].value, serde_json::json!({"tier": 2}));
        let without = unknown_fields(line, &schema, false).unwrap();
        assert_eq!(without.len(), 5);
        assert!(without.iter().all(|u| u.value.is_null()));
        assert!(unknown_fields(br#"{"id":"a"}"#, &schema, true)
            .unwrap()
            .is_empty());
        // Wrong types are not this walker's business.
        assert!(unknown_fields(br#"{"user":5,"items":"x"}"#, &schema, true)
            .unwrap()
            .is_empty());
        assert!(unknown_fields(br#"{"id":"a""#, &schema, true).is_err());
        assert!(unknown_fields(br#"{"id":"a"} x"#, &schema, true).is_err());
    }
}
