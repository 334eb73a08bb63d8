//! Fields named by a dotted path (`payload.created_at`), for the time field and key fields.

use std::sync::Arc;

use deltalake::arrow::array::{make_array, Array, ArrayRef, AsArray, RecordBatch};
use deltalake::arrow::buffer::NullBuffer;
use deltalake::arrow::datatypes::{DataType, Field, Fields, Schema};

/// A record field, top-level or nested in structs: the member names from the top.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldPath {
    names: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("field {path:?} is not in the record schema (fields: {fields})")]
    NotFound { path: String, fields: String },
    #[error("field {path:?}: {parent:?} is a {kind}, not a struct; only struct members can be named with a dot")]
    NotAStruct {
        path: String,
        parent: String,
        kind: String,
    },
}

impl FieldPath {
    /// A top-level field.
    pub fn top(name: impl Into<String>) -> Self {
        FieldPath {
            names: vec![name.into()],
        }
    }

    /// Resolves `text` against `schema`: a top-level field of exactly that name (a name may
    /// hold a dot), else the dot-separated members of nested structs. A name is a column's
    /// own, or the record field's a renamed column holds (`event time` for `event_time`);
    /// the path names the columns.
    pub fn resolve(schema: &Schema, text: &str) -> Result<FieldPath, PathError> {
        if let Some(f) = member(schema.fields(), text) {
            return Ok(FieldPath::top(f.name().clone()));
        }
        let path = FieldPath {
            names: text.split('.').map(str::to_string).collect(),
        };
        path.field(schema)?;
        // The same members, by their column names.
        let mut names = Vec::with_capacity(path.names.len());
        let mut fields = schema.fields().clone();
        for name in &path.names {
            let f = member(&fields, name)
                .cloned()
                .ok_or_else(|| path.not_found(schema))?;
            names.push(f.name().clone());
            if let DataType::Struct(members) = f.data_type() {
                fields = members.clone();
            }
        }
        Ok(FieldPath { names })
    }

    fn not_found(&self, schema: &Schema) -> PathError {
        PathError::NotFound {
            path: self.to_string(),
            fields: field_names(schema),
        }
    }

    /// The field it names in `schema`.
    pub fn field(&self, schema: &Schema) -> Result<Field, PathError> {
        let mut field = member(schema.fields(), &self.names[0])
            .ok_or_else(|| self.not_found(schema))?
            .as_ref()
            .clone();
        for (i, name) in self.names.iter().enumerate().skip(1) {
            let DataType::Struct(members) = field.data_type() else {
                return Err(PathError::NotAStruct {
                    path: self.to_string(),
                    parent: self.names[..i].join("."),
                    kind: super::types::type_name(field.data_type()),
                });
            };
            field = member(members, name)
                .ok_or_else(|| self.not_found(schema))?
                .as_ref()
                .clone();
        }
        Ok(field)
    }

    /// The top-level column this path starts in.
    /// The same path by the records' own names (a renamed column's `sluice.sourceName`):
    /// the names arrow-json reads the records by.
    pub fn by_source_names(&self, schema: &Schema) -> FieldPath {
        let mut names = Vec::with_capacity(self.names.len());
        let mut fields = schema.fields().clone();
        for name in &self.names {
            let Some(f) = fields.iter().find(|f| f.name() == name).cloned() else {
                names.push(name.clone());
                continue;
            };
            names.push(crate::schema::source_name(&f).to_string());
            if let DataType::Struct(members) = f.data_type() {
                fields = members.clone();
            }
        }
        FieldPath { names }
    }

    pub fn root(&self) -> &str {
        &self.names[0]
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn is_top_level(&self) -> bool {
        self.names.len() == 1
    }

    /// The values of this field in `batch`, null wherever the field or any struct above it is
    /// null; `None` if the batch has no such field.
    pub fn array(&self, batch: &RecordBatch) -> Option<ArrayRef> {
        let mut array = batch.column_by_name(&self.names[0])?.clone();
        for name in &self.names[1..] {
            let parent = array.as_struct_opt()?;
            let child = parent.column_by_name(name)?.clone();
            array = with_parent_nulls(child, parent.nulls());
        }
        Some(array)
    }
}

impl std::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.names.join("."))
    }
}

/// `child` with its parent's nulls added to its own.
fn with_parent_nulls(child: ArrayRef, parent: Option<&NullBuffer>) -> ArrayRef {
    let Some(parent) = parent else {
        return child;
    };
    let nulls = NullBuffer::union(Some(parent), child.nulls());
    let data = child.to_data().into_builder().nulls(nulls).build();
    match data {
        Ok(data) => make_array(data),
        // The same layout with more nulls is always valid; keep the child if not.
        Err(_) => child,
    }
}

/// The member of `fields` named `name`: by its column name, else by the record field's name
/// a renamed column holds.
fn member<'f>(fields: &'f Fields, name: &str) -> Option<&'f Arc<Field>> {
    fields
        .iter()
        .find(|f| f.name() == name)
        .or_else(|| fields.iter().find(|f| super::source_name(f) == name))
}

fn field_names(schema: &Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `schema` with the field at `path` given another type (for reading it differently).
pub(crate) fn with_type_at(
    fields: &[Arc<Field>],
    names: &[String],
    to: &DataType,
) -> Vec<Arc<Field>> {
    fields
        .iter()
        .map(|f| {
            if f.name() != &names[0] {
                return f.clone();
            }
            if names.len() == 1 {
                return Arc::new(f.as_ref().clone().with_data_type(to.clone()));
            }
            match f.data_type() {
                DataType::Struct(members) => {
                    let members = with_type_at(members, &names[1..], to);
                    Arc::new(
                        f.as_ref()
                            .clone()
                            .with_data_type(DataType::Struct(members.into())),
                    )
                }
                _ => f.clone(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use deltalake::arrow::array::{Int64Array, StringArray, StructArray};
    use deltalake::arrow::datatypes::Fields;

    use super::*;

    #[test]
    fn paths_resolve_through_structs_and_carry_parent_nulls() {
        let user = Fields::from(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ]);
        let schema = Arc::new(Schema::new(vec![
            Field::new("user", DataType::Struct(user.clone()), true),
            Field::new("a.b", DataType::Utf8, true),
        ]));
        let p = FieldPath::resolve(&schema, "user.id").unwrap();
        assert_eq!(p.to_string(), "user.id");
        assert_eq!(p.root(), "user");
        assert_eq!(
            FieldPath::resolve(&schema, "a.b").unwrap(),
            FieldPath::top("a.b")
        );
        assert!(matches!(
            FieldPath::resolve(&schema, "user.email"),
            Err(PathError::NotFound { .. })
        ));
        assert!(matches!(
            FieldPath::resolve(&schema, "user.name.first"),
            Err(PathError::NotAStruct { .. })
        ));
        let users = StructArray::new(
            user,
            vec![
                Arc::new(Int64Array::from(vec![Some(1), Some(2), None])),
                Arc::new(StringArray::from(vec!["x", "y", "z"])),
            ],
            Some(NullBuffer::from(vec![true, false, true])),
        );
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(users),
                Arc::new(StringArray::from(vec!["p", "q", "r"])),
            ],
        )
        .unwrap();
        let ids = p.array(&batch).unwrap();
        let nulls: Vec<bool> = (0..3).map(|i| ids.is_null(i)).collect();
        assert_eq!(nulls, [false, true, true]);
    }
}
