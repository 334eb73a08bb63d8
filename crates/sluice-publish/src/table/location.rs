//! Where a table is and how it is reached: its URL, its store (through the retry and fault
//! seams), and the read-only opens of readers, which never create anything at a location.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::{DeltaTable, DeltaTableBuilder, DeltaTableError};
use object_store::{ObjectStore, ObjectStoreExt};
use url::Url;

use sluice_store::{root_store, LocalListing, RetryStore};

use crate::table::error::OpenError;
use crate::table::options::TableOptions;

/// The table at `options.location`, not yet loaded, reaching its store through the seam
/// (`options.store`, or the store the location names) and the retries of `options.retry`.
pub(crate) fn unloaded_table(options: &TableOptions) -> Result<(DeltaTable, Url), OpenError> {
    let url = table_url(&options.location)?;
    let delta = |source| OpenError::Delta {
        url: url.to_string(),
        source,
    };
    let root = match &options.store {
        Some(store) => store.clone(),
        None => {
            let store = root_store(&url, &options.storage_options).map_err(delta)?;
            // Only object_store's local file system rooted at `/` (what `file://` tables get).
            if store.to_string() == "LocalFileSystem(file:///)" {
                Arc::new(LocalListing::new(store))
            } else {
                store
            }
        }
    };
    let root: Arc<dyn ObjectStore> = Arc::new(RetryStore::new(root, options.retry));
    let table = DeltaTableBuilder::from_url(url.clone())
        .map_err(delta)?
        .with_storage_options(options.storage_options.clone())
        .with_storage_backend(root, url.clone())
        .build()
        .map_err(delta)?;
    Ok((table, url))
}

/// Turns a path or URL into a table URL (creating local directories).
pub fn table_url(location: &str) -> Result<Url, OpenError> {
    deltalake::ensure_table_uri(location).map_err(|_| OpenError::Location(location.to_string()))
}

/// Whether `location` names a local directory that does not exist (no table can be there,
/// and asking the store would create the directory).
pub(crate) fn missing_local_dir(location: &str) -> bool {
    local_path(location).is_some_and(|p| !p.exists())
}

/// The local directory of a table that does not exist yet, which opening it creates: removed
/// again when dropped (if still empty), unless [`MadeDir::keep`] says the open succeeded.
pub(crate) struct MadeDir(Option<std::path::PathBuf>);

impl MadeDir {
    pub(crate) fn before_opening(options: &TableOptions) -> MadeDir {
        let missing = options.store.is_none() && missing_local_dir(&options.location);
        MadeDir(local_path(&options.location).filter(|_| missing))
    }

    pub(crate) fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for MadeDir {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            // Fails, and so keeps it, unless the directory is empty.
            let _ = std::fs::remove_dir(path);
        }
    }
}

/// The local path `location` names; `None` for an object store URL.
pub fn local_path(location: &str) -> Option<std::path::PathBuf> {
    match Url::parse(location) {
        Ok(url) if url.scheme() == "file" => url.to_file_path().ok(),
        // A one-letter scheme is a Windows drive.
        Ok(url) if url.scheme().len() > 1 => None,
        _ => Some(std::path::PathBuf::from(location)),
    }
}

/// Opens an existing table (for queries and listings), at `version` or the latest. Creates
/// nothing: a location without a table is [`OpenError::NoTable`], a version past the latest
/// [`OpenError::NoVersion`].
pub async fn open_table(
    location: &str,
    storage_options: &HashMap<String, String>,
    version: Option<u64>,
) -> Result<DeltaTable, OpenError> {
    if missing_local_dir(location) {
        return Err(OpenError::NoTable(location.to_string()));
    }
    let url = table_url(location)?;
    let delta = |source| OpenError::Delta {
        url: url.to_string(),
        source,
    };
    let mut table = DeltaTableBuilder::from_url(url.clone())
        .map_err(delta)?
        .with_storage_options(storage_options.clone())
        .build()
        .map_err(delta)?;
    if !table_exists(&table).await.map_err(delta)? {
        return Err(OpenError::NoTable(location.to_string()));
    }
    table.load().await.map_err(delta)?;
    if let Some(v) = version {
        let latest = table.version().unwrap_or(0);
        if v > latest {
            return Err(OpenError::NoVersion {
                url: url.to_string(),
                version: v,
                latest,
            });
        }
        if v < latest {
            table.load_version(v).await.map_err(delta)?;
        }
    }
    Ok(table)
}

/// Opens an existing table through `options`' store seam and retries (a reader that follows
/// a table beside its writer: transient store failures are retried as the writer's are), at
/// `version` or the latest. Creates nothing, like [`open_table`].
pub async fn open_table_with(
    options: &TableOptions,
    version: Option<u64>,
) -> Result<DeltaTable, OpenError> {
    let Some(mut table) = open_table_if_exists(options).await? else {
        return Err(OpenError::NoTable(options.location.clone()));
    };
    if let Some(v) = version {
        let url = table.table_url().to_string();
        let latest = table.version().unwrap_or(0);
        if v > latest {
            return Err(OpenError::NoVersion {
                url,
                version: v,
                latest,
            });
        }
        if v < latest {
            table
                .load_version(v)
                .await
                .map_err(|source| OpenError::Delta { url, source })?;
        }
    }
    Ok(table)
}

