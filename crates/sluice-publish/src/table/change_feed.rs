//! The change data feed of a window swap, on a table with `delta.enableChangeDataFeed`: the
//! true difference, by row key, between the rows a commit removes from a window and the rows
//! it adds, written as Delta's `_change_data` files (column `_change_type`: `insert`,
//! `update_preimage`, `update_postimage`, `delete`). A window republished with its late rows
//! then shows a reader of the feed those rows, not every old row deleted and every new row
//! inserted; a republication that changes nothing shows nothing.
//!
//! Only a commit that removes files needs change files: readers take a commit without them
//! as its adds inserted and its removes deleted (a window's first publication, an expiry).
//! Once a commit has one, readers read only those, so every window of such a commit gets
//! one, even an empty one. MERGE commits (merge mode, mirrors, histories) get theirs from
//! deltalake's MERGE.
//!
//! The row key is the table's (`--key`), or the source position for a table without one.
//! Rows are compared whole (every column, the position columns too). Both sides of the
//! window are held in memory while they are compared: the price of the feed.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray, UInt32Array};
use deltalake::arrow::compute::{concat_batches, take};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::row::{RowConverter, SortField};
use deltalake::kernel::AddCDCFile;
use deltalake::parquet::arrow::ArrowWriter;
use deltalake::DeltaTableError;
use object_store::ObjectStoreExt;

use crate::table::commit::AddressChange;
use crate::table::error::OpenError;
use crate::table::options::{OFFSET_COLUMN, SOURCE_COLUMN};
use crate::table::window_table::{PublishedFile, WindowTable};

/// The column of a change file that says what the row is.
pub const CHANGE_TYPE_COLUMN: &str = "_change_type";

/// The table property that turns the feed on.
pub const CHANGE_FEED_PROPERTY: &str = "delta.enableChangeDataFeed";

/// Which side of the comparison a changed row comes from, and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Delete,
    Preimage,
    Postimage,
    Insert,
}

impl Change {
    fn name(self) -> &'static str {
        match self {
            Change::Delete => "delete",
            Change::Preimage => "update_preimage",
            Change::Postimage => "update_postimage",
            Change::Insert => "insert",
        }
    }
}

/// The schema of a change file of a table whose files are `schema`.
pub(crate) fn change_schema(schema: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(CHANGE_TYPE_COLUMN, DataType::Utf8, false));
    Arc::new(Schema::new(fields))
}

