//! An Avro schema that references named types of other subjects (Confluent's schema
//! references: a record used by many schemas registered once), made whole: each referenced
//! type's definition put in place of its first use, as Avro's own parser would see it with
//! the referenced schemas parsed first. Later uses keep the name (a name is defined once).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

/// The deepest nesting of types read (a bound on what a registry's answer can make sluice
/// walk).
const DEPTH_MAX: usize = 256;

const PRIMITIVES: [&str; 8] = [
    "null", "boolean", "int", "long", "float", "double", "bytes", "string",
];

/// `main` (Avro JSON) with the named types `referenced` defines (each an Avro JSON schema)
/// defined where `main` first uses them, transitively; an error names what cannot be read.
pub fn inline(main: &str, referenced: &[&str]) -> Result<String, String> {
    let mut named: HashMap<String, Value> = HashMap::new();
    for text in referenced {
        let schema: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if let Some(name) = defined_name(&schema, "") {
            named.insert(name.0, schema);
        }
    }
    let mut schema: Value = serde_json::from_str(main).map_err(|e| e.to_string())?;
    let mut walk = Walk {
        named,
        defined: HashSet::new(),
    };
    walk.visit(&mut schema, "", 0)?;
    Ok(schema.to_string())
}

/// The full name a schema object defines and the namespace its members inherit, if it is a
/// named type (`record`, `enum`, `fixed`).
fn defined_name(schema: &Value, namespace: &str) -> Option<(String, String)> {
    let object = schema.as_object()?;
    let kind = object.get("type")?.as_str()?;
    if !matches!(kind, "record" | "error" | "enum" | "fixed") {
        return None;
    }
    let name = object.get("name")?.as_str()?;
    if let Some((space, _)) = name.rsplit_once('.') {
        return Some((name.to_string(), space.to_string()));
    }
    let space = object
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or(namespace);
    let full = if space.is_empty() {
        name.to_string()
    } else {
        format!("{space}.{name}")
    };
    Some((full, space.to_string()))
}

struct Walk {
    /// The referenced types by full name.
    named: HashMap<String, Value>,
    /// The names defined so far, in document order.
    defined: HashSet<String>,
}

impl Walk {
    fn visit(&mut self, schema: &mut Value, namespace: &str, depth: usize) -> Result<(), String> {
        if depth > DEPTH_MAX {
            return Err(format!("types nested deeper than {DEPTH_MAX}"));
        }
        match schema {
            Value::String(name) if !PRIMITIVES.contains(&name.as_str()) => {
                let full = if name.contains('.') || namespace.is_empty() {
                    name.clone()
                } else {
                    format!("{namespace}.{name}")
                };
                // A name of the enclosing namespace, or (Avro's fallback) of none.
                let full = [full, name.clone()]
                    .into_iter()
                    .find(|n| self.defined.contains(n) || self.named.contains_key(n));
                let Some(full) = full else { return Ok(()) };
                if self.defined.contains(&full) {
                    return Ok(());
                }
                if let Some(mut definition) = self.named.remove(&full) {
                    // A referenced schema is a document of its own: no enclosing namespace.
                    self.visit(&mut definition, "", depth + 1)?;
                    *schema = definition;
                }
                Ok(())
            }
            Value::Array(branches) => branches
                .iter_mut()
                .try_for_each(|b| self.visit(b, namespace, depth + 1)),
            Value::Object(_) => self.visit_object(schema, namespace, depth),
            _ => Ok(()),
        }
    }

    fn visit_object(
        &mut self,
        schema: &mut Value,
        namespace: &str,
        depth: usize,
    ) -> Result<(), String> {
        let mut inner = namespace.to_string();
        if let Some((full, space)) = defined_name(schema, namespace) {
            self.defined.insert(full);
            inner = space;
        }
        let Some(object) = schema.as_object_mut() else {
            return Ok(());
        };
        match object.get("type").and_then(Value::as_str) {
            Some("record" | "error") => {
                let fields = object.get_mut("fields").and_then(Value::as_array_mut);
                for field in fields.into_iter().flatten() {
                    if let Some(t) = field.get_mut("type") {
                        self.visit(t, &inner, depth + 1)?;
                    }
                }
                Ok(())
            }
            Some("array") => match object.get_mut("items") {
                Some(items) => self.visit(items, &inner, depth + 1),
                None => Ok(()),
            },
            Some("map") => match object.get_mut("values") {
                Some(values) => self.visit(values, &inner, depth + 1),
                None => Ok(()),
            },
            Some("enum" | "fixed") => Ok(()),
            // `{"type": "long", "logicalType": ...}` or `{"type": "com.acme.Address"}`.
            _ => match object.get_mut("type") {
                Some(t) => self.visit(t, &inner, depth + 1),
                None => Ok(()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::inline;

    const ADDRESS: &str = r#"{"type":"record","name":"Address","namespace":"com.acme",
        "fields":[{"name":"city","type":"string"},{"name":"geo","type":"com.acme.Geo"}]}"#;
    const GEO: &str =
        r#"{"type":"record","name":"com.acme.Geo","fields":[{"name":"lat","type":"double"}]}"#;

    #[test]
    fn referenced_types_are_defined_at_their_first_use_and_named_after() {
        let main = r#"{"type":"record","name":"Order","namespace":"com.acme","fields":[
            {"name":"ship","type":"Address"},
            {"name":"bill","type":["null","com.acme.Address"]},
            {"name":"pins","type":{"type":"array","items":"Geo"}}]}"#;
        let whole = inline(main, &[ADDRESS, GEO]).unwrap();
        let v: serde_json::Value = serde_json::from_str(&whole).unwrap();
        let fields = v["fields"].as_array().unwrap();
        assert_eq!(fields[0]["type"]["name"], "Address");
        // Geo is defined inside Address (its first use), then used by name.
        assert_eq!(
            fields[0]["type"]["fields"][1]["type"]["name"],
            "com.acme.Geo"
        );
        assert_eq!(fields[1]["type"][1], "com.acme.Address");
        assert_eq!(fields[2]["type"]["items"], "Geo");
    }

    #[test]
    fn a_schema_without_references_is_unchanged_and_garbage_is_an_error() {
        let plain = r#"{"type":"record","name":"A","fields":[{"name":"x","type":"Nope"}]}"#;
        let same: serde_json::Value = serde_json::from_str(&inline(plain, &[]).unwrap()).unwrap();
        assert_eq!(
            same,
            serde_json::from_str::<serde_json::Value>(plain).unwrap()
        );
        assert!(inline("{", &[]).is_err());
        assert!(inline(plain, &["not json"]).is_err());
        let deep = format!("{}\"long\"{}", "[".repeat(300), "]".repeat(300));
        assert!(inline(&deep, &[]).is_err());
    }
}
