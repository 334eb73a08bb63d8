//! The contract as a table holds it: read ([`recorded_contract`]), checked against a run's
//! before anything is written, and recorded where the table lacks a term or a changeable
//! term changed ([`WindowTable::record_contract`]).

use std::collections::HashMap;

use deltalake::kernel::transaction::CommitBuilder;
use deltalake::kernel::{Action, MetadataExt};
use deltalake::protocol::DeltaOperation;

use crate::table::contract::{contract_key, Contract};
use crate::table::error::OpenError;
use crate::table::land::commit_properties;
use crate::table::options::TableOptions;
use crate::table::window_table::WindowTable;

/// The contract recorded for `pipeline` in the table at `options.location`, without creating
/// or changing anything: `None` when there is no table there or it records no contract.
/// Commands fill the options a user left out from it, so a table keeps being written the
/// way it was created.
pub async fn recorded_contract(
    options: &TableOptions,
    pipeline: &str,
) -> Result<Option<Contract>, OpenError> {
    let Some(table) = crate::table::open_table_if_exists(options).await? else {
        return Ok(None);
    };
    let snapshot = table.snapshot().map_err(|source| OpenError::Delta {
        url: table.table_url().to_string(),
        source,
    })?;
    Ok(Contract::recorded_in(
        snapshot.metadata().configuration(),
        pipeline,
    ))
}

/// Checks the run's contract against the one the table records for the pipeline.
pub(crate) fn check(
    url: &str,
    configuration: &HashMap<String, String>,
    pipeline: &str,
    given: &Contract,
) -> Result<(), OpenError> {
    let Some(recorded) = Contract::recorded_in(configuration, pipeline) else {
        return Ok(());
    };
    let differences = recorded.differences(given);
    if differences.is_empty() {
        Ok(())
    } else {
        Err(OpenError::ContractMismatch {
            url: url.to_string(),
            pipeline: pipeline.to_string(),
            differences,
        })
    }
}

impl WindowTable {
    /// The contract the table records for `pipeline`, if any.
    pub fn contract(&self, pipeline: &str) -> Result<Option<Contract>, deltalake::DeltaTableError> {
        let snapshot = self.loaded.snapshot()?;
        Ok(Contract::recorded_in(
            snapshot.metadata().configuration(),
            pipeline,
        ))
    }

    /// Records the options' contract in the table if it lacks any of its terms (a table
    /// written before contracts, or a new pipeline of a table of several): one commit of a
    /// metadata action. Call it once the run's options are validated; a table created by
    /// [`WindowTable::open_or_create`] has its contract already and commits nothing.
    pub async fn record_contract(&mut self, options: &TableOptions) -> Result<(), OpenError> {
        let (Some(given), Some(pipeline)) = (&options.contract, &options.pipeline) else {
            return Ok(());
        };
        let url = self.url.clone();
        let delta = |source| OpenError::Delta {
            url: url.clone(),
            source,
        };
        self.catch_up().await.map_err(delta)?;
        let snapshot = self.loaded.snapshot().map_err(delta)?;
        let configuration = snapshot.metadata().configuration();
        let recorded = Contract::recorded_in(configuration, pipeline).unwrap_or_default();
        if recorded.covers(given) {
            return Ok(());
        }
        let extended = recorded.extended_by(given);
        debug_assert!(
            extended.covers(given),
            "E7: the contract recorded holds the options given"
        );
        let value = extended.to_property();
        let key = contract_key(pipeline);
        let metadata = snapshot
            .metadata()
            .clone()
            .add_config_key(key.clone(), value.clone())
            .map_err(|e| delta(e.into()))?;
        let operation = DeltaOperation::SetTableProperties {
            properties: HashMap::from([(key, value)]),
        };
        // A few retries: this metadata commit conflicts only with another metadata change.
        let properties = commit_properties(snapshot, Vec::new(), None, 3);
        let committed = CommitBuilder::from(properties)
            .with_actions(vec![Action::Metadata(metadata)])
            .build(Some(snapshot), self.loaded.log_store(), operation)
            .await;
        match committed {
            Ok(finalized) => {
                self.loaded.state = Some(finalized.snapshot());
                self.index = None;
                Ok(())
            }
            Err(e) => {
                // Another writer moved the table first (perhaps recording the same contract):
                // re-read it and check again.
                self.reload().await.map_err(delta)?;
                let snapshot = self.loaded.snapshot().map_err(delta)?;
                check(&url, snapshot.metadata().configuration(), pipeline, given)?;
                let now = Contract::recorded_in(snapshot.metadata().configuration(), pipeline)
                    .unwrap_or_default();
                if now.covers(given) {
                    Ok(())
                } else {
                    Err(OpenError::RecordContract { url, source: e })
                }
            }
        }
    }
}
