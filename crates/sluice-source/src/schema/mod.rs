//! The record schema: which fields of a JSON line become table columns, with which types.
//!
//! A schema file is JSON or TOML (chosen by the `.toml` extension) with one entry per field:
//!
//! ```toml
//! [[fields]]
//! name = "ts"
//! type = "string"
//!
//! [[fields]]
//! name = "actor"
//! type = "struct<id:long,login:string>"
//!
//! [[fields]]
//! name = "commits"
//! type = "array"
//! items = { type = "struct", fields = [{ name = "sha", type = "string" }] }
//! ```
//!
//! A type is a name of [`types`]' grammar (`decimal(10,2)`, `array<string>`,
//! `map<string,long>`, `struct<id:long,login:string>`), or, for nested types written out in
//! TOML, `struct` with `fields`, `array` with `items`, `map` with `values` (keys are strings).
//! A field may name the column that stores it (`column = "flight_hour"` beside `name =
//! "hour"`: a record field named like a column sluice adds); the field's own name stays in
//! the column's metadata. Fields absent from a line are null; every column is nullable. What happens to fields the
//! schema does not have is the pipeline's schema evolution policy (`--schema-evolution`).

mod infer;
mod names;
mod path;
pub mod types;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use serde::Deserialize;

pub use infer::infer;
pub(crate) use infer::value_type;
pub use names::{acceptable, same_column, source_name, SOURCE_NAME_KEY};
pub(crate) use names::{lookup, new_field, Found};
pub(crate) use path::with_type_at;
pub use path::{FieldPath, PathError};
pub use types::{list_of, map_of, parse_type, type_name, TypeError};

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("cannot read schema file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("schema file {path} is not valid: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("schema field {field:?}: {source}")]
    Type { field: String, source: TypeError },
    #[error("schema field {field:?}: {reason}")]
    Spec { field: String, reason: String },
    #[error("schema field {0:?} appears twice (column names are case-insensitive)")]
    Duplicate(String),
    #[error("no schema could be inferred: none of the first {0} lines is a JSON object")]
    NothingToInfer(usize),
}

/// A schema file's contents.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordSchema {
    pub fields: Vec<FieldSpec>,
}

/// One field: a name and a type (as in [`TypeSpec`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSpec {
    pub name: String,
    /// The column that stores the field, when it is not `name` (a record field named like
    /// a column sluice adds, say); the field's name is kept in the column's metadata.
    #[serde(default)]
    pub column: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub fields: Option<Vec<FieldSpec>>,
    #[serde(default)]
    pub items: Option<Box<TypeSpec>>,
    #[serde(default)]
    pub values: Option<Box<TypeSpec>>,
}

impl FieldSpec {
    fn spec(&self) -> TypeSpec {
        TypeSpec {
            kind: self.kind.clone(),
            fields: self.fields.clone(),
            items: self.items.clone(),
            values: self.values.clone(),
        }
    }
}

/// A type: a name of the grammar, or `struct`/`array`/`map` spelled out with their parts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypeSpec {
    #[serde(rename = "type")]
    pub kind: String,
    /// Members of a `struct`.
    #[serde(default)]
    pub fields: Option<Vec<FieldSpec>>,
    /// Elements of an `array`.
    #[serde(default)]
    pub items: Option<Box<TypeSpec>>,
    /// Values of a `map`.
    #[serde(default)]
    pub values: Option<Box<TypeSpec>>,
}

impl TypeSpec {
    fn to_arrow(&self, field: &str) -> Result<DataType, SchemaError> {
        let spec = |reason: &str| SchemaError::Spec {
            field: field.to_string(),
            reason: reason.to_string(),
        };
        let kind = self.kind.trim().to_ascii_lowercase();
        let parts = [
            self.fields.is_some(),
            self.items.is_some(),
            self.values.is_some(),
        ];
        let t = match kind.as_str() {
            "struct" => {
                let members = self
                    .fields
                    .as_ref()
                    .ok_or_else(|| spec("a struct needs `fields`"))?;
                DataType::Struct(fields_of(members, field)?)
            }
            "array" | "list" => {
                let items = self
                    .items
                    .as_ref()
                    .ok_or_else(|| spec("an array needs `items`"))?;
                list_of(items.to_arrow(&format!("{field}[]"))?)
            }
            "map" => {
                let values = self
                    .values
                    .as_ref()
                    .ok_or_else(|| spec("a map needs `values`"))?;
                map_of(values.to_arrow(&format!("{field}{{}}"))?)
            }
            _ => {
                if parts.iter().any(|p| *p) {
                    return Err(spec(
                        "`fields`, `items` and `values` go only with struct, array and map",
                    ));
                }
                return parse_type(&self.kind).map_err(|source| SchemaError::Type {
                    field: field.to_string(),
                    source,
                });
            }
        };
        let expected = match kind.as_str() {
            "struct" => [true, false, false],
            "map" => [false, false, true],
            _ => [false, true, false],
        };
        if parts != expected {
            return Err(spec(
                "give a struct `fields`, an array `items`, a map `values`, and nothing else",
            ));
        }
        Ok(t)
    }
}

