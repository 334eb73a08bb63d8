//! Reaching object stores: the one job of this crate.
//!
//! Every table and every object-store source of sluice is reached through a store built here:
//! - [`root_store`]: the store a URL names, rooted at the root of its storage (the bucket), as
//!   Delta builds it (the same schemes, option keys and environment);
//! - [`check_store_options`]: the options given for it (`--storage-option`,
//!   `--source-option`) checked before anything is opened, a misspelt key named with the
//!   nearest one the store takes;
//! - [`RetryStore`]: every operation retried with bounded, jittered backoff when its failure
//!   may be transient ([`is_transient`]), a retried create-only put that landed recognised as
//!   its own;
//! - [`LocalListing`]: a local file system whose log directory is listed after an offset
//!   without converting every name (a commit at version 10,000 costs what one at 10 does).
//!
//! The table side (sluice-publish) wraps a table's store with these; the source side
//! (sluice-source's `source_store`) a source prefix's.

mod local;
mod options;
mod retry;
mod root;

pub use local::LocalListing;
pub use options::{check_store_options, StoreKind, StoreOptionError};
pub use retry::{is_transient, RetryPolicy, RetryStore};
pub use root::root_store;
