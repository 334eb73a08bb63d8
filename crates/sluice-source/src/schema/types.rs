//! The type names of schema files, one grammar for flat and nested types:
//!
//! - scalars: `string`; `long` (`int64`, `bigint`), `integer` (`int`, `int32`), `short`
//!   (`int16`, `smallint`), `byte` (`int8`, `tinyint`); `double` (`float64`), `float`
//!   (`float32`, `real`); `boolean` (`bool`); `date`; `timestamp` (an instant, stored in UTC)
//!   and `timestamp_ntz` (a wall-clock time without a zone); `binary` (base64 text in the
//!   JSON); `decimal(p,s)` (precision 1 to 38);
//! - nested: `array<T>` (also `list<T>`), `map<string,T>` (JSON objects with arbitrary
//!   keys), `struct<name:T,other:T>`.
//!
//! These are Delta Lake's own type names (Spark SQL's, too), so a table's schema can be
//! written down as its readers print it.

use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Fields, TimeUnit};

/// Why a type name could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} in type {text:?}")]
pub struct TypeError {
    pub text: String,
    pub reason: String,
}

/// The names every scalar type is known by (for messages).
pub const SCALAR_NAMES: &str = "string, long, integer, short, byte, double, float, boolean, date, timestamp, timestamp_ntz, binary, decimal(p,s)";

/// The Arrow type a type name denotes.
pub fn parse_type(text: &str) -> Result<DataType, TypeError> {
    let mut p = Parser { text, at: 0 };
    let t = p.data_type()?;
    p.skip_spaces();
    if p.at != text.len() {
        return Err(p.error("unexpected text after the type"));
    }
    Ok(t)
}

/// A scalar type by name (no nesting), `None` if the name is unknown.
pub fn scalar_type(name: &str) -> Option<DataType> {
    Some(match name.to_ascii_lowercase().as_str() {
        "string" | "str" | "text" | "utf8" => DataType::Utf8,
        "long" | "int64" | "bigint" => DataType::Int64,
        "integer" | "int" | "int32" => DataType::Int32,
        "short" | "int16" | "smallint" => DataType::Int16,
        "byte" | "int8" | "tinyint" => DataType::Int8,
        "double" | "float64" => DataType::Float64,
        "float" | "float32" | "real" => DataType::Float32,
        "boolean" | "bool" => DataType::Boolean,
        "date" => DataType::Date32,
        "timestamp" => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        "timestamp_ntz" => DataType::Timestamp(TimeUnit::Microsecond, None),
        "binary" => DataType::Binary,
        _ => return None,
    })
}

/// The type name of an Arrow type, in this grammar (for messages and listings).
pub fn type_name(t: &DataType) -> String {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string".into(),
        DataType::Int64 => "long".into(),
        DataType::Int32 => "integer".into(),
        DataType::Int16 => "short".into(),
        DataType::Int8 => "byte".into(),
        DataType::Float64 => "double".into(),
        DataType::Float32 => "float".into(),
        DataType::Boolean => "boolean".into(),
        DataType::Date32 => "date".into(),
        DataType::Timestamp(_, Some(_)) => "timestamp".into(),
        DataType::Timestamp(_, None) => "timestamp_ntz".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "binary".into(),
        DataType::Decimal128(p, s) => format!("decimal({p},{s})"),
        DataType::List(f) | DataType::LargeList(f) => {
            format!("array<{}>", type_name(f.data_type()))
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => format!(
                "map<{},{}>",
                type_name(kv[0].data_type()),
                type_name(kv[1].data_type())
            ),
            other => other.to_string(),
        },
        DataType::Struct(fields) => format!(
            "struct<{}>",
            fields
                .iter()
                .map(|f| format!("{}:{}", f.name(), type_name(f.data_type())))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.to_string(),
    }
}

/// A list of `element`s (nullable elements, as Delta writes them).
pub fn list_of(element: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("element", element, true)))
}

