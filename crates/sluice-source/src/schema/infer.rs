//! Schema inference: the types a stream's first lines need, each holding every value seen
//! there exactly, whatever one line holds.
//!
//! - Numbers are typed by their text: integers within i64 are `long`; numbers a double holds
//!   exactly (`1.5`, `1e300`) `double`; otherwise `decimal(38, s)` when every value fits one
//!   (`1.5` beside `9007199254740993`, which a double would round), else `string` (each value
//!   kept as its text).
//! - Values of two kinds in one field never fail inference: scalars of two kinds (a number
//!   here, a string there) make a `string` column, which keeps numbers and booleans as their
//!   text; a nested value beside a scalar or another kind of nesting (`[1, "a", {"x": 1}]`'s
//!   elements) makes a `string` column too, holding each such value as its JSON text.
//! - Objects are structs whose members come in the order they first appear; keys that differ
//!   only by case are one member (Delta column names are case-insensitive), spelled as first
//!   seen. Names readers refuse are renamed ([`super::names`]).
//! - A field only ever null is `string`; an object only ever `{}` has nothing to store and is
//!   left out, as is an array's element type seen only as `{}` (then `string`).
//! - Nesting deeper than [`NESTING_MAX`] levels is a `string` column at that depth, holding
//!   the deeper values as JSON text: Delta readers refuse schemas nested much deeper.

use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use sluice_window::{parse_f64_exact, parse_integer_exact, Decimal};

use super::names::{new_field, NameIndex};
use super::types::list_of;
use super::{SchemaError, BOM};
use crate::json::Json;

/// The deepest nesting of types inference gives a column (structs in arrays in maps ...):
/// deeper values are JSON text. A Delta schema's JSON nests up to three levels per struct
/// level, and readers stop at 128.
pub const NESTING_MAX: usize = 32;

/// Infers a schema from the first `max_lines` lines (see the module doc). Lines that are
/// not JSON objects are passed over here (they are rejected, with their position, when the
/// run reads them). A UTF-8 byte-order mark before a line is skipped. `reserved`: the
/// columns sluice adds, which no field may be named like.
pub fn infer<'a>(
    lines: impl Iterator<Item = &'a [u8]>,
    max_lines: usize,
    reserved: &[String],
) -> Result<SchemaRef, SchemaError> {
    let mut top = Members::default();
    let mut objects = 0usize;
    for line in lines.take(max_lines) {
        let line = line.strip_prefix(BOM).unwrap_or(line);
        if let Ok(Json::Object(members)) = Json::parse_bytes(line) {
            objects += 1;
            for (key, value) in &members {
                top.add(key, Shape::of(value, 1));
            }
        }
    }
    if objects == 0 {
        return Err(SchemaError::NothingToInfer(max_lines));
    }
    let fields = top.fields(reserved).unwrap_or_default();
    Ok(Arc::new(Schema::new(fields)))
}

/// The type a value `depth` levels down (1: a top-level field) is stored as (a field that
/// schema evolution adds), as inference types it; `None` for a value with nothing to store
/// (`null`, `{}`).
pub(crate) fn value_type(value: &Json, depth: usize) -> Option<DataType> {
    match Shape::of(value, depth) {
        Shape::Null => None,
        shape => shape.data_type(),
    }
}

/// What the values of one field seen so far need.
#[derive(Debug, Clone, PartialEq)]
enum Shape {
    Null,
    Bool,
    Number(Numbers),
    String,
    /// Values of kinds no one type holds: stored as JSON text.
    Text,
    Array(Box<Shape>),
    Object(Members),
}

impl Shape {
    /// The shape of `value`, `depth` levels down (a top-level field is at 1).
    fn of(value: &Json, depth: usize) -> Shape {
        match value {
            Json::Null => Shape::Null,
            Json::Bool(_) => Shape::Bool,
            Json::Number(text) => Shape::Number(Numbers::of(text)),
            Json::String(_) => Shape::String,
            // Nothing to store at any depth: no type comes from it.
            Json::Object(_) if value.holds_nothing() => Shape::Object(Members::default()),
            Json::Array(_) | Json::Object(_) if depth >= NESTING_MAX => Shape::Text,
            Json::Array(items) => {
                Shape::Array(Box::new(items.iter().fold(Shape::Null, |shape, item| {
                    shape.merge(Shape::of(item, depth + 1))
                })))
            }
            Json::Object(members) => {
                let mut m = Members::default();
                for (key, value) in members {
                    m.add(key, Shape::of(value, depth + 1));
                }
                Shape::Object(m)
            }
        }
    }

