//! Schema evolution by addition: fields a record has and the schema does not become new
//! nullable columns (or new struct members), typed from their first appearance as inference
//! types a value, and named as inference names a field (a name readers refuse, or one a
//! column has in another spelling, is renamed; see `schema::names`).

use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};

use super::walk::{Step, Unknown};
use crate::json::Json;
use crate::schema::{leaf_count, lookup, new_field, value_type};

/// The schema a chunk's unknown fields widen `schema` to.
#[derive(Debug)]
pub(crate) struct Widened {
    pub schema: SchemaRef,
    /// Paths of the fields added (`coupon`, `user.plan`), in the order added.
    pub added: Vec<String>,
    /// Paths that could not be added: the column limit was reached.
    pub over_limit: Vec<String>,
}

/// Adds each unknown field, in order, typed by its value, unless a field of that path was
/// added before it (the first appearance decides the type, so a chunk read in one piece or in
/// two widens a schema the same way). Struct members go at the end of their struct.
/// `reserved`: top-level names no field may take (the columns sluice adds).
pub(crate) fn widen<'a>(
    schema: &SchemaRef,
    unknowns: impl IntoIterator<Item = &'a Unknown>,
    columns_max: usize,
    reserved: &[String],
) -> Widened {
    let mut fields = schema.fields().clone();
    let mut added = Vec::new();
    let mut over_limit = Vec::new();
    for u in unknowns {
        let path = u.path();
        if added.contains(&path) || over_limit.contains(&path) {
            continue;
        }
        let Ok(Some(t)) = stored_type(u) else {
            continue; // `{}` or null: nothing to store (or nested too deep: rejected)
        };
        let Some(next) = insert(&fields, &u.parent, &u.name, t, reserved) else {
            continue; // a parent that is not a struct: decoding rejects the value's type
        };
        if leaf_count(&next) > columns_max {
            over_limit.push(path);
            continue;
        }
        fields = next;
        added.push(path);
    }
    Widened {
        schema: Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())),
        added,
        over_limit,
    }
}

/// The type an unknown field's value is stored as, as inference types it at its depth;
/// `None` for a value with nothing to store (`{}`, null); `Err` for a value nested deeper
/// than JSON is read.
pub(crate) fn stored_type(u: &Unknown) -> Result<Option<DataType>, serde_json::Error> {
    let value = Json::parse(&u.value)?;
    Ok(value_type(&value, u.parent.len() + 1))
}

/// `fields` with a field for `key` added to the struct at `parent`; `None` if a field is
/// there already for that key (in any spelling) or `parent` does not lead to a struct.
fn insert(
    fields: &Fields,
    parent: &[Step],
    key: &str,
    t: DataType,
    reserved: &[String],
) -> Option<Fields> {
    let Some((first, rest)) = parent.split_first() else {
        if lookup(fields, key).is_some() {
            return None;
        }
        let siblings: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
        let mut all: Vec<Arc<Field>> = fields.iter().cloned().collect();
        all.push(Arc::new(new_field(key, t, &siblings, reserved)));
        return Some(all.into());
    };
    let Step::Member(name) = first else {
        return None;
    };
    let i = lookup(fields, name)?.index();
    let t = insert_in(fields[i].data_type(), rest, key, t)?;
    let mut all: Vec<Arc<Field>> = fields.iter().cloned().collect();
    all[i] = Arc::new(fields[i].as_ref().clone().with_data_type(t));
    Some(all.into())
}

