//! Reading back what a writer needs of the table: its files by address, its windows, the
//! resume offsets its `txn`s record, and the table again after another writer moved it.

use std::collections::HashMap;

use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::StructField;
use deltalake::{DeltaTable, DeltaTableError};
use futures::{StreamExt, TryStreamExt};
use sluice_window::{Address, Window};

use crate::table::files::active_files;
use crate::table::options::app_id;
use crate::table::schema::kernel_to_arrow;
use crate::table::window_table::{address_key, AddressIndex, PublishedFile, Share, WindowTable};

impl WindowTable {
    /// deltalake's view of the table at [`WindowTable::version`] (brought forward first if
    /// this writer's own commits left it behind), for reading the table: SQL, file lists,
    /// the log.
    pub async fn delta_table(&mut self) -> Result<&DeltaTable, DeltaTableError> {
        self.catch_up().await?;
        Ok(&self.loaded)
    }

    /// Re-reads the table state (after a conflict, or to see other writers' commits): its
    /// files, and its columns (another writer may have added some); a schema change not
    /// committed yet is dropped (the caller grows the schema again from what it re-reads).
    pub async fn reload(&mut self) -> Result<(), DeltaTableError> {
        self.index = None;
        self.schema_change = None;
        self.own_head = None;
        self.loaded.update_state().await?;
        self.file_schema = data_file_schema(self.loaded.snapshot()?)?;
        Ok(())
    }

    /// The committed resume offset of each partition (`txn` appId `<pipeline>/<partition>`).
    pub async fn resume_offsets(
        &mut self,
        pipeline: &str,
        partitions: &[String],
    ) -> Result<HashMap<String, i64>, DeltaTableError> {
        self.txns.clear();
        self.catch_up().await?;
        let mut offsets = HashMap::new();
        if let Some(version) = self.loaded.version() {
            // One replay of the log for every partition: delta-rs's lookup replays it once per
            // app id, which a source of many files (two txns each) would pay per file.
            let store = self.loaded.object_store();
            if let Some(all) = crate::log_txns::txns_if_complete(store.as_ref(), version).await {
                for p in partitions {
                    let app_id = app_id(pipeline, p);
                    if let Some(txn) = all.get(&app_id) {
                        self.txns.insert(app_id, txn.version);
                        offsets.insert(p.clone(), txn.version);
                    }
                }
                return Ok(offsets);
            }
        }
        let snapshot = self.loaded.snapshot()?;
        let log_store = self.loaded.log_store();
        let lookups = partitions.iter().map(|p| {
            let app_id = app_id(pipeline, p);
            let log_store = log_store.clone();
            async move {
                let v = snapshot
                    .transaction_version(log_store.as_ref(), &app_id)
                    .await?;
                Ok::<_, DeltaTableError>((p.clone(), app_id, v))
            }
        });
        let found: Vec<_> = futures::stream::iter(lookups)
            .buffered(8)
            .try_collect()
            .await?;
        for (partition, app_id, version) in found {
            if let Some(v) = version {
                self.txns.insert(app_id, v);
                offsets.insert(partition, v);
            }
        }
        Ok(offsets)
    }

    /// The address index, built from the table's file list on first use.
    async fn index(&mut self) -> Result<&mut AddressIndex, DeltaTableError> {
        if self.index.is_none() {
            self.catch_up().await?;
            let mut index: AddressIndex = HashMap::new();
            if self.loaded.version().is_some() {
                for file in active_files(&self.loaded).await? {
                    index
                        .entry(file.partition_values.clone())
                        .or_default()
                        .push(file);
                }
            }
            self.index = Some(index);
        }
        Ok(self.index.get_or_insert_with(HashMap::new))
    }

    /// The files currently at `address` (from the address index, built on first use).
    pub async fn files_at(
        &mut self,
        address: &Address,
    ) -> Result<Vec<PublishedFile>, DeltaTableError> {
        Ok(self
            .index()
            .await?
            .get(&address_key(address))
            .cloned()
            .unwrap_or_default())
    }

    /// Every window that has files in this writer's share of the table, in time order;
    /// addresses that are not windows of this table's layout and size are left out.
    pub async fn windows(&mut self) -> Result<Vec<Window>, DeltaTableError> {
        let share = self.share.clone();
        self.windows_in(&share).await
    }

    /// Every window that has files of this writer's pipeline in any shard, in time order: a
    /// sharded table's windows whole, as derived tables read them ([`WindowTable::windows`]
    /// for a table without shards).
    pub async fn windows_of_every_shard(&mut self) -> Result<Vec<Window>, DeltaTableError> {
        let every_shard = Share {
            shard: None,
            ..self.share.clone()
        };
        self.windows_in(&every_shard).await
    }

    /// Every window with files in `share` of the table, in time order.
    async fn windows_in(&mut self, share: &Share) -> Result<Vec<Window>, DeltaTableError> {
        let mut windows: Vec<Window> = self
            .index()
            .await?
            .iter()
            .filter(|(_, files)| !files.is_empty())
            .filter_map(|(key, _)| share.window_of(key))
            .collect();
        windows.sort();
        windows.dedup();
        Ok(windows)
    }
}

/// The columns of the table's data files: its schema without the partition columns.
pub(crate) fn data_file_schema(
    snapshot: &deltalake::table::state::DeltaTableState,
) -> Result<SchemaRef, DeltaTableError> {
    let partition_columns = snapshot.metadata().partition_columns().to_vec();
    let data_fields: Vec<StructField> = snapshot
        .schema()
        .fields()
        .filter(|f| !partition_columns.contains(f.name()))
        .cloned()
        .collect();
    kernel_to_arrow(data_fields).map_err(|e| DeltaTableError::Generic(e.to_string()))
}