/// The rows that differ between `old` and `new` (one window's rows before and after a
/// commit, in files of `schema` or of an older schema it extends), each with its change
/// type, by the row key `key` (column names, dotted for a struct's member; empty: the source
/// position): a key only in `old` is a delete, only in `new` an insert, in both with other
/// values an update (its pre- and post-image); a row the same on both sides is no change.
pub(crate) fn difference(
    old: &[RecordBatch],
    new: &[RecordBatch],
    schema: &SchemaRef,
    key: &[String],
) -> Result<RecordBatch, ArrowError> {
    let old = whole(old, schema)?;
    let new = whole(new, schema)?;
    let position = [SOURCE_COLUMN.to_string(), OFFSET_COLUMN.to_string()];
    let key = if key.is_empty() { &position[..] } else { key };
    let keys = |b: &RecordBatch| -> Result<Vec<ArrayRef>, ArrowError> {
        key.iter().map(|k| column_at(b, k)).collect()
    };
    let (old_keys, new_keys) = match (keys(&old), keys(&new)) {
        (Ok(o), Ok(n)) => (o, n),
        // A key the files lack (a derived table's rows have no source position): the whole
        // row is its key, so a changed row is a delete and an insert.
        _ => (old.columns().to_vec(), new.columns().to_vec()),
    };
    let sort = |columns: &[ArrayRef]| {
        columns
            .iter()
            .map(|c| SortField::new(c.data_type().clone()))
            .collect::<Vec<_>>()
    };
    let key_rows = RowConverter::new(sort(&old_keys))?;
    let (old_k, new_k) = (
        key_rows.convert_columns(&old_keys)?,
        key_rows.convert_columns(&new_keys)?,
    );
    let value_rows = RowConverter::new(sort(old.columns()))?;
    let (old_v, new_v) = (
        value_rows.convert_columns(old.columns())?,
        value_rows.convert_columns(new.columns())?,
    );
    // Each key's rows on either side, keys in the order they first appear.
    let mut groups: HashMap<&[u8], (Vec<usize>, Vec<usize>)> = HashMap::new();
    let mut order: Vec<&[u8]> = Vec::new();
    for (side, rows) in [(0, &old_k), (1, &new_k)] {
        for i in 0..rows.num_rows() {
            let k = rows.row(i).data();
            let group = groups.entry(k).or_insert_with(|| {
                order.push(k);
                Default::default()
            });
            if side == 0 {
                &mut group.0
            } else {
                &mut group.1
            }
            .push(i);
        }
    }
    let mut from_old: Vec<(u32, Change)> = Vec::new();
    let mut from_new: Vec<(u32, Change)> = Vec::new();
    for k in order {
        let (mut before, mut after) = groups.remove(k).unwrap_or_default();
        // The same row on both sides is no change.
        before.retain(
            |&o| match after.iter().position(|&n| old_v.row(o) == new_v.row(n)) {
                Some(j) => {
                    after.remove(j);
                    false
                }
                None => true,
            },
        );
        let updates = before.len().min(after.len());
        for (n, &o) in before.iter().enumerate() {
            let change = if n < updates {
                Change::Preimage
            } else {
                Change::Delete
            };
            from_old.push((o as u32, change));
        }
        for (n, &i) in after.iter().enumerate() {
            let change = if n < updates {
                Change::Postimage
            } else {
                Change::Insert
            };
            from_new.push((i as u32, change));
        }
    }
    debug_assert_eq!(
        old.num_rows() - from_old.len() + from_new.len(),
        new.num_rows(),
        "E9 change feed: the old rows, less those changed away, plus those changed in, are the new rows"
    );
    let out = change_schema(schema);
    let batches = [
        picked(&old, &from_old, &out)?,
        picked(&new, &from_new, &out)?,
    ];
    concat_batches(&out, &batches)
}

/// The rows `picked` of `batch`, each with its change type, as `out`.
fn picked(
    batch: &RecordBatch,
    picked: &[(u32, Change)],
    out: &SchemaRef,
) -> Result<RecordBatch, ArrowError> {
    let indices = UInt32Array::from_iter_values(picked.iter().map(|(i, _)| *i));
    let mut columns = batch
        .columns()
        .iter()
        .map(|c| take(c, &indices, None))
        .collect::<Result<Vec<_>, _>>()?;
    let types = StringArray::from_iter_values(picked.iter().map(|(_, c)| c.name()));
    columns.push(Arc::new(types));
    RecordBatch::try_new(out.clone(), columns)
}

/// `batches` as one batch of `schema` (the columns of an older schema's files filled with
/// nulls).
fn whole(batches: &[RecordBatch], schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let aligned = sluice_stage::align_all(batches, schema)?;
    concat_batches(schema, &aligned)
}

/// The column `name` of `batch`: a top-level column, or a struct's member by its dotted path.
fn column_at(batch: &RecordBatch, name: &str) -> Result<ArrayRef, ArrowError> {
    if let Some(c) = batch.column_by_name(name) {
        return Ok(c.clone());
    }
    let mut parts = name.split('.');
    let first = parts.next().unwrap_or_default();
    let mut column = batch
        .column_by_name(first)
        .ok_or_else(|| ArrowError::SchemaError(format!("no key column {name:?}")))?
        .clone();
    for member in parts {
        let parent = column.as_struct_opt().ok_or_else(|| {
            ArrowError::SchemaError(format!("key {name:?}: {member} is not a struct member"))
        })?;
        column = parent
            .column_by_name(member)
            .ok_or_else(|| ArrowError::SchemaError(format!("no key column {name:?}")))?
            .clone();
    }
    debug_assert_eq!(
        column.len(),
        batch.num_rows(),
        "E9 change feed: a row key value per row"
    );
    Ok(column)
}