fn fields_of(specs: &[FieldSpec], parent: &str) -> Result<Fields, SchemaError> {
    let mut fields: Vec<Field> = Vec::with_capacity(specs.len());
    for f in specs {
        let name = if parent.is_empty() {
            f.name.clone()
        } else {
            format!("{parent}.{}", f.name)
        };
        if f.name.is_empty() {
            return Err(SchemaError::Spec {
                field: name,
                reason: "an empty field name".into(),
            });
        }
        if fields.iter().any(|g| same_column(source_name(g), &f.name)) {
            return Err(SchemaError::Duplicate(name));
        }
        let siblings: Vec<&str> = fields.iter().map(|g| g.name().as_str()).collect();
        let t = f.spec().to_arrow(&name)?;
        fields.push(match &f.column {
            Some(column) => named_column(f, column, t, &siblings, &name)?,
            // A name readers refuse is renamed as an inferred one is (see `names`).
            None => new_field(&f.name, t, &siblings, &[]),
        });
    }
    Ok(Fields::from(fields))
}

/// The field `f` stored as the column `column` (`column = "…"` in the schema file).
fn named_column(
    f: &FieldSpec,
    column: &str,
    t: DataType,
    siblings: &[&str],
    path: &str,
) -> Result<Field, SchemaError> {
    let refused = |reason: &str| SchemaError::Spec {
        field: path.to_string(),
        reason: format!("column {column:?}: {reason}"),
    };
    if !acceptable(column) {
        return Err(refused(
            "not a column name Delta readers take (empty, or one of ` ,;{}()=`, a tab, a newline or a control character)",
        ));
    }
    if siblings.iter().any(|s| same_column(s, column)) {
        return Err(refused("another field has this column"));
    }
    let field = Field::new(column, t, true);
    Ok(if column == f.name {
        field
    } else {
        let key = HashMap::from([(SOURCE_NAME_KEY.to_string(), f.name.clone())]);
        field.with_metadata(key)
    })
}

impl RecordSchema {
    pub fn load(path: &Path) -> Result<SchemaRef, SchemaError> {
        let text = std::fs::read_to_string(path).map_err(|source| SchemaError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |reason: String| SchemaError::Invalid {
            path: path.to_path_buf(),
            reason,
        };
        let spec: RecordSchema = if path.extension().is_some_and(|e| e == "toml") {
            toml::from_str(&text).map_err(|e| invalid(e.to_string()))?
        } else {
            serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?
        };
        spec.to_arrow()
    }

    pub fn to_arrow(&self) -> Result<SchemaRef, SchemaError> {
        Ok(Arc::new(Schema::new(fields_of(&self.fields, "")?)))
    }
}

/// Leaf columns of a schema: every scalar, counting inside structs, lists and maps (what a
/// column limit counts).
pub fn leaf_count(fields: &Fields) -> usize {
    fn of(t: &DataType) -> usize {
        match t {
            DataType::Struct(fs) => fs.iter().map(|f| of(f.data_type())).sum(),
            DataType::List(f) | DataType::LargeList(f) => of(f.data_type()),
            DataType::Map(entries, _) => of(entries.data_type()),
            _ => 1,
        }
    }
    fields.iter().map(|f| of(f.data_type())).sum()
}

/// The UTF-8 byte-order mark some tools write at the start of a file.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_files_in_json_and_toml() {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("s.json");
        std::fs::write(
            &json,
            r#"{"fields":[{"name":"ts","type":"string"},{"name":"n","type":"long"}]}"#,
        )
        .unwrap();
        let toml_path = dir.path().join("s.toml");
        std::fs::write(&toml_path, "[[fields]]\nname = \"ts\"\ntype = \"string\"\n[[fields]]\nname = \"n\"\ntype = \"long\"\n").unwrap();
        let a = RecordSchema::load(&json).unwrap();
        let b = RecordSchema::load(&toml_path).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.field(1).data_type(), &DataType::Int64);

        std::fs::write(&json, r#"{"fields":[{"name":"x","type":"money"}]}"#).unwrap();
        assert!(matches!(
            RecordSchema::load(&json),
            Err(SchemaError::Type { .. })
        ));
        std::fs::write(
            &json,
            r#"{"fields":[{"name":"x","type":"long"},{"name":"x","type":"long"}]}"#,
        )
        .unwrap();
        assert!(matches!(
            RecordSchema::load(&json),
            Err(SchemaError::Duplicate(_))
        ));
        std::fs::write(&json, r#"{"feilds":[]}"#).unwrap();
        assert!(matches!(
            RecordSchema::load(&json),
            Err(SchemaError::Invalid { .. })
        ));
    }
}
