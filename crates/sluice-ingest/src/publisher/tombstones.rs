//! Deletes of a table-scope merge (`--delete-when`): which offered changes are deletes, which
//! a tombstone buries, and the new tombstones, recorded before the data commit (see
//! [`sluice_publish::TombstoneTable`] for why that order).

use deltalake::arrow::array::{BooleanArray, RecordBatch, UInt32Array};
use deltalake::arrow::compute::take_record_batch;
use sluice_publish::{TombstoneTable, Tombstones};

use super::Publisher;
use crate::config::{DeleteRule, IngestError};
use crate::dedupe::{columns_named, KeySpec};
use crate::deletes::{bury, event_times_of, field_types, flag_array, tombstone_values};

impl Publisher {
    /// The rows of `changing` (unique by key, each above its key's row in the table) that
    /// change the table once the tombstones of their keys are read, with the flags of those
    /// that are deletes. Records the new tombstones first. Without deletes, `changing` as it is.
    pub(super) async fn apply_tombstones(
        &mut self,
        key: &KeySpec,
        changing: RecordBatch,
    ) -> Result<(RecordBatch, Option<BooleanArray>), IngestError> {
        let Some(rule) = &self.policy.deletes else {
            return Ok((changing, None));
        };
        if changing.num_rows() == 0 {
            return Ok((changing, None));
        }
        let deletes = rule.when.evaluate(&changing)?;
        let pipeline = self.policy.pipeline.clone();
        let tombstones = self.tombstone_table(key).await?;
        let keys = columns_named(&changing, &key.columns)?;
        let held = tombstones.of_keys(&keys).await?;
        let buried = bury(&changing, &deletes, &held, key)?;
        if !buried.new_tombstones.is_empty() {
            let rows = &buried.new_tombstones;
            tombstones
                .append(Tombstones {
                    pipeline,
                    values: tombstone_values(&changing, rows, key)?,
                    deleted_at: event_times_of(&changing, rows, key)?,
                })
                .await?;
        }
        let flags = flag_array(buried.kept.iter().map(|i| deletes[*i as usize]));
        let kept = take_record_batch(&changing, &UInt32Array::from(buried.kept))?;
        Ok((kept, Some(flags)))
    }

    /// The tombstone table of the run's [`DeleteRule`], opened (or created) on first use.
    pub(super) async fn tombstone_table(
        &mut self,
        key: &KeySpec,
    ) -> Result<&mut TombstoneTable, IngestError> {
        let table = match (self.tombstones.take(), &self.policy.deletes) {
            (Some(table), _) => table,
            (None, Some(DeleteRule { tombstones, .. })) => {
                let keys = field_types(&self.file_schema, &key.columns)?;
                let sequence = field_types(&self.file_schema, &key.sequence)?;
                TombstoneTable::open_or_create(tombstones, &keys, &sequence).await?
            }
            (None, None) => unreachable!("tombstones are read only in a run with deletes"),
        };
        Ok(self.tombstones.insert(table))
    }
}
