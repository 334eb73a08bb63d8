//! The Avro case of the Kafka bench (issue 45): the flat input's lines as Avro messages in the
//! Confluent wire format (a zero byte, the schema id, the body), the schema id 1 in the
//! bench's schema registry (registry.rs). (ka) is `sluice run --input-format avro` over
//! them, to compare with (k) over the same lines as JSON.

/// The topic of the Avro messages.
pub const TOPIC: &str = "events-avro";

/// The flat events' fields, each a union of null and its type (as a producer of optional
/// fields writes them).
const FIELDS: [(&str, Type); 6] = [
    ("event_id", Type::String),
    ("ts", Type::String),
    ("user_id", Type::String),
    ("country", Type::String),
    ("kind", Type::String),
    ("amount", Type::Double),
];

#[derive(Clone, Copy)]
enum Type {
    String,
    Double,
}

/// The writer schema of [`FIELDS`].
pub fn schema() -> String {
    let fields: Vec<String> = FIELDS
        .iter()
        .map(|(name, t)| {
            let t = match t {
                Type::String => "string",
                Type::Double => "double",
            };
            format!(r#"{{"name":"{name}","type":["null","{t}"],"default":null}}"#)
        })
        .collect();
    format!(
        r#"{{"type":"record","name":"Event","fields":[{}]}}"#,
        fields.join(",")
    )
}

fn long(v: i64, out: &mut Vec<u8>) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// An NDJSON line as an Avro message of schema id 1; a line that is not a JSON object stays
/// as it is (a dead letter `no_magic_byte`, as a JSON line would be one).
pub fn encode(line: &str) -> Vec<u8> {
    let Ok(serde_json::Value::Object(event)) = serde_json::from_str(line) else {
        return line.as_bytes().to_vec();
    };
    let mut out = vec![0, 0, 0, 0, 1];
    for (name, t) in FIELDS {
        match (t, event.get(name)) {
            (Type::String, Some(serde_json::Value::String(s))) => {
                long(1, &mut out);
                long(s.len() as i64, &mut out);
                out.extend_from_slice(s.as_bytes());
            }
            (Type::Double, Some(v)) if v.is_number() => {
                long(1, &mut out);
                out.extend_from_slice(&v.as_f64().unwrap_or_default().to_le_bytes());
            }
            _ => long(0, &mut out),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_flat_event_is_its_fields_in_schema_order() {
        let m = super::encode(r#"{"event_id":"e1","amount":1.5,"kind":null}"#);
        let mut want = vec![0, 0, 0, 0, 1, 2, 4, b'e', b'1', 0, 0, 0, 0, 2];
        want.extend_from_slice(&1.5f64.to_le_bytes());
        assert_eq!(m, want);
        assert_eq!(super::encode("not json"), b"not json");
    }
}
