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
//! name = "amount"
//! type = "double"
//! ```
//!
//! Types: `string`, `long` (or `int64`), `integer` (`int32`), `short`, `byte`, `double`
//! (`float64`), `float` (`float32`), `boolean`, `date` (`"2026-10-03"`), `timestamp`
//! (RFC 3339 text or epoch microseconds, stored as UTC microseconds). Fields absent from a line
//! are null; fields absent from the schema are ignored. Every column is nullable.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("cannot read schema file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("schema file {path} is not valid: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("schema field {field:?} has unknown type {kind:?} (use string, long, integer, short, byte, double, float, boolean, date or timestamp)")]
    UnknownType { field: String, kind: String },
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
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
        let mut fields: Vec<Field> = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            if fields.iter().any(|g| g.name() == &f.name) {
                return Err(SchemaError::Duplicate(f.name.clone()));
            }
            fields.push(Field::new(&f.name, type_named(&f.name, &f.kind)?, true));
        }
        Ok(Arc::new(Schema::new(fields)))
    }
}

fn type_named(field: &str, kind: &str) -> Result<DataType, SchemaError> {
    Ok(match kind {
        "string" => DataType::Utf8,
        "long" | "int64" => DataType::Int64,
        "integer" | "int32" | "int" => DataType::Int32,
        "short" | "int16" => DataType::Int16,
        "byte" | "int8" => DataType::Int8,
        "double" | "float64" => DataType::Float64,
        "float" | "float32" => DataType::Float32,
        "boolean" | "bool" => DataType::Boolean,
        "date" => DataType::Date32,
        "timestamp" => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        other => {
            return Err(SchemaError::UnknownType {
                field: field.to_string(),
                kind: other.to_string(),
            })
        }
    })
}

/// Infers a schema from the first `max_lines` parseable lines: integers become `long`,
/// decimals `double`, text `string`, nested objects and arrays keep their shape, fields that
/// are only ever null become `string`. Lines that are not JSON objects are passed over here
/// (they are rejected, with their position, when the run reads them).
pub fn infer<'a>(
    lines: impl Iterator<Item = &'a [u8]>,
    max_lines: usize,
) -> Result<SchemaRef, SchemaError> {
    let values: Vec<serde_json::Value> = lines
        .take(max_lines)
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
        .map(|f| Field::new(f.name(), denull(f.data_type()), true))
        .collect();
    Ok(Arc::new(Schema::new(fields)))
}

/// Delta has no null type: a field seen only as null is read as text.
fn denull(t: &DataType) -> DataType {
    match t {
        DataType::Null => DataType::Utf8,
        DataType::List(f) => {
            DataType::List(Arc::new(Field::new(f.name(), denull(f.data_type()), true)))
        }
        DataType::Struct(fs) => DataType::Struct(
            fs.iter()
                .map(|f| Field::new(f.name(), denull(f.data_type()), true))
                .collect(),
        ),
        other => other.clone(),
    }
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
            Err(SchemaError::UnknownType { .. })
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
