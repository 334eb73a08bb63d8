//! The store a URL names, as Delta builds it.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::logstore::{object_store_factories, StorageConfig};
use deltalake::DeltaTableError;
use object_store::ObjectStore;
use url::Url;

/// The store rooted at the root of `url`'s storage (not at the table or prefix), as Delta
/// would build it: the factory of the URL's scheme, with `storage_options`.
pub fn root_store(
    url: &Url,
    storage_options: &HashMap<String, String>,
) -> Result<Arc<dyn ObjectStore>, DeltaTableError> {
    let scheme = Url::parse(&format!("{}://", url.scheme()))
        .map_err(|_| DeltaTableError::InvalidTableLocation(url.to_string()))?;
    let config = StorageConfig::parse_options(storage_options.clone())?;
    let factory = object_store_factories()
        .get(&scheme)
        .map(|f| f.value().clone())
        .ok_or_else(|| DeltaTableError::InvalidTableLocation(url.to_string()))?;
    let (store, _path) = factory.parse_url_opts(url, &config)?;
    Ok(store)
}
