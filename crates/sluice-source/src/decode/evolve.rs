//! Schema evolution by addition: fields a record has and the schema does not become new
//! nullable columns (or new struct members), typed from their first appearance.

use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use serde_json::Value;

use super::walk::{Step, Unknown};
use crate::schema::{leaf_count, storable};

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
pub(crate) fn widen<'a>(
    schema: &SchemaRef,
    unknowns: impl IntoIterator<Item = &'a Unknown>,
    columns_max: usize,
) -> Widened {
    let mut fields = schema.fields().clone();
    let mut added = Vec::new();
    let mut over_limit = Vec::new();
    for u in unknowns {
        let path = u.path();
        if added.contains(&path) || over_limit.contains(&path) {
            continue;
        }
        let Some(t) = value_type(&u.value) else {
            continue; // `{}` or null: nothing to store
        };
        let Some(next) = insert(&fields, &u.parent, Field::new(&u.name, t, true)) else {
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

/// The type a JSON value is stored as: as schema inference types it.
pub(crate) fn value_type(value: &Value) -> Option<DataType> {
    if value.is_null() {
        return None;
    }
    let wrapped = serde_json::json!({ "v": value });
    let inferred = deltalake::arrow::json::reader::infer_json_schema_from_iterator(
        std::iter::once(Ok(wrapped)),
    )
    .ok()?;
    storable(inferred.field(0).data_type())
}

/// `fields` with `field` added to the struct at `parent`; `None` if it is there already or
/// `parent` does not lead to a struct.
fn insert(fields: &Fields, parent: &[Step], field: Field) -> Option<Fields> {
    let Some((first, rest)) = parent.split_first() else {
        if fields.iter().any(|f| f.name() == field.name()) {
            return None;
        }
        let mut all: Vec<Arc<Field>> = fields.iter().cloned().collect();
        all.push(Arc::new(field));
        return Some(all.into());
    };
    let Step::Member(name) = first else {
        return None;
    };
    let i = fields.iter().position(|f| f.name() == name)?;
    let t = insert_in(fields[i].data_type(), rest, field)?;
    let mut all: Vec<Arc<Field>> = fields.iter().cloned().collect();
    all[i] = Arc::new(fields[i].as_ref().clone().with_data_type(t));
    Some(all.into())
}

fn insert_in(t: &DataType, steps: &[Step], field: Field) -> Option<DataType> {
    match (t, steps.first()) {
        (DataType::Struct(members), _) => Some(DataType::Struct(insert(members, steps, field)?)),
        (DataType::List(element), Some(Step::Element)) => {
            let inner = insert_in(element.data_type(), &steps[1..], field)?;
            Some(DataType::List(Arc::new(
                element.as_ref().clone().with_data_type(inner),
            )))
        }
        (DataType::Map(entries, sorted), Some(Step::Value)) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return None;
            };
            let inner = insert_in(kv[1].data_type(), &steps[1..], field)?;
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
    use super::super::walk::unknown_fields;
    use super::*;
    use crate::schema::{parse_type, type_name};

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
            .map(|f| format!("{}:{}", f.name(), type_name(f.data_type())))
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
        let unknowns: Vec<Unknown> = lines
            .iter()
            .flat_map(|l| unknown_fields(l, s.fields(), true).unwrap())
            .collect();
        let w = widen(&s, &unknowns, 100);
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
        let again: Vec<Unknown> = lines
            .iter()
            .flat_map(|l| unknown_fields(l, w.schema.fields(), true).unwrap())
            .collect();
        assert!(widen(&w.schema, &again, 100).added.is_empty());
        // The column limit: what would pass it is not added.
        let limited = widen(&s, &unknowns, 5);
        assert_eq!(limited.added, ["coupon", "user.plan"]);
        assert_eq!(limited.over_limit, ["items[].qty", "tags", "n"]);
    }
}
