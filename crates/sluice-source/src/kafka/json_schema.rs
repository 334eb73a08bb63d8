//! JSON messages in the registry's wire format (`--input-format json-schema`), as
//! confluent-kafka's JSONSerializer and Kafka Connect's JsonSchemaConverter write them: the
//! prefix names the JSON Schema the producer validated the message against, the rest is the
//! JSON text, read as a `json` message is (keys, time, evolution and dead letters alike).
//!
//! sluice checks that the id names a JSON schema the registry knows (else the message is a
//! dead letter `unknown_schema_id`); it does not validate the record against that schema: the
//! producer did, and the table's own schema decides what lands.

use std::collections::HashMap;

use crate::registry::{RegistryError, SchemaKind, SchemaRegistry};

use super::wire::{distinct_ids, framing, kept, schema_for, Outcome, PREFIX_BYTES};

/// Reads JSON Schema messages, checking their ids with the registry.
pub struct JsonSchemaMessages {
    registry: SchemaRegistry,
    /// Each id the registry answered: a JSON schema, or why its messages are dead letters.
    ids: HashMap<u32, Result<(), String>>,
}

impl JsonSchemaMessages {
    pub fn new(registry: SchemaRegistry) -> JsonSchemaMessages {
        JsonSchemaMessages {
            registry,
            ids: HashMap::new(),
        }
    }

    /// Looks up the ids not seen before (waiting while the registry cannot be reached).
    pub async fn prepare(&mut self, payloads: &[Option<&[u8]>]) -> Result<(), RegistryError> {
        for id in distinct_ids(payloads) {
            if self.ids.contains_key(&id) {
                continue;
            }
            let found = schema_for(&mut self.registry, id, SchemaKind::Json, "json-schema").await?;
            if let Some(found) = found {
                self.ids.insert(id, found.map(|_| ()));
            }
        }
        Ok(())
    }

    /// Each message's JSON text (a line break read as a space, as for `json`), or why it is
    /// a dead letter.
    pub fn decode(&self, payloads: &[Option<&[u8]>]) -> Vec<Outcome> {
        payloads
            .iter()
            .map(|p| {
                if let Err(reason) = framing(*p).and_then(|id| kept(&self.ids, id)) {
                    return Outcome::Bad(reason);
                }
                let text = &p.unwrap_or_default()[PREFIX_BYTES..];
                Outcome::Row(
                    text.iter()
                        .map(|b| if *b == b'\n' || *b == b'\r' { b' ' } else { *b })
                        .collect(),
                )
            })
            .collect()
    }
}
