//! JSON values as written: a number keeps its text (`9007199254740993`, `1.50`, `1e400` are
//! not rounded through a double), an object its members in written order, repeated keys
//! included. Schema inference types numbers by their text, and the decoder rewrites a line
//! (a key to its column's spelling, a nested value to its JSON text) without changing any
//! other value.
//!
//! Each level is read through serde_json's `RawValue` and its members read again from their
//! own text: a value `d` levels deep is read `d` times. Values nested deeper than
//! [`DEPTH_MAX`] are refused, as serde_json refuses them elsewhere in sluice.

use std::fmt;

use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The deepest nesting read (serde_json's own limit).
pub(crate) const DEPTH_MAX: usize = 128;

/// One JSON value, with the text of its numbers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json<'a> {
    Null,
    Bool(bool),
    /// A number's own text.
    Number(&'a str),
    String(String),
    Array(Vec<Json<'a>>),
    /// Members in written order; a repeated key is repeated here.
    Object(Vec<(String, Json<'a>)>),
}

impl<'a> Json<'a> {
    /// Reads one JSON value (surrounding whitespace allowed, nothing else).
    pub fn parse(text: &'a str) -> Result<Json<'a>, serde_json::Error> {
        let raw: &'a RawValue = serde_json::from_str(text)?;
        Self::from_raw(raw.get(), 1)
    }

    /// As [`Json::parse`], for bytes (which must be UTF-8).
    pub fn parse_bytes(bytes: &'a [u8]) -> Result<Json<'a>, serde_json::Error> {
        let raw: &'a RawValue = serde_json::from_slice(bytes)?;
        Self::from_raw(raw.get(), 1)
    }

    /// `text` is one value's own text, as serde_json validated it, `depth` levels down.
    fn from_raw(text: &'a str, depth: usize) -> Result<Json<'a>, serde_json::Error> {
        let nested = matches!(text.as_bytes().first(), Some(b'{' | b'['));
        if nested && depth > DEPTH_MAX {
            return Err(serde_json::Error::custom(format!(
                "nested more than {DEPTH_MAX} levels deep"
            )));
        }
        Ok(match text.as_bytes().first() {
            Some(b'{') => {
                let Members(members) = serde_json::from_str(text)?;
                let mut out = Vec::with_capacity(members.len());
                for (key, value) in members {
                    out.push((key, Self::from_raw(value.get(), depth + 1)?));
                }
                Json::Object(out)
            }
            Some(b'[') => {
                let items: Vec<&'a RawValue> = serde_json::from_str(text)?;
                let mut out = Vec::with_capacity(items.len());
                for value in items {
                    out.push(Self::from_raw(value.get(), depth + 1)?);
                }
                Json::Array(out)
            }
            Some(b'"') => Json::String(serde_json::from_str(text)?),
            Some(b't') => Json::Bool(true),
            Some(b'f') => Json::Bool(false),
            Some(b'n') => Json::Null,
            _ => Json::Number(text),
        })
    }

    /// Whether this is an object with nothing to store: `{}`, or members that are such
    /// objects themselves (`{"a":{}}`). No column type comes from it, and a column that is
    /// not a map reads it as null (a struct column, as a struct whose members are all null).
    pub fn holds_nothing(&self) -> bool {
        match self {
            Json::Object(members) => members.iter().all(|(_, v)| v.holds_nothing()),
            _ => false,
        }
    }

    /// Whether this is an object or an array.
    pub fn is_nested(&self) -> bool {
        matches!(self, Json::Array(_) | Json::Object(_))
    }

    /// Compact JSON text: numbers as written, strings escaped as serde_json escapes them.
    pub fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Number(text) => out.push_str(text),
            Json::String(s) => quote(s, out),
            Json::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Json::Object(members) => {
                out.push('{');
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    quote(key, out);
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }

    /// [`Json::write`] into a new string.
    pub fn text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }
}

/// `s` as a JSON string literal.
fn quote(s: &str, out: &mut String) {
    out.push_str(&serde_json::Value::String(s.to_string()).to_string());
}

/// An object's members, each value left as its own text.
pub(crate) struct Members<'a>(pub(crate) Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'a>, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value: &'de RawValue = map.next_value()?;
                    out.push((key, value));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_their_text_and_objects_their_order() {
        let text = r#" {"b": 9007199254740993, "a": [1.50, -0, 1e400, "x\u00e9\n"], "b": {"z": null, "y": true}} "#;
        let json = Json::parse(text).unwrap();
        let Json::Object(members) = &json else {
            panic!("{json:?}")
        };
        let keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "b"]);
        assert_eq!(members[0].1, Json::Number("9007199254740993"));
        assert_eq!(
            json.text(),
            r#"{"b":9007199254740993,"a":[1.50,-0,1e400,"xé\n"],"b":{"z":null,"y":true}}"#
        );
        // What it writes reads back as the same value.
        assert_eq!(Json::parse(&json.text()).unwrap(), json);
        for bad in ["", "{", "[1,]", "{\"a\":1} x", "nul", "\"\\ud800\"", "01"] {
            assert!(Json::parse(bad).is_err(), "{bad}");
        }
        assert!(Json::parse_bytes(b"\"\xff\"").is_err());
        let deep = |d: usize| format!("{}1{}", "[".repeat(d), "]".repeat(d));
        assert!(Json::parse(&deep(DEPTH_MAX)).is_ok());
        assert!(Json::parse(&deep(DEPTH_MAX + 1)).is_err());
        assert!(Json::parse(&deep(100_000)).is_err());
    }
}