    fn is_scalar(&self) -> bool {
        matches!(self, Shape::Bool | Shape::Number(_) | Shape::String)
    }

    fn merge(self, other: Shape) -> Shape {
        match (self, other) {
            (Shape::Null, s) | (s, Shape::Null) => s,
            (Shape::Text, _) | (_, Shape::Text) => Shape::Text,
            (Shape::Bool, Shape::Bool) => Shape::Bool,
            (Shape::String, Shape::String) => Shape::String,
            (Shape::Number(a), Shape::Number(b)) => Shape::Number(a.merge(b)),
            (a, b) if a.is_scalar() && b.is_scalar() => Shape::String,
            (Shape::Array(a), Shape::Array(b)) => Shape::Array(Box::new(a.merge(*b))),
            (Shape::Object(mut a), Shape::Object(b)) => {
                for (key, shape) in b.members {
                    a.add(&key, shape);
                }
                Shape::Object(a)
            }
            _ => Shape::Text,
        }
    }

    /// `None`: nothing to store (an object only ever `{}`).
    fn data_type(&self) -> Option<DataType> {
        Some(match self {
            Shape::Null | Shape::String | Shape::Text => DataType::Utf8,
            Shape::Bool => DataType::Boolean,
            Shape::Number(n) => n.data_type(),
            Shape::Array(element) => list_of(element.data_type().unwrap_or(DataType::Utf8)),
            Shape::Object(members) => DataType::Struct(members.fields(&[])?),
        })
    }
}

/// An object's members, in the order first seen; keys equal ignoring case are one member.
#[derive(Debug, Clone, Default)]
struct Members {
    members: Vec<(String, Shape)>,
    index: NameIndex,
}

impl PartialEq for Members {
    fn eq(&self, other: &Self) -> bool {
        self.members == other.members
    }
}

impl Members {
    fn add(&mut self, key: &str, shape: Shape) {
        match self.index.get(key) {
            Some(i) => {
                let old = std::mem::replace(&mut self.members[i].1, Shape::Null);
                self.members[i].1 = old.merge(shape);
            }
            None => {
                self.index.insert(key, self.members.len());
                self.members.push((key.to_string(), shape));
            }
        }
    }

    /// The struct's fields (`reserved`: names no field may take); `None` if none has anything
    /// to store.
    fn fields(&self, reserved: &[String]) -> Option<Fields> {
        let mut fields: Vec<Field> = Vec::with_capacity(self.members.len());
        for (key, shape) in &self.members {
            let Some(t) = shape.data_type() else {
                continue;
            };
            let siblings: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
            fields.push(new_field(key, t, &siblings, reserved));
        }
        (!fields.is_empty()).then(|| Fields::from(fields))
    }
}

/// What the numbers of one field seen so far need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Numbers {
    /// Every one an integer literal within i64.
    long: bool,
    /// Every one held exactly by a double.
    double: bool,
    /// The most digits any had before the point, and after it.
    integer_digits: u32,
    fraction_digits: u32,
}

impl Numbers {
    fn of(text: &str) -> Numbers {
        let (integer_digits, fraction_digits) =
            Decimal::parse(text).map_or((u32::MAX, u32::MAX), Decimal::integer_and_fraction_digits);
        Numbers {
            long: !text.contains(['.', 'e', 'E']) && parse_integer_exact(text).is_some(),
            double: parse_f64_exact(text).is_some(),
            integer_digits,
            fraction_digits,
        }
    }

    fn merge(self, other: Numbers) -> Numbers {
        Numbers {
            long: self.long && other.long,
            double: self.double && other.double,
            integer_digits: self.integer_digits.max(other.integer_digits),
            fraction_digits: self.fraction_digits.max(other.fraction_digits),
        }
    }

