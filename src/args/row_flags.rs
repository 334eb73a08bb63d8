//! What a row is and how it is published: `--key`, `--sequence-field`, `--mode`,
//! `--merge-scope`, `--envelope`, `--delete-when`, `--scd`, `--schema-evolution` and
//! `--columns-max`, with the combinations they need.

use sluice_ingest::{defaults, KeySpec, PublishMode};
use sluice_publish::MergeScope;
use sluice_source::envelope::Envelope;
use sluice_source::SchemaEvolution;

use super::run_args::RunArgs;
use super::time_flags::TimeGroup;
use crate::exit::usage;

/// The row group, resolved.
#[derive(Debug)]
pub(crate) struct RowGroup {
    pub key: Option<KeySpec>,
    pub mode: PublishMode,
    pub evolution: SchemaEvolution,
    pub columns_max: usize,
    /// `--envelope`.
    pub envelope: Option<Envelope>,
    /// `--delete-when` (or the envelope's default in a mirror).
    pub delete_when: Option<String>,
    /// `--scd 2`: every change a version of its row.
    pub history: bool,
}

impl RunArgs {
    /// The row group's flags; `time` names the event time a key's changes are ordered by
    /// without a sequence, `format` the records' format (a CSV record takes no envelope).
    pub(crate) fn row_group(&self, time: &TimeGroup, format: &str) -> anyhow::Result<RowGroup> {
        let evolution = self
            .schema_evolution
            .as_deref()
            .map(|name| {
                SchemaEvolution::parse_name(name)
                    .ok_or_else(|| usage("--schema-evolution: use add, reject or ignore"))
            })
            .transpose()?
            .unwrap_or_default();
        let columns_max = self.columns_max.unwrap_or(defaults::COLUMNS_MAX);
        if columns_max == 0 {
            return Err(usage("--columns-max: must be at least 1"));
        }
        let key = self.key_spec(time)?;
        let mode = self.mode(key.is_some())?;
        let envelope = self.envelope()?;
        if envelope.is_some() && format == "csv" {
            return Err(usage(
                "--envelope: a CSV record is flat, it cannot hold a change's before and after rows (ndjson, parquet, json, json-schema, avro or protobuf records can)",
            ));
        }
        let mirror = mode == PublishMode::Merge(MergeScope::Table);
        let sequences = key.as_ref().map_or(0, |k| k.sequence.len());
        let delete_when = self
            .delete_when
            .clone()
            .filter(|w| !w.is_empty())
            .or_else(|| {
                envelope
                    .filter(|_| mirror && key.is_some())
                    .map(|e| e.default_delete_when().to_string())
            });
        if delete_when.is_some() && (!mirror || sequences == 0) {
            return Err(usage(
                "--delete-when: needs --mode merge --merge-scope table and --sequence-field (a mirror of a source's rows: a delete removes its key's row across the table, ordered by the source's sequence)",
            ));
        }
        let history = self.scd.as_deref() == Some("2");
        if history && (!mirror || sequences != 1) {
            return Err(usage(
                "--scd 2: needs --mode merge --merge-scope table and one --sequence-field (a version starts and ends at a sequence value of its key's changes)",
            ));
        }
        Ok(RowGroup {
            key,
            mode,
            evolution,
            columns_max,
            envelope,
            delete_when,
            history,
        })
    }

    /// `--key` and `--sequence-field` (which needs a key).
    fn key_spec(&self, time: &TimeGroup) -> anyhow::Result<Option<KeySpec>> {
        let Some(k) = &self.key else {
            if self.sequence_field.is_some() {
                return Err(usage(
                    "--sequence-field: needs --key FIELD[,FIELD] (a sequence orders the changes of one key)",
                ));
            }
            return Ok(None);
        };
        let columns: Vec<String> = k.split(',').map(|c| c.trim().to_string()).collect();
        if columns.iter().any(String::is_empty) {
            return Err(usage(format!("--key {k:?}: empty field name")));
        }
        Ok(Some(KeySpec {
            columns,
            time_field: time.time_field.clone(),
            time: time.time.clone(),
            sequence: self.sequence_fields()?,
        }))
    }

    /// `--mode` and `--merge-scope`; `keyed` says whether `--key` was given.
    fn mode(&self, keyed: bool) -> anyhow::Result<PublishMode> {
        let scope = match self.merge_scope.as_deref() {
            None => None,
            Some(name) => Some(
                MergeScope::parse_name(name)
                    .ok_or_else(|| usage("--merge-scope: use window or table"))?,
            ),
        };
        match self.mode.as_deref().unwrap_or(defaults::MODE) {
            "swap" if scope.is_some() => Err(usage("--merge-scope: only with --mode merge")),
            "swap" => Ok(PublishMode::Swap),
            "merge" if !keyed => Err(usage(
                "--mode merge: needs --key FIELD[,FIELD] (the natural key rows are upserted on)",
            )),
            "merge" => Ok(PublishMode::Merge(scope.unwrap_or_default())),
            _ => Err(usage("--mode: use swap or merge")),
        }
    }

    /// `--sequence-field`: the fields that order a key's changes (none: the event time;
    /// with an envelope, its log position).
    fn sequence_fields(&self) -> anyhow::Result<Vec<String>> {
        let Some(given) = self.sequence_field.as_deref().filter(|s| !s.is_empty()) else {
            let history = self.scd.as_deref() == Some("2");
            return Ok(match self.envelope()? {
                Some(e) => e
                    .default_sequence(history)
                    .into_iter()
                    .map(String::from)
                    .collect(),
                None => Vec::new(),
            });
        };
        let fields: Vec<String> = given.split(',').map(|c| c.trim().to_string()).collect();
        if fields.iter().any(String::is_empty) {
            return Err(usage(format!(
                "--sequence-field {given:?}: empty field name"
            )));
        }
        Ok(fields)
    }

    /// `--envelope`.
    fn envelope(&self) -> anyhow::Result<Option<Envelope>> {
        match self.envelope.as_deref().filter(|e| !e.is_empty()) {
            None => Ok(None),
            Some(name) => Envelope::parse_name(name)
                .map(Some)
                .ok_or_else(|| usage("--envelope: use debezium")),
        }
    }
}
