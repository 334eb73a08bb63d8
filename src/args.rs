//! Options of `sluice run`: flags, a TOML config file (`--config`, same names in snake_case),
//! and their validation. Flags win over the file; the file wins over defaults.
//!
//! [`RunArgs`] holds the flags as given (`run_args`); each group of them resolves itself
//! (`source_flags`, `target_flags`, `time_flags`, `row_flags`, `flow_flags`, `tuning_flags`,
//! `output_flags`), and [`RunSettings`] puts the resolved groups together (`run_settings`).
//! The other commands' `--table` flags are in `table_flags`.

mod config;
mod derive_tables;
mod expect_rules;
mod flow_flags;
mod notify_targets;
mod output_flags;
mod row_flags;
mod run_args;
mod run_settings;
mod source_flags;
mod store_flags;
pub mod table_flags;
mod target_flags;
mod time_flags;
mod tuning_flags;
mod values;

pub(crate) use notify_targets::timeout_ms;
pub use run_args::RunArgs;
pub use run_settings::RunSettings;
pub use source_flags::KafkaSettings;
pub(crate) use store_flags::{
    check_store_options_at, default_dlq_location, default_tombstones_location, store_options,
};
pub(crate) use values::duration_or_default;
pub use values::source_url;
pub use values::{parse_bytes, parse_range_of};

#[cfg(test)]
mod tests;