fn insert_in(t: &DataType, steps: &[Step], key: &str, field: DataType) -> Option<DataType> {
    match (t, steps.first()) {
        (DataType::Struct(members), _) => {
            Some(DataType::Struct(insert(members, steps, key, field, &[])?))
        }
        (DataType::List(element), Some(Step::Element)) => {
            let inner = insert_in(element.data_type(), &steps[1..], key, field)?;
            Some(DataType::List(Arc::new(
                element.as_ref().clone().with_data_type(inner),
            )))
        }
        (DataType::Map(entries, sorted), Some(Step::Value)) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return None;
            };
            let inner = insert_in(kv[1].data_type(), &steps[1..], key, field)?;
            let kv: Fields = vec![
                kv[0].clone(),
                Arc::new(kv[1].as_ref().clone().with_data_type(inner)),
            ]
            .into();
            Some(DataType::Map(
                Arc::new(
                    entries
                        .as_ref()
                        .clone()
                        .with_data_type(DataType::Struct(kv)),
                ),
                *sorted,
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::walk::walk;
    use super::*;
    use crate::schema::{parse_type, source_name, type_name};

    fn schema(spec: &[(&str, &str)]) -> SchemaRef {
        Arc::new(Schema::new(
            spec.iter()
                .map(|(n, t)| Field::new(*n, parse_type(t).unwrap(), true))
                .collect::<Vec<_>>(),
        ))
    }

    fn describe(s: &Schema) -> Vec<String> {
        s.fields()
            .iter()
            .map(|f| match source_name(f) {
                n if n == f.name() => format!("{}:{}", f.name(), type_name(f.data_type())),
                n => format!("{}({n:?}):{}", f.name(), type_name(f.data_type())),
            })
            .collect()
    }

    fn unknowns(lines: &[&[u8]], s: &SchemaRef) -> Vec<Unknown> {
        lines
            .iter()
            .flat_map(|l| walk(l, s.fields(), true).unwrap().unknown)
            .collect()
    }

    #[test]
    fn unknown_fields_become_columns_typed_by_their_first_appearance() {
        let s = schema(&[
            ("id", "string"),
            ("user", "struct<name:string>"),
            ("items", "array<struct<sku:string>>"),
        ]);
        let lines: [&[u8]; 3] = [
            br#"{"id":"a","coupon":"X","user":{"name":"n","plan":{"tier":2}},"items":[{"sku":"s","qty":3}]}"#,
            br#"{"id":"b","coupon":5,"meta":{},"tags":[],"gone":null}"#,
            br#"{"id":"c","n":1.5}"#,
        ];
        let found = unknowns(&lines, &s);
        let w = widen(&s, &found, 100, &[]);
        assert_eq!(w.added, ["coupon", "user.plan", "items[].qty", "tags", "n"]);
        assert_eq!(
            describe(&w.schema),
            [
                "id:string",
                "user:struct<name:string,plan:struct<tier:long>>",
                "items:array<struct<sku:string,qty:long>>",
                "coupon:string",
                "tags:array<string>",
                "n:double"
            ]
        );
        // Widening twice adds nothing more.
        let again = unknowns(&lines, &w.schema);
        assert!(widen(&w.schema, &again, 100, &[]).added.is_empty());
        // The column limit: what would pass it is not added.
        let limited = widen(&s, &found, 5, &[]);
        assert_eq!(limited.added, ["coupon", "user.plan"]);
        assert_eq!(limited.over_limit, ["items[].qty", "tags", "n"]);
    }

    #[test]
    fn new_fields_are_named_as_readers_resolve_them_and_typed_to_hold_their_value() {
        let s = schema(&[("id", "string"), ("user", "struct<Name:string>")]);
        let lines: [&[u8]; 2] = [
            br#"{"Coupon":"X","coupon":"Y","a b":1,"dt":2,"user":{"name":"n","Plan":1},"big":9007199254740993.5}"#,
            br#"{"COUPON":"Z","user":{"plan":2},"mixed":[1,{"a":1}]}"#,
        ];
        let found = unknowns(&lines, &s);
        let w = widen(&s, &found, 100, &["dt".to_string()]);
        assert_eq!(
            describe(&w.schema),
            [
                "id:string",
                "user:struct<Name:string,Plan:long>",
                "Coupon:string",
                r#"a_b("a b"):long"#,
                r#"dt_2("dt"):long"#,
                "big:decimal(38,1)",
                "mixed:array<string>"
            ]
        );
    }
}
