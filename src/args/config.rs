//! The config file (`--config`, the flags' names in snake_case): merged under the flags,
//! its paths relative to the file; and the options a table records (its contract), filled in
//! where neither a flag nor the file gave them.

use std::path::PathBuf;

use super::run_args::RunArgs;
use crate::exit::usage;

impl RunArgs {
    /// Fills options not given as flags from the config file.
    pub fn merge_config(self) -> anyhow::Result<RunArgs> {
        let mut merged = self.merge_config_file()?;
        super::derive_tables::apply_flags(
            &mut merged.derive,
            &merged.derive_sql,
            &merged.derive_key,
        )?;
        // Applied: a second merge (commands that merge before planning) changes nothing.
        merged.notify_urls.clear();
        merged.notify_commands.clear();
        merged.derive_tables.clear();
        merged.derive_sql.clear();
        merged.derive_key.clear();
        Ok(merged)
    }

    fn merge_config_file(mut self) -> anyhow::Result<RunArgs> {
        // Derived tables: those given as flags replace the file's of the same name.
        for d in super::derive_tables::tables_from_flags(&self.derive_tables)? {
            match self.derive.iter_mut().find(|f| f.name == d.name) {
                Some(f) => *f = d,
                None => self.derive.push(d),
            }
        }
        // Notify targets: those given as flags replace the file's of the same name.
        for t in
            super::notify_targets::targets_from_flags(&self.notify_urls, &self.notify_commands)?
        {
            match self.notify.iter_mut().find(|f| f.name == t.name) {
                Some(f) => *f = t,
                None => self.notify.push(t),
            }
        }
        let Some(path) = self.config.clone() else {
            return Ok(self);
        };
        let file = read_file(&path)?;
        self.check_derived_tables_of(&file)?;
        self.fill_from(file);
        Ok(self)
    }