/// The rows of the Parquet files at `paths` in `store`, file after file.
async fn read_all(
    store: &dyn object_store::ObjectStore,
    paths: impl Iterator<Item = &str>,
) -> Result<Vec<RecordBatch>, sluice_stage::StageError> {
    let mut rows = Vec::new();
    for path in paths {
        rows.extend(sluice_stage::read_parquet(store, path).await?);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests;

/// Where change files go, under the table's root (never listed as data, never gc'd: its
/// name starts with `_`).
pub const CHANGE_DATA_DIR: &str = "_change_data";

impl WindowTable {
    /// Whether the table keeps a change data feed, as Delta's protocol asks a writer to
    /// decide: `delta.enableChangeDataFeed` set, on a protocol with the feature.
    pub fn change_feed(&self) -> bool {
        let Ok(snapshot) = self.loaded.snapshot() else {
            return false;
        };
        let on = snapshot
            .metadata()
            .configuration()
            .get(CHANGE_FEED_PROPERTY)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let protocol = snapshot.protocol();
        let writer = protocol.min_writer_version();
        let featured = || {
            protocol
                .writer_features()
                .is_some_and(|f| f.iter().any(|f| f.to_string() == "changeDataFeed"))
        };
        on && writer >= 4 && (writer < 7 || featured())
    }

    /// The row key the change data feed compares a window's rows by: the pipeline's
    /// (`--key`); empty: the source position.
    pub fn set_change_key(&mut self, key: Vec<String>) {
        self.change_key = key;
    }

    /// Turns the change data feed on, by a metadata commit (deltalake raises the protocol
    /// to one with the feature); nothing when it is on. Every commit after it that replaces
    /// rows writes change files.
    pub async fn enable_change_feed(&mut self) -> Result<(), OpenError> {
        if self.change_feed() {
            return Ok(());
        }
        let delta = self.open_error();
        self.catch_up().await.map_err(&delta)?;
        let on = HashMap::from([(CHANGE_FEED_PROPERTY.to_string(), "true".to_string())]);
        let table = self
            .loaded
            .clone()
            .set_tbl_properties()
            .with_properties(on)
            .await
            .map_err(delta)?;
        self.loaded = table;
        self.own_head = None;
        self.index = None;
        Ok(())
    }

    /// A failed Delta operation on the table, as the error of opening it (naming its URL).
    fn open_error(&self) -> impl Fn(DeltaTableError) -> OpenError {
        let url = self.url.clone();
        move |source| OpenError::Delta {
            url: url.clone(),
            source,
        }
    }

    /// The change file of one address's part of a commit: the difference between the rows
    /// of `existing` (the files the commit removes there) and of the files it adds, under
    /// `_change_data/<address>/`, named after the first added file (unique: staged names
    /// are).
    pub(crate) async fn change_file(
        &self,
        change: &AddressChange<'_>,
        existing: &[PublishedFile],
    ) -> Result<AddCDCFile, DeltaTableError> {
        let store = self.store();
        let generic = |e: String| DeltaTableError::Generic(format!("change data feed: {e}"));
        let old = read_all(store.as_ref(), existing.iter().map(|f| f.path.as_str())).await;
        let old = old.map_err(|e| generic(e.to_string()))?;
        let new = read_all(store.as_ref(), change.files.iter().map(|f| f.path.as_str())).await;
        let new = new.map_err(|e| generic(e.to_string()))?;
        let schema = self.staging_schema().clone();
        let key = self.change_key.clone();
        let encoded = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, String> {
            let batch = difference(&old, &new, &schema, &key).map_err(|e| e.to_string())?;
            let mut writer = ArrowWriter::try_new(Vec::new(), batch.schema(), None)
                .map_err(|e| e.to_string())?;
            writer.write(&batch).map_err(|e| e.to_string())?;
            writer.into_inner().map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| generic(e.to_string()))?
        .map_err(generic)?;
        let name = change
            .files
            .first()
            .and_then(|f| f.path.rsplit('/').next())
            .unwrap_or("empty.parquet");
        let path = format!(
            "{CHANGE_DATA_DIR}/{}/cdc-{name}",
            change.address.hive_path()
        );
        let size = encoded.len() as i64;
        let location =
            object_store::path::Path::parse(&path).map_err(|e| generic(e.to_string()))?;
        store
            .put(&location, encoded.into())
            .await
            .map_err(|source| DeltaTableError::ObjectStore { source })?;
        Ok(AddCDCFile {
            path,
            size,
            partition_values: change
                .address
                .pairs()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect(),
            data_change: false,
            tags: None,
        })
    }
}
