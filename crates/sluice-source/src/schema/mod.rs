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
//! Fields absent from a line are null; every column is nullable. What happens to fields the
//! schema does not have is the pipeline's schema evolution policy (`--schema-evolution`).

mod path;
pub mod types;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use serde::Deserialize;

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
    #[error("schema field {0:?} appears twice")]
    Duplicate(String),
    #[error("no schema could be inferred: none of the first {0} lines is a JSON object")]
    NothingToInfer(usize),
    #[error("inferring the schema failed: {0}")]
    Inference(String),
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
        if fields.iter().any(|g| g.name() == &f.name) {
            return Err(SchemaError::Duplicate(name));
        }
        fields.push(Field::new(&f.name, f.spec().to_arrow(&name)?, true));
    }
    Ok(Fields::from(fields))
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

/// Infers a schema from the first `max_lines` parseable lines: integers become `long`,
/// decimals `double`, text `string`, nested objects and arrays keep their shape, fields that
/// are only ever null become `string` (see [`storable`]). A UTF-8 byte-order mark before the
/// first line is skipped. Lines that are not JSON objects are passed over here
/// (they are rejected, with their position, when the run reads them).
pub fn infer<'a>(
    lines: impl Iterator<Item = &'a [u8]>,
    max_lines: usize,
) -> Result<SchemaRef, SchemaError> {
    let values: Vec<serde_json::Value> = lines
        .take(max_lines)
        .map(|l| l.strip_prefix(BOM).unwrap_or(l))
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .filter(|v| v.is_object())
        .collect();
    if values.is_empty() {
        return Err(SchemaError::NothingToInfer(max_lines));
    }
    let inferred =
        deltalake::arrow::json::reader::infer_json_schema_from_iterator(values.into_iter().map(Ok))
            .map_err(|e| SchemaError::Inference(e.to_string()))?;
    let fields: Vec<Field> = inferred
        .fields()
        .iter()
        .filter_map(|f| Some(Field::new(f.name(), storable(f.data_type())?, true)))
        .collect();
    Ok(Arc::new(Schema::new(fields)))
}

/// A type Delta can store for an inferred one: Delta has no null type (a field seen only as
/// null, or an empty array's elements, are read as text), lists are Delta's (`element`), and
/// a struct seen only as `{}` has nothing to store (`None`: the field is left out, as a
/// field seen only as null would carry nothing either).
pub fn storable(t: &DataType) -> Option<DataType> {
    Some(match t {
        DataType::Null => DataType::Utf8,
        DataType::List(f) | DataType::LargeList(f) => {
            list_of(storable(f.data_type()).unwrap_or(DataType::Utf8))
        }
        DataType::Struct(fs) => {
            let members: Vec<Field> = fs
                .iter()
                .filter_map(|f| Some(Field::new(f.name(), storable(f.data_type())?, true)))
                .collect();
            if members.is_empty() {
                return None;
            }
            DataType::Struct(Fields::from(members))
        }
        other => other.clone(),
    })
}

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

    #[test]
    fn inference_skips_bad_lines_and_maps_null_to_text() {
        let lines: Vec<&[u8]> = vec![
            b"{\"a\":1,\"b\":null}",
            b"garbage",
            b"{\"a\":2,\"c\":\"x\"}",
        ];
        let schema = infer(lines.into_iter(), 10).unwrap();
        assert_eq!(
            schema.field_with_name("a").unwrap().data_type(),
            &DataType::Int64
        );
        assert_eq!(
            schema.field_with_name("b").unwrap().data_type(),
            &DataType::Utf8
        );
        assert_eq!(
            schema.field_with_name("c").unwrap().data_type(),
            &DataType::Utf8
        );
        let none: Vec<&[u8]> = vec![b"nope"];
        assert!(matches!(
            infer(none.into_iter(), 10),
            Err(SchemaError::NothingToInfer(_))
        ));
    }
}
