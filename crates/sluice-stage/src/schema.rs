//! Schemas that grow: a table's columns are only ever added to (top-level columns and struct
//! members), so a file written before a column existed holds a prefix of today's fields.
//! [`align_batch`] reads such rows as today's schema (the missing values null), as every
//! Delta reader does; [`extends`] and [`union`] say how two schemas relate.

use std::sync::Arc;

use deltalake::arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, ListArray, MapArray, RecordBatch, StructArray,
};
use deltalake::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use deltalake::arrow::error::ArrowError;

/// `batch` as `schema`: columns in `schema`'s order, a column (or struct member) the batch
/// lacks filled with nulls. Types must otherwise agree (a field only ever grows); a column or
/// member `schema` lacks is an error, never dropped.
pub fn align_batch(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    if batch.schema().as_ref() == schema.as_ref() {
        return Ok(batch.clone());
    }
    if !extends(&batch.schema(), schema) {
        return Err(ArrowError::SchemaError(format!(
            "rows with fields {} cannot be read as {}: a field would be dropped",
            field_list(&batch.schema()),
            field_list(schema)
        )));
    }
    let n = batch.num_rows();
    let mut columns = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        columns.push(match batch.column_by_name(field.name()) {
            Some(c) => align_array(c, field.data_type())?,
            None => new_null_array(field.data_type(), n),
        });
    }
    RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &deltalake::arrow::array::RecordBatchOptions::new().with_row_count(Some(n)),
    )
}