    /// A `--table` other than the config file's leaves the file's derived tables without a
    /// table to be computed from, unless the flags name their locations.
    fn check_derived_tables_of(&self, file: &RunArgs) -> anyhow::Result<()> {
        if let (Some(flag), Some(in_file)) = (&self.table, &file.table) {
            let orphans: Vec<String> = file
                .derive
                .iter()
                .filter(|d| !self.derive.iter().any(|f| f.name == d.name))
                .map(|d| format!("{} ({})", d.name, d.table))
                .collect();
            if flag != in_file && !orphans.is_empty() {
                return Err(usage(format!(
                    "--table {flag}: the config file's derived tables {} are computed from its table {in_file}; with another --table, give their locations too (--derive NAME=LOCATION), or use a config file of its own",
                    orphans.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// Options the flags left out, taken from the config file.
    fn fill_from(&mut self, file: RunArgs) {
        macro_rules! fill {
            ($($f:ident),*) => { $( if self.$f.is_none() { self.$f = file.$f; } )* };
        }
        fill!(
            source,
            input_format,
            listing,
            csv_delimiter,
            csv_quote,
            csv_escape,
            csv_header,
            schema_registry,
            kafka_columns,
            kafka_bytes,
            brokers,
            group,
            start,
            max_events,
            table,
            pipeline,
            pipelines,
            time_field,
            time_format,
            time_zone,
            time_column,
            max_time_ahead,
            time_jump_events,
            schema_evolution,
            columns_max,
            window,
            window_zone,
            address,
            lateness,
            key,
            sequence_field,
            delete_when,
            scd,
            envelope,
            tombstones,
            mode,
            merge_scope,
            schema,
            infer_lines,
            dlq,
            late,
            max_rewrite_age,
            late_batch,
            poll_interval,
            idle_timeout,
            until_idle,
            flush_bytes_max,
            chunk_bytes,
            decode_threads,
            compression,
            checkpoint_interval,
            store_attempts_max,
            restarts_max,
            group_windows_max,
            compact_files_min,
            retain,
            attempt,
            max_reject_ratio,
            format,
            metrics_addr,
            notify_drain
        );
        if self.storage_options.is_empty() {
            self.storage_options = file.storage_options;
        }
        if self.kafka_options.is_empty() {
            self.kafka_options = file.kafka_options;
        }
        self.follow |= file.follow;
        self.no_expectations |= file.no_expectations;
        self.change_feed |= file.change_feed;
        (self.expect, self.expect_or_drop, self.expect_or_fail) =
            (file.expect, file.expect_or_drop, file.expect_or_fail);
        for t in file.notify {
            if !self.notify.iter().any(|f| f.name == t.name) {
                self.notify.push(t);
            }
        }
        for d in file.derive {
            if !self.derive.iter().any(|f| f.name == d.name) {
                self.derive.push(d);
            }
        }
    }
}

/// The options of config file `path`, its relative paths made relative to the file (as in
/// any config format that names files: the pipeline runs the same from any working
/// directory); a usage error naming the line and column of what it cannot take.
pub(super) fn read_file(path: &std::path::Path) -> anyhow::Result<RunArgs> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("--config {}: cannot read it: {e}", path.display())))?;
    let mut file: RunArgs = toml::from_str(&text).map_err(|e| {
        let at = e
            .span()
            .map(|span| line_and_column(&text, span.start))
            .map(|(line, column)| format!("line {line}, column {column}: "))
            .unwrap_or_default();
        usage(format!(
            "--config {}: {at}{}",
            path.display(),
            e.message().trim()
        ))
    })?;
    file.resolve_paths(path.parent().unwrap_or(std::path::Path::new("")));
    Ok(file)
}

impl RunArgs {
    /// Makes the file's relative paths (source, table, dead-letter, tombstone and derived
    /// tables, schema) relative to `dir`, the config file's directory.
    fn resolve_paths(&mut self, dir: &std::path::Path) {
        if let Some(source) = &self.source {
            if let Some(path) = source.strip_prefix("ndjson:") {
                self.source = Some(format!("ndjson:{}", relative_to(dir, path)));
            }
        }
        for location in [&mut self.table, &mut self.dlq, &mut self.tombstones]
            .into_iter()
            .flatten()
        {
            *location = relative_to(dir, location);
        }
        if let Some(schema) = &self.schema {
            self.schema = Some(PathBuf::from(relative_to(dir, &schema.to_string_lossy())));
        }
        for d in &mut self.derive {
            d.table = relative_to(dir, &d.table);
        }
    }

    /// Fills the options that decide what the table holds, where neither a flag nor the
    /// config file gave them, from the contract the table records for the pipeline: a table
    /// keeps being written the way it was created. (A given option that disagrees is refused
    /// when the table is opened.)
    pub fn adopt(&mut self, recorded: &sluice_publish::Contract) {
        use sluice_ingest::terms;
        // The address layout follows the window size unless given: a run that gives another
        // window size is then refused for its window size, not for the old layout.
        let window_given = self.window.is_some();
        // Likewise the merge scope follows the mode.
        let mode_given = self.mode.is_some();
        let fields: [(&str, &mut Option<String>); 14] = [
            (terms::TIME_FIELD, &mut self.time_field),
            (terms::TIME_COLUMN, &mut self.time_column),
            (terms::TIME_FORMAT, &mut self.time_format),
            (terms::TIME_ZONE, &mut self.time_zone),
            (terms::WINDOW, &mut self.window),
            (terms::ADDRESS, &mut self.address),
            (terms::KEY, &mut self.key),
            (terms::SEQUENCE_FIELD, &mut self.sequence_field),
            (terms::DELETE_WHEN, &mut self.delete_when),
            (terms::SCD, &mut self.scd),
            (terms::ENVELOPE, &mut self.envelope),
            (terms::MODE, &mut self.mode),
            (terms::MERGE_SCOPE, &mut self.merge_scope),
            (terms::LATE, &mut self.late),
        ];
        for (term, field) in fields {
            match recorded.get(term) {
                // Empty: no key, no merge scope (a swap table).
                Some("") | None => {}
                Some(_) if term == terms::ADDRESS && window_given => {}
                Some(_) if term == terms::MERGE_SCOPE && mode_given => {}
                Some(value) if field.is_none() => *field = Some(value.to_string()),
                Some(_) => {}
            }
        }
        if !self.gives_expectations() {
            self.expect_recorded = recorded.get(terms::EXPECT).map(String::from);
        }
        // A recorded window carries its zone (`1h in America/New_York`); a zone given on its
        // own replaces it, so that a different one is refused as a different window.
        if !window_given && self.window_zone.is_some() {
            if let Some((size, _zone)) = self.window.as_deref().and_then(|w| w.split_once(" in ")) {
                self.window = Some(size.to_string());
            }
        }
    }
}

/// `location` relative to `dir` when it is a relative local path; URLs and absolute paths as
/// they are.
fn relative_to(dir: &std::path::Path, location: &str) -> String {
    let is_url = location
        .split_once("://")
        .is_some_and(|(scheme, _)| scheme.len() > 1);
    if is_url || std::path::Path::new(location).is_absolute() || dir.as_os_str().is_empty() {
        location.to_string()
    } else {
        dir.join(location).to_string_lossy().into_owned()
    }
}

/// 1-based line and column of byte `at` in `text`.
pub(super) fn line_and_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}