/// A map from string keys to `value`s (nullable values).
pub fn map_of(value: DataType) -> DataType {
    let entries = Field::new(
        "key_value",
        DataType::Struct(Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", value, true),
        ])),
        false,
    );
    DataType::Map(Arc::new(entries), false)
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn error(&self, reason: &str) -> TypeError {
        TypeError {
            text: self.text.to_string(),
            reason: format!("{reason} at character {}", self.at + 1),
        }
    }

    fn skip_spaces(&mut self) {
        while self.text[self.at..].starts_with(|c: char| c.is_whitespace()) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_spaces();
        if self.text[self.at..].starts_with(c) {
            self.at += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), TypeError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(&format!("expected '{c}'")))
        }
    }

    /// A word of letters, digits and `_`.
    fn word(&mut self) -> &str {
        self.skip_spaces();
        let start = self.at;
        while self.text[self.at..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            self.at += 1;
        }
        &self.text[start..self.at]
    }

    /// A struct member name: a word, or any text in backquotes (`` `user id` ``).
    fn member_name(&mut self) -> Result<String, TypeError> {
        self.skip_spaces();
        if self.eat('`') {
            let rest = &self.text[self.at..];
            let end = rest.find('`').ok_or_else(|| self.error("unclosed '`'"))?;
            let name = rest[..end].to_string();
            self.at += end + 1;
            return Ok(name);
        }
        let w = self.word().to_string();
        if w.is_empty() {
            return Err(self.error("expected a field name"));
        }
        Ok(w)
    }

    fn number(&mut self) -> Result<u32, TypeError> {
        let w = self.word().to_string();
        w.parse().map_err(|_| self.error("expected a number"))
    }

    fn data_type(&mut self) -> Result<DataType, TypeError> {
        let start = self.at;
        let name = self.word().to_ascii_lowercase();
        match name.as_str() {
            "array" | "list" => {
                self.expect('<')?;
                let element = self.data_type()?;
                self.expect('>')?;
                Ok(list_of(element))
            }
            "map" => {
                self.expect('<')?;
                let key = self.data_type()?;
                if key != DataType::Utf8 {
                    return Err(self.error("map keys must be string (JSON object keys)"));
                }
                self.expect(',')?;
                let value = self.data_type()?;
                self.expect('>')?;
                Ok(map_of(value))
            }
            "struct" => {
                self.expect('<')?;
                let mut fields: Vec<Field> = Vec::new();
                if !self.eat('>') {
                    loop {
                        let name = self.member_name()?;
                        if fields.iter().any(|f| f.name() == &name) {
                            return Err(self.error(&format!("member {name:?} appears twice")));
                        }
                        self.expect(':')?;
                        let t = self.data_type()?;
                        fields.push(Field::new(name, t, true));
                        if self.eat('>') {
                            break;
                        }
                        self.expect(',')?;
                    }
                }
                if fields.is_empty() {
                    return Err(self.error("a struct needs at least one member"));
                }
                Ok(DataType::Struct(Fields::from(fields)))
            }
            "decimal" => {
                self.expect('(')?;
                let p = self.number()?;
                self.expect(',')?;
                let s = self.number()?;
                self.expect(')')?;
                if !(1..=38).contains(&p) || s > p {
                    return Err(self.error("decimal(p,s) needs 1 <= p <= 38 and 0 <= s <= p"));
                }
                Ok(DataType::Decimal128(p as u8, s as i8))
            }
            "" => Err(self.error("expected a type")),
            other => scalar_type(other).ok_or_else(|| {
                self.at = start;
                self.error(&format!("unknown type {other:?} (use {SCALAR_NAMES}, array<T>, map<string,T> or struct<name:T,...>)"))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_types_parse_and_print_back() {
        for text in [
            "string",
            "decimal(10,2)",
            "array<string>",
            "map<string,long>",
            "struct<id:long,login:string>",
            "array<struct<sha:string,author:struct<name:string,email:string>>>",
            "map<string,array<double>>",
            "timestamp",
            "timestamp_ntz",
            "binary",
        ] {
            let t = parse_type(text).unwrap();
            assert_eq!(type_name(&t), text);
        }
        assert_eq!(
            parse_type(" struct < a : int , `b c` : bigint > ").map(|t| type_name(&t)),
            Ok("struct<a:integer,b c:long>".to_string())
        );
        for bad in [
            "money",
            "array<>",
            "map<long,string>",
            "struct<>",
            "struct<a:int,a:int>",
            "decimal(40,2)",
            "decimal(5,6)",
            "array<string",
            "string string",
        ] {
            assert!(parse_type(bad).is_err(), "{bad}");
        }
    }
}
