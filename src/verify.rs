//! `sluice verify`: checks a table's log and files against what sluice promises (docs/cli.md
//! lists the checks); exit 4 when a promise is broken.

use anyhow::Context;
use clap::Args;
use sluice_publish::OpenError;
use sluice_verify::{Report, Verify, EXAMPLES_PER_CHECK_DEFAULT};

use crate::args::table_flags::TableFlags;
use crate::exit::{usage, Exit};
use crate::report::parse_storage_options;

#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub target: TableFlags,
    /// Its tombstone table, for a mirror or history with deletes. [default: the table's
    /// location with _tombstones appended, when there is a table there]
    #[arg(long)]
    pub tombstones: Option<String>,
    /// Findings shown per check about rows; the rest are counted.
    #[arg(long, default_value_t = EXAMPLES_PER_CHECK_DEFAULT, value_name = "N")]
    pub examples: usize,
    /// table (for people) or json (one object, documented in docs/cli.md).
    #[arg(long, default_value = "table")]
    pub format: String,
}

pub async fn verify(args: VerifyArgs) -> anyhow::Result<()> {
    let json = match args.format.as_str() {
        "table" => false,
        "json" => true,
        other => return Err(usage(format!("--format {other:?}: use table or json"))),
    };
    if args.examples == 0 {
        return Err(usage("--examples 0: give at least 1"));
    }
    let target = args.target.resolve()?;
    let storage = parse_storage_options(&target.table, &target.storage_options)?;
    let table = sluice_publish::open_table(&target.table, &storage, None).await?;
    let tombstones = args.tombstones.clone().or(target.file.tombstones.clone());
    let tombstones = tombstone_table(&target.table, tombstones, &storage).await?;
    let report = Verify::new(table)
        .with_tombstones(tombstones)
        .with_examples_max(args.examples)
        .await
        .with_context(|| format!("verifying {}", target.table))?;
    if json {
        let mut value = serde_json::to_value(&report)?;
        value["table"] = serde_json::json!(target.table);
        value["holds"] = serde_json::json!(report.holds());
        println!("{value}");
    } else {
        print!("{}", text(&target.table, &report));
    }
    if report.holds() {
        Ok(())
    } else {
        Err(Exit::error(
            Exit::FINDINGS,
            format!(
                "{}: {} finding(s); the table does not keep what sluice promises",
                target.table,
                report.findings.len()
            ),
        ))
    }
}

/// The tombstone table given (by `--tombstones` or the config file; it must exist), else
/// `table`'s default one if there is a table there.
async fn tombstone_table(
    table: &str,
    given: Option<String>,
    storage: &std::collections::HashMap<String, String>,
) -> anyhow::Result<Option<deltalake::DeltaTable>> {
    let (location, given) = match given {
        Some(t) => (t, true),
        None => (crate::args::default_tombstones_location(table), false),
    };
    match sluice_publish::open_table(&location, storage, None).await {
        Ok(t) => Ok(Some(t)),
        Err(OpenError::NoTable(_)) if !given => Ok(None),
        Err(e) => Err(e).with_context(|| format!("opening the tombstone table {location}")),
    }
}

fn text(table: &str, r: &Report) -> String {
    let mut out = String::new();
    let mut line = |l: String| {
        out.push_str(&l);
        out.push('\n');
    };
    line(format!("table      {table}"));
    line(format!(
        "version    {}{}",
        r.version,
        match r.log_from_version {
            Some(0) | None => String::new(),
            Some(v) =>
                format!(" (the log holds commits from version {v}; older ones are in a checkpoint)"),
        }
    ));
    let pipelines = if r.pipelines_checked.is_empty() {
        "no pipeline's rows".to_string()
    } else {
        format!("the rows of {}", r.pipelines_checked.join(", "))
    };
    line(format!(
        "checked    {} files, {} windows' row counts, {pipelines}, the offsets of every source partition",
        r.files, r.windows_compared
    ));
    for s in &r.skipped {
        line(format!("skipped    {s}"));
    }
    if r.holds() {
        line("holds      every promise checked".into());
    }
    for f in &r.findings {
        line(format!("finding    {f}"));
    }
    out
}
