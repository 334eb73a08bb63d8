//! The Protobuf case of the Kafka bench: the flat input's lines as Protobuf messages in the
//! Confluent wire format (a zero byte, the schema id, the message indexes, the body), the
//! schema id 2 in the bench's schema registry (registry.rs). (kpb) is `sluice run
//! --input-format protobuf` over them, beside (k) over the same lines as JSON.

/// The topic of the Protobuf messages.
pub const TOPIC: &str = "events-protobuf";

/// The flat events as a message, each field `optional` (a null stays null, as in the JSON
/// lines: proto3 would read an unset plain `string` as "").
pub const SCHEMA: &str = r#"syntax = "proto3";
package bench;
message Event {
  optional string event_id = 1;
  optional string ts = 2;
  optional string user_id = 3;
  optional string country = 4;
  optional string kind = 5;
  optional double amount = 6;
}
"#;

/// The string fields of [`SCHEMA`] by field number, then `amount` (6, a double).
const STRINGS: [(&str, u8); 5] = [
    ("event_id", 1),
    ("ts", 2),
    ("user_id", 3),
    ("country", 4),
    ("kind", 5),
];

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// An NDJSON line as a Protobuf message of schema id 2 (message index 0: `Event`); a line
/// that is not a JSON object stays as it is (a dead letter `no_magic_byte`, as a JSON line
/// would be one).
pub fn encode(line: &str) -> Vec<u8> {
    let Ok(serde_json::Value::Object(event)) = serde_json::from_str(line) else {
        return line.as_bytes().to_vec();
    };
    let mut out = vec![0, 0, 0, 0, 2, 0];
    for (name, number) in STRINGS {
        if let Some(serde_json::Value::String(s)) = event.get(name) {
            out.push(number << 3 | 2);
            varint(s.len() as u64, &mut out);
            out.extend_from_slice(s.as_bytes());
        }
    }
    if let Some(amount) = event.get("amount").and_then(|v| v.as_f64()) {
        out.push(6 << 3 | 1);
        out.extend_from_slice(&amount.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_flat_event_is_its_set_fields_in_number_order() {
        let m = super::encode(r#"{"event_id":"e1","amount":1.5,"kind":null}"#);
        let mut want = vec![0, 0, 0, 0, 2, 0, 0x0a, 2, b'e', b'1', 0x31];
        want.extend_from_slice(&1.5f64.to_le_bytes());
        assert_eq!(m, want);
        assert_eq!(super::encode("not json"), b"not json");
    }
}
