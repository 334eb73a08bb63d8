//! `sluice run --dry-run`: the whole run, with every store it opens behind an overlay that
//! keeps writes in memory (`sluice_publish::write_to_memory`), so its windows, dedupe, late
//! rewrites, MERGEs, dead letters and derived tables are the real ones; then what it would
//! have published, read back from the tables as the run left them in memory. Local
//! directories that opening a new table makes are removed again.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use sluice_ingest::RunSummary;
use sluice_publish::{Contract, OpenError, TableOptions, WindowListing};

use crate::args::RunSettings;
use crate::words::counted;

/// A dry run under way: what the tables held before it.
pub struct DryRun {
    before: Tables,
    /// Local directories that did not exist before the run, deepest first.
    made: MadeDirs,
    /// Notify targets the run did not notify.
    targets_skipped: usize,
}

/// The raw table and its pipeline's dead letters, as the run found or left them.
#[derive(Default)]
struct Tables {
    /// `None`: no table.
    version: Option<u64>,
    windows: Vec<WindowListing>,
    contract: Option<Contract>,
    /// The pipeline's dead letters by reason.
    dead_letters: BTreeMap<String, i64>,
}

impl DryRun {
    /// Puts every store behind the overlay and reads the tables as they are; leaves out the
    /// run's notify targets and metrics endpoint.
    pub async fn start(settings: &mut RunSettings) -> anyhow::Result<DryRun> {
        let made = MadeDirs::missing(settings);
        sluice_publish::write_to_memory();
        let targets_skipped = std::mem::take(&mut settings.notify).len();
        settings.output.metrics_addr = None;
        let before = Tables::read(settings)
            .await
            .context("reading the tables before the dry run")?;
        Ok(DryRun {
            before,
            made,
            targets_skipped,
        })
    }

    /// Prints what the run would have published (text or JSON), then exits as the run would.
    pub async fn finish(self, settings: &RunSettings, summary: &RunSummary) -> anyhow::Result<()> {
        let after = Tables::read(settings)
            .await
            .context("reading back what the dry run published")?;
        let report = Report::new(&self.before, &after, summary);
        if settings.output.json {
            println!("{}", report.json(settings, self.targets_skipped));
        } else {
            print!("{}", report.text(settings, self.targets_skipped));
        }
        drop(self.made);
        crate::warnings::warn_about_input(summary, settings)
    }
}

impl Tables {
    async fn read(settings: &RunSettings) -> anyhow::Result<Tables> {
        let storage = &settings.storage_options;
        let table = match sluice_publish::open_table(&settings.table, storage, None).await {
            Ok(table) => Some(table),
            Err(OpenError::NoTable(_)) => None,
            Err(e) => return Err(e).with_context(|| format!("opening {}", settings.table)),
        };
        // Without a table (none yet, or a run that lands no row), the dead letters of any.
        let id = table.as_ref().map(sluice_publish::table_id).transpose()?;
        let dead_letters = crate::status::dead_letters(&settings.dlq, storage, id.as_deref())
            .await?
            .and_then(|(mut by_pipeline, _)| by_pipeline.remove(&settings.pipeline))
            .unwrap_or_default();
        let Some(table) = table else {
            return Ok(Tables {
                dead_letters,
                ..Tables::default()
            });
        };
        let options = TableOptions {
            storage_options: storage.clone(),
            ..TableOptions::new(settings.table.clone())
        };
        Ok(Tables {
            version: table.version(),
            windows: sluice_publish::list_windows(&table).await?,
            contract: sluice_publish::recorded_contract(&options, &settings.pipeline).await?,
            dead_letters,
        })
    }
}

/// What the run would have done to the tables.
struct Report<'a> {
    table_existed: bool,
    contract: Option<&'a Contract>,
    /// The windows the run published, each with whether it replaces one the table had.
    windows: Vec<(&'a WindowListing, bool)>,
    dead_letters: BTreeMap<&'a str, i64>,
    summary: &'a RunSummary,
}