fn field_list(schema: &Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every batch of `batches` aligned to `schema`.
pub fn align_all(
    batches: &[RecordBatch],
    schema: &SchemaRef,
) -> Result<Vec<RecordBatch>, ArrowError> {
    batches.iter().map(|b| align_batch(b, schema)).collect()
}

fn align_array(array: &ArrayRef, target: &DataType) -> Result<ArrayRef, ArrowError> {
    if array.data_type() == target {
        return Ok(array.clone());
    }
    let mismatch = || {
        ArrowError::SchemaError(format!(
            "cannot read {} as {target}: a column only ever gains members",
            array.data_type()
        ))
    };
    match target {
        DataType::Struct(fields) => {
            let source = array.as_struct_opt().ok_or_else(mismatch)?;
            let mut children = Vec::with_capacity(fields.len());
            for f in fields.iter() {
                children.push(match source.column_by_name(f.name()) {
                    Some(c) => align_array(c, f.data_type())?,
                    None => new_null_array(f.data_type(), source.len()),
                });
            }
            Ok(Arc::new(StructArray::try_new(
                fields.clone(),
                children,
                source.nulls().cloned(),
            )?))
        }
        DataType::List(element) => {
            let source = array.as_list_opt::<i32>().ok_or_else(mismatch)?;
            let values = align_array(source.values(), element.data_type())?;
            Ok(Arc::new(ListArray::try_new(
                element.clone(),
                source.offsets().clone(),
                values,
                source.nulls().cloned(),
            )?))
        }
        DataType::Map(entries, sorted) => {
            let source = array.as_map_opt().ok_or_else(mismatch)?;
            let kv: ArrayRef = Arc::new(source.entries().clone());
            let kv = align_array(&kv, entries.data_type())?;
            Ok(Arc::new(MapArray::try_new(
                entries.clone(),
                source.offsets().clone(),
                kv.as_struct().clone(),
                source.nulls().cloned(),
                *sorted,
            )?))
        }
        // Same type but other field names or nullability (a reader's spelling): a cast.
        _ => deltalake::arrow::compute::cast(array, target).map_err(|_| mismatch()),
    }
}

/// Whether `new` holds every field of `old` with the same type, or (structs, lists and maps
/// of structs) a type that only gained members: a schema `old` can grow into.
pub fn extends(old: &Schema, new: &Schema) -> bool {
    fields_extend(old.fields(), new.fields())
}

fn fields_extend(old: &Fields, new: &Fields) -> bool {
    old.iter().all(|f| {
        new.iter()
            .find(|g| g.name() == f.name())
            .is_some_and(|g| type_extends(f.data_type(), g.data_type()))
    })
}

fn type_extends(old: &DataType, new: &DataType) -> bool {
    match (old, new) {
        (DataType::Struct(a), DataType::Struct(b)) => fields_extend(a, b),
        (DataType::List(a), DataType::List(b)) => type_extends(a.data_type(), b.data_type()),
        (DataType::Map(a, _), DataType::Map(b, _)) => type_extends(a.data_type(), b.data_type()),
        (a, b) => a == b,
    }
}

/// A field whose type differs between two schemas (a conflict, not a growth).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field {path} is {left} in one schema and {right} in the other")]
pub struct SchemaConflict {
    pub path: String,
    pub left: String,
    pub right: String,
}

/// `base` grown by what `more` has and it lacks: `base`'s fields first, in its order, then
/// `more`'s new ones (struct members likewise). Names are compared as Delta compares column
/// names, ignoring case: `base`'s spelling is kept. `Err` if a field has two different types.
pub fn union(base: &Schema, more: &Schema) -> Result<Schema, SchemaConflict> {
    Ok(Schema::new_with_metadata(
        union_fields(base.fields(), more.fields(), "")?,
        base.metadata().clone(),
    ))
}

fn union_fields(base: &Fields, more: &Fields, at: &str) -> Result<Fields, SchemaConflict> {
    let mut out: Vec<Arc<Field>> = Vec::with_capacity(base.len() + more.len());
    for f in base.iter() {
        match more.iter().find(|g| same_column(g.name(), f.name())) {
            None => out.push(f.clone()),
            Some(g) => {
                let path = if at.is_empty() {
                    f.name().clone()
                } else {
                    format!("{at}.{}", f.name())
                };
                let t = union_types(f.data_type(), g.data_type(), &path)?;
                out.push(Arc::new(f.as_ref().clone().with_data_type(t)));
            }
        }
    }
    for g in more.iter() {
        if !base.iter().any(|f| same_column(f.name(), g.name())) {
            out.push(g.clone());
        }
    }
    Ok(out.into())
}

/// Whether two names are one Delta column (equal ignoring case, Unicode lowercase, as the
/// Delta kernel compares them).
fn same_column(a: &str, b: &str) -> bool {
    a == b || a.to_lowercase() == b.to_lowercase()
}

fn union_types(a: &DataType, b: &DataType, path: &str) -> Result<DataType, SchemaConflict> {
    Ok(match (a, b) {
        (DataType::Struct(x), DataType::Struct(y)) => DataType::Struct(union_fields(x, y, path)?),
        (DataType::List(x), DataType::List(y)) => {
            DataType::List(Arc::new(x.as_ref().clone().with_data_type(union_types(
                x.data_type(),
                y.data_type(),
                &format!("{path}[]"),
            )?)))
        }
        (DataType::Map(x, s), DataType::Map(y, _)) => DataType::Map(
            Arc::new(x.as_ref().clone().with_data_type(union_types(
                x.data_type(),
                y.data_type(),
                &format!("{path}{{}}"),
            )?)),
            *s,
        ),
        (x, y) if x == y => x.clone(),
        (x, y) => {
            return Err(SchemaConflict {
                path: path.to_string(),
                left: x.to_string(),
                right: y.to_string(),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use deltalake::arrow::array::{Int64Array, StringArray};

    use super::*;

    fn user(members: &[(&str, DataType)]) -> DataType {
        DataType::Struct(
            members
                .iter()
                .map(|(n, t)| Field::new(*n, t.clone(), true))
                .collect::<Vec<_>>()
                .into(),
        )
    }

    #[test]
    fn old_rows_read_as_the_grown_schema() {
        let old = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("user", user(&[("name", DataType::Utf8)]), true),
        ]));
        let new = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new(
                "user",
                user(&[("name", DataType::Utf8), ("plan", DataType::Utf8)]),
                true,
            ),
            Field::new("coupon", DataType::Utf8, true),
        ]));
        assert!(extends(&old, &new));
        assert!(!extends(&new, &old));
        let users = StructArray::try_new(
            match user(&[("name", DataType::Utf8)]) {
                DataType::Struct(f) => f,
                _ => unreachable!(),
            },
            vec![Arc::new(StringArray::from(vec!["a", "b"]))],
            None,
        )
        .unwrap();
        let batch = RecordBatch::try_new(
            old.clone(),
            vec![Arc::new(Int64Array::from(vec![1, 2])), Arc::new(users)],
        )
        .unwrap();
        let aligned = align_batch(&batch, &new).unwrap();
        assert_eq!(aligned.schema(), new);
        assert_eq!(aligned.column(2).null_count(), 2);
        let plan = aligned.column(1).as_struct().column(1).clone();
        assert_eq!(plan.null_count(), 2);
        assert_eq!(union(&old, &new).unwrap(), *new);
        // Never the other way: a column would be dropped.
        let grown = align_batch(&batch, &new).unwrap();
        assert!(align_batch(&grown, &old).is_err());
        let other = Schema::new(vec![Field::new("id", DataType::Utf8, true)]);
        assert_eq!(union(&old, &other).unwrap_err().path, "id");
    }
}
