//! Change-event envelopes (`--envelope debezium`): each record is one change of a source row,
//! `{"before": {...}, "after": {...}, "op": "u", "source": {...}, "ts_ms": ...}` (or that
//! object under `"payload"`, beside its `"schema"`, as Debezium's JSON converter writes it
//! with schemas enabled). Decoding reads the row instead: the fields of `after` (of `before`
//! for a delete, which has no `after`), then [`OP_FIELD`] (the operation),
//! [`SOURCE_FIELD`] (the `source` block, where the log position is: `lsn` for PostgreSQL,
//! `file`, `pos` and `row` for MySQL) and [`STREAMED_FIELD`] (false for a snapshot's read). A row's values keep their text: a number is not read
//! through a double on the way.
//!
//! A record that is a row already (it has [`OP_FIELD`] and no `op`: a dead letter of a decoded
//! row, replayed) is read as it is.
//!
//! A record that is not such a change is a dead letter `bad_envelope` with its reason: not an
//! object, no or an unknown `op`, a create, update or read without its `after` object, a
//! delete without `before`, a truncate (`t`) or a logical message (`m`), which name no row,
//! and a row with a field named like one sluice adds.

use serde_json::value::RawValue;

use crate::chunk::Chunk;
use crate::json::Members;
use crate::reject::{Reject, RejectReason, RAW_BYTES_MAX};

/// The field a row gets for the change's operation: `c` (create), `u` (update), `d`
/// (delete), `r` (a snapshot's read).
pub const OP_FIELD: &str = "__op";
/// The field a row gets for the change's `source` block.
pub const SOURCE_FIELD: &str = "__source";
/// The field a row gets for where the change came from: `false` for a snapshot's read (`r`),
/// `true` for a change streamed from the log. A snapshot's rows carry the log position the
/// snapshot was taken at, which the first streamed change of a row can carry too; ordered
/// after the position, this field makes that change win over the read.
pub const STREAMED_FIELD: &str = "__streamed";

/// How each record wraps its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Envelope {
    Debezium,
}

impl Envelope {
    pub fn parse_name(name: &str) -> Option<Envelope> {
        match name {
            "debezium" => Some(Envelope::Debezium),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Envelope::Debezium => "debezium",
        }
    }