impl<'a> Report<'a> {
    fn new(before: &'a Tables, after: &'a Tables, summary: &'a RunSummary) -> Self {
        let published_after = |w: &&WindowListing| match (w.version, before.version) {
            (Some(v), Some(b)) => v > b,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let windows = after
            .windows
            .iter()
            .filter(published_after)
            .map(|w| {
                let existed = before.windows.iter().any(|b| b.address == w.address);
                (w, existed)
            })
            .collect();
        let dead_letters = after
            .dead_letters
            .iter()
            .map(|(reason, n)| {
                let had = before.dead_letters.get(reason).copied().unwrap_or(0);
                (reason.as_str(), n - had)
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        Report {
            table_existed: before.version.is_some(),
            contract: after.contract.as_ref(),
            windows,
            dead_letters,
            summary,
        }
    }

    fn contract_text(&self) -> String {
        self.contract.map_or("(none)".into(), |c| {
            c.terms()
                .filter(|(_, v)| !v.is_empty())
                .map(|(t, v)| format!("{t}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
    }

    fn text(&self, settings: &RunSettings, targets_skipped: usize) -> String {
        let s = self.summary;
        let mut out = String::new();
        let mut line = |l: String| {
            out.push_str(&l);
            out.push('\n');
        };
        line(format!(
            "sluice run --dry-run: nothing was written. A run would read {} ({:.1} MB): {} late, {} rejected",
            counted(s.rows - s.replayed, "record"),
            s.bytes as f64 / 1e6,
            s.late,
            s.rejected
        ));
        match (self.table_existed, self.contract) {
            (false, None) => line(format!(
                "create no table: no record would land in {}",
                settings.table
            )),
            (existed, _) => line(format!(
                "{} {}, pipeline {}: {}",
                if existed { "publish to" } else { "create" },
                settings.table,
                settings.pipeline,
                self.contract_text()
            )),
        }
        let rows: i64 = self.windows.iter().map(|(w, _)| w.rows).sum();
        line(format!(
            "publish {} ({} rows):",
            counted(self.windows.len() as u64, "window"),
            rows
        ));
        let width = self.windows.iter().map(|(w, _)| w.address.len()).max();
        for (w, replaces) in &self.windows {
            line(format!(
                "  {:<width$}  {:>10} rows  {}",
                w.address,
                w.rows,
                if *replaces {
                    "replacing the table's"
                } else {
                    "new"
                },
                width = width.unwrap_or(0)
            ));
        }
        if self.dead_letters.is_empty() {
            line(format!("dead-letter nothing (in {})", settings.dlq));
        } else {
            let reasons: Vec<String> = (self.dead_letters.iter())
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            line(format!(
                "dead-letter {} (in {}): {}",
                counted(self.dead_letters.values().sum::<i64>() as u64, "record"),
                settings.dlq,
                reasons.join(", ")
            ));
        }
        if !settings.derive.is_empty() {
            line(format!(
                "recompute {} of {}",
                counted(s.derived.published, "derived window"),
                counted(settings.derive.len() as u64, "derived table")
            ));
        }
        if targets_skipped > 0 {
            line(format!(
                "(not notified: {})",
                counted(targets_skipped as u64, "notify target")
            ));
        }
        out
    }

    fn json(&self, settings: &RunSettings, targets_skipped: usize) -> serde_json::Value {
        let s = self.summary;
        let contract: BTreeMap<&str, &str> = self.contract.map_or(BTreeMap::new(), |c| {
            c.terms().filter(|(_, v)| !v.is_empty()).collect()
        });
        serde_json::json!({
            "dry_run": true,
            "table": settings.table,
            "table_exists": self.table_existed,
            "pipeline": settings.pipeline,
            "contract": contract,
            "windows": self.windows.iter().map(|(w, replaces)| serde_json::json!({
                "address": w.address,
                "rows": w.rows,
                "files": w.files,
                "replaces": replaces,
            })).collect::<Vec<_>>(),
            "dead_letter_table": settings.dlq,
            "dead_letters": self.dead_letters,
            "records": s.rows - s.replayed,
            "late": s.late,
            "rejected": s.rejected,
            "bytes": s.bytes,
            "derived_windows_published": s.derived.published,
            "notify_targets_skipped": targets_skipped,
        })
    }
}

/// The local directories of the run's tables that do not exist before it (opening a new
/// table makes its directory, and its parents): removed when dropped, each if still empty.
struct MadeDirs(Vec<PathBuf>);

impl MadeDirs {
    fn missing(settings: &RunSettings) -> MadeDirs {
        let mut locations = vec![&settings.table, &settings.dlq, &settings.tombstones];
        locations.extend(settings.derive.iter().map(|d| &d.table));
        let mut missing = Vec::new();
        for location in locations {
            let Some(mut dir) = sluice_publish::local_path(location) else {
                continue;
            };
            while !dir.as_os_str().is_empty() && !dir.exists() {
                if !missing.contains(&dir) {
                    missing.push(dir.clone());
                }
                if !dir.pop() {
                    break;
                }
            }
        }
        // Deepest first: a parent is empty once its children are gone.
        missing.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        MadeDirs(missing)
    }
}

impl Drop for MadeDirs {
    fn drop(&mut self) {
        for dir in &self.0 {
            // Fails, and so keeps it, unless the directory is empty.
            let _ = std::fs::remove_dir(dir);
        }
    }
}
