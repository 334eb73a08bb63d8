//! A line as the decoder reads it: every key spelled as its column's field is (`amount` for
//! a column `Amount`), every object with nothing to store (`{}`) where the column is not a
//! struct or a map null, and every other object or array where a column holds text replaced
//! by its JSON text. Nothing else changes: numbers keep their text, unknown fields stay
//! (schema evolution decides about them).

use deltalake::arrow::datatypes::{DataType, Fields};

use crate::json::Json;
use crate::schema::{lookup, source_name};

/// `line` rewritten against the record's `fields`; `Err` if it cannot be read as JSON (not
/// valid, or nested too deeply). A line that is not an object is left as it is.
pub(crate) fn rewrite(line: &[u8], fields: &Fields) -> Result<Vec<u8>, serde_json::Error> {
    let mut json = Json::parse_bytes(line)?;
    if let Json::Object(members) = &mut json {
        fix_members(members, fields);
    }
    Ok(json.text().into_bytes())
}

/// `line` with only the members `fields` has, at every depth: a line judged against an
/// older schema, as it reads with a newer one whose added fields it left out.
pub(crate) fn project(line: &[u8], fields: &Fields) -> Result<Vec<u8>, serde_json::Error> {
    let mut json = Json::parse_bytes(line)?;
    if let Json::Object(members) = &mut json {
        keep_known(members, fields);
    }
    Ok(json.text().into_bytes())
}

fn keep_known(members: &mut Vec<(String, Json)>, fields: &Fields) {
    members.retain(|(key, _)| lookup(fields, key).is_some());
    for (key, value) in members.iter_mut() {
        if let Some(found) = lookup(fields, key) {
            keep_known_in(value, fields[found.index()].data_type());
        }
    }
}

fn keep_known_in(value: &mut Json, t: &DataType) {
    match (value, t) {
        (Json::Object(members), DataType::Struct(fields)) => keep_known(members, fields),
        (Json::Array(items), DataType::List(element) | DataType::LargeList(element)) => {
            for item in items {
                keep_known_in(item, element.data_type());
            }
        }
        (Json::Object(members), t @ DataType::Map(..)) => {
            if let Some(v) = map_values(t) {
                for (_, value) in members.iter_mut() {
                    keep_known_in(value, v);
                }
            }
        }
        _ => {}
    }
}

fn fix_members(members: &mut [(String, Json)], fields: &Fields) {
    for (key, value) in members {
        if let Some(found) = lookup(fields, key) {
            let field = &fields[found.index()];
            if key != source_name(field) {
                *key = source_name(field).to_string();
            }
            fix(value, field.data_type());
        }
    }
}

fn fix(value: &mut Json, t: &DataType) {
    match (value, t) {
        (v, t) if v.holds_nothing() && !matches!(t, DataType::Struct(_) | DataType::Map(..)) => {
            *v = Json::Null
        }
        (v, DataType::Utf8) if v.is_nested() => *v = Json::String(v.text()),
        (Json::Object(members), DataType::Struct(fields)) => fix_members(members, fields),
        (Json::Array(items), DataType::List(element) | DataType::LargeList(element)) => {
            for item in items {
                fix(item, element.data_type());
            }
        }
        (Json::Object(members), t @ DataType::Map(..)) => {
            if let Some(v) = map_values(t) {
                for (_, value) in members {
                    fix(value, v);
                }
            }
        }
        _ => {}
    }
}

/// The type of a map's values.
fn map_values(t: &DataType) -> Option<&DataType> {
    match t {
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) => kv.get(1).map(|v| v.data_type()),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use deltalake::arrow::datatypes::Field;

    use super::*;
    use crate::schema::parse_type;

    #[test]
    fn keys_take_their_columns_spelling_and_nested_values_in_text_become_text() {
        let fields: Fields = [
            ("Amount", "long"),
            ("note", "string"),
            ("tags", "array<string>"),
            ("user", "struct<Name:string>"),
            ("attrs", "map<string,string>"),
        ]
        .iter()
        .map(|(n, t)| Field::new(*n, parse_type(t).unwrap(), true))
        .collect();
        let line = r#"{"amount": 9007199254740993, "note": {"a": [1, 2.50]}, "Amount": {"x": {}}, "tags": [1, "a", {"x": null}], "USER": {"name": "é"}, "attrs": {"k": [true]}, "new": 1e400}"#;
        let out = String::from_utf8(rewrite(line.as_bytes(), &fields).unwrap()).unwrap();
        assert_eq!(
            out,
            r#"{"Amount":9007199254740993,"note":"{\"a\":[1,2.50]}","Amount":null,"tags":[1,"a","{\"x\":null}"],"user":{"Name":"é"},"attrs":{"k":"[true]"},"new":1e400}"#
        );
        let projected = project(
            br#"{"Amount":1,"new":2,"user":{"Name":"n","plan":3},"tags":["a"]}"#,
            &fields,
        )
        .unwrap();
        assert_eq!(
            projected,
            br#"{"Amount":1,"user":{"Name":"n"},"tags":["a"]}"#
        );
        assert_eq!(rewrite(b"[1]", &fields).unwrap(), b"[1]");
        assert!(rewrite(b"{", &fields).is_err());
        let deep = format!("{{\"note\":{}1{}}}", "[".repeat(200), "]".repeat(200));
        assert!(rewrite(deep.as_bytes(), &fields).is_err());
    }
}