/// The table at `options.location` (through its store seam), loaded; `None` when there is
/// none. Creates nothing.
pub(crate) async fn open_table_if_exists(
    options: &TableOptions,
) -> Result<Option<DeltaTable>, OpenError> {
    if options.store.is_none() && missing_local_dir(&options.location) {
        return Ok(None);
    }
    let (mut table, url) = unloaded_table(options)?;
    let delta = |source| OpenError::Delta {
        url: url.to_string(),
        source,
    };
    if !table_exists(&table).await.map_err(delta)? {
        return Ok(None);
    }
    table.load().await.map_err(delta)?;
    Ok(Some(table))
}

/// The URL a table at `location` has, without creating anything: for a local directory that
/// does not exist yet, its absolute path. (An existing directory's URL is its canonical path,
/// as Delta opens it.)
pub fn location_url(location: &str) -> Result<Url, OpenError> {
    if !missing_local_dir(location) {
        return table_url(location);
    }
    let path = match Url::parse(location) {
        Ok(url) if url.scheme() == "file" => url
            .to_file_path()
            .map_err(|()| OpenError::Location(location.to_string()))?,
        _ => std::path::PathBuf::from(location),
    };
    let absolute =
        std::path::absolute(&path).map_err(|_| OpenError::Location(location.to_string()))?;
    Url::from_directory_path(absolute).map_err(|()| OpenError::Location(location.to_string()))
}

/// Whether a Delta table is at `table`'s location, in one or two `HEAD` requests for nearly
/// every table: its `_last_checkpoint` (any table past its first checkpoint), else its first
/// commit (a young table). Only a log with neither (its first commits cleaned up and no
/// `_last_checkpoint`, which no writer leaves) is listed, as deltalake's own check always
/// does: `verify_deltatable_existence` lists `_delta_log/`, whose first page on S3 is a
/// thousand keys, on every open, a cost growing with the table's history.
pub(crate) async fn table_exists(table: &DeltaTable) -> Result<bool, DeltaTableError> {
    let store = table.log_store().object_store(None);
    for probe in [
        "_delta_log/_last_checkpoint",
        "_delta_log/00000000000000000000.json",
    ] {
        match store.head(&object_store::path::Path::from(probe)).await {
            Ok(_) => return Ok(true),
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    table.verify_deltatable_existence().await
}

impl crate::table::window_table::WindowTable {
    /// Removes the table if this writer created it and nothing was written to it since: its
    /// location holds only the creating commit (version 0). A run that landed no row leaves
    /// no table behind, so the options it recorded (its contract) bind no later run. Returns
    /// whether it was removed. A writer that commits to the new table between the listing
    /// and the removal would lose its commit's base; a table another run is creating at the
    /// same instant is the only such case.
    pub async fn remove_if_unwritten(&self) -> Result<bool, DeltaTableError> {
        if !self.created {
            return Ok(false);
        }
        let store = self.store();
        let first = object_store::path::Path::from("_delta_log/00000000000000000000.json");
        let mut listed = store.list(None);
        let mut only_first = false;
        while let Some(meta) = futures::StreamExt::next(&mut listed).await {
            let meta = meta.map_err(DeltaTableError::from)?;
            if meta.location != first {
                return Ok(false);
            }
            only_first = true;
        }
        if !only_first {
            return Ok(false);
        }
        store.delete(&first).await.map_err(DeltaTableError::from)?;
        if let Some(dir) = local_path(&self.url) {
            // Each fails, and so keeps it, unless the directory is empty.
            let _ = std::fs::remove_dir(dir.join("_delta_log"));
            let _ = std::fs::remove_dir(dir);
        }
        Ok(true)
    }
}

/// Opens the table at `options.location`, or creates it with `schema` (no partitions); an
/// existing table is opened as it is. Returns the table, loaded, and its URL.
pub(crate) async fn open_or_create_table(
    options: &TableOptions,
    schema: &deltalake::arrow::datatypes::SchemaRef,
) -> Result<(DeltaTable, String), OpenError> {
    use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
    use deltalake::kernel::transaction::CommitProperties;
    use deltalake::kernel::StructType;
    use deltalake::operations::create::CreateBuilder;

    let (mut table, url) = unloaded_table(options)?;
    let url_text = url.to_string();
    let delta = |source| OpenError::Delta {
        url: url_text.clone(),
        source,
    };
    if table_exists(&table).await.map_err(delta)? {
        table.load().await.map_err(delta)?;
        return Ok((table, url_text));
    }
    let kernel: StructType = schema
        .as_ref()
        .try_into_kernel()
        .map_err(|e| OpenError::Schema(e.to_string()))?;
    let created = CreateBuilder::new()
        .with_log_store(table.log_store())
        .with_columns(kernel.fields().cloned())
        // Version 0 or nothing: deltalake retries a create that lost its race as a commit at
        // the next version (a second CREATE, with a new table id).
        .with_commit_properties(CommitProperties::default().with_max_retries(0))
        .await;
    let table = match created {
        Ok(t) => t,
        // Another writer created it first: use theirs.
        Err(e) => {
            if !table_exists(&table).await.map_err(delta)? {
                return Err(delta(e));
            }
            table.load().await.map_err(delta)?;
            table
        }
    };
    Ok((table, url_text))
}

/// Makes `ctx` read `table`'s files through the table's own store (its retries, and the
/// overlay of a dry run), not through the store DataFusion's registry holds for the URL's
/// scheme (for `file://`, a plain local file system of its own), which deltalake's table
/// provider leaves in place.
pub fn read_through_table_store(
    ctx: &deltalake::datafusion::prelude::SessionContext,
    table: &DeltaTable,
) {
    let log_store = table.log_store();
    ctx.runtime_env()
        .register_object_store(log_store.root_url(), log_store.root_object_store(None));
}
