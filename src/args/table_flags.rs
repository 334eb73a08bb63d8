//! The table a reporting or maintenance command works on (`status`, `windows`, `verify`,
//! `dead-letters`, `compact`, `expire`, `vacuum`, `gc`, `query`): `--table`, or the table of
//! a run's config file (`--config`), whose storage options, dead-letter and tombstone tables
//! and pipeline apply where no flag gives them. Flags win, as in `sluice run`.

use std::path::PathBuf;

use clap::Args;

use super::run_args::RunArgs;
use crate::exit::usage;

#[derive(Debug, Clone, Default, Args)]
pub struct TableFlags {
    /// The table. [default: the table of --config]
    #[arg(long, value_name = "PATH")]
    pub table: Option<String>,
    /// A run's config file (docs/cli.md, "Options from a config file"): its table, storage options,
    /// dead-letter and tombstone tables and pipeline, where no flag gives them.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Object store option, KEY=VALUE (repeatable). [default: the config file's]
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    pub storage_options: Vec<String>,
}

/// The table a command works on, and the run options of its config file (all unset without
/// one).
#[derive(Debug, Clone)]
pub struct TableTarget {
    pub table: String,
    pub storage_options: Vec<String>,
    pub file: RunArgs,
}

impl TableFlags {
    /// The table, from `--table` or the config file; a usage error (exit 2) when neither
    /// names one.
    pub fn resolve(&self) -> anyhow::Result<TableTarget> {
        let (table, storage_options, file) = self.resolve_optional()?;
        let table = table.ok_or_else(|| match &self.config {
            Some(path) => usage(format!(
                "--config {}: the file names no table; give --table",
                path.display()
            )),
            None => usage("--table: give the table, or --config FILE (a run's config file)"),
        })?;
        Ok(TableTarget {
            table,
            storage_options,
            file,
        })
    }

    /// Like `resolve`, for a command whose table is optional (`expire` of dead letters only).
    pub fn resolve_optional(&self) -> anyhow::Result<(Option<String>, Vec<String>, RunArgs)> {
        let file = match &self.config {
            Some(path) => super::config::read_file(path)?,
            None => RunArgs::default(),
        };
        let table = self.table.clone().or_else(|| file.table.clone());
        let storage_options = if self.storage_options.is_empty() {
            file.storage_options.clone()
        } else {
            self.storage_options.clone()
        };
        Ok((table, storage_options, file))
    }
}

/// The tables of config file `path` for `sluice query`: its table, named after its last
/// segment, and its derived tables by their names; and its storage options.
pub fn config_tables(
    path: &std::path::Path,
) -> anyhow::Result<(Vec<sluice_sql::TableRef>, Vec<String>)> {
    let file = super::config::read_file(path)?;
    let mut tables = Vec::new();
    if let Some(table) = &file.table {
        tables.push(sluice_sql::TableRef::parse(table).ok_or_else(|| {
            usage(format!(
                "--config {}: cannot name its table {table:?} in SQL; give --table NAME={table}",
                path.display()
            ))
        })?);
    }
    for d in &file.derive {
        tables.push(sluice_sql::TableRef {
            name: d.name.clone(),
            location: d.table.clone(),
            version: None,
        });
    }
    if tables.is_empty() {
        return Err(usage(format!(
            "--config {}: the file names no table; give --table",
            path.display()
        )));
    }
    Ok((tables, file.storage_options))
}