    /// The sequence fields of a row, unless the pipeline gives others: PostgreSQL's log
    /// sequence number, then [`STREAMED_FIELD`] (a streamed change after a snapshot's read
    /// at one position). A history (`history`) is ordered by one field: the position alone.
    pub fn default_sequence(self, history: bool) -> Vec<&'static str> {
        match history {
            true => vec!["__source.lsn"],
            false => vec!["__source.lsn", STREAMED_FIELD],
        }
    }

    /// The delete predicate of a row, unless the pipeline gives another.
    pub fn default_delete_when(self) -> &'static str {
        "__op = 'd'"
    }

    /// `chunk` with each record replaced by its row, at the record's own offset; records
    /// that are not changes are rejects of the chunk (`bad_envelope`). A message without a
    /// value (a Kafka tombstone) is neither: a change log writes one after each delete event
    /// so that log compaction can drop the key, and the delete event before it carries the
    /// delete; it is left out, and counted (the second value). Rows that arrived as Arrow
    /// batches are unwrapped as columns where their shape allows ([`columns`]), else as JSON
    /// lines like text rows.
    pub fn unwrap_chunk(self, chunk: &Chunk) -> (Chunk, u64) {
        if !chunk.arrow.is_empty() {
            if let Some(unwrapped) = self.unwrap_arrow(chunk) {
                return unwrapped;
            }
            tracing::debug!(
                file = chunk.file,
                start = chunk.start,
                "changes read as JSON lines: their columns are not a change's shape read as columns"
            );
        }
        if !chunk.arrow.is_empty() || chunk.text.is_some() {
            return self.unwrap_chunk(&chunk.as_lines());
        }
        let mut data = Vec::with_capacity(chunk.data.len());
        let mut offsets = Vec::new();
        let (mut bad, mut tombstones) = without_tombstones(chunk);
        let messages = chunk.message_offsets.is_some();
        for (offset, line) in chunk.lines() {
            if messages && line.is_empty() {
                tombstones += 1;
                continue;
            }
            let row = self.unwrap_line(line);
            match row {
                Ok(row) => {
                    offsets.push(offset);
                    data.extend_from_slice(&row);
                    data.push(b'\n');
                }
                Err(why) => bad.push(Reject {
                    file: chunk.file,
                    offset,
                    reason: RejectReason::BadEnvelope(why),
                    raw: String::from_utf8_lossy(&line[..line.len().min(RAW_BYTES_MAX)])
                        .into_owned(),
                }),
            }
        }
        bad.sort_by_key(|r| r.offset);
        let rows = Chunk {
            file: chunk.file,
            start: chunk.start,
            data,
            message_offsets: Some(offsets),
            overlong: chunk.overlong.clone(),
            end_at: Some(chunk.end()),
            bad,
            stored_bytes: Some(chunk.bytes_read()),
            meta: chunk.meta.clone(),
            arrow: Vec::new(),
            text: None,
        };
        (rows, tombstones)
    }

    /// [`Envelope::unwrap_chunk`] of a chunk of Arrow rows, column by column; `None` if a
    /// batch is not of a shape [`columns`] reads.
    fn unwrap_arrow(self, chunk: &Chunk) -> Option<(Chunk, u64)> {
        let (mut bad, tombstones) = without_tombstones(chunk);
        let mut arrow = Vec::with_capacity(chunk.arrow.len());
        for rows in &chunk.arrow {
            let (rows, rejects) = columns::unwrap_rows(rows, chunk.file)?;
            arrow.push(rows);
            bad.extend(rejects);
        }
        bad.sort_by_key(|r| r.offset);
        let rows = Chunk {
            arrow,
            bad,
            ..chunk.clone()
        };
        Some((rows, tombstones))
    }

    /// The row of one change record, as a JSON object's text (see the module doc).
    ///
    /// (An empty line, a Kafka tombstone, is no change: [`Envelope::unwrap_chunk`] leaves
    /// tombstones out before it is called.)
    pub fn unwrap_line(self, line: &[u8]) -> Result<Vec<u8>, String> {
        let text = std::str::from_utf8(line).map_err(|e| format!("not UTF-8: {e}"))?;
        let members = object(text, "the record")?;
        let change = match (field(&members, "payload"), field(&members, "schema")) {
            (Some(payload), Some(_)) => object(payload.get(), "payload")?,
            _ => members,
        };
        let op = match field(&change, "op") {
            // A row already (a dead letter of a decoded row, replayed): as it is.
            None if field(&change, OP_FIELD).is_some() => return Ok(line.to_vec()),
            None => return Err("no \"op\": not a change event".into()),
            Some(op) => serde_json::from_str::<String>(op.get())
                .map_err(|_| format!("\"op\" is {}, not a string", op.get()))?,
        };
        let image = match op.as_str() {
            "c" | "u" | "r" => "after",
            "d" => "before",
            "t" | "m" => {
                return Err(format!(
                    "op {op:?} (a truncate or a logical message) names no row"
                ))
            }
            other => return Err(format!("unknown op {other:?} (c, u, d, r)")),
        };
        let row = match field(&change, image) {
            Some(row) if row.get() != "null" => object(row.get(), image)?,
            _ => return Err(format!("op {op:?} without its {image:?} object")),
        };
        let mut out = Vec::with_capacity(line.len());
        out.push(b'{');
        for (key, value) in &row {
            if key == OP_FIELD || key == SOURCE_FIELD || key == STREAMED_FIELD {
                return Err(format!(
                    "the row has a field {key:?}, which sluice adds for the change"
                ));
            }
            push_member(&mut out, key, value.get());
        }
        push_member(&mut out, OP_FIELD, &json_string(&op));
        let source = field(&change, "source").map_or("null", |s| s.get());
        push_member(&mut out, SOURCE_FIELD, source);
        let streamed = if op == "r" { "false" } else { "true" };
        push_member(&mut out, STREAMED_FIELD, streamed);
        out.push(b'}');
        Ok(out)
    }
}

/// The chunk's rejects but its tombstones, and how many tombstones there were: a registry
/// format's tombstones are rejects of the chunk already (`null_value`).
fn without_tombstones(chunk: &Chunk) -> (Vec<Reject>, u64) {
    let (tombstones, bad): (Vec<Reject>, Vec<Reject>) = chunk
        .bad
        .iter()
        .cloned()
        .partition(|r| r.reason == RejectReason::NullValue);
    (bad, tombstones.len() as u64)
}

/// The members of the JSON object `text` (`what` names it in the error).
fn object<'a>(text: &'a str, what: &str) -> Result<Vec<(String, &'a RawValue)>, String> {
    serde_json::from_str::<Members>(text)
        .map(|m| m.0)
        .map_err(|e| format!("{what} is not a JSON object: {e}"))
}

/// The value of the first member named `key`.
fn field<'a>(members: &[(String, &'a RawValue)], key: &str) -> Option<&'a RawValue> {
    members.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
}

fn push_member(out: &mut Vec<u8>, key: &str, value: &str) {
    if out.len() > 1 {
        out.push(b',');
    }
    out.extend_from_slice(json_string(key).as_bytes());
    out.push(b':');
    out.extend_from_slice(value.as_bytes());
}

/// `text` as a JSON string.
fn json_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

mod columns;
#[cfg(test)]
mod tests;
