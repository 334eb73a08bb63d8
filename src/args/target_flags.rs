//! The tables a run writes and whose they are: `--table`, `--pipeline`, `--pipelines`,
//! `--dlq`, `--tombstones` and `--storage-option`.

use std::collections::HashMap;

use sluice_ingest::defaults;
use sluice_publish::Pipelines;
use sluice_window::valid_pipeline_name;

use super::run_args::RunArgs;
use super::store_flags::{default_dlq_location, default_tombstones_location, store_options};
use crate::exit::usage;

/// The target group, resolved.
#[derive(Debug)]
pub(crate) struct TargetGroup {
    pub table: String,
    pub pipeline: String,
    /// Given for a new table (or checked against an existing one).
    pub pipelines: Option<Pipelines>,
    pub dlq: String,
    /// `--tombstones`: the tombstone table's location.
    pub tombstones: String,
    pub storage_options: HashMap<String, String>,
}

impl RunArgs {
    /// The target group's flags.
    pub(crate) fn target_group(&self) -> anyhow::Result<TargetGroup> {
        let table = self
            .table
            .clone()
            .ok_or_else(|| usage("--table is required"))?;
        let pipeline = self
            .pipeline
            .clone()
            .unwrap_or_else(|| defaults::PIPELINE.into());
        if !valid_pipeline_name(&pipeline) {
            return Err(usage(format!(
                "--pipeline {pipeline:?}: use 1 to 128 letters, digits, '_', '-' or '.', not starting with '.'"
            )));
        }
        let pipelines = self
            .pipelines
            .as_deref()
            .map(|p| Pipelines::parse_name(p).ok_or_else(|| usage("--pipelines: use one or many")))
            .transpose()?;
        Ok(TargetGroup {
            storage_options: store_options("--storage-option", &table, &self.storage_options)?,
            dlq: (self.dlq.clone()).unwrap_or_else(|| default_dlq_location(&table)),
            tombstones: (self.tombstones.clone())
                .unwrap_or_else(|| default_tombstones_location(&table)),
            table,
            pipeline,
            pipelines,
        })
    }
}