    fn data_type(self) -> DataType {
        if self.long {
            DataType::Int64
        } else if self.double {
            DataType::Float64
        } else if self.integer_digits.saturating_add(self.fraction_digits) <= 38 {
            DataType::Decimal128(38, self.fraction_digits as i8)
        } else {
            DataType::Utf8
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{source_name, type_name};

    fn describe(lines: &[&str]) -> Vec<String> {
        let schema = infer(lines.iter().map(|l| l.as_bytes()), 1000, &["hour".into()]).unwrap();
        schema
            .fields()
            .iter()
            .map(|f| {
                let t = type_name(f.data_type());
                match source_name(f) {
                    s if s == f.name() => format!("{}:{t}", f.name()),
                    s => format!("{}({s:?}):{t}", f.name()),
                }
            })
            .collect()
    }

    #[test]
    fn numbers_get_a_type_that_holds_every_value_seen() {
        assert_eq!(
            describe(&[
                r#"{"id": 1, "price": 1, "big": 1.5, "huge": 1, "e": 1}"#,
                r#"{"id": 9223372036854775807, "price": 2.25, "big": 9007199254740993, "huge": 18446744073709551616, "e": 1e400}"#,
            ]),
            [
                "id:long",
                "price:double",
                "big:decimal(38,1)",
                "huge:decimal(38,0)",
                "e:string"
            ]
        );
    }

    /// Up to 38 digits in all make a decimal(38, s); past them no decimal holds every value.
    #[test]
    fn numbers_of_up_to_38_digits_make_a_decimal() {
        let digits37 = "1234567890123456789012345678901234567";
        let digits38 = "12345678901234567890123456789012345678";
        let one = |a: &str, b: &str| {
            describe(&[&format!(r#"{{"n": {a}}}"#), &format!(r#"{{"n": {b}}}"#)])
        };
        assert_eq!(one(digits37, "1.5"), ["n:decimal(38,1)"]);
        assert_eq!(one(digits38, "1"), ["n:decimal(38,0)"]);
        assert_eq!(one(digits38, "1.5"), ["n:string"], "39 digits together");
    }

    #[test]
    fn values_of_two_kinds_make_a_text_column_instead_of_failing() {
        assert_eq!(
            describe(&[
                r#"{"mixed": [1, "a", {"x": 1}], "n": 1, "o": {"a": 1}, "l": [1]}"#,
                r#"{"mixed": [], "n": "one", "o": 5, "l": {"k": true}}"#,
                r#"{"n": true, "nothing": null, "empty": {}, "empties": [{}]}"#,
            ]),
            [
                "mixed:array<string>",
                "n:string",
                "o:string",
                "l:string",
                "nothing:string",
                "empties:array<string>"
            ]
        );
    }

    #[test]
    fn names_keep_their_first_spelling_and_order_and_refused_ones_are_renamed() {
        assert_eq!(
            describe(&[
                r#"{"b": 1, "Amount": 2, "a b": "x", "hour": 3, "": 4, "s": {"K": 1}}"#,
                r#"{"amount": 5, "A B": "y", "s": {"k": 2, "k v": 3}}"#,
            ]),
            [
                "b:long",
                "Amount:long",
                r#"a_b("a b"):string"#,
                r#"hour_2("hour"):long"#,
                r#"_(""):long"#,
                "s:struct<K:long,k_v:long>"
            ]
        );
    }

    #[test]
    fn nesting_past_the_most_is_text() {
        let deep = |d: usize| format!("{}1{}", "[".repeat(d), "]".repeat(d));
        let line = format!(r#"{{"a": {}, "b": {}}}"#, deep(NESTING_MAX - 1), deep(100));
        let schema = infer(std::iter::once(line.as_bytes()), 10, &[]).unwrap();
        let depth = |mut t: &DataType| {
            let mut n = 1;
            while let DataType::List(e) = t {
                t = e.data_type();
                n += 1;
            }
            (n, t.clone())
        };
        assert_eq!(
            depth(schema.field(0).data_type()),
            (NESTING_MAX, DataType::Int64)
        );
        assert_eq!(
            depth(schema.field(1).data_type()),
            (NESTING_MAX, DataType::Utf8)
        );
    }

    #[test]
    fn nothing_to_infer_without_an_object() {
        let lines: Vec<&[u8]> = vec![b"[1]", b"nope", b"\"text\""];
        assert!(matches!(
            infer(lines.into_iter(), 10, &[]),
            Err(SchemaError::NothingToInfer(10))
        ));
    }
}
