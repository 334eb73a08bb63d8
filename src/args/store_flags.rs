//! Object-store options (`--storage-option`, `--source-option`) checked before anything is
//! opened, and the default locations of a table's companions.

use std::collections::HashMap;

use super::values::key_value;
use crate::exit::usage;

/// `KEY=VALUE` pairs of `flag` for the object store at `location`, checked against what the
/// store takes (a misspelt key, a plain-HTTP S3 endpoint without allow_http: exit 2) before
/// anything is opened. A local path takes any (it has no store options).
pub(crate) fn store_options(
    flag: &str,
    location: &str,
    kvs: &[String],
) -> anyhow::Result<HashMap<String, String>> {
    let mut options = HashMap::new();
    for kv in kvs {
        let (k, v) = key_value(flag, kv)?;
        options.insert(k, v);
    }
    check_store_options_at(flag, location, &options)?;
    Ok(options)
}

/// Checks `options` (given by `flag`) against the store at `location`; see [`store_options`].
pub(crate) fn check_store_options_at(
    flag: &str,
    location: &str,
    options: &HashMap<String, String>,
) -> anyhow::Result<()> {
    if let Ok(url) = url::Url::parse(location) {
        sluice_store::check_store_options(&url, options, &|k| std::env::var(k).ok())
            .map_err(|e| usage(format!("{flag}: {e}")))?;
    }
    Ok(())
}

/// The tombstone table beside `table` (`--tombstones`' default).
pub(crate) fn default_tombstones_location(table: &str) -> String {
    format!("{}_tombstones", table.trim_end_matches('/'))
}

/// The dead-letter table beside `table` (`--dlq`'s default).
pub(crate) fn default_dlq_location(table: &str) -> String {
    format!("{}_dlq", table.trim_end_matches('/'))
}
